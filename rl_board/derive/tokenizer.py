"""The run's tokenizer: where it is, loading it from local files, and token ids as text.

Trainers that log token ids (prime-rl's token exports, NeMo-RL's step files) need
the tokenizer that made them. It is a ``tokenizer.json`` (the ``tokenizers``
library's file, which every Hugging Face model folder holds) given by the user, or
found next to the run: lying in the run folder or in one of the two folders above it
(never in a folder beside the run: another run's or another user's). It is read with
``tokenizers.Tokenizer.from_file``: from the disk only, never downloaded from a hub; a run at a
URL has its tokenizer read beside it through the run's filesystem (``Tokenizer.from_str``).

Each id is decoded on its own (``decode([id])``, special tokens kept), so a token
reads as what it adds to the text; an id the tokenizer does not know, or any id
without a tokenizer, reads ``#ID`` (``#151644``). A tokenizer that fails (the library
panics) reads every id as ``#ID`` from then on in that process, with a note
(``GuardedTokenizer``): the run, the page and the MCP server go on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.access import RootError, check_allowed, is_url, usable_path
from ..base.location import RunLocation, open_location
from ..base.remote import remote_path

if TYPE_CHECKING:
    import numpy as np

TOKENIZER_FILE = "tokenizer.json"
#: time one call into the library may take (seconds, plus so much per id decoded): a tokenizer past it is not
#: asked again in this process (its ids read #ID, with a note); a real one decodes millions of ids a second
DECODE_SECONDS, DECODE_SECONDS_PER_ID = 5.0, 1e-4
#: time the worker process that makes those calls may take to start and read the tokenizer (seconds)
START_SECONDS = 60.0
#: how the note on a tokenizer that failed ends (``store.snapshot`` gives it once for the run)
TOKENIZER_FAILED = ": token ids are shown as #ID. Replace it, or give another tokenizer."
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
    """The ``tokenizer.json`` next to a run: the file lying in the run folder, else in its parent, else in
    its grandparent, the nearest first. Only the run's own folder and its ancestors, never a sub-folder of
    one of them: a folder beside the run (``000/``, another run's, another user's) never decides how this
    run's ids decode. Folders outside the allowed ones are never looked in (those the run's location was
    opened under). None when there is none."""
    try:
        location = open_location(run_dir)
        folder = location.path.resolve()
    except (RootError, OSError):
        return None
    for _ in range(SEARCH_UP + 1):
        if not folder.parts or not location.contains(folder):  # no parts: above a URL's bucket
            return None
        own = folder / TOKENIZER_FILE
        try:
            if own.is_file() and location.contains(own):
                return own
        except OSError:  # a folder that can't be read (no permission): look further up
            pass
        if folder.parent == folder:
            return None
        folder = folder.parent
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
    """The tokenizer in file ``path`` as a ``GuardedTokenizer`` (kept while the file is unchanged), or None
    for None. Raises ``TokenizerError`` when the file is no tokenizer (or the library fails reading it)."""
    if path is None:
        return None
    return _load(str(path), stamp(str(path)))


class TokenizerFailed(TokenizerError):
    """The tokenizers library failed decoding (a panic, such as a decoder's regular expression over its
    backtracking limit): the message names the file and what it said."""


def _fatal(exc: BaseException) -> bool:
    """Whether ``exc`` must end the program as it would anyway (Ctrl-C, ``sys.exit``), not be contained."""
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit))


class GuardedTokenizer:
    """A ``tokenizers.Tokenizer`` whose calls can't take the process down, nor hold it: each call is made in a
    worker process (``tokenizer_worker.py``, one per tokenizer and process, started at the first call and kept
    for the next ones), which the process waits for no longer than ``DECODE_SECONDS`` (plus
    ``DECODE_SECONDS_PER_ID`` an id decoded) and ends past it. A decoder stuck in the library's Rust code (a
    backtracking regular expression, which no thread can interrupt) then costs its run's token texts, not the
    page or the MCP server. The library raises its Rust panics as ``PanicException`` (huggingface/tokenizers#1345),
    answered by the worker as an error. A failure raises ``TokenizerFailed``, and the tokenizer is then
    ``failed`` for good in this process, so a hostile file costs one failure, not one per sample: the decoding
    functions below read ids as ``#ID`` once it has failed; ``failed`` says why (the load report's note)."""

    def __init__(self, tokenizer, path: str, source: dict | None = None):
        self._tokenizer, self.path, self.failed = tokenizer, path, None
        self._source = source or {"path": path}  # what the worker reads the tokenizer from
        self._worker: _Worker | None = None
        self._lock, self._pid = threading.Lock(), os.getpid()
        self._sizes: dict = {}  # get_vocab_size's answers

    def _call(self, name: str, *args, ids: int = 1, **kwargs):
        """The library's ``name`` called with ``args`` in the worker; ``ids``: how many ids it decodes (its
        time allowance)."""
        if self.failed is not None:
            raise TokenizerFailed(self.failed)
        if self._pid != os.getpid():  # a forked process: the worker and its lock are its parent's
            self._worker, self._lock, self._pid = None, threading.Lock(), os.getpid()
        allowed = DECODE_SECONDS + ids * DECODE_SECONDS_PER_ID
        with self._lock:
            if self.failed is not None:
                raise TokenizerFailed(self.failed)
            try:
                if self._worker is None:
                    self._worker = _Worker(self._source)
                return self._worker.call(name, list(args), kwargs, allowed)
            except _WorkerFailed as exc:
                self._worker = None
                self._fail(str(exc).replace("{ids}", f"{ids:,}"))

    def _fail(self, why: str):
        self.failed = f"The tokenizer {self.path} {why}{TOKENIZER_FAILED}"
        raise TokenizerFailed(self.failed) from None

    def decode(self, ids, **kwargs) -> str:
        return self._call("decode", [int(i) for i in ids], ids=len(ids), **kwargs)

    def decode_batch(self, batch, **kwargs) -> list[str]:
        return self._call("decode_batch", [[int(i) for i in ids] for ids in batch], ids=sum(map(len, batch)),
                          **kwargs)

    def id_to_token(self, token_id: int):
        return self._call("id_to_token", int(token_id))

    def known(self, ids: list[int]) -> list[bool]:
        """Whether the tokenizer has a token for each id (``id_to_token`` not None), in one call."""
        return self._call("known", [int(i) for i in ids], ids=len(ids))

    def get_vocab_size(self, **kwargs) -> int:
        key = tuple(sorted(kwargs.items()))
        if key not in self._sizes:  # (a tokenizer's size does not change: asked once, not once a decode)
            self._sizes[key] = self._call("get_vocab_size", **kwargs)
        return self._sizes[key]

    def __getattr__(self, name):  # what else a caller asks of it (the library's own tokenizer)
        return getattr(self._tokenizer, name)


class _WorkerFailed(Exception):
    """The worker answered an error, died, or ran past its time; the message ends the tokenizer's note."""


class _Worker:
    """One ``tokenizer_worker.py`` process and the pipes to it; ended when it fails or runs past its time,
    and when this object goes (its stdin closed: it exits)."""

    def __init__(self, source: dict):
        import json
        import subprocess
        import sys
        import weakref

        self._json = json
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        weakref.finalize(self, _end, self.proc, os.getpid())
        self._buffer = b""
        self._send(source)
        self._answer(START_SECONDS, "took longer than {allowed:.0f} s to start its worker, and was stopped")

    def _send(self, message: dict) -> None:
        try:
            self.proc.stdin.write(self._json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            _end(self.proc)
            raise _WorkerFailed("failed decoding (its worker process ended)") from None

    def call(self, op: str, args: list, kwargs: dict, allowed: float):
        """The answer to ``op``, waited for at most ``allowed`` seconds (then the process is ended)."""
        self._send({"op": op, "args": args, "kwargs": kwargs})
        return self._answer(allowed, "took longer than the {allowed:.1f} s allowed decoding {{ids}} ids, and was stopped")

    def _answer(self, allowed: float, late: str):
        """The next answer, waited for at most ``allowed`` seconds (then the process is ended and ``late``,
        formatted, says why)."""
        import select

        deadline = time.monotonic() + allowed
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                _end(self.proc)
                raise _WorkerFailed(late.format(allowed=allowed))
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                _end(self.proc)
                raise _WorkerFailed("failed decoding (its worker process ended)")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer = self._json.loads(line)
        if "error" in answer:
            _end(self.proc)
            raise _WorkerFailed(f"failed decoding ({answer['error']})")
        return answer["ok"]


def _end(proc, owner: int | None = None) -> None:
    """End a worker process (it may be stuck in the library) and reap it; not from a process forked from its
    ``owner`` (the pid that started it), where the object is a copy."""
    if owner is not None and os.getpid() != owner:
        return
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            stream.close()


WORKER = Path(__file__).with_name("tokenizer_worker.py")


@contextlib.contextmanager
def _rust_quiet():
    """File descriptor 2 sent to /dev/null while the library runs: a Rust panic's default hook writes its
    message and backtrace (``RUST_BACKTRACE``) straight to it, past Python's ``sys.stderr``, and the note
    says it in one line instead. Several threads may decode at once: the first one in sends it away, the
    last one out brings it back (never one thread restoring what another sent away)."""
    global _quiet_depth, _saved_stderr
    with _quiet_lock:
        if _quiet_depth == 0:
            try:
                _saved_stderr = os.dup(2)
                os.dup2(_devnull(), 2)
            except OSError:  # no stderr at all: nothing to keep quiet
                _saved_stderr = None
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0 and _saved_stderr is not None:
                os.dup2(_saved_stderr, 2)
                os.close(_saved_stderr)
                _saved_stderr = None


_quiet_lock = threading.Lock()
_quiet_depth, _saved_stderr = 0, None  # threads inside ``_rust_quiet``; the stderr they will bring back


@functools.lru_cache(maxsize=1)
def _devnull() -> int:
    return os.open(os.devnull, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))


@functools.lru_cache(maxsize=4)
def _load(path: str, version: str) -> GuardedTokenizer:
    from tokenizers import Tokenizer  # here: only runs with token ids need it

    try:
        if is_url(path):  # beside a run at a URL: read through its filesystem
            text = remote_path(path).read_text()
            with _rust_quiet():
                return GuardedTokenizer(Tokenizer.from_str(text), path, {"text": text})
        with _rust_quiet():
            return GuardedTokenizer(Tokenizer.from_file(path), path)
    except BaseException as exc:  # the library raises its own exception types (and panics) for a bad file
        if _fatal(exc):
            raise
        raise TokenizerError(f"{path} is not a tokenizer the tokenizers library can read ({exc})") from None


def failure(tokenizer) -> str | None:
    """Why ``tokenizer`` (as ``load_tokenizer`` gives it) failed in this process, None when it did not."""
    return getattr(tokenizer, "failed", None)


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
    import numpy as np

    distinct, where = np.unique(np.asarray(ids, dtype=np.int64), return_inverse=True)
    return token_strings(tokenizer, distinct.tolist()), where.astype(np.int32).reshape(np.shape(ids))


def token_strings(tokenizer, ids: list[int]) -> list[str]:
    """Each id of ``ids`` decoded on its own (special tokens kept); ``#ID`` without a tokenizer
    or for an id it does not know."""
    if tokenizer is None or failure(tokenizer):
        return [id_text(i) for i in ids]
    try:
        known = (tokenizer.known(ids) if isinstance(tokenizer, GuardedTokenizer)
                 else [0 <= i < 2**32 and tokenizer.id_to_token(i) is not None for i in ids])
        texts = tokenizer.decode_batch([[i] for i, ok in zip(ids, known) if ok], skip_special_tokens=False)
    except TokenizerFailed:  # read as without a tokenizer; ``failure`` says why
        return [id_text(i) for i in ids]
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
    if tokenizer is None or failure(tokenizer):
        return " ".join(id_text(i) for i in ids)
    try:
        size = tokenizer.get_vocab_size(with_added_tokens=True)
        if all(0 <= i < size for i in ids):
            return tokenizer.decode(list(ids), skip_special_tokens=False)
    except TokenizerFailed:
        return " ".join(id_text(i) for i in ids)
    return "".join(token_strings(tokenizer, list(ids)))


def decode_texts(tokenizer, runs: list[list[int]]) -> list[str]:
    """``decode_text`` of each list of ids (in one batch call when every id is known)."""
    if tokenizer is None or not runs or failure(tokenizer):
        return [decode_text(tokenizer, ids) for ids in runs]
    try:
        size = tokenizer.get_vocab_size(with_added_tokens=True)
        if all(0 <= i < size for ids in runs for i in ids):
            return tokenizer.decode_batch([list(ids) for ids in runs], skip_special_tokens=False)
    except TokenizerFailed:
        pass  # each run below reads as without a tokenizer
    return [decode_text(tokenizer, ids) for ids in runs]
