"""Turn bytes of JSONL into an Arrow table of samples, one bad line at a time.

The fast path hands a whole block to ``pyarrow.json`` (C++, multi-threaded, and
it accepts NaN/Infinity). Any block it refuses (a malformed line, a wrong type,
non-UTF-8 bytes, a missing step) is parsed again line by line, so a bad line
costs only itself: it becomes an entry in ``errors`` and every other line loads.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pa_json
import ujson

from . import fields as F

#: What a line may carry, as parsed (token numbers as float64, as JSON has them).
_PARSE_SCHEMA = pa.schema(
    [(F.STEP, pa.int64()), (F.REWARD, pa.float64())]
    + [(name, pa.float64()) for name in F.SCALAR_FIELDS]
    + [(name, pa.string()) for name in F.TEXT_FIELDS]
    + [(F.TOKENS, pa.list_(pa.string()))]
    + [(name, pa.list_(pa.float64())) for name in F.TOKEN_FIELDS]
)
#: What a parsed block is stored as: token numbers as float32, plus the line number.
SCHEMA = pa.schema(
    [f if f.name not in F.TOKEN_FIELDS else pa.field(f.name, pa.list_(pa.float32())) for f in _PARSE_SCHEMA]
    + [(F.LINE, pa.int64())]
)
_PARSE_OPTIONS = pa_json.ParseOptions(explicit_schema=_PARSE_SCHEMA, unexpected_field_behavior="ignore")
_STEP_RE = re.compile(rb'(?<!\\)"step"\s*:\s*(-?\d+)')


@dataclass
class ParsedBlock:
    """Samples parsed from a block of complete lines, and the lines rejected.

    table: one row per accepted line, columns of ``SCHEMA``.
    errors: ``(line_number, reason)`` for every rejected line.
    skipped: lines not parsed because their step already had enough samples.
    """

    table: pa.Table
    errors: list[tuple[int, str]] = field(default_factory=list)
    skipped: int = 0


def parse_block(data: bytes, first_line: int, step_quota: dict[int, int] | None = None,
                max_per_step: int | None = None) -> ParsedBlock:
    """Parse ``data`` (whole lines, each ending in a newline) whose first line is ``first_line``.

    With ``max_per_step``, lines are kept only while their step has fewer than
    that many samples in ``step_quota`` (updated in place), and a line whose step
    is already full is skipped without being parsed.
    """
    if max_per_step is None:
        table = _parse_fast(data, first_line)
        if table is not None:
            return ParsedBlock(table)
    return _parse_lines(data, first_line, step_quota if step_quota is not None else {}, max_per_step)


def _parse_fast(data: bytes, first_line: int) -> pa.Table | None:
    """The whole block through pyarrow.json, or None when any line needs a closer look."""
    if not data.strip():
        return _to_table([], [])
    try:
        table = pa_json.read_json(io.BytesIO(data), parse_options=_PARSE_OPTIONS)
    except (pa.ArrowInvalid, UnicodeDecodeError, pa.ArrowNotImplementedError):
        return None
    if table[F.STEP].null_count or table[F.REWARD].null_count:
        return None
    try:  # pyarrow.json does not check that strings are UTF-8
        for name in (*F.TEXT_FIELDS, F.TOKENS):
            table[name].validate(full=True)
    except pa.ArrowInvalid:
        return None
    lines = _nonblank_line_numbers(data, first_line)
    if len(lines) != table.num_rows:
        return None
    return _finish(table, lines)


def _nonblank_line_numbers(data: bytes, first_line: int) -> np.ndarray:
    """1-based numbers of the lines in ``data`` that hold more than white space."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A)
    starts = np.concatenate(([0], ends[:-1] + 1))
    keep = (ends - starts) > 0
    for i in np.flatnonzero(keep & ((ends - starts) < 64)):  # only short lines can be blank
        keep[i] = bool(data[starts[i]:ends[i]].strip())
    return np.flatnonzero(keep) + first_line


def _finish(table: pa.Table, lines) -> pa.Table:
    table = table.cast(SCHEMA.remove(SCHEMA.get_field_index(F.LINE)))
    return table.append_column(F.LINE, pa.array(lines, pa.int64()))


def _to_table(rows: list[dict], lines: list[int]) -> pa.Table:
    parsed = pa.Table.from_pylist(rows, schema=_PARSE_SCHEMA) if rows else _PARSE_SCHEMA.empty_table()
    return _finish(parsed, lines)


def _parse_lines(data: bytes, first_line: int, quota: dict[int, int], max_per_step: int | None) -> ParsedBlock:
    rows, lines, errors, skipped = [], [], [], 0
    for number, raw in enumerate(data.split(b"\n")[:-1], start=first_line):
        if not raw.strip():
            continue
        if max_per_step is not None:
            hits = _STEP_RE.findall(raw)
            if len(hits) == 1 and quota.get(int(hits[0]), 0) >= max_per_step:
                skipped += 1
                continue
        row = _parse_line(raw)
        if isinstance(row, str):
            errors.append((number, row))
            continue
        if max_per_step is not None:
            if quota.get(row[F.STEP], 0) >= max_per_step:
                skipped += 1
                continue
            quota[row[F.STEP]] = quota.get(row[F.STEP], 0) + 1
        rows.append(row)
        lines.append(number)
    return ParsedBlock(_to_table(rows, lines), errors, skipped)


def _parse_line(raw: bytes) -> dict | str:
    """A validated row for one line, or the reason it is rejected."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 (byte {exc.start + 1} of the line)"
        try:  # NaN, Infinity and 1e400 are JSON to Python's json and ujson, not to orjson
            obj = ujson.loads(text)
        except ValueError:
            return _json_error(text)
    if not isinstance(obj, dict):
        return f"line is a JSON {type(obj).__name__}, not an object"
    step = obj.get(F.STEP)
    if step is None:
        return "missing 'step'"
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not float(step).is_integer():
        return f"'step' must be an integer, got {_short(step)}"
    if abs(step) > 2**62:
        return f"'step' out of range: {_short(step)}"
    reward = obj.get(F.REWARD)
    if reward is None:
        return "missing 'reward'"
    if not _is_number(reward):
        return f"'reward' must be a number, got {_short(reward)}"
    row = {F.STEP: int(step), F.REWARD: float(reward)}
    for name in F.SCALAR_FIELDS:
        value = obj.get(name)
        row[name] = float(value) if _is_number(value) else None
    for name in F.TEXT_FIELDS:
        value = obj.get(name)
        row[name] = value if isinstance(value, str) or value is None else json.dumps(value, ensure_ascii=False)
    tokens = obj.get(F.TOKENS)
    row[F.TOKENS] = [t if isinstance(t, str) else str(t) for t in tokens] if isinstance(tokens, list) else None
    for name in F.TOKEN_FIELDS:
        values = obj.get(name)
        if values is None:
            row[name] = None
        elif isinstance(values, list) and all(v is None or _is_number(v) for v in values):
            row[name] = [math.nan if v is None else float(v) for v in values]
        else:
            return f"'{name}' must be a list of numbers or null"
    return row


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at column {exc.colno}"
    except ValueError as exc:  # e.g. an integer too large
        return f"invalid JSON: {exc}"
    return "invalid JSON"
