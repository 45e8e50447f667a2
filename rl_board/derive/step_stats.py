"""A step's mean and spread by the board's own definition, with numpy alone: the kernel the parent's
per-step statistics (``analysis.steps``) and a parsing worker share, so a step's numbers are the same
bits whoever computes them.

The definition, for one series and one step: the step's values in row order (the rows of the run in
the order they are gathered, kept stable by step), NaN left out, ``n`` of them;

- ``sum``: ``np.add.reduceat`` over those values (the first value plus numpy's pairwise sum of the rest);
- ``mean``: ``sum / n`` (NaN with ``n == 0``);
- ``std``: population, ``sqrt(reduceat((x - mean) ** 2) / n)`` over the same values (0 with one value).

Each of these depends only on that step's values and their order: not on other steps' rows, on other
series, or on where in an array the step's rows sit. (pandas' grouped mean chooses its sum from the whole
block of columns: ``np.add.reduceat`` when no value of the block is NaN, else compensated sums; its
``std`` is Welford's. The digits can differ from these in the last place.)
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from ..base import fields as F

#: Per-step statistics: base name -> the per-sample column averaged (each extra field's column too, named
#: by itself). ``response_len`` below 0 is unknown: left out, as NaN.
STEP_SERIES = {**{name: name for name in F.REWARD_FIELDS}, "kl": "kl_mean", "k2": "k2_mean",
               "log_ratio": "log_ratio_mean", "kl_sum": "kl_sum", "log_ratio_sum": "log_ratio_sum",
               "response_len": "response_len", "response_chars": "response_chars",
               "ref_response_chars": "ref_response_chars", "mismatch_kl": "mismatch_kl",
               "entropy": "entropy_mean", "repeat_4gram": "repeat_4gram"}

#: A segment's schema metadata: its steps' statistics as its worker computed them (``segment_step_stats``)
STATS_KEY = b"rl_board.step_stats"


def step_starts(codes: np.ndarray, n: int) -> tuple[np.ndarray | slice, np.ndarray]:
    """(the rows in step order: a slice when ``codes`` already are, else a stable ``argsort``, rows of code
    -1 (no step) left out; where each code's rows start in that order, shape (n,)). ``codes``: each row's
    step as 0..n-1 or -1. A code with no row gets the start of the next (an empty segment)."""
    codes = np.asarray(codes)
    if len(codes) < 2 or bool((codes[1:] >= codes[:-1]).all()):
        skip = int(np.searchsorted(codes, 0)) if len(codes) and codes[0] < 0 else 0
        order: np.ndarray | slice = slice(skip, None)
        ordered = codes[skip:]
    else:
        order = np.argsort(codes, kind="stable")
        order = order[np.searchsorted(codes[order], 0):]
        ordered = codes[order]
    return order, np.searchsorted(ordered, np.arange(n)).astype(np.int64)


def segment_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each segment's sum by ``np.add.reduceat`` (NaN kept: a segment with one sums to NaN; 0 for an empty
    segment). ``values``: float64 in segment order; ``starts``: shape (n,), ascending; segment i runs to
    ``starts[i + 1]`` (the last to the end)."""
    counts = np.diff(np.r_[starts, len(values)])
    out = np.zeros(len(starts))
    has = counts > 0
    if has.any():
        out[has] = np.add.reduceat(values, starts[has])
    return out


def mean_std(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean, population std) of each segment's non-NaN values, by the module's definition; NaN
    mean and std for a segment with no value. ``values``: float64 in segment order (a step's rows in row
    order); ``starts``: shape (n,), ascending, as ``segment_sums`` takes them."""
    values = np.asarray(values, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.int64)
    mean, std = np.full(len(starts), np.nan), np.full(len(starts), np.nan)
    keep = ~np.isnan(values)
    if keep.all():
        kept, kept_starts = values, starts
        counts = np.diff(np.r_[starts, len(values)])
    else:
        rows = np.diff(np.r_[starts, len(values)])
        counts = np.zeros(len(starts), np.int64)
        if rows.any():  # (reduceat counts a segment of no row as its next row: only those with rows)
            counts[rows > 0] = np.add.reduceat(keep, starts[rows > 0], dtype=np.int64)
        kept, kept_starts = values[keep], np.cumsum(counts) - counts
    has = counts > 0
    if has.any():
        at, n = kept_starts[has], counts[has]
        means = np.add.reduceat(kept, at) / n
        with np.errstate(invalid="ignore"):  # (inf - inf: NaN, the spread of a step with an inf)
            deviations = kept - np.repeat(means, n)
            std[has] = np.sqrt(np.add.reduceat(deviations * deviations, at) / n)
        mean[has] = means
    return counts, mean, std


def series_values(name: str, values: np.ndarray) -> np.ndarray:
    """A series' values as its step statistics take them: float64, ``response_len`` below 0 (unknown) NaN."""
    values = np.asarray(values, dtype=np.float64)
    return np.where(values >= 0, values, np.nan) if name == "response_len" else values


def segment_step_stats(table: pa.Table) -> bytes | None:
    """The statistics of each step among one segment's rows (``table``, a ``pyarrow.Table`` of one file's
    rows, as a worker keeps them), as JSON for the segment's metadata (``STATS_KEY``): ``rows`` (the
    table's), ``steps`` ascending, ``samples`` (the step's rows here) and, for each series
    (``STEP_SERIES``' names and each extra column) with a value here, ``[at, counts, means, stds]`` of the
    steps (positions in ``steps``) where it has one. A step's
    rows are taken in line order (stable), as the run's rows are gathered, so for a step with no row in any
    other segment these are the bits ``mean_std`` gives the parent over the whole run. (JSON keeps a float's
    bits: Python writes the shortest repr that reads back as the same double; NaN as ``NaN``.) None when a
    series' column is not numbers (the parent then computes every step of the segment)."""
    steps = table[F.STEP].to_numpy()
    order = np.lexsort((table[F.LINE].to_numpy(), steps))  # (stable: a line's samples keep their order)
    steps = steps[order]
    starts = np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]]) if len(steps) else np.zeros(0, np.int64)
    series = {}
    columns = {**STEP_SERIES, **{c: c for c in F.extra_columns(table.column_names)}}
    for name, column in columns.items():
        kind = table.schema.field(column).type if column in table.column_names else pa.null()
        if pa.types.is_null(kind):  # (no value here: the gathered rows' NaN)
            continue
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_boolean(kind) and not table[column].null_count):
            return None
        counts, mean, std = mean_std(series_values(name, table[column].to_numpy())[order], starts)
        at = np.flatnonzero(counts)  # (an extra at few steps: as many numbers as its values, not as steps)
        if len(at):
            series[name] = [at.tolist(), counts[at].tolist(), mean[at].tolist(), std[at].tolist()]
    return json.dumps({"rows": table.num_rows, "steps": steps[starts].tolist(),
                       "samples": np.diff(np.r_[starts, len(steps)]).tolist(), "series": series}).encode()


def read_step_stats(table: pa.Table) -> dict | None:
    """A segment's ``segment_step_stats`` (its metadata's), or None where it has none or they are not of
    these rows (a table made of several segments keeps the first one's metadata)."""
    raw = (table.schema.metadata or {}).get(STATS_KEY)
    if raw is None:
        return None
    stats = json.loads(raw)
    return stats if stats.get("rows") == table.num_rows else None

