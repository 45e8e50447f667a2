"""A command's output kept beside the caches and served again while the run's files are exactly as they were.

``rl-board summary`` on a run it has summarised before, with the same settings, reads no
segment and imports neither pandas nor pyarrow: it lists the run folder's files (path,
size, modification time, inode, mode, and a hash of the first and last 4 KB of each) and, when
that listing, the settings and this package's cache version are what they were, prints the kept
output. Any change to any file of the folder (a line appended, a file added, removed or touched,
or replaced by one of its size with its time restored, as ``cp -p`` does, that differs in its
first or last 4 KB) misses, and the command reads the run as usual. A run whose token ids are decoded with a tokenizer found
next to it is not kept (that file lies outside the folder), nor is a run with a file changed
in the last two seconds (a rewrite within the file system's clock tick would look the same).
The memos live in
``<cache root>/memos``; ``rl-board cache clear`` removes them with the caches.

This module imports only the standard library.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..base.defaults import bounds_key

FOLDER = "memos"
VERSION = 3  # 3: a file's first and last blocks are hashed too; 2: a summary's step lists only the extras it has
MAX_FILES = 20_000  # a folder with more files than this is not kept (listing it would cost too much)
ENDS_BLOCK = 4096  # bytes hashed at each end of every file of the folder (one page each)
LIST_CHUNK = 4096  # items of a long list encoded at a time (``json_pieces``)


def _root(cache_root: Path | None) -> Path:
    from .cache import default_cache_root

    return Path(cache_root or default_cache_root()) / FOLDER


def key(command: str, run_dir: Path | str, settings: dict) -> str:
    """What names one output: the command, the run folder (resolved) and its settings."""
    from .cache import CACHE_VERSION

    resolved = str(Path(run_dir).expanduser().resolve())
    text = json.dumps([VERSION, CACHE_VERSION, command, resolved, settings, os.environ.get("RL_BOARD_MAX_LINE_MB"),
                       bounds_key()],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def fingerprint(run_dir: Path | str) -> list | None:
    """Every file under ``run_dir`` (path relative to it, size, modification time, inode, mode, the hash
    of its ends: ``_ends``), sorted; None when it holds more than ``MAX_FILES`` or can't be listed."""
    out, stack = [], [(Path(run_dir), "")]
    try:
        while stack:
            folder, prefix = stack.pop()
            with os.scandir(folder) as entries:
                for entry in entries:
                    st = entry.stat(follow_symlinks=True)
                    name = prefix + entry.name
                    if entry.is_dir(follow_symlinks=True):
                        if len(stack) + len(out) > MAX_FILES or name.count("/") > 8:
                            return None
                        stack.append((Path(entry.path), name + "/"))
                    else:
                        out.append([name, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode, _ends(entry.path, st)])
                    if len(out) > MAX_FILES:
                        return None
    except OSError:
        return None
    return sorted(out)


def _ends(path: str, st: os.stat_result) -> str:
    """A hash of a file's first and last ``ENDS_BLOCK`` bytes (its whole bytes when shorter than two): what
    tells a file replaced by one of its size with its time restored (``cp -p``) from the one summarised.
    A FIFO or a file that can't be read: "" (it is named by its mode, and never read)."""
    if not stat.S_ISREG(st.st_mode):
        return ""
    try:
        with open(path, "rb") as fh:
            data = fh.read(ENDS_BLOCK)
            if st.st_size > 2 * ENDS_BLOCK:
                fh.seek(st.st_size - ENDS_BLOCK)
            data += fh.read(ENDS_BLOCK)
    except OSError:
        return ""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def load(name: str, print_: list | None, cache_root: Path | None = None) -> dict | None:
    """The output kept under ``name`` when the run's files are still ``print_`` (a fresh
    ``fingerprint``), else None."""
    if print_ is None:
        return None
    try:
        kept = json.loads((_root(cache_root) / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("files") != print_:
        return None
    return kept


def json_pieces(value):
    """``json.dumps(value, ensure_ascii=False, allow_nan=False)``, the same text, as pieces: a dict's items
    one at a time and a list's items ``LIST_CHUNK`` at a time, each by json's C encoder. A summary of 200,000
    steps is then never one 85 MB string (nor the encoder's pieces of it) beside the dicts it is made of."""
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield (", " if i else "") + json.dumps(key, ensure_ascii=False) + ": "
            yield from json_pieces(item)
        yield "}"
    elif isinstance(value, list) and len(value) > LIST_CHUNK:
        yield "["
        for at in range(0, len(value), LIST_CHUNK):
            text = json.dumps(value[at:at + LIST_CHUNK], ensure_ascii=False, allow_nan=False)
            yield (", " if at else "") + text[1:-1]
        yield "]"
    else:
        yield json.dumps(value, ensure_ascii=False, allow_nan=False)


def save(name: str, run_dir: Path | str, print_: list | None, output: dict, notes: list[str],
         cache_root: Path | None = None) -> None:
    """Keep ``output`` (and the notes printed with it) for ``name``, as read from files ``print_``; a
    memo that can't be written only means reading the run again next time."""
    if print_ is None:
        return
    from .cache import SETTLED_NS

    if any(entry[2] > time.time_ns() - SETTLED_NS for entry in print_):
        return  # a rewrite in the same tick of the file system's clock would look unchanged
    folder = _root(cache_root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.writelines(json_pieces({"run": str(Path(run_dir).expanduser().resolve()), "files": print_,
                                           "output": output, "notes": notes}))
            os.replace(tmp, folder / f"{name}.json")
        except (OSError, TypeError, ValueError):
            Path(tmp).unlink(missing_ok=True)
            raise
    except (OSError, TypeError, ValueError):
        pass


def clear(run_dir: Path | str | None = None, cache_root: Path | None = None,
          allowed: Callable[[str], bool] | None = None) -> int:
    """Remove the memos of ``run_dir`` (every memo when None) whose run ``allowed`` accepts (every run
    when None: a memo of a run one may not read is left alone); returns how many went."""
    folder = _root(cache_root)
    wanted = None if run_dir is None else str(Path(run_dir).expanduser().resolve())
    removed = 0
    try:
        paths = list(folder.glob("*.json"))
    except OSError:
        return 0
    for path in paths:
        try:
            if wanted is not None or allowed is not None:
                run = json.loads(path.read_text()).get("run")
                if (wanted is not None and run != wanted) or (
                        allowed is not None and not (isinstance(run, str) and allowed(run))):
                    continue
            path.unlink()
            removed += 1
        except (OSError, ValueError, AttributeError):
            continue
    return removed
