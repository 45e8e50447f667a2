"""The canonical rows every reader produces: one Arrow row per sample, what the source holds.

A reader turns its bytes into a table of ``ROWS`` columns, in that order, followed
by one float64 column ``fields.EXTRA_PREFIX + name`` per extra field (null where a
sample lacks it), in name order. Nothing here is derived: counted positions,
aggregates and keys are computed from these rows by ``rl_board.derive.samples``.

- ``line``: 1-based line (or table row), counted from the block's first;
  ``offset``/``length``: where the line lies in its file (the 0-based row and 0
  for a table file).
- each per-token list of ``fields.TOKEN_FIELDS``: ``list<double>``, null where the
  sample has none (a null entry is NaN);
- ``response_tokens``: ``list<string>`` (dictionary-encoded), null where none;
- ``token_ids``: ``list<int64>``, null where none (decoded by ``rl_board.derive.samples``, not here);
- ``loss_mask``: ``list<bool>`` (true = trained), null where none;
- ``messages``: ``list<struct>`` of ``TURN`` (an agent sample's conversation, see
  ``readers.turns``), null where the sample has none.
"""

from __future__ import annotations

from itertools import chain, compress, repeat
from operator import is_not

import numpy as np
import pyarrow as pa

from ..base import fields as F
from .extras import FieldNotes, column_name, why_unusable

TOKEN_STRINGS = pa.list_(pa.dictionary(pa.int32(), pa.string()))
#: One tool call of an assistant turn: its id, the tool's name and the arguments as text (JSON as written).
TOOL_CALL = pa.struct([("id", pa.string()), ("name", pa.string()), ("arguments", pa.string())])
#: One image part of a turn's content, where it is, not what it holds (``readers.turns.image_refs``): where
#: its ``[image]`` begins in the content, its index among the content's parts, where its bytes are ("data":
#: in the line, read again when shown; "url"; "path"; "none": not kept) and the URL or path as written.
IMAGE_REF = pa.struct([("at", pa.int64()), ("part", pa.int64()), ("source", pa.string()), ("url", pa.string())])
#: One turn of a conversation. ``trainable`` is null when the format doesn't say; ``num_tokens`` is how
#: many of the sample's token positions the turn holds (its positions follow those of the turns before
#: it), null when the format doesn't say; ``images``: its image parts, null without any; ``meta`` is what the
#: trainer logged about the turn (stop reason, errors, timing, token counts: ``readers.turns``) as JSON text of an
#: object, null when it logged none.
TURN = pa.struct([("role", pa.string()), ("content", pa.string()), ("reasoning", pa.string()),
                  ("tool_calls", pa.list_(TOOL_CALL)), ("tool_call_id", pa.string()), ("trainable", pa.bool_()),
                  ("num_tokens", pa.int64()), ("images", pa.list_(IMAGE_REF)), ("meta", pa.string())])
MESSAGES = pa.list_(TURN)

ROWS = pa.schema(
    [(F.STEP, pa.int64()), (F.REWARD, pa.float64())]
    + [(name, pa.float64()) for name in F.SCALAR_FIELDS]
    + [(name, pa.string()) for name in F.TEXT_FIELDS]
    + [(F.LINE, pa.int64()), ("offset", pa.int64()), ("length", pa.int64())]
    + [(name, pa.list_(pa.float64())) for name in F.TOKEN_FIELDS]
    + [(F.TOKENS, TOKEN_STRINGS), (F.TOKEN_IDS, pa.list_(pa.int64())), (F.LOSS_MASK, pa.list_(pa.bool_()))]
    + [(F.MESSAGES, MESSAGES)]
)


def present_mask(values) -> np.ndarray:
    """Whether each entry of a sequence is not None; bool, shape (len(values),)."""
    return np.fromiter(map(is_not, values, repeat(None)), bool, len(values))


def float_lists(values) -> pa.Array:
    """A ``list<double>`` array from a sequence of lists of numbers (None entries are NaN) or None."""
    present, kept, lengths = _present_lists(values)
    total = int(lengths.sum())
    try:
        flat = np.fromiter(chain.from_iterable(kept), np.float64, total)
    except TypeError:  # None entries: numpy's array() makes them NaN
        flat = np.array(list(chain.from_iterable(kept)), dtype=np.float64)
    return _lists(lengths, present, pa.array(flat, pa.float64()))


def int_lists(values) -> pa.Array:
    """A ``list<int64>`` array from a sequence of lists of integers or None."""
    present, kept, lengths = _present_lists(values)
    flat = np.fromiter(chain.from_iterable(kept), np.int64, int(lengths.sum()))
    return _lists(lengths, present, pa.array(flat, pa.int64()))


def mask_lists(values) -> pa.Array:
    """A ``list<bool>`` array from a sequence of lists of booleans or numbers (non-zero = true;
    a None entry is false) or None."""
    present, kept, lengths = _present_lists(values)
    flat = np.fromiter(map(bool, chain.from_iterable(kept)), bool, int(lengths.sum()))
    return _lists(lengths, present, pa.array(flat, pa.bool_()))


def token_lists(values) -> pa.Array:
    """A dictionary-encoded ``list<string>`` array from a sequence of lists of strings or None."""
    present, kept, lengths = _present_lists(values)
    flat = list(chain.from_iterable(kept))
    vocabulary = list(dict.fromkeys(flat))
    index = {token: i for i, token in enumerate(vocabulary)}
    ids = np.fromiter(map(index.__getitem__, flat), np.int32, len(flat))
    tokens = pa.DictionaryArray.from_arrays(pa.array(ids, pa.int32()), pa.array(vocabulary, pa.string()))
    return _lists(lengths, present, tokens)


def _present_lists(values) -> tuple[np.ndarray, list, np.ndarray]:
    """(whether each entry is a list, not None; the lists; each entry's length, 0 for None)."""
    present = present_mask(values)
    kept = list(compress(values, present))
    lengths = np.zeros(len(values), np.int64)
    lengths[present] = np.fromiter(map(len, kept), np.int64, len(kept))
    return present, kept, lengths


def _lists(lengths: np.ndarray, present: np.ndarray, values: pa.Array) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(~present))


def build_rows(columns: dict, extras: dict) -> pa.Table:
    """A canonical table from ``columns`` (``ROWS`` name -> values: Python sequences, numpy
    or Arrow arrays; per-token lists as sequences of lists or Arrow list arrays; turns as lists of
    ``readers.turns`` dicts; a name left out is null in every row) and ``extras`` (extra field
    name -> float values or None, one per row, or an Arrow array). A name that can't be a column is
    renamed (``extras.column_name``) and the table's notes say so (``extras.FieldNotes``)."""
    arrays = []
    count = len(columns[F.STEP])
    for f in ROWS:
        values = columns.get(f.name)
        if values is None:
            arrays.append(pa.nulls(count, f.type))
        elif isinstance(values, (pa.Array, pa.ChunkedArray)):
            arrays.append(values if values.type == f.type else values.cast(f.type))
        elif f.name == F.TOKENS:
            arrays.append(token_lists(values))
        elif f.name == F.TOKEN_IDS:
            arrays.append(int_lists(values))
        elif f.name == F.LOSS_MASK:
            arrays.append(mask_lists(values))
        elif f.name in F.TOKEN_FIELDS:
            arrays.append(float_lists(values))
        else:
            arrays.append(pa.array(values, type=f.type))
    names = list(ROWS.names)
    taken = set(names)  # looked up once per extra: linear in the extras, not quadratic
    notes = FieldNotes()
    for name in sorted(extras):
        column = F.extra_column(column_name(name))
        if column in taken:  # a renamed name meeting a real one (a hash collision): the first keeps it
            continue
        taken.add(column)
        if column != F.extra_column(name):
            notes.renamed[F.extra_name(column)] = why_unusable(name)
        values = extras[name]
        arrays.append(values.cast(pa.float64()) if isinstance(values, (pa.Array, pa.ChunkedArray))
                      else pa.array(values, pa.float64()))
        names.append(column)
    return notes.attach(pa.Table.from_arrays(arrays, names=names))


def empty_rows() -> pa.Table:
    return ROWS.empty_table()
