"""Whole lines of a file written whole, and canonical tables of rows that may hold turns.

Shared by the readers of trainers that write one file per step in one go (verl, SkyRL,
AReaL, ROLL, tinker-cookbook): ``whole_lines`` walks the complete lines of a file's bytes
(a last line without its newline is read when it is a whole JSON value, else left for the
next read), ``read_rows`` makes a file's canonical table from a row function, and ``table``
builds the canonical table of ``records.canonical_row`` results that may also carry
``messages`` (canonical turns).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from ..base import fields as F
from .formats.jsonl import is_whole_record
from .record_rows import rows_table


def whole_lines(data: bytes):
    """``(number, offset, stop, raw)`` of each non-blank complete line (``number`` 1-based), then
    stops; the count of lines read is the last ``number`` the caller saw, or ``count_lines``."""
    offset, number = 0, 0
    while offset < len(data):
        stop = data.find(b"\n", offset)
        if stop < 0:
            if not is_whole_record(data[offset:]):
                return
            stop = len(data)
        number += 1
        raw = data[offset:stop]
        if raw.strip():
            yield number, offset, stop, raw
        offset = stop + 1


def count_lines(data: bytes) -> int:
    """The complete lines of ``data`` (as ``whole_lines`` numbers them)."""
    count = data.count(b"\n")
    tail = data[data.rfind(b"\n") + 1:]
    return count + (1 if tail.strip() and is_whole_record(tail) else 0)


def read_rows(data: bytes, row_of) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(the canonical table of ``data``'s complete lines, (line, reason) for each rejected one, lines read):
    ``row_of(raw)`` gives a line's canonical row, or the reason it is rejected (a string)."""
    rows, lines, offsets, lengths, errors = [], [], [], [], []
    for number, offset, stop, raw in whole_lines(data):
        got = row_of(raw)
        if isinstance(got, str):
            errors.append((number, got))
        else:
            rows.append(got)
            lines.append(number)
            offsets.append(offset)
            lengths.append(stop - offset)
    return table(rows, lines, offsets, lengths), errors, count_lines(data)


def table(rows: list[dict], lines, offsets, lengths, max_extras: int | None = None) -> pa.Table:
    """The canonical table of ``rows`` (``canonical_row`` results, each with an optional
    ``messages`` list of canonical turns) with where each lies; ``max_extras`` as ``rows_table``'s."""
    got = rows_table(rows, lines, offsets, lengths, max_extras)
    messages = [r.get(F.MESSAGES) for r in rows]
    if all(m is None for m in messages):
        return got
    index = got.schema.get_field_index(F.MESSAGES)
    return got.set_column(index, F.MESSAGES, pa.array(messages, got.schema.field(F.MESSAGES).type))


@contextmanager
def file_path(fh):
    """A path holding ``fh``'s bytes, for a library that opens files by name: the file's own path when
    ``fh`` was opened by one, else a temporary copy of what ``fh`` reads (the board opens a run's
    files by descriptor, after checking where they are), removed afterwards."""
    name = getattr(fh, "name", None)
    if isinstance(name, str) and os.path.isfile(name):
        yield Path(name)
        return
    fh.seek(0)
    with tempfile.TemporaryDirectory(prefix="rl-board-") as folder:
        path = Path(folder) / "file"
        with open(path, "wb") as out:
            shutil.copyfileobj(fh, out)
        yield path


def opened_path(fh) -> Path | None:
    """The path ``fh`` was opened at: its name, or for a file opened by descriptor the path the
    system gives for it (``/proc/self/fd``, Linux); None when unknown."""
    name = getattr(fh, "name", None)
    if isinstance(name, str):
        return Path(name)
    try:
        return Path(os.readlink(f"/proc/self/fd/{fh.fileno()}"))
    except (OSError, ValueError, AttributeError):
        return None
