"""The canonical rows every reader produces: one Arrow row per sample.

The columns of ``SCHEMA`` come first, in its order; each extra field of the
source follows as a float64 column ``fields.EXTRA_PREFIX + name`` (null where a
sample lacks it). Segments of one run may differ in their extras; the loader
unifies them.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa

from .. import fields as F
from ..metrics import SAMPLE_AGGREGATES

SCHEMA = pa.schema(
    [(F.STEP, pa.int64()), (F.REWARD, pa.float64())]
    + [(name, pa.float64()) for name in F.SCALAR_FIELDS]
    + [(name, pa.string()) for name in F.TEXT_FIELDS]
    + [
        (F.LINE, pa.int64()),  # 1-based line (or table row), counted from the block's first
        ("offset", pa.int64()),  # byte offset of the line in its file (the 0-based row for a table file)
        ("length", pa.int64()),  # bytes of the line, without its newline (0 for a table file)
        ("n_tokens", pa.int32()),  # token positions: the shortest numeric list
        ("response_len", pa.int32()),  # counted positions (see metrics); -1 when nothing tells
        ("lengths_differ", pa.bool_()),  # per-token lists of unequal length
        ("response_chars", pa.float64()),  # characters of the response, pads removed
        ("ref_response_chars", pa.float64()),
        ("repeat_4gram", pa.float64()),  # 1 - distinct/total 4-grams of the counted tokens (or words)
        ("prompt_key", pa.int64()),  # 64-bit key of the prompt text with pads removed; null without a prompt
    ]
    + [(name, pa.float64()) for name in SAMPLE_AGGREGATES]
)


def prompt_key(prompt: str | None, pad_token: str | None) -> int | None:
    """A 64-bit key of a prompt's text with ``pad_token`` removed (blake2b: the same in every
    process), so samples with the same prompt group without holding texts; None without a prompt."""
    if prompt is None:
        return None
    text = prompt.replace(pad_token, "") if pad_token else prompt
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "little", signed=True)


def build_table(columns: dict, extras: dict) -> pa.Table:
    """A canonical table from ``columns`` (every ``SCHEMA`` name -> values) and ``extras``
    (extra field name -> float values or None, one per row), extras in name order. Values
    are Python sequences, numpy arrays or Arrow arrays."""
    arrays = [_array(columns[f.name], f.type) for f in SCHEMA]
    names = list(SCHEMA.names)
    for name in sorted(extras):
        arrays.append(_array(extras[name], pa.float64()))
        names.append(F.extra_column(name))
    return pa.Table.from_arrays(arrays, names=names)


def _array(values, type_: pa.DataType):
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.cast(type_)
    return pa.array(values, type=type_)


def has_canonical_prefix(schema: pa.Schema) -> bool:
    """Whether a stored table starts with ``SCHEMA`` and has only float64 extras after it."""
    n = len(SCHEMA)
    head = pa.schema(list(schema)[:n])
    return head.equals(SCHEMA) and all(
        f.name.startswith(F.EXTRA_PREFIX) and f.type == pa.float64() for f in list(schema)[n:])
