"""The run's tokenizer: where it is, loading it from local files, and token ids as text.

Trainers that log token ids (prime-rl's token exports, NeMo-RL's step files) need
the tokenizer that made them. It is a ``tokenizer.json`` (the ``tokenizers``
library's file, which every Hugging Face model folder holds) given by the user, or
found next to the run: in the run folder or up to two folders above it, either
lying there or in a model folder there (a subfolder holding one). It is read with
``tokenizers.Tokenizer.from_file``: from the disk only, never downloaded from a hub; a run at a
URL has its tokenizer read beside it through the run's filesystem (``Tokenizer.from_str``).

Each id is decoded on its own (``decode([id])``, special tokens kept), so a token
reads as what it adds to the text; an id the tokenizer does not know, or any id
without a tokenizer, reads ``#ID`` (``#151644``).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from ..base.access import RootError, check_allowed, is_url, usable_path
from ..base.location import RunLocation, open_location
from ..base.remote import remote_path

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"  # beside it: the model's pad and EOS tokens (``special_tokens``)
MAX_CONFIG_BYTES = 16 << 20  # a longer tokenizer_config.json is not read (Llama-3's is 50 KB)
SEARCH_UP = 2  # folders above the run folder looked in


class TokenizerError(ValueError):
    """A tokenizer path that can't be used; the message says why."""


def id_text(token_id: int) -> str:
    """How a token id reads without a tokenizer: ``#151644``."""
    return f"#{int(token_id)}"


def resolve_tokenizer(path: Path | str) -> Path:
    """The ``tokenizer.json`` at ``path``: the file itself, or the one inside a folder (a model
    folder). Raises ``TokenizerError`` (or ``RootError`` outside the allowed folders)."""
    if is_url(str(path)):
        path = open_location(str(path)).path  # the door: a URL prefix of the allowed ones
    else:
        check_allowed(path)
        path = usable_path(path)
    if path.is_dir():
        path = path / TOKENIZER_FILE
    if not path.is_file():
        raise TokenizerError(f"no tokenizer at {path}: give a {TOKENIZER_FILE} file or a model folder holding one")
    return path.resolve()


def find_tokenizer(run_dir: Path | str | RunLocation) -> Path | None:
    """The ``tokenizer.json`` next to a run: in the run folder, its parent or its grandparent, the
    nearest first; in each, the folder's own file, else that of its first subfolder (by name) that
    holds one and is no run itself (a model folder, not another run's folder). Folders outside the
    allowed ones are never looked in (those the run's location was opened under). None when there is
    none."""
    try:
        location = open_location(run_dir)
        folder = location.path.resolve()
    except (RootError, OSError):
        return None
    for _ in range(SEARCH_UP + 1):
        if not folder.parts or not location.contains(folder):  # no parts: above a URL's bucket
            return None
        found = _tokenizer_in(folder, location)
        if found is not None:
            return found
        if folder.parent == folder:
            return None
        folder = folder.parent
    return None


def _tokenizer_in(folder: Path, location: RunLocation) -> Path | None:
    own = folder / TOKENIZER_FILE
    try:
        if own.is_file() and location.contains(own):
            return own
        if isinstance(folder, Path):
            with os.scandir(folder) as entries:  # a folder of 100,000 run files: no stat per file
                subfolders = sorted(folder / e.name for e in entries if not e.name.startswith(".") and e.is_dir())
        else:  # a URL's folder, listed through its filesystem
            subfolders = sorted(p for p in folder.iterdir() if not p.name.startswith(".") and p.is_dir())
    except OSError:
        return None
    from ..readers import holds_run

    for sub in subfolders:
        candidate = sub / TOKENIZER_FILE
        try:
            if candidate.is_file() and location.contains(candidate) and not holds_run(sub):
                return candidate
        except OSError:  # a folder beside the run that can't be read (no permission): not the run's tokenizer
            continue
    return None


def stamp(path: str | None) -> str:
    """What identifies a tokenizer file's version (size and modification time), "" for None or a
    file that is gone."""
    if path is None:
        return ""
    try:
        st = remote_path(path).stat() if is_url(path) else os.stat(path)
    except (OSError, RootError):
        return ""
    return f"{st.st_size}:{st.st_mtime_ns}" + (f":{st.etag}" if getattr(st, "etag", "") else "")


def load_tokenizer(path: str | None):
    """The ``tokenizers.Tokenizer`` in file ``path`` (kept while the file is unchanged), or None
    for None. Raises ``TokenizerError`` when the file is no tokenizer."""
    if path is None:
        return None
    return _load(str(path), stamp(str(path)))


@functools.lru_cache(maxsize=4)
def _load(path: str, version: str):
    from tokenizers import Tokenizer  # here: only runs with token ids need it

    try:
        if is_url(path):  # beside a run at a URL: read through its filesystem
            return Tokenizer.from_str(remote_path(path).read_text())
        return Tokenizer.from_file(path)
    except Exception as exc:  # the library raises its own exception types for a bad file
        raise TokenizerError(f"{path} is not a tokenizer the tokenizers library can read ({exc})") from exc


def special_tokens(tokenizer_path: str | None) -> tuple[str | None, str | None] | None:
    """(pad, EOS) from the ``tokenizer_config.json`` beside the tokenizer file ``tokenizer_path``, each
    a string or ``{"content": ...}`` (an ``AddedToken``); None without such a file, or one that is no JSON
    object or holds no ``eos_token``. A config without a pad token (``null`` or absent, Llama-3's) pads with
    its EOS token, as verl's and TRL's trainers set it (``tokenizer.pad_token = tokenizer.eos_token``)."""
    if tokenizer_path is None:
        return None
    import json

    config = str(tokenizer_path).rsplit("/", 1)[0] + "/" + CONFIG_FILE
    try:
        if is_url(config):
            with remote_path(config).open("rb") as fh:
                raw = fh.read(MAX_CONFIG_BYTES + 1)
        else:
            with open(config, "rb") as fh:
                raw = fh.read(MAX_CONFIG_BYTES + 1)
        obj = json.loads(raw) if len(raw) <= MAX_CONFIG_BYTES else None
    except (OSError, RootError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    eos = _token_text(obj.get("eos_token"))
    if eos is None:
        return None
    return _token_text(obj.get("pad_token")) or eos, eos


def _token_text(value) -> str | None:
    """A special token as a tokenizer_config.json holds it: a string, or an ``AddedToken``'s
    ``{"content": ...}``; None for anything else or an empty one."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def decode_ids(tokenizer, ids: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(the distinct ids of ``ids`` as token strings, each decoded once on its own; for each id its
    place in that list: int32, shape ids.shape). ``#ID`` without a tokenizer or for an unknown id."""
    distinct, where = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
    return token_strings(tokenizer, distinct.tolist()), where.astype(np.int32).reshape(np.shape(ids))


def token_strings(tokenizer, ids: list[int]) -> list[str]:
    """Each id of ``ids`` decoded on its own (special tokens kept); ``#ID`` without a tokenizer
    or for an id it does not know."""
    if tokenizer is None:
        return [id_text(i) for i in ids]
    known = [0 <= i < 2**32 and tokenizer.id_to_token(i) is not None for i in ids]
    texts = tokenizer.decode_batch([[i] for i, ok in zip(ids, known) if ok], skip_special_tokens=False)
    decoded = iter(texts)
    return [next(decoded) if ok else id_text(i) for i, ok in zip(ids, known)]


_REPLACEMENT = "\ufffd"
_PIECES_MAX = 4  # tokens one character can span: a UTF-8 character is at most 4 bytes, a byte-level token at least 1


def token_pieces(tokenizer, ids: list[int]) -> list[str]:
    """One string per id, as ``token_strings``, except that a character split over several byte-level
    tokens (CJK text: 3 bytes, often two tokens) is whole in the first of them and the others are "":
    decoded on its own, each piece would be U+FFFD. A run of ids that decodes to U+FFFD whatever the
    join is left as it is."""
    distinct = list(dict.fromkeys(ids))
    by_id = dict(zip(distinct, token_strings(tokenizer, distinct)))
    out = [by_id[i] for i in ids]
    if tokenizer is None or not any(_REPLACEMENT in by_id[i] for i in distinct):
        return out
    i = 0
    while i < len(out):
        if _REPLACEMENT in out[i]:
            for j in range(i + 1, min(len(out), i + _PIECES_MAX)):
                joined = decode_text(tokenizer, ids[i:j + 1])
                if _REPLACEMENT not in joined:
                    out[i:j + 1] = [joined] + [""] * (j - i)
                    i = j
                    break
        i += 1
    return out


def decode_text(tokenizer, ids: list[int]) -> str:
    """A run of ids as one text: decoded together (so characters split over several tokens come
    out whole), or the ids as ``#ID`` separated by spaces without a tokenizer."""
    if tokenizer is None:
        return " ".join(id_text(i) for i in ids)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if all(0 <= i < size for i in ids):
        return tokenizer.decode(list(ids), skip_special_tokens=False)
    return "".join(token_strings(tokenizer, list(ids)))


def decode_texts(tokenizer, runs: list[list[int]]) -> list[str]:
    """``decode_text`` of each list of ids (in one batch call when every id is known)."""
    if tokenizer is None or not runs:
        return [decode_text(tokenizer, ids) for ids in runs]
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if all(0 <= i < size for ids in runs for i in ids):
        return tokenizer.decode_batch([list(ids) for ids in runs], skip_special_tokens=False)
    return [decode_text(tokenizer, ids) for ids in runs]
