"""The line parser every reader of JSON lines uses: a block of complete lines -> canonical rows.

Which parser reads which line (``parse_block``; every path gives the same rows for the same line)::

    a block of bytes, cut at its last newline
      |  split at its newlines by numpy (no Python per line); blank and too long lines set aside
      v
    every line starts with "{" and the block's keys and types are ones the struct would take?
      | yes                                               | no, or Arrow refuses the block
      v                                                   v
    Arrow fast path (arrowfast.read_flat):           msgspec struct path (shape._Shape.decode):
    pyarrow.json reads the block's columns           one decode_lines of a span into the struct of the
    at once (verl's flat dumps): the rows            file's shape; typed keys typed, others msgspec.Raw;
                                                     an unknown key is learned and the block decoded
                                                     again (shape._BlockDecode); a refused line is set
                                                     aside, the spans around it decoded again
                                                          |                         |
                                                          v                         v
                                                     the columns (shape._rows):  orjson slow path (slow):
                                                     per-token lists left as     each refused line alone,
                                                     raw JSON become Arrow by    orjson then ujson (NaN,
                                                     simdjson (rawlists), else   Infinity); its row, or the
                                                     msgspec's typed decoder;    reason it is rejected
                                                     a value they refuse sends
                                                     its line to the slow path
                                                          |                         |
                                                          +------------+------------+
                                                                       v
                                                     the block's rows, in line order; errors, steps

``parse_block`` splits the block at its newlines (numpy, no Python per line); a block of flat lines
whose rows Arrow's JSON reader gives exactly as the struct would is read by it (``arrowfast``); any
other block is decoded by one msgspec call into the struct of the file's shape (``shape``), its
columns taken from it, and each line the struct refused read alone by the slow path (``slow``),
which costs only itself: the rows are the same either way, or the line becomes an entry in
``errors``. A line that cannot be an object (its first byte says so) goes to the slow path
without a decode. A new parse path comes with a benchmark showing it pays and a test that
it gives the rows of the slow path (``tests/test_arrowfast.py`` is the one for Arrow's).
Imports only the readers' own modules and ``base``.
"""

from __future__ import annotations

import gc
import re
from array import array
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ...base import fields as F
from ...base.defaults import max_errors
from ..base import KeyResolver, ReadOptions, line_too_long
from ..canonical import ROWS
from ..extras import cap, merged_notes
from ..records import rows_table
from .arrowfast import read_flat
from .shape import ALIASES, _rows, _shape
from .slow import _slow_row, not_json

_BLANK_FIRST = frozenset(b" \t\r\x0b\x0c")
# the first bytes a JSON object's line may start with (a BOM's first byte too, as the slow path judges it);
# a line starting with any other is no object: it goes to the slow path without a decode
_OBJECT_FIRST = np.array(sorted({*b"{\xef", *_BLANK_FIRST}), np.uint8)
_OPEN = ord("{")
#: Whether a block of flat lines may be read by Arrow's JSON reader (``arrowfast``); False for checks
ARROW_FAST = True
_STEP_RE = re.compile(rb'(?<!\\)"step"\s*:\s*(-?\d+)')
#: ``ParsedBlock.unlisted_steps``'s value for a line whose step a cheap look did not find
NO_STEP = np.iinfo(np.int64).min
_STEP_KEY = re.compile(rb'"step"')


@dataclass
class ParsedBlock:
    """Samples read from a block of complete lines, and the lines rejected.

    table: one canonical row per accepted line (``canonical.ROWS`` plus extras).
    errors: ``(line_number, reason)`` for the first rejected lines (``defaults.max_errors``).
    lines: complete lines in the block (blank ones included).
    slow: lines read one at a time by the slow path (refused by the block's struct).
    steps: for each rejected line, the step it names when a cheap look finds exactly one, else None
        (so a per-step quota can count a broken line of a full step as skipped, not as bad).
    unlisted: the numbers of the rejected lines past those in ``errors``: counted, their reasons not
        kept (int64), so a block of a million bad lines costs 8 MB, not a string each.
    unlisted_steps: for each of ``unlisted``, the step as in ``steps``, ``NO_STEP`` for None (int64).
    """

    table: pa.Table
    errors: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0
    steps: list[int | None] = field(default_factory=list)
    slow: int = 0
    unlisted: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    unlisted_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def parse_block(data: bytes, first_line: int = 1, base_offset: int = 0,
                options: ReadOptions = ReadOptions(), fast: bool = True, reward_required: bool = True) -> ParsedBlock:
    """Read the complete lines of ``data`` (up to its last newline) into canonical rows.

    Args:
        data: bytes of a file starting at byte ``base_offset``, at a line start.
        first_line: the number of the first line.
        options: the user's field mapping (which source keys feed which field) and the line limit.
        fast: False reads every line by the slow path (what a refused line gets), for checks.
        reward_required: False for a format that logs no reward: a line without one is a sample
            without a reward, not an error.
    """
    end = data.rfind(b"\n") + 1
    data = memoryview(data)[:end]  # the complete lines, not copied
    buffer = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buffer == 10)
    starts = np.r_[0, ends[:-1] + 1].astype(np.int64)
    lengths = ends - starts
    blank = _blank(data, buffer, starts, lengths)
    too_long = np.flatnonzero(lengths > options.max_line)
    blank[too_long] = True  # not read: each is an error of its own
    lines = np.flatnonzero(~blank)
    shape = _shape(options.fields) if fast else None
    enabled = gc.isenabled()
    gc.disable()  # decoded lines make no reference cycles; collecting while reading only costs time
    try:
        parsed = _read_lines(data, starts, ends, lengths, lines, shape, first_line, base_offset, options,
                             reward_required)
    finally:
        if enabled:
            gc.enable()
    if len(too_long):
        long = [(first_line + int(i), line_too_long(int(lengths[i]), options.max_line)) for i in too_long]
        merged = sorted([*zip(parsed.errors, parsed.steps), *((e, None) for e in long)], key=lambda e: e[0][0])
        room = max_errors()
        parsed.errors, parsed.steps = [e for e, _ in merged[:room]], [s for _, s in merged[:room]]
        parsed.unlisted = np.r_[parsed.unlisted, [e[0] for e, _ in merged[room:]]].astype(np.int64)
        parsed.unlisted_steps = np.r_[parsed.unlisted_steps,
                                      [NO_STEP if s is None else s for _, s in merged[room:]]].astype(np.int64)
    return parsed


def _read_lines(data, starts, ends, lengths, lines, shape, first_line, base_offset, options,
                reward_required=True) -> ParsedBlock:
    buffer = np.frombuffer(data, np.uint8)
    if ARROW_FAST and shape is not None and len(lines) == len(starts) and (buffer[starts] == _OPEN).all():
        table = read_flat(shape, shape.version, data, starts, lengths, first_line, base_offset, reward_required)
        if table is not None:
            table, _ = cap(table, options.max_extras)
            return ParsedBlock(table, lines=len(ends))
    hopeless = ~np.isin(buffer[starts[lines]], _OBJECT_FIRST) if len(lines) else np.zeros(0, bool)
    if shape is None:
        objs, fast, slow, version = [], [], list(lines), None
    else:
        objs, fast, slow, version = shape.decode(data, starts, ends, lines[~hopeless])
        slow = np.sort(np.r_[np.asarray(slow, np.int64), lines[hopeless]]) if hopeless.any() else slow
    tables, errors, unlisted = [], [], (array("q"), array("q"))
    if fast:
        table, refused = _rows(shape, version, objs, np.asarray(fast, np.int64), first_line, base_offset, starts,
                               lengths, reward_required)
        tables.append(table)
        slow = sorted([*slow, *(fast[i] for i in refused)])
    if len(slow):
        records, kept = _read_slow(data, buffer, starts, ends, np.asarray(slow, np.int64), first_line,
                                   KeyResolver(options.fields, ALIASES), reward_required, errors, unlisted)
        if records:
            kept = np.asarray(kept, np.int64)
            tables.append(rows_table(records, first_line + kept, base_offset + starts[kept], lengths[kept],
                                     options.max_extras))
    if not tables:
        table = ROWS.empty_table()
    elif len(tables) == 1:
        table = tables[0]
    else:
        notes = merged_notes(tables)
        table = pa.concat_tables(tables, promote_options="default").unify_dictionaries().combine_chunks()
        table = notes.attach(table.take(np.argsort(table[F.LINE].to_numpy(), kind="stable")))
    table, _ = cap(table, options.max_extras)  # the block's first extra fields met, at most the run's limit
    errors.sort()
    numbers, steps = (np.frombuffer(a, np.int64) if a else np.zeros(0, np.int64) for a in unlisted)
    return ParsedBlock(table, [(line, why) for line, why, _ in errors], len(ends), [hint for *_, hint in errors],
                       len(slow), numbers, steps)


def _read_slow(data, buffer, starts, ends, slow, first_line, resolver, reward_required, errors, unlisted):
    """(the rows, their line indices) of the ``slow`` lines read one by one; each rejected line is added
    to ``errors`` (line, reason, step hint) while it has room (``defaults.max_errors``), else its number
    to ``unlisted`` (two arrays: the line numbers, their step hints with ``NO_STEP`` for None); past that
    room, lines that can't be an object are counted at once, unread but for a step they name."""
    records, kept, room = [], [], max_errors()
    order = slow.tolist()
    k = 0
    while k < len(order):
        index = order[k]
        if len(errors) >= room and slow is not None:  # once: the rest that is no object, counted at once
            rest, slow = np.asarray(order[k:], np.int64), None
            no_object = ~np.isin(buffer[starts[rest]], _OBJECT_FIRST)
            unlisted[0].frombytes((first_line + rest[no_object]).astype(np.int64).tobytes())
            unlisted[1].frombytes(_step_hints(data, starts, ends, rest[no_object]).tobytes())
            order, k = rest[~no_object].tolist(), 0
            continue
        k += 1
        raw = bytes(data[starts[index]:ends[index]])
        if len(errors) >= room and not_json(raw):  # rejected, past those listed: counted only
            _count(unlisted, first_line + index, raw)
            continue
        got = _slow_row(raw, resolver, reward_required)
        if isinstance(got, str):
            if len(errors) < room:
                errors.append((first_line + index, got, _step_hint(raw)))
            else:  # counted, not kept: memory stays the same whatever their number
                _count(unlisted, first_line + index, raw)
        else:
            records.append(got)
            kept.append(index)
    return records, kept


def _step_hint(raw: bytes) -> int | None:
    hits = _STEP_RE.findall(raw)
    return int(hits[0]) if len(hits) == 1 else None


def _count(unlisted: tuple[array, array], line: int, raw: bytes) -> None:
    """Count a rejected line past those listed: its number and its step hint (``NO_STEP`` for None)."""
    hint = _step_hint(raw)
    unlisted[0].append(line)
    unlisted[1].append(NO_STEP if hint is None or not NO_STEP < hint < -NO_STEP else hint)


def _step_hints(data, starts: np.ndarray, ends: np.ndarray, which: np.ndarray) -> np.ndarray:
    """The step hints (``_step_hint``, ``NO_STEP`` for None) of the lines ``which`` (int64): only a line
    holding ``"step"`` (found by ``re.finditer`` over the block) is looked at one by one."""
    hints = np.full(len(which), NO_STEP, np.int64)
    if not len(which):
        return hints
    at = np.fromiter((found.start() for found in _STEP_KEY.finditer(data)), np.int64)
    holding = np.unique(np.searchsorted(starts, at, side="right") - 1)
    for i in np.flatnonzero(np.isin(which, holding)).tolist():
        raw = bytes(data[starts[which[i]]:ends[which[i]]])
        hint = _step_hint(raw)
        if hint is not None and NO_STEP < hint < -NO_STEP:
            hints[i] = hint
    return hints


def _blank(data: bytes, buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Blank lines: empty, or shorter than 64 bytes of nothing but white space."""
    blank = lengths == 0
    first = buffer[np.minimum(starts, max(len(buffer) - 1, 0))] if len(buffer) else np.zeros(0, np.uint8)
    maybe = np.flatnonzero(~blank & (lengths < 64) & np.isin(first, list(_BLANK_FIRST)))
    for index in maybe:
        blank[index] = not bytes(data[starts[index]:starts[index] + lengths[index]]).strip()
    return blank
