"""The per-sample columns of a snapshot, gathered from a run's segments one segment at a time.

``Arrow.concat_tables(parts).to_pandas()`` would hold every part's numbers at once, each page of
them touched in the segment files' mappings (resident for as long as the texts stay mapped), and
would make an 8-byte array of every column, though most columns of a short-sample run hold one value
throughout (verl's: 17 of 29 float columns all NaN, its flags all false, its bookkeeping 0). Here each
part is copied into the columns and let go before the next, and a column whose every value has the
same bytes stays one value, broadcast (a read-only array of stride 0: the same dtype and values as
before; a row taken from it is an ordinary array); a part's column made again from an array of one value
that segments share (``segments.one_value_source``) is compared with that value once per array, not once
per part (verl's 2M samples: 41 such columns in 250 segments). The dtypes are those Arrow's ``to_pandas`` gives
the concatenated table (an integer column with a null as float64, a boolean one as object).

An extra field with a value in fewer than ``SPARSE_SHARE`` of at least ``SPARSE_MIN_ROWS`` rows is kept as
pandas' sparse array (its values and their rows; NaN not stored): 200,000 samples each with one of 256
extras hold 200,000 values, not 51 million (410 MB). Its values, read as a column, are the same.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..base import fields as F
from .segments import one_value_source

#: rows of parts gathered at once (their pages mapped until then): one copy of a column a window,
#: not one a part, for a run of many short segments
WINDOW_ROWS = 1 << 17
#: an extra field's column (float64) with a value in fewer than this share of its rows is kept sparse
SPARSE_SHARE = 0.25
#: ... when it has at least this many rows (a short run's columns stay plain arrays)
SPARSE_MIN_ROWS = 1 << 14


@functools.lru_cache(maxsize=256)
def _dtype(type_: pa.DataType, nulls: bool):
    """The numpy dtype Arrow's ``to_pandas`` gives a column of ``type_`` (with a null: ``nulls``), or
    None for a type not gathered here (it is converted whole, as before); asked of Arrow once a type
    (a millisecond each: 45 columns of a run, on every open)."""
    if not (pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_boolean(type_)):
        return None
    return pa.table({"x": pa.array([None] if nulls else [], type=type_)}).to_pandas()["x"].dtype


class _Column:
    """One column being gathered: its value while every part so far held only it, its array after."""

    def __init__(self, name: str, type_: pa.DataType, dtype, rows: int, first_valid: bool, extra: bool = False):
        self.name, self.type, self.dtype, self.rows = name, type_, dtype, rows
        self.value: np.ndarray | None = None  # shape (1,): the one value met so far
        self.bits = np.dtype(f"u{dtype.itemsize}") if dtype is not None and dtype.kind != "O" else None
        self.key = None  # the one value's bytes, as an unsigned integer
        self.array: np.ndarray | None = None
        self.chunks: list = []  # a type not gathered: its parts, converted at the end
        self.first_valid = -1 if first_valid else None  # the first row not null (extra fields' order)
        # an extra's values kept sparse while few: (their rows, their values) per piece, and how many
        self.sparse: list | None = [] if extra and rows >= SPARSE_MIN_ROWS and dtype == np.float64 else None
        self.kept = 0
        self.checked: set = set()  # shared one-value arrays (``segments.one_value_source``) found to hold the value

    def put(self, start: int, pieces: list[tuple[int, object]]) -> None:
        """The rows from ``start`` on: each piece (rows, its chunk; None: the part has no such column,
        all null) in turn."""
        if self.first_valid == -1:
            self._find_first_valid(start, pieces)
        if self.dtype is None:
            self.chunks += [chunk.cast(self.type) if chunk is not None else pa.nulls(rows, self.type)
                            for rows, chunk in pieces]
            return
        if not sum(count for count, _ in pieces):
            return
        if self.array is None:
            if self.bits is not None and self._same(pieces):
                return  # the same bytes throughout: kept as the one value
            if self.sparse is not None and self._kept_sparse(start, pieces):
                return
            self.array = np.empty(self.rows, self.dtype)
            if start:
                self.array[:start] = self.value[0]
                for rows, values in self.sparse or ():
                    self.array[rows] = values
                self.sparse = None
        for count, chunk in pieces:  # each piece into its place: no concatenation of the window
            self.array[start:start + count] = self._values(count, chunk)
            start += count

    def _same(self, pieces: list[tuple[int, object]]) -> bool:
        """Whether every value of ``pieces`` has the one value's bytes (the first value met, when none
        yet), compared a piece at a time (an absent column's piece by its one fill value)."""
        for count, chunk in pieces:
            if not count:
                continue
            source = one_value_source(chunk) if chunk is not None else None
            if source is not None and source in self.checked:
                continue  # a slice of an array of one value already found to be this one
            values = self._values(1 if chunk is None else count, chunk)
            if self.key is None:
                self.value = values[:1].copy()
                self.key = self.value.view(self.bits)[0]
            if not (values.view(self.bits) == self.key).all():
                return False
            if source is not None:
                self.checked.add(source)
        return True

    def _kept_sparse(self, start: int, pieces: list[tuple[int, object]]) -> bool:
        """Whether ``pieces`` (from row ``start``) were kept as values and rows (``sparse``): the rows before
        them all NaN or kept so, and the values kept still fewer than ``SPARSE_SHARE`` of the rows."""
        if start and not self.sparse and not np.isnan(self.value[0]):
            return False  # the rows before held one number throughout (``_same``): not sparse
        kept = []
        for count, chunk in pieces:
            if chunk is not None:
                values = self._values(count, chunk)
                rows = np.flatnonzero(~np.isnan(values))
                kept.append((rows + start, values[rows]))
                self.kept += len(rows)
            start += count
        if self.kept >= SPARSE_SHARE * self.rows:
            return False
        self.sparse += kept
        return True

    def _values(self, rows: int, chunk) -> np.ndarray:
        if chunk is None:
            return np.full(rows, np.nan if self.dtype.kind == "f" else None, self.dtype)
        values = chunk.to_numpy(zero_copy_only=False)
        return values if values.dtype == self.dtype else values.astype(self.dtype)

    def _find_first_valid(self, start: int, pieces: list[tuple[int, object]]) -> None:
        for rows, chunk in pieces:
            if chunk is not None and chunk.null_count < rows:
                self.first_valid = start + pc.index(pc.is_valid(chunk), True).as_py()
                return
            start += rows

    def result(self):
        """The column: an array of ``rows`` values (a broadcast one value, read-only), or a Series."""
        if self.dtype is None:
            return pa.chunked_array(self.chunks, self.type).to_pandas()
        if self.array is not None:
            return self.array
        if self.sparse:
            import pandas as pd

            values = np.full(self.rows, np.nan)
            for rows, kept in self.sparse:
                values[rows] = kept
            return pd.arrays.SparseArray(values, fill_value=np.nan)
        if self.value is None:
            return np.empty(self.rows, self.dtype)
        return np.broadcast_to(self.value, (self.rows,))


def gather(parts: list[pa.Table], first_valid: bool = False) -> tuple[dict, dict[str, int]]:
    """(name -> column, in the order ``concat_tables(parts, promote_options="default")`` gives; with
    ``first_valid``, for each extra field's column the row of its first value not null, -1 for none,
    else {}). Each part is taken out of ``parts`` (set to None) once copied, so its buffers (a segment
    file's mapping) are let go before the next is read."""
    schema = pa.unify_schemas([part.schema for part in parts], promote_options="default")
    rows = sum(part.num_rows for part in parts)
    wanted = set(F.extra_columns(schema.names)) if first_valid else set()
    # each part's columns by name (a column of null type, all null, as absent)
    chunks = [{name: chunk for name, chunk in zip(part.schema.names, part.columns) if chunk.type != pa.null()}
              for part in parts]
    nulls = {field.name for part, by_name in zip(parts, chunks) if part.num_rows for field in schema
             if (chunk := by_name.get(field.name)) is None or chunk.null_count}
    extras = set(F.extra_columns(schema.names))
    columns = [_Column(field.name, field.type, _dtype(field.type, field.name in nulls), rows, field.name in wanted,
                       field.name in extras) for field in schema]
    start, first = 0, 0
    while first < len(parts):  # a window of parts at a time: ~WINDOW_ROWS rows, its mappings then let go
        last, count = first, 0
        while last < len(parts) and (count < WINDOW_ROWS or last == first):
            count += parts[last].num_rows
            last += 1
        window = [(parts[i].num_rows, chunks[i]) for i in range(first, last)]
        parts[first:last] = chunks[first:last] = [None] * (last - first)
        for column in columns:
            column.put(start, [(rows, by_name.get(column.name)) for rows, by_name in window])
        start, first = start + count, last
        del window
    return ({c.name: c.result() for c in columns},
            {c.name: c.first_valid for c in columns if c.first_valid is not None})


class _Grown(_Column):
    """A ``_Column`` of parts given one at a time, whose rows are not known until the last: its array grows
    as parts come (``reserve``: ``ndarray.resize``, whose ``realloc`` of a large block maps its pages again
    rather than copying them), and is cut to the rows at the end (``finish``). Its ``rows`` is its capacity
    until then, which a new array is made with."""

    def reserve(self, capacity: int) -> None:
        self.rows = capacity
        if self.array is not None and len(self.array) < capacity:
            self.array.resize(capacity, refcheck=False)

    def finish(self, rows: int) -> None:
        self.rows = rows
        if self.array is not None and len(self.array) != rows:
            self.array.resize(rows, refcheck=False)


#: ``Gathering`` grows its columns by 1/GROWTH of their rows at a time
GROWTH = 4


class Gathering:
    """``gather`` of parts given one at a time, in their order, while the rest are still being read
    (``numbers.Numbers``: a cold read's segments as the workers give them back), so the copy of each column
    and the memory it fills are done before the read ends. ``result`` gives what ``gather(parts)`` gives for
    the same parts (``first_valid`` false), or None when this way can't: a column whose dtype a later part
    changes (a null in integers or booleans, a type that differs), or an extra field that ``gather`` might
    keep sparse (``SPARSE_SHARE``); the caller then gathers the parts as before."""

    def __init__(self):
        self.columns: dict[str, _Grown] = {}
        self.rows = 0
        self.capacity = 0
        self.failed = False

    def add(self, part: pa.Table) -> None:
        """Gather ``part``'s rows after those given before."""
        if self.failed:
            return
        rows = part.num_rows
        if not rows:  # (``gather`` takes a part without rows for its columns' names alone)
            self.failed = any(name not in self.columns for name in part.schema.names)
            return
        by_name = {name: chunk for name, chunk in zip(part.schema.names, part.columns) if chunk.type != pa.null()}
        for field in part.schema:
            column = self.columns.get(field.name)
            if column is None:
                nulls = self.rows > 0 or field.type == pa.null() or by_name[field.name].null_count > 0
                self.columns[field.name] = _Grown(field.name, field.type, _dtype(field.type, nulls), self.capacity,
                                                  False)
                if self.rows:  # the rows before this part have none: nulls, where the dtype allows them
                    if field.type == pa.null() or _dtype(field.type, True) != _dtype(field.type, False):
                        self.failed = True
                        return
                    self.columns[field.name].put(0, [(self.rows, None)])
            elif field.type != pa.null() and column.type != field.type:
                self.failed = True  # (``gather`` promotes a column first met as nulls to the other type)
                return
        for name, column in self.columns.items():
            chunk = by_name.get(name)
            if (chunk is None or chunk.null_count) and column.dtype is not None and column.dtype != _dtype(
                    column.type, True):
                self.failed = True  # a null in a column of integers or booleans: ``gather`` makes it floats
                return
        if self.rows + rows > self.capacity:  # a quarter more each time: at most that much memory past the rows
            self.capacity = max(self.rows + rows, self.capacity + self.capacity // GROWTH)
        for name, column in self.columns.items():
            column.reserve(self.capacity)
            column.put(self.rows, [(rows, by_name.get(name))])
        self.rows += rows

    def result(self) -> dict | None:
        """(name -> column, as ``gather`` gives them) of every part given, or None (see the class)."""
        if self.failed:
            return None
        for column in self.columns.values():
            column.finish(self.rows)
            if (column.name.startswith(F.EXTRA_PREFIX) and column.dtype == np.float64 and self.rows >= SPARSE_MIN_ROWS
                    and column.array is not None
                    and np.count_nonzero(~np.isnan(column.array)) < SPARSE_SHARE * self.rows):
                return None  # ``gather`` may keep it sparse
        return {name: column.result() for name, column in self.columns.items()}


def one_value(values: np.ndarray) -> np.ndarray:
    """``values`` (a numeric array) as a broadcast one value when every value has the same bytes."""
    if values.dtype.kind == "O" or len(values) == 0 or not values.strides[0]:
        return values
    bits = values.view(f"u{values.dtype.itemsize}")
    return np.broadcast_to(values[:1].copy(), values.shape) if (bits == bits[0]).all() else values


def take(column, order: np.ndarray):
    """``column`` (a result of ``gather``) at the rows ``order``; a broadcast value stays one."""
    if not isinstance(column, np.ndarray):  # a pandas Series, or a sparse extra's array
        taken = column.take(order)
        return taken.reset_index(drop=True) if hasattr(taken, "reset_index") else taken
    if not column.strides[0] and len(order):
        return np.broadcast_to(column[:1], (len(order),))
    return column[order]


def frame(columns: dict) -> pd.DataFrame:  # noqa: F821 (pandas is imported here, when first needed)
    """``columns`` as a frame (index 0..n-1), each column its own block: none is copied."""
    import pandas as pd

    rows = next((len(c) for c in columns.values()), 0)
    return pd.DataFrame(columns, index=pd.RangeIndex(rows), copy=False)
