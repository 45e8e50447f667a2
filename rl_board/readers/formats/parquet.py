"""Parquet tables: TRL's ``completions/completions_{step:05d}.parquet`` (``log_completions=True``).

One row is one completion: ``step``, ``prompt``, ``completion`` (-> ``response``),
one float column per reward function, ``advantage``. The file is read column-wise
with pyarrow, never row by row. ``reward`` is the ``reward`` column when there is
one, else the sum of the reward-function columns ignoring NaN (0 when all are
NaN, as TRL's ``nansum``), the reward-function columns being the numeric columns
other than ``step``, ``advantage`` and the canonical ones. Every numeric or
boolean column that feeds no canonical field is an extra (so each reward function
and ``advantage`` are). A table file can't grow by appending: any change re-reads it.

TRL 1.16 logs a conversational dataset's ``prompt`` and ``completion`` as lists of chat messages
(``strip_images_from_messages``: each image block kept as ``{"type": "image"}``, its pixels not written).
Such a row is a conversation: its turns are the prompt's messages then the completion's (``turns.turns``),
its prompt and response texts are made from them as for every format with turns. When any row of a file
holds an image block, every conversational row of the file gets the extra ``image_placeholders`` (its
image blocks, 0 included) and the file a note: the writer did not keep the pixels.

Every Parquet file the readers open (TRL's, ART's, a field-mapped table) is read by ``read_bounded``: a row
group at a time, each checked against the expansion bound of compressed files before it is read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...base import fields as F
from ...base.compression import expansion_limit
from ...base.location import as_path, open_file
from ..base import FileError, KeyResolver, ReadOptions, SourceChanged, is_path
from ..canonical import TOKEN_STRINGS, build_rows
from ..notes import with_notes
from ..placeholders import IMAGE_PLACEHOLDERS, image_blocks
from ..turns import turns

NAME = "parquet"
SUFFIX = ".parquet"
APPENDABLE = False
ALIASES = {"response": "completion"}
NOT_REWARD_FUNCTIONS = ("step", "advantage")
CONVERSATION = ("prompt", "response")  # the canonical texts a list of chat messages may stand for
NO_PIXELS = ('image placeholders without images: TRL writes each image of a conversation as {"type": "image"}, '
             "its pixels left out (they are only in the completions table TRL logs to W&B or trackio); "
             "image_placeholders counts them per sample")


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (row, reason) for each rejected row, rows in the file). Raises
    ``FileError`` when the file can't be used at all."""
    source, notes = read_bounded(path)
    if any(is_path(s) and s not in source.column_names for _, s in options.fields):
        source = _flattened(source)  # a nested source (``meta.step``) names a struct column's field
    resolver = KeyResolver(options.fields, ALIASES)
    sources, taken = resolver.resolve(source.column_names)
    rows = source.num_rows
    if F.STEP not in sources:
        raise FileError(f"no {resolver.source_of(F.STEP)} column")
    step, bad_step = _integers(source[sources[F.STEP]])
    if F.REWARD in sources:
        reward = _numbers(source[sources[F.REWARD]], F.REWARD)
    else:
        functions = [name for name in source.column_names if name not in taken
                     and name not in NOT_REWARD_FUNCTIONS and _is_numeric(source.schema.field(name).type)]
        if not functions:
            raise FileError(f"no {resolver.source_of(F.REWARD)} column and no numeric reward-function "
                            "columns to sum")
        stacked = np.column_stack([_floats(source[name]) for name in functions])
        reward = pa.array(np.nansum(stacked, axis=1))
    no_step, no_reward = _mask(step.is_null()), _mask(reward.is_null())
    errors = sorted([(int(i) + 1, f"missing {resolver.source_of(F.STEP)}")
                     for i in np.flatnonzero(no_step & ~bad_step)]
                    + [(int(i) + 1, f"{resolver.source_of(F.STEP)} is not an integer step")
                       for i in np.flatnonzero(bad_step)]
                    + [(int(i) + 1, f"missing {resolver.source_of(F.REWARD)}")
                       for i in np.flatnonzero(no_reward & ~no_step)])
    index = np.arange(rows, dtype=np.int64)
    if errors:
        keep = pa.array(~(no_step | no_reward))
        source, step, reward, index = source.filter(keep), step.filter(keep), reward.filter(keep), index[~(
            no_step | no_reward)]
    n = source.num_rows
    missing = pa.nulls(n, pa.float64())
    columns = {F.STEP: step, F.REWARD: reward, F.LINE: index + 1, "offset": index,
               "length": np.zeros(n, dtype=np.int64)}
    for name in F.SCALAR_FIELDS:
        columns[name] = _numbers(source[sources[name]], name) if name in sources else missing
    conversations = {name: source[sources[name]].to_pylist() for name in CONVERSATION
                     if name in sources and _is_messages(source.schema.field(sources[name]).type)}
    for name in F.TEXT_FIELDS:
        if name in conversations:  # made from the turns (``derive.conversations``) where the row has them
            columns[name] = pa.nulls(n, pa.string())
        else:
            columns[name] = _texts(source[sources[name]]) if name in sources else pa.nulls(n, pa.string())
    for name in F.TOKEN_FIELDS:  # TRL logs no per-token lists
        columns[name] = pa.nulls(n, pa.list_(pa.float64()))
    columns[F.TOKENS] = pa.nulls(n, TOKEN_STRINGS)
    extras = {name: source[name] for name in source.column_names
              if name not in taken and _is_numeric(source.schema.field(name).type, booleans=True)}
    if conversations:
        messages = [_conversation(*parts) for parts in zip(*(conversations.get(name, [None] * n)
                                                               for name in CONVERSATION))]
        columns[F.MESSAGES] = [None if m is None else turns(m) for m in messages]
        blocks = [None if m is None else image_blocks(m) for m in messages]
        if any(blocks):
            extras[IMAGE_PLACEHOLDERS] = blocks
            notes.append(NO_PIXELS)
    return with_notes(build_rows(columns, extras), notes), errors, rows


#: bytes an Arrow value of a fixed-width type takes, by Parquet physical type (a string's is its offset)
_WIDTHS = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8, "BYTE_ARRAY": 4,
           "FIXED_LEN_BYTE_ARRAY": 4}


#: bytes one row costs once it is a canonical row, whatever its columns (measured: a TRL file of 1,000,000 rows
#: of a step and a reward, 16 MB as Arrow columns, peaks at 690 MB in ``summary``)
ROW_BYTES = 512


def _row_group_bound(meta, index: int) -> int:
    """What row group ``index`` of a file's metadata will take once read, at least, before reading it: per
    column the larger of its uncompressed pages and its rows times the Arrow width of one value (a page of
    run-length-encoded integers is bytes on disk, 8 bytes a row in memory), plus one validity bit a row, and
    ``ROW_BYTES`` a row for the canonical row it becomes."""
    group = meta.row_group(index)
    rows = group.num_rows
    total = rows * ROW_BYTES
    for c in range(group.num_columns):
        column = group.column(c)
        total += max(column.total_uncompressed_size, rows * _WIDTHS.get(column.physical_type, 8) + rows // 8)
    return total


def _expanded(column) -> int:
    """The bytes a dictionary-encoded string column takes once each row holds its own value (its indices
    times the lengths of the values they name: 8 rows naming one 128 MiB value are 1 GiB); 0 for others."""
    import pyarrow.compute as pc

    if not pa.types.is_dictionary(column.type):
        return 0
    total = 0
    for chunk in column.chunks:
        lengths = pc.binary_length(chunk.dictionary).cast(pa.int64())
        total += int(pc.sum(lengths.take(chunk.indices)).as_py() or 0)
    return total


def read_bounded(path, columns: list[str] | None = None) -> tuple[pa.Table, list[str]]:
    """(the Parquet file at ``path`` read a row group at a time, notes): what it expands to is bounded as a
    compressed file's is (``base.compression.expansion_limit``: ``RL_BOARD_MAX_RATIO`` times its size, at least
    64 MiB, at most ``RL_BOARD_MAX_EXPANDED_GB``). Each row group's size is checked from its metadata before it
    is read (uncompressed pages, rows times the width of a value), its string columns are read as
    dictionaries and their expanded size checked before they are made whole. At the first row group past the
    bound, reading stops: the groups before it are the table and a note names the bound (``FileError`` when it
    is the first). ``FileError`` for a file that is no Parquet."""
    import pyarrow.parquet as pq  # here, not at import: JSONL parsing workers never need it

    try:
        with open_file(as_path(path)) as fh:  # a local file or a URL's object, read through its filesystem
            size = _size_of(fh)
            limit, why = expansion_limit(size)
            strings = _string_columns(pq.ParquetFile(fh).schema_arrow)
            parquet = pq.ParquetFile(fh, read_dictionary=strings)
            meta, tables, used, stopped = parquet.metadata, [], 0, None
            for index in range(meta.num_row_groups):
                used += _row_group_bound(meta, index)
                if used > limit:
                    stopped = index
                    break
                table = parquet.read_row_group(index, columns=columns)
                used += sum(_expanded(table[name]) for name in table.column_names)  # any dictionary column
                if used > limit:
                    stopped = index
                    break
                tables.append(_undictionary(table, strings))
            if not tables:  # an empty file, or the first row group already past the bound
                if stopped is not None:
                    raise FileError(why)
                return _undictionary(parquet.schema_arrow.empty_table(), strings), []
    except (pa.ArrowException, OSError) as exc:
        raise FileError(f"not a readable parquet file: {exc}") from exc
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    notes = [] if stopped is None else [f"{why} (its first {stopped:,} of "
                                        f"{meta.num_row_groups:,} row groups, {table.num_rows:,} rows, are read)"]
    return table, notes


def _string_columns(schema: pa.Schema) -> list[str]:
    """The top-level string and binary columns of ``schema`` (those read as dictionaries)."""
    return [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            or pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]


def _undictionary(table: pa.Table, strings: list[str]) -> pa.Table:
    """``table`` with the columns read as dictionaries cast back to their value type (checked first)."""
    for name in strings:
        if name in table.column_names and pa.types.is_dictionary(table.schema.field(name).type):
            index = table.column_names.index(name)
            table = table.set_column(index, name, table[name].cast(table.schema.field(name).type.value_type))
    return table


def _size_of(fh) -> int:
    try:
        return os.fstat(fh.fileno()).st_size
    except (OSError, AttributeError, ValueError):  # an fsspec file has no descriptor
        size = fh.seek(0, os.SEEK_END)
        fh.seek(0)
        return size


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """Row ``offset`` (0-based) of a table file (``fh``, open for reading, called ``name``) as a dict."""
    import pyarrow.parquet as pq

    try:
        key = _version(fh, name)
        parquet = pq.ParquetFile(fh)
        meta, first = parquet.metadata, 0
        for index in range(meta.num_row_groups):  # only the row group holding the row is read
            rows = meta.row_group(index).num_rows
            if offset < first + rows:
                break
            first += rows
        else:
            raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
        table = _TABLES.get((key, index))
        if table is None:
            limit, why = expansion_limit(_size_of(fh))
            if _row_group_bound(meta, index) > limit:
                raise SourceChanged(f"{name} {why}")
            table = _TABLES[(key, index)] = parquet.read_row_group(index)
            while len(_TABLES) > 4:  # a step's samples are shown row by row: keep the last few row groups
                _TABLES.pop(next(iter(_TABLES)))
    except (pa.ArrowException, OSError) as exc:
        raise SourceChanged(f"{name} can't be read any more ({exc}); refresh it.") from exc
    row = table.slice(offset - first, 1).to_pylist()[0]
    parts = [row[key] if _is_messages(table.schema.field(key).type) else None
             for key in ("prompt", "completion") if key in row]
    messages = _conversation(*parts) if any(p is not None for p in parts) else None
    if messages is not None:  # a conversation: its turns, not the two lists as text
        for key in ("prompt", "completion"):
            if key in row and _is_messages(table.schema.field(key).type):
                row.pop(key)
        row[F.MESSAGES] = messages
        blocks = image_blocks(messages)
        if blocks:
            row[IMAGE_PLACEHOLDERS] = blocks
    return row


_TABLES: dict[tuple, pa.Table] = {}  # table files read for ``record``, while unchanged


def _is_messages(type_: pa.DataType) -> bool:
    """Whether a column holds lists of chat messages (structs with a ``role``), as TRL writes a
    conversational prompt or completion."""
    return ((pa.types.is_list(type_) or pa.types.is_large_list(type_)) and pa.types.is_struct(type_.value_type)
            and type_.value_type.get_field_index("role") >= 0)


def _conversation(*parts) -> list | None:
    """The messages of a row's conversation columns one after another, None when it has none (each part a list
    of messages or None). Arrow gives every message every field of the column's struct: a field a message
    did not have is None, and is left out (a content part ``{"type": "image", "text": None}`` is TRL's
    ``{"type": "image"}``)."""
    if all(p is None for p in parts):
        return None
    return [_without_nulls(m) for p in parts if p is not None for m in p]


def _without_nulls(value):
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _flattened(table: pa.Table) -> pa.Table:
    """``table`` with every struct column replaced by its fields, ``parent.child``, at every depth."""
    while any(pa.types.is_struct(f.type) for f in table.schema):
        table = table.flatten()
    return table


def _mask(flags) -> np.ndarray:
    """A boolean Arrow array or chunked array as a numpy bool array."""
    return np.asarray(flags, dtype=bool)


def _is_numeric(type_: pa.DataType, booleans: bool = False) -> bool:
    return pa.types.is_integer(type_) or pa.types.is_floating(type_) or (booleans and pa.types.is_boolean(type_))


_STEP_LIMIT = 2**63  # steps must fit int64


def _integers(column: pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """(a step column as int64, null where missing or unusable; bool, shape (rows,): where a value
    was there but is no int64 integer (inf, 1e300, 2.5, 2**64-1)). Each such value costs its row."""
    import pyarrow.compute as pc

    if pa.types.is_integer(column.type):
        column = column.combine_chunks()
        if pa.types.is_unsigned_integer(column.type):  # only these can pass int64's largest
            too_big = pc.greater(column, pa.scalar(_STEP_LIMIT - 1, pa.uint64())).fill_null(False)
            column = pc.if_else(too_big, pa.scalar(None, column.type), column)
            return column.cast(pa.int64()), _mask(too_big)
        return column.cast(pa.int64()), np.zeros(len(column), dtype=bool)
    if pa.types.is_floating(column.type):
        values = column.cast(pa.float64()).to_numpy()
        missing = np.isnan(values)
        with np.errstate(invalid="ignore"):
            usable = np.isfinite(values) & (np.abs(values) < _STEP_LIMIT) & (values == np.floor(values))
        return pa.array(np.where(usable, values, 0).astype(np.int64), mask=~usable), ~missing & ~usable
    raise FileError(f"'step' must be a column of integers, is {column.type}")


def _numbers(column: pa.ChunkedArray, name: str) -> pa.ChunkedArray:
    if not _is_numeric(column.type):
        raise FileError(f"'{name}' must be a column of numbers, is {column.type}")
    return column.cast(pa.float64())


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    """float64 values, nulls as NaN."""
    return column.cast(pa.float64()).to_numpy()


def _texts(column: pa.ChunkedArray):
    """Strings as they are; any other column (chat messages, say) as JSON text."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column.cast(pa.string())
    return pa.array([None if v is None else json.dumps(v, ensure_ascii=False, default=str)
                     for v in column.to_pylist()], type=pa.string())


def _version(fh, name: str) -> tuple:
    """What names one version of an open table file: its device, inode, size and time (a local file),
    else the size and ETag its filesystem reports (a URL's object)."""
    try:
        st = os.fstat(fh.fileno())
    except (OSError, ValueError):  # an fsspec file has no descriptor
        details = getattr(fh, "details", None) or {}
        return (name, "url", str(getattr(fh, "path", "")), details.get("size"),
                str(details.get("ETag") or details.get("etag") or details.get("created") or ""))
    return (name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
