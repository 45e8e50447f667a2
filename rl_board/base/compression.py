"""Compressed logs: ``.gz``, ``.xz``, ``.bz2`` (the standard library) and ``.zst`` (``zstandard``).

A log named ``data_rank0.jsonl.xz`` is the file ``data_rank0.jsonl`` compressed: every reader
that reads text opens it through ``open_stream`` or ``read_bytes`` and sees the uncompressed
bytes; offsets of the samples in it are offsets in those bytes. A compressed file is read whole
each time it changes: lines appended to it later can't be read from where the last read stopped
(``APPEND_NOTE``), so a trainer's live log should stay uncompressed while it is written.

This module imports only the standard library (``zstandard`` when a ``.zst`` file is opened) and
``location``'s opener: a file of a run at a URL is read through its filesystem.
"""

from __future__ import annotations

import io
from pathlib import Path, PurePath
from typing import BinaryIO

from .location import as_path, open_file

#: Suffix -> codec name, for every compression read transparently.
SUFFIXES = {".gz": "gzip", ".xz": "xz", ".bz2": "bzip2", ".zst": "zstd"}

APPEND_NOTE = ("compressed files are read whole, each time they change: lines appended to a compressed log "
               "are not read from where the last read stopped (keep a live log uncompressed while it is written)")


def codec_of(name: str | PurePath) -> str | None:
    """The codec of a file named ``name`` (``"gzip"`` for ``a.jsonl.gz``), None when uncompressed."""
    return SUFFIXES.get(PurePath(str(name)).suffix.lower())


def base_name(name: str) -> str:
    """``name`` without its compression suffix: ``a.jsonl.gz`` -> ``a.jsonl``."""
    return name[: -len(PurePath(name).suffix)] if codec_of(name) else name


def variants(pattern: str) -> tuple[str, ...]:
    """A file pattern and the same pattern compressed: ``*.jsonl`` -> ``*.jsonl``, ``*.jsonl.gz``, ..."""
    return (pattern, *(pattern + suffix for suffix in SUFFIXES))


def open_stream(fh: BinaryIO, name: str | PurePath) -> BinaryIO:
    """``fh`` (a file open for reading in binary) as the uncompressed bytes of a file named ``name``:
    ``fh`` itself when the name has no compression suffix. The stream reads, seeks (forward cheaply,
    backward by starting again), tells and iterates lines; closing it closes ``fh``."""
    codec = codec_of(name)
    if codec is None:
        return fh
    if codec == "gzip":
        import gzip

        return _Owning(gzip.GzipFile(fileobj=fh, mode="rb"), fh)
    if codec == "xz":
        import lzma

        return _Owning(lzma.LZMAFile(fh, "rb"), fh)
    if codec == "bzip2":
        import bz2

        return _Owning(bz2.BZ2File(fh, "rb"), fh)
    return io.BufferedReader(_ZstdRaw(fh), buffer_size=1 << 16)


def open_path(path: Path | str) -> BinaryIO:
    """The file at ``path`` (a local path, or a ``RemotePath`` read through its filesystem) opened for
    reading its uncompressed bytes."""
    return open_stream(open_file(path), path)


def read_bytes(path: Path | str) -> bytes:
    """The whole uncompressed content of the file at ``path`` (``Path.read_bytes`` for a plain file).
    Raises ``OSError`` (``EOFError`` and codec errors come as ``OSError`` too) for a file that can't
    be read or decompressed."""
    if codec_of(path) is None:
        return as_path(path).read_bytes()
    try:
        with open_path(path) as fh:
            return fh.read()
    except OSError:
        raise
    except Exception as exc:  # lzma.LZMAError, EOFError, zstandard.ZstdError: a broken archive
        raise OSError(f"{as_path(path).name} can't be decompressed ({type(exc).__name__}: {exc})") from exc


class _Owning(io.BufferedIOBase):
    """A decompressing file that closes the file it reads from when it is closed."""

    def __init__(self, inner, raw: BinaryIO):
        self._inner, self._raw = inner, raw

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._inner.read(size)

    def read1(self, size: int = -1) -> bytes:
        return self._inner.read1(size)

    def readline(self, size: int = -1) -> bytes:
        return self._inner.readline(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._inner.seek(offset, whence)

    def tell(self) -> int:
        return self._inner.tell()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._raw.close()
            super().close()


class _ZstdRaw(io.RawIOBase):
    """The uncompressed bytes of a zstd file (one or more frames), as a raw stream that seeks."""

    def __init__(self, fh: BinaryIO):
        import zstandard

        self._fh, self._zstd, self._pos = fh, zstandard, 0
        self._reader = self._start()

    def _start(self):
        self._fh.seek(0)
        self._pos = 0
        return self._zstd.ZstdDecompressor().stream_reader(self._fh, read_across_frames=True, closefd=False)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._reader.read(len(buffer))
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset if whence == io.SEEK_SET else self._pos + offset if whence == io.SEEK_CUR else None
        if target is None:  # from the end: the length is known only once read through
            raise io.UnsupportedOperation("seek from the end of a zstd stream")
        if target < self._pos:
            self._reader = self._start()
        while self._pos < target:
            skipped = self._reader.read(min(1 << 20, target - self._pos))
            if not skipped:
                break
            self._pos += len(skipped)
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                self._reader.close()
            finally:
                self._fh.close()
        super().close()
