"""Compressed logs: ``.gz``, ``.xz``, ``.bz2`` (the standard library) and ``.zst`` (``zstandard``).

A log named ``data_rank0.jsonl.xz`` is the file ``data_rank0.jsonl`` compressed: every reader
that reads text opens it through ``open_stream`` or ``read_bytes`` and sees the uncompressed
bytes; offsets of the samples in it are offsets in those bytes. A compressed file is read whole
each time it changes: lines appended to it later can't be read from where the last read stopped
(``APPEND_NOTE``), so a trainer's live log should stay uncompressed while it is written.

What a compressed file may expand to is bounded (``expansion_limit``): at most ``RL_BOARD_MAX_RATIO``
times its compressed size (at least 64 MiB) and at most ``RL_BOARD_MAX_EXPANDED_GB``; a read past it
raises ``TooLarge`` naming the bound, so a 26 KB bomb costs a 64 MiB read, not 20 GiB. ``read_bytes``
(a file read whole, into memory) reads through the same bound, and a plain file over the absolute one
is refused before it is read.

This module imports only the standard library (``zstandard`` when a ``.zst`` file is opened) and
``location``'s opener: a file of a run at a URL is read through its filesystem.
"""

from __future__ import annotations

import io
import os
from pathlib import Path, PurePath
from typing import BinaryIO

from . import defaults
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


class TooLarge(OSError):
    """A file past a bound on what it may expand to (or hold, read whole); the message names the bound."""


def _size(size: int) -> str:
    """Bytes as a person reads them: ``20 GB``, ``64 MB``, ``26 KB``."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}" if size < 10 * scale else f"{size / scale:.0f} {unit}"
    return f"{size} bytes"


def expansion_limit(compressed: int) -> tuple[int, str]:
    """(the uncompressed bytes a file of ``compressed`` bytes may expand to, why it stops there):
    ``RL_BOARD_MAX_RATIO`` times its size (at least ``defaults.RATIO_FLOOR``), at most
    ``RL_BOARD_MAX_EXPANDED_GB``."""
    ratio, absolute = defaults.max_ratio(), defaults.max_expanded()
    relative = max(defaults.RATIO_FLOOR, int(ratio * compressed))
    if relative < absolute:
        return relative, (f"expands past {_size(relative)}, more than {ratio:g}× its {_size(compressed)} "
                          f"and is not read further: {defaults.MAX_RATIO_ENV} raises the bound")
    return absolute, f"expands past {_size(absolute)} and is not read further: {defaults.MAX_EXPANDED_ENV} raises the bound"


def _compressed_size(fh: BinaryIO) -> int:
    """The bytes of ``fh`` (a file open at its start): its descriptor's size, else its end's offset."""
    try:
        return os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        size = fh.seek(0, io.SEEK_END)
        fh.seek(0)
        return size


def open_stream(fh: BinaryIO, name: str | PurePath) -> BinaryIO:
    """``fh`` (a file open for reading in binary) as the uncompressed bytes of a file named ``name``:
    ``fh`` itself when the name has no compression suffix. The stream reads, seeks (forward cheaply,
    backward by starting again), tells and iterates lines; closing it closes ``fh``. Reading or
    seeking past ``expansion_limit`` raises ``TooLarge``."""
    codec = codec_of(name)
    if codec is None:
        return fh
    limit, why = expansion_limit(_compressed_size(fh))
    if codec == "gzip":
        import gzip

        return _Owning(gzip.GzipFile(fileobj=fh, mode="rb"), fh, limit, why)
    if codec == "xz":
        import lzma

        return _Owning(lzma.LZMAFile(fh, "rb"), fh, limit, why)
    if codec == "bzip2":
        import bz2

        return _Owning(bz2.BZ2File(fh, "rb"), fh, limit, why)
    return io.BufferedReader(_ZstdRaw(fh, limit, why), buffer_size=1 << 16)


def open_path(path: Path | str) -> BinaryIO:
    """The file at ``path`` (a local path, or a ``RemotePath`` read through its filesystem) opened for
    reading its uncompressed bytes."""
    return open_stream(open_file(path), path)


def read_bytes(path: Path | str, line: bool = False) -> bytes:
    """The whole uncompressed content of the file at ``path`` (``Path.read_bytes`` for a plain file).
    Raises ``OSError`` (``EOFError`` and codec errors come as ``OSError`` too) for a file that can't
    be read or decompressed, ``TooLarge`` for one past ``expansion_limit`` (a plain one past
    ``RL_BOARD_MAX_EXPANDED_GB``, before it is read). ``line``: the file is one JSON value, read as one
    line is: past the line limit (``defaults.max_line_bytes``) it is ``TooLarge`` too, a plain file
    before it is read, a compressed one once that much has come out."""
    name = as_path(path).name
    limit = defaults.max_line_bytes() if line else None
    try:
        with open_path(path) as fh:
            if codec_of(path) is None:
                size, absolute = _compressed_size(fh), defaults.max_expanded()
                if size > absolute:
                    raise TooLarge(f"{name} is {_size(size)}, more than a file read whole may hold "
                                   f"({_size(absolute)}; set {defaults.MAX_EXPANDED_ENV})")
                if limit is not None and size > limit:
                    raise TooLarge(_past_line(name, f"is {_size(size)}", limit))
            if limit is None:
                return fh.read()
            pieces, got = [], 0
            while got <= limit and (piece := fh.read(min(1 << 20, limit + 1 - got))):
                pieces.append(piece)
                got += len(piece)
            if got > limit:
                raise TooLarge(_past_line(name, "expands past that", limit))
            return b"".join(pieces)
    except OSError:
        raise
    except Exception as exc:  # lzma.LZMAError, EOFError, zstandard.ZstdError: a broken archive
        raise OSError(f"{as_path(path).name} can't be decompressed ({type(exc).__name__}: {exc})") from exc


def _past_line(name: str, what: str, limit: int) -> str:
    return (f"{name} {what}, more than the line limit ({_size(limit)}; set {defaults.MAX_LINE_ENV}): "
            "one JSON value, not read")


class _Owning(io.BufferedIOBase):
    """A decompressing file that closes the file it reads from when it is closed."""

    def __init__(self, inner, raw: BinaryIO, limit: int, why: str):
        self._inner, self._raw, self._limit, self._why = inner, raw, limit, why

    def _within(self, got):
        if self._inner.tell() > self._limit:
            raise TooLarge(self._why)
        return got

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:  # whole: a piece at a time, so the bound bites before memory does
            return b"".join(iter(lambda: self.read(1 << 20), b""))
        return self._within(self._inner.read(size))

    def read1(self, size: int = -1) -> bytes:
        return self._within(self._inner.read1(size if size is not None and size >= 0 else 1 << 20))

    def readline(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._limit + 1 - self._inner.tell()  # a line runs to the bound at most
        return self._within(self._inner.readline(max(1, size)))

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._within(self._inner.seek(offset, whence))

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

    def __init__(self, fh: BinaryIO, limit: int, why: str):
        import zstandard

        self._fh, self._zstd, self._pos, self._limit, self._why = fh, zstandard, 0, limit, why
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
        if self._pos > self._limit:
            raise TooLarge(self._why)
        data = self._reader.read(min(len(buffer), self._limit + 1 - self._pos))
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
            if self._pos > self._limit:
                raise TooLarge(self._why)
            skipped = self._reader.read(min(1 << 20, target - self._pos))
            if not skipped:
                break
            self._pos += len(skipped)
        if self._pos > self._limit:
            raise TooLarge(self._why)
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                self._reader.close()
            finally:
                self._fh.close()
        super().close()
