"""Records (one dict per sample, as a format holds it) to canonical rows: the shared slow path.

The JSONL reader's fast path decodes whole blocks into columns; a line it refuses,
and every format that walks its own structure (episodes, trajectories, token
dumps), comes here: ``canonical_row`` checks one record and takes its canonical
fields (through the user's field mapping and the aliases), ``rows_table`` builds the
canonical table of many. The checks and messages are the same for every format.
"""

from __future__ import annotations

import json
from itertools import chain

import numpy as np
import pyarrow as pa

from ..base import fields as F
from .base import KeyResolver, is_extra_value, value_at
from .canonical import build_rows
from .extras import FieldNotes

STRICT = ("logprobs", "ref_logprobs")  # a record whose list here holds a non-number is rejected
# Fields a record may hold as something else than a list (a per-sample ``advantages`` number, say): such
# a value is not the field, and a number there is an extra as before.
LENIENT = frozenset((*F.LOGGED_TOKEN_FIELDS, F.TOKEN_IDS, F.LOSS_MASK))
MAX_STEP = 2**62


def canonical_row(obj: dict, resolver: KeyResolver, default_step: int | None = None,
                  reward_required: bool = True) -> dict | str:
    """One record's canonical values (scalars, texts, lists, tokens, token ids, loss mask, ``extras``:
    other numeric or boolean fields), or why it is rejected. ``default_step``: the step of a record
    without one (a format that keeps it in its file names); None: a record needs its own.
    ``reward_required`` False: a record without a reward is a sample without one (a format that
    logs none), its reward None."""
    sources, taken = resolver.resolve(obj.keys())

    def get(name):
        key = sources.get(name)
        return None if key is None else value_at(obj, key)

    step = get(F.STEP)
    if step is None:
        if default_step is None:
            return f"missing {resolver.source_of(F.STEP)}"
        step = default_step
    if type(step) is not int:
        if not is_number(step) or not float(step).is_integer():
            return f"'step' must be an integer, got {short(step)}"
        step = int(step)
    if abs(step) > MAX_STEP:
        return f"'step' out of range: {short(step)}"
    reward = get(F.REWARD)
    if reward is None and reward_required:
        return f"missing {resolver.source_of(F.REWARD)}"
    if reward is not None and not is_number(reward):
        return f"'reward' must be a number, got {short(reward)}"
    row = {F.STEP: step, F.REWARD: to_float(reward) if reward is not None else None}
    for name in F.SCALAR_FIELDS:
        value = get(name)
        row[name] = to_float(value) if is_number(value) else None
    for name in F.TEXT_FIELDS:
        value = get(name)
        row[name] = value if value is None or type(value) is str else json.dumps(value, ensure_ascii=False)
    lenient = set()  # keys of lenient fields whose value is no list: extras when numbers
    for name in F.TOKEN_FIELDS:
        values = get(name)
        if values is None:
            row[name] = None
            continue
        if type(values) is not list:
            if name in LENIENT:
                row[name] = None
                lenient.add(sources[name])
                continue
            return f"'{name}' must be a list of numbers or null, got {json_type(values)}"
        if name in STRICT:
            if not all(v is None or is_number(v) for v in values):
                return f"'{name}' must be a list of numbers or null"
        row[name] = [to_float(v) if is_number(v) else None for v in values]
    tokens = get(F.TOKENS)
    row[F.TOKENS] = ([t if type(t) is str else json.dumps(t, ensure_ascii=False) for t in tokens]
                     if type(tokens) is list else None)
    ids = get(F.TOKEN_IDS)
    row[F.TOKEN_IDS] = ids if type(ids) is list and all(type(i) is int for i in ids) else None
    if ids is not None and row[F.TOKEN_IDS] is None:  # ids that are not integers are no token ids
        lenient.add(sources[F.TOKEN_IDS])
    mask = get(F.LOSS_MASK)
    row[F.LOSS_MASK] = (mask if type(mask) is list and all(v is None or type(v) is bool or is_number(v) for v in mask)
                        else None)
    if mask is not None and row[F.LOSS_MASK] is None:
        lenient.add(sources[F.LOSS_MASK])
    row["extras"] = {key: to_float(value) for key, value in obj.items()
                     if (key not in taken or key in lenient) and is_extra_value(value)}
    return row


def rows_table(rows: list[dict], lines, offsets, lengths, max_extras: int | None = None) -> pa.Table:
    """The canonical table of ``rows`` (``canonical_row`` results), with where each lies: its line
    (1-based), and ``offset``/``length`` as the format's ``record`` reads them again. With
    ``max_extras``, only the first that many extra fields met (row by row) become columns; the
    table's notes (``extras.FieldNotes``) count the others as dropped. Time and memory are linear in
    the extras the rows hold (columns are filled where a row has the field, not row by field)."""
    columns = {name: [r[name] for r in rows] for name in F.CANONICAL}
    columns[F.LINE] = np.asarray(lines, np.int64)
    columns["offset"] = np.asarray(offsets, np.int64)
    columns["length"] = np.asarray(lengths, np.int64)
    met = list(dict.fromkeys(chain.from_iterable(r["extras"] for r in rows)))
    kept = met if max_extras is None else met[:max_extras]
    values = {name: np.full(len(rows), np.nan) for name in kept}
    present = {name: np.zeros(len(rows), bool) for name in kept}
    first: dict[str, int] = {}  # dropped name -> the row it is first met in
    for i, r in enumerate(rows):
        for key, value in r["extras"].items():
            column = values.get(key)
            if column is not None:
                column[i] = value
                present[key][i] = True
            elif key not in first:
                first[key] = i
    extras = {name: pa.array(values[name], pa.float64(), mask=~present[name]) for name in kept}
    table = build_rows(columns, extras)
    if len(kept) == len(met):
        return table
    notes = FieldNotes.of(table)
    lines = columns[F.LINE]
    notes.drop(met[len(kept):], [int(lines[first[name]]) for name in met[len(kept):]])
    return notes.attach(table)


def to_float(value) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range
        return float("inf") if value > 0 else float("-inf")


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def short(value) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
