"""A block of flat JSON lines read straight into Arrow columns (``pyarrow.json``), or None.

Short flat lines (verl's ``_dump_generations``: texts, a score, a step, a few numbers) cost a line's
decode plus Python work per field when decoded into structs (``shape``); Arrow's own JSON reader
gives the columns at the speed of parsing them. It is taken only when its rows are certainly the
ones ``shape._rows`` would build: every line starts with ``{`` (no blank line, no BOM), Arrow gives
one row per line, every key is one the block's shape knows or learns at once (an extra a struct can
name, within the shape's limit, as a refusal naming it would teach it), the typed keys hold exactly
the types the struct wants (``step`` an int64 without nulls and within range, numbers int64 or
finite doubles, texts strings; no lists, objects or booleans where a number is wanted), at most one
of a field and its aliases is present, and a reward is on every line when one is required. Arrow
makes every column dense (a key on one line costs a value on every line), so it reads only the keys
and types of a block's first ``SCHEMA_LINES`` lines, and at most ``MAX_CELLS`` rows x columns: a
block with more keys, or a key met later, is the struct path's, where a key costs what its bytes do. Any
other block (Arrow's refusal included: duplicate keys, NaN, mixed types, bad UTF-8, lone
surrogates) returns None and is read by the struct path, where each odd line costs only itself.
"""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj

from ...base import fields as F
from ..canonical import build_rows
from ..record_rows import MAX_STEP

_NUMBER_FIELDS = frozenset((F.REWARD, *F.SCALAR_FIELDS))
_TEXT_FIELDS = frozenset(F.TEXT_FIELDS)
_NUMERIC = (pa.int64(), pa.float64())
_EXTRA_TYPES = (pa.int64(), pa.float64(), pa.bool_())
SCHEMA_LINES = 256  # a block's first lines, whose keys and types are the only columns Arrow reads
MAX_CELLS = 1 << 24  # rows x columns of a block Arrow reads (each column is dense: nulls cost as values)


def read_flat(shape, version, data, starts: np.ndarray, lengths: np.ndarray, first_line: int,
              base_offset: int, reward_required: bool = True) -> pa.Table | None:
    """The canonical rows of every line of ``data`` (complete lines, none blank, each starting with
    ``{``) as ``shape._rows`` builds them from ``version``'s structs, or None when this block is not
    one whose rows are certainly the same (see the module's docstring)."""
    if not shape.usable or not len(starts) or not _looks_flat(data[:starts[1] if len(starts) > 1 else len(data)]):
        return None
    count = len(starts)
    head = int(starts[SCHEMA_LINES]) if count > SCHEMA_LINES else len(data)
    try:
        # the keys and types of the first lines, then the block read with those columns only: a key
        # met later refuses the block (the struct path reads it), so Arrow never makes a column per key
        # of a block whose every line has its own (its columns are dense: rows x keys values)
        schema = _read(data[:head]).schema
        if count * len(schema) > MAX_CELLS:
            return None
        table = _read(data, schema) if head < len(data) else _read(data[:head])
        names = table.column_names
    except (pa.ArrowException, UnicodeDecodeError, ValueError):
        return None
    if table.num_rows != count or F.MESSAGES in names:
        return None
    if not set(version.keys).issuperset(names):  # extras the shape has not met: learned as a refusal would
        if not shape.learn_keys(names):
            return None
        version = shape.version
    if any(pa.types.is_nested(f.type) for f in table.schema):
        return None
    found = {name: table.column(i).combine_chunks() for i, name in enumerate(names)}
    present = {key: column for key, column in found.items() if column.type != pa.null()}
    if not all(_utf8(c) for c in present.values() if c.type == pa.string()):
        return None
    columns = {}
    for name, keys in shape.candidates.items():
        here = [key for key in keys if key in present]
        if len(here) > 1:
            return None
        if not here:
            continue
        column = present[here[0]]
        if name == F.STEP:
            if column.type != pa.int64() or column.null_count:
                return None
            steps = column.to_numpy()
            if ((steps < -MAX_STEP) | (steps > MAX_STEP)).any():
                return None
            columns[name] = steps
        elif name in _NUMBER_FIELDS:
            numbers = _floats(column, _NUMERIC)
            if numbers is None:
                return None
            columns[name] = numbers
        elif name in _TEXT_FIELDS:
            if column.type != pa.string():
                return None
            columns[name] = column
        else:  # a per-token list, tokens, ids or a mask given as a scalar: the struct path words it
            return None
    if F.STEP not in columns or (reward_required and (F.REWARD not in columns or columns[F.REWARD].null_count)):
        return None
    extras = {}
    for key in version.keys:  # in the order the struct path meets them: the run's first extras are capped
        column = present.get(key)
        if column is None or key in shape.taken or column.type == pa.string():
            continue
        numbers = _floats(column, _EXTRA_TYPES)
        if numbers is None:
            return None
        extras[key] = numbers
    lines = np.arange(count, dtype=np.int64)
    columns[F.LINE] = first_line + lines
    columns["offset"] = base_offset + starts
    columns["length"] = lengths
    return build_rows(columns, extras)


def _read(data, schema: pa.Schema | None = None) -> pa.Table:
    """``data``'s lines as one Arrow table; with ``schema``, those columns only (another key raises)."""
    parse = (pj.ParseOptions() if schema is None
             else pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"))
    return pj.read_json(pa.py_buffer(data), read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
                        parse_options=parse)


def _looks_flat(line) -> bool:
    """Whether a block's first line is an object with no list or object in it: a block of per-token
    lists is not handed to Arrow only to be refused after a full parse."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return isinstance(record, dict) and not any(isinstance(value, (list, dict)) for value in record.values())


def _utf8(column: pa.Array) -> bool:
    """Whether every string is UTF-8: Arrow's reader passes a string's bytes on unchecked, where the struct
    path sends a line with bytes that are not UTF-8 to the slow path, which words it."""
    try:
        column.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _floats(column: pa.Array, types: tuple) -> pa.Array | None:
    """A float64 column of int64, double or bool values as the struct path converts them (an int
    rounded to the nearest double, true 1.0), nulls kept; None when the column's type is not one of
    ``types`` or a value is not finite (Arrow reads NaN and Infinity, which are not JSON)."""
    if column.type not in types:
        return None
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    values = column.to_numpy(zero_copy_only=False)
    if column.type == pa.float64():
        if not np.isfinite(values[valid]).all():
            return None
        return column
    numbers = np.zeros(len(column)) if column.null_count else None
    if numbers is None:
        numbers = values.astype(np.float64)
    else:
        numbers[valid] = values[valid].astype(np.float64)
    return pa.array(numbers, pa.float64(), mask=~valid if column.null_count else None)
