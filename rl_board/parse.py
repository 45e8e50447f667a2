"""Turn bytes of JSONL into a table of samples with their aggregates, one bad line at a time.

Each line is parsed by orjson (ujson where orjson refuses NaN/Infinity, which
Python's json writes) and checked. What a sample's row needs is kept: its
scalars, its texts, where the line lies in the file, and its per-sample
aggregates (log-ratio and KL over the positions before the pad). The per-token
lists themselves are not kept: a sample's tokens are read again from its line
when it is shown, so memory does not grow with tokens. A bad line costs only
itself: it becomes an entry in ``errors`` and every other line loads.
"""

from __future__ import annotations

import gc
import json
import re
from dataclasses import dataclass, field

import numpy as np
import orjson
import pyarrow as pa
import ujson

from . import fields as F
from .metrics import LOG_RATIO_AGGREGATES, compute_log_ratio_aggregates, token_positions

#: One row per accepted line.
SCHEMA = pa.schema(
    [(F.STEP, pa.int64()), (F.REWARD, pa.float64())]
    + [(name, pa.float64()) for name in F.SCALAR_FIELDS]
    + [(name, pa.string()) for name in F.TEXT_FIELDS]
    + [
        (F.LINE, pa.int64()),  # 1-based, counted from the block's first line
        ("offset", pa.int64()),  # byte offset of the line in its file
        ("length", pa.int64()),  # bytes of the line, without its newline
        ("n_tokens", pa.int32()),  # token positions: the shortest numeric list
        ("response_len", pa.int32()),  # positions before the pad; -1 when nothing tells
        ("lengths_differ", pa.bool_()),  # per-token lists of unequal length
        ("response_chars", pa.float64()),  # characters of the response, pads removed
        ("ref_response_chars", pa.float64()),
    ]
    + [(name, pa.float64()) for name in LOG_RATIO_AGGREGATES]
)
#: The fields of a row tuple built while parsing, in order.
_ROW_FIELDS = (F.LINE, "offset", "length", F.STEP, F.REWARD, *F.SCALAR_FIELDS, *F.TEXT_FIELDS,
               "n_tokens", "response_len", "lengths_differ", "response_chars", "ref_response_chars")
_RESPONSE, _REF_RESPONSE = F.TEXT_FIELDS.index("response"), F.TEXT_FIELDS.index("ref_response")
_AGGREGATED = ("logprobs", "ref_logprobs")  # lists whose every entry the aggregates read
_STEP_RE = re.compile(rb'(?<!\\)"step"\s*:\s*(-?\d+)')
_MAX_STEP = 2**62


@dataclass
class ParsedBlock:
    """Samples parsed from a block of complete lines, and the lines rejected.

    table: one row per accepted line, columns of ``SCHEMA``.
    errors: ``(line_number, reason)`` for every rejected line.
    lines: complete lines in the block (blank ones included).
    skipped: lines not parsed because their step already had enough samples.
    """

    table: pa.Table
    errors: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0
    skipped: int = 0


def parse_block(data: bytes, first_line: int = 1, base_offset: int = 0, pad_token: str | None = None,
                step_quota: dict[int, int] | None = None, max_per_step: int | None = None) -> ParsedBlock:
    """Parse the complete lines of ``data`` (up to its last newline).

    Args:
        data: bytes of a file starting at byte ``base_offset``, at a line start.
        first_line: the number of the first line.
        pad_token: positions at and after its first occurrence leave the aggregates.
        step_quota, max_per_step: with ``max_per_step``, keep a line only while its
            step has fewer samples than that in ``step_quota`` (updated in place); a
            line whose step is already full is skipped without being parsed.
    """
    quota = step_quota if step_quota is not None else {}
    rows, logps, refs, errors, skipped, lines = [], [], [], [], 0, 0
    enabled = gc.isenabled()
    gc.disable()  # lines make no reference cycles; collecting while parsing only costs time
    try:
        view, start, find = memoryview(data), 0, data.find
        while (end := find(b"\n", start)) >= 0:
            raw, line_start, start = view[start:end], start, end + 1
            number = first_line + lines
            lines += 1
            if max_per_step is not None:
                hits = _STEP_RE.findall(raw)  # a cheap look at the step, before any parsing
                if len(hits) == 1 and quota.get(int(hits[0]), 0) >= max_per_step:
                    skipped += 1
                    continue
            parsed = _parse_line(raw, pad_token)
            if parsed is None:
                continue
            if isinstance(parsed, str):
                errors.append((number, parsed))
                continue
            row, logp, ref = parsed
            if max_per_step is not None:
                step = row[0]
                if quota.get(step, 0) >= max_per_step:
                    skipped += 1
                    continue
                quota[step] = quota.get(step, 0) + 1
            rows.append((number, base_offset + line_start, len(raw), *row))
            logps.append(logp)
            refs.append(ref)
    finally:
        if enabled:
            gc.enable()
    columns = dict(zip(_ROW_FIELDS, zip(*rows))) if rows else {name: () for name in _ROW_FIELDS}
    columns.update(compute_log_ratio_aggregates(logps, refs))
    arrays = [pa.array(columns[f.name], type=f.type) for f in SCHEMA]
    return ParsedBlock(pa.Table.from_arrays(arrays, schema=SCHEMA), errors, lines, skipped)


def parse_line(raw: bytes) -> dict | str:
    """One line as a dict, or the reason it is not a JSON object."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 (byte {exc.start + 1} of the line)"
        try:  # NaN, Infinity and 1e400 are JSON to Python's json and ujson, not to orjson
            obj = ujson.loads(text)
        except ValueError:
            return _json_error(text)
    if not isinstance(obj, dict):
        return f"line is a JSON {_json_type(obj)}, not an object"
    return obj


def _parse_line(raw: memoryview, pad_token: str | None):
    """(row, logprobs, ref_logprobs cut to the counted positions) for one line, None for a
    blank line, or the reason it is rejected. ``row`` holds the fields of ``_ROW_FIELDS``
    after line, offset and length."""
    if not raw.nbytes or (raw.nbytes < 64 and not bytes(raw).strip()):
        return None
    obj = parse_line(raw)
    if isinstance(obj, str):
        return obj
    get = obj.get
    step = get(F.STEP)
    if step is None:
        return "missing 'step'"
    if type(step) is not int:
        if not _is_number(step) or not float(step).is_integer():
            return f"'step' must be an integer, got {_short(step)}"
        step = int(step)
    if abs(step) > _MAX_STEP:
        return f"'step' out of range: {_short(step)}"
    reward = get(F.REWARD)
    if reward is None:
        return "missing 'reward'"
    if not _is_number(reward):
        return f"'reward' must be a number, got {_short(reward)}"
    scalars = [float(v) if _is_number(v) else None for v in map(get, F.SCALAR_FIELDS)]
    texts = [v if v is None or type(v) is str else json.dumps(v, ensure_ascii=False)
             for v in map(get, F.TEXT_FIELDS)]
    arrays, lengths = {}, {}
    for name in F.TOKEN_FIELDS:
        values = get(name)
        if values is None:
            continue
        if type(values) is not list:
            return f"'{name}' must be a list of numbers or null, got {_json_type(values)}"
        lengths[name] = len(values)
        if name in _AGGREGATED:  # the others' entries are checked when the sample is shown
            array = _float_array(values)
            if array is None:
                return f"'{name}' must be a list of numbers or null"
            arrays[name] = array
    tokens = get(F.TOKENS)
    tokens = tokens if type(tokens) is list else None
    n, valid = token_positions(lengths, tokens, pad_token)
    sizes = set(lengths.values())
    if tokens is not None and lengths:
        sizes.add(len(tokens))
    chars = [None if text is None else float(len(text.replace(pad_token, "") if pad_token else text))
             for text in (texts[_RESPONSE], texts[_REF_RESPONSE])]
    row = (step, float(reward), *scalars, *texts, n if lengths else 0,
           valid if lengths or tokens is not None else -1, len(sizes) > 1, *chars)
    logp, ref = arrays.get("logprobs"), arrays.get("ref_logprobs")
    if logp is None or ref is None:
        return row, None, None
    return row, logp[:valid], ref[:valid]


def _float_array(values: list) -> np.ndarray | None:
    """float64, shape (len(values),), null entries as NaN; None if anything is not a number."""
    try:
        array = np.array(values)
    except ValueError:  # ragged nested lists
        return None
    if array.ndim != 1:
        return None
    if array.dtype.kind in "fiu":
        return array.astype(np.float64, copy=False)
    if array.dtype.kind == "O" and all(v is None or _is_number(v) for v in values):
        return np.array(values, dtype=np.float64)
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at column {exc.colno}"
    except ValueError as exc:  # e.g. an integer too large
        return f"invalid JSON: {exc}"
    return "invalid JSON"
