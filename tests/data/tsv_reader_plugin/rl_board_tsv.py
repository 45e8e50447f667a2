"""A reader of tab-separated rollouts, written outside rl-board: a header line naming the columns
(``step``, ``prompt``, ``response``, ``reward``, any others), then one sample a line. It uses only
rl-board's public reader interface (``rl_board.readers``)."""

from __future__ import annotations

from pathlib import Path

from rl_board.readers import KeyResolver, ReadOptions, SourceChanged
from rl_board.readers.record_rows import canonical_row, rows_table

NAME = "tsv"
SUFFIX = ".tsv"
ALIASES = {"response": "completion"}
APPENDABLE = False
GLOBS = ("*.tsv",)


def _value(text: str):
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return text


def _lines(data: bytes):
    """(line number, byte offset, the line's bytes) of each line after the header."""
    offset = 0
    for number, raw in enumerate(data.splitlines(keepends=True), 1):
        if number > 1 and raw.strip():
            yield number, offset, raw
        offset += len(raw)


def _parse(header: list[str], raw: bytes) -> dict:
    return {key: _value(value) for key, value in zip(header, raw.decode().rstrip("\r\n").split("\t"))}


def read_table(path: Path, options: ReadOptions = ReadOptions()):
    """(canonical rows, (line, reason) for each rejected line, lines read)."""
    data = Path(path).read_bytes()
    header = data.split(b"\n", 1)[0].decode().rstrip("\r").split("\t")
    resolver, rows, lines, offsets, lengths, errors = KeyResolver(options.fields, ALIASES), [], [], [], [], []
    for number, offset, raw in _lines(data):
        got = canonical_row(_parse(header, raw), resolver)
        if isinstance(got, str):
            errors.append((number, got))
            continue
        rows.append(got)
        lines.append(number)
        offsets.append(offset)
        lengths.append(len(raw))
    return rows_table(rows, lines, offsets, lengths), errors, len(rows) + len(errors)


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One sample's line read again, as a dict of the header's columns."""
    fh.seek(0)
    header = fh.readline().decode().rstrip("\r\n").split("\t")
    fh.seek(offset)
    raw = fh.read(length)
    if len(raw) != length:
        raise SourceChanged(f"{name} line {line} is no longer there")
    return _parse(header, raw)
