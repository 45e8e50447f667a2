"""Random access into compressed logs (issue 38): a seekable, uncompressed copy of a compressed log
kept in the run's cache folder, so that reading a sample of a ``.jsonl.xz`` again (its record, its
token lists) costs what it costs in the plain file instead of decompressing from the start each time.

The copy is made on the first random access, by one pass over the compressed file, and named by the
file's name, size and modification time (``plain-<hash>-<size>-<mtime_ns>``): a file that changes gets
a new copy, the old one is removed. It is a file of the cache folder like the segments, so it counts
toward the cache's cap (``cache.cache_limit``) and goes when the cache does; a copy that would take the
folder over the cap is not kept (``SKIPPED`` remembers it for this process), and its reads stay batched
(``analysis.source_records``: one pass over the compressed file per batch of samples)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import BinaryIO

from ..base.compression import open_stream
from .cache import RunCache, cache_limit

PREFIX = "plain-"  # a copy's name in the cache folder starts with this

CHUNK = 1 << 20  # bytes decompressed and written at a time

#: (cache folder, copy name) of copies found too large for the cache's cap in this process: not tried again
SKIPPED: set[tuple[str, str]] = set()


class _TooLarge(Exception):
    pass


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def seekable_copy(folder: Path, name: str, raw: BinaryIO) -> Path | None:
    """The uncompressed copy, in the cache ``folder``, of the compressed run file ``name`` open as
    ``raw`` (a local file, read from its start): made now when missing (the cache folder kept within
    ``cache_limit()``), None when it can't be (too large, no such folder, not a local file, a codec
    error). The caller keeps ``raw`` and closes it."""
    try:
        st = os.fstat(raw.fileno())
    except (OSError, AttributeError, ValueError):  # a remote file: no copy
        return None
    key = _key(name)
    copy = Path(folder) / f"{PREFIX}{key}-{st.st_size}-{st.st_mtime_ns}"
    if copy.is_file():
        return copy
    if (str(folder), copy.name) in SKIPPED or not Path(folder).is_dir():
        return None
    tmp = copy.with_name(f".tmp-{os.getpid()}-{copy.name}")
    try:
        budget = cache_limit() - RunCache(folder).size()
        raw.seek(0)
        with open_stream(_Borrowed(raw), name) as stream, open(tmp, "wb") as out:
            written = 0
            while chunk := stream.read(CHUNK):
                written += len(chunk)
                if written > budget:
                    raise _TooLarge
                out.write(chunk)
        for old in Path(folder).glob(f"{PREFIX}{key}-*"):
            old.unlink(missing_ok=True)
        os.replace(tmp, copy)
        return copy
    except _TooLarge:
        SKIPPED.add((str(folder), copy.name))
    except Exception:  # noqa: BLE001, S110 (OSError, a codec's error: no copy, the compressed file is read instead)
        pass
    tmp.unlink(missing_ok=True)
    return None


class _Borrowed:
    """``raw`` as a decompressor reads it, left open when the decompressor is closed or dropped."""

    def __init__(self, raw: BinaryIO):
        self._raw = raw

    def __getattr__(self, attr):
        return getattr(self._raw, attr)

    def close(self) -> None:
        pass
