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
from .metrics import pool_explained_variance

#: Per-step statistics: base name -> the per-sample column averaged (each extra field's column too, named
#: by itself). ``response_len`` below 0 is unknown: left out, as NaN.
STEP_SERIES = {**{name: name for name in F.REWARD_FIELDS}, "kl": "kl_mean", "k2": "k2_mean",
               "log_ratio": "log_ratio_mean", "kl_sum": "kl_sum", "log_ratio_sum": "log_ratio_sum",
               "response_len": "response_len", "response_chars": "response_chars",
               "ref_response_chars": "ref_response_chars", "mismatch_kl": "mismatch_kl",
               "entropy": "entropy_mean", "repeat_4gram": "repeat_4gram"}

MIN_CORR_SAMPLES = 3  # fewer samples than this: no reward-length correlation

#: The per-sample columns of a step's explained variance (``metrics.pool_explained_variance``)
EV_COLUMNS = ("ev_n", "ret_sum", "ret_m2", "res_sum", "res_m2")

#: The per-step numbers that pool a step's samples (``step_numbers``), each with the columns it needs: the
#: diagnostics, the GRPO groups' counts and the loss mask's sums
STEP_NUMBERS = {"neg_log_ratio_share": ("lr_pairs", "lr_negative"),
                "reward_len_corr": (F.REWARD, "response_len", "response_chars"),
                "explained_variance": EV_COLUMNS, "truncated_share": ("truncated",)}

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


def _contiguous(values: np.ndarray) -> np.ndarray:
    """float64 values laid out one after the other (a column of one value, broadcast with stride 0, copied):
    numpy then sums each segment in one call of its pairwise loop, whatever array the segment came from."""
    return np.ascontiguousarray(values, dtype=np.float64)


def segment_sums(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each segment's sum by ``np.add.reduceat`` (NaN kept: a segment with one sums to NaN; 0 for an empty
    segment). ``values``: float64 in segment order; ``starts``: shape (n,), ascending; segment i runs to
    ``starts[i + 1]`` (the last to the end)."""
    values = _contiguous(values)
    counts = np.diff(np.append(starts, len(values)))
    out = np.zeros(len(starts))
    has = counts > 0
    if has.any():
        out[has] = np.add.reduceat(values, starts[has])
    return out


def mean_std(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean, population std) of each segment's non-NaN values, by the module's definition; NaN
    mean and std for a segment with no value. ``values``: float64 in segment order (a step's rows in row
    order); ``starts``: shape (n,), ascending, as ``segment_sums`` takes them."""
    values = _contiguous(values)
    starts = np.asarray(starts, dtype=np.int64)
    mean, std = np.full(len(starts), np.nan), np.full(len(starts), np.nan)
    missing = np.isnan(values)
    rows = np.diff(np.append(starts, len(values)))
    if not missing.any():
        kept, kept_starts, counts = values, starts, rows
    elif missing.all():
        return np.zeros(len(starts), np.int64), mean, std
    else:
        counts = rows.copy()
        if rows.any():  # (reduceat counts a segment of no row as its next row: only those with rows)
            counts[rows > 0] -= np.add.reduceat(missing, starts[rows > 0], dtype=np.int64)
        kept, kept_starts = values[~missing], np.cumsum(counts) - counts
    del missing
    has = counts > 0
    if has.any():
        at, n = kept_starts[has], counts[has]
        means = np.add.reduceat(kept, at) / n
        deviations = np.repeat(means, n)
        with np.errstate(invalid="ignore"):  # (inf - inf: NaN, the spread of a step with an inf)
            np.subtract(kept, deviations, out=deviations)
            np.multiply(deviations, deviations, out=deviations)
            std[has] = np.sqrt(np.add.reduceat(deviations, at) / n)
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
    steps, lines = table[F.STEP].to_numpy(), table[F.LINE].to_numpy()
    if len(steps) < 2 or _in_order(steps, lines):  # (a range's rows mostly are: nothing taken apart)
        order: np.ndarray | slice = slice(None)
    else:
        order = np.lexsort((lines, steps))  # (stable: a line's samples keep their order)
        steps = steps[order]
    new = np.empty(len(steps), bool)
    new[:1], new[1:] = True, steps[1:] != steps[:-1]
    starts = np.flatnonzero(new)
    names = set(table.column_names)
    present = {c for c in names if not pa.types.is_null(table.schema.field(c).type)}

    def column(name):
        return np.asarray(table.column(name).to_numpy(), dtype=np.float64)[order]

    series = {}
    columns = {**STEP_SERIES, **{c: c for c in F.extra_columns(table.column_names)}}
    for name, source in columns.items():
        if source not in present:
            continue  # (no value here: the gathered rows' NaN)
        if not _is_number(table, source):
            return None
        counts, mean, std = mean_std(series_values(name, column(source)), starts)
        at = np.flatnonzero(counts)  # (an extra at few steps: as many numbers as its values, not as steps)
        if len(at):
            series[name] = [at.tolist(), counts[at].tolist(), mean[at].tolist(), std[at].tolist()]
    needed = {c for inputs in STEP_NUMBERS.values() for c in inputs} | {"mask_positions"}
    if not all(_is_number(table, c) for c in needed & present):
        return None

    numbers = step_numbers(column, present, starts, len(steps))
    groups = _segment_groups(table, order, steps, starts)
    if groups is None:
        return None
    return json.dumps({"rows": table.num_rows, "steps": steps[starts].tolist(),
                       "samples": np.diff(np.append(starts, len(steps))).tolist(), "series": series,
                       "numbers": {name: values.tolist() for name, values in numbers.items()},
                       "groups": {name: values.tolist() for name, values in groups.items()}}).encode()


def _in_order(steps: np.ndarray, lines: np.ndarray) -> bool:
    """Whether rows are in (step, line) order already, ties allowed."""
    up = steps[1:] > steps[:-1]
    return bool((up | (steps[1:] == steps[:-1]) & (lines[1:] >= lines[:-1])).all())


def _is_number(table: pa.Table, column: str) -> bool:
    """Whether ``column`` reads as float64 as the gathered rows have it (numbers; booleans without a null)."""
    kind = table.schema.field(column).type
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)
            or pa.types.is_boolean(kind) and not table[column].null_count)


def _segment_groups(table: pa.Table, order: np.ndarray, steps: np.ndarray, starts: np.ndarray) -> dict | None:
    """``group_counts`` of each step of the segment (``steps`` in step order, their ``starts``), the samples
    with a prompt key and a reward as ``analysis.steps.compute_group_stats`` takes them; None where two
    distinct keys are one float64 (the gathered rows hold the keys as float64 when any segment has a sample
    without one: the parent then counts these steps itself)."""
    if "prompt_key" not in table.column_names:
        return group_counts(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), len(starts))
    keys = table["prompt_key"]
    have = keys.is_valid().to_numpy(zero_copy_only=False)
    if "has_reward" in table.column_names:
        have &= np.asarray(table["has_reward"].to_numpy(), dtype=bool)
    have = have[order]
    keys = np.asarray(keys.fill_null(0).to_numpy(), dtype=np.int64)[order][have]
    unique, key_codes = np.unique(keys, return_inverse=True)
    if len(np.unique(unique.astype(np.float64))) != len(unique):
        return None
    step_codes = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(steps)]))[have]
    reward = np.asarray(table[F.REWARD].to_numpy(), dtype=np.float64)[order][have]
    return group_counts(key_codes.reshape(-1), reward, step_codes, len(starts))


def read_step_stats(table: pa.Table) -> dict | None:
    """A segment's ``segment_step_stats`` (its metadata's), or None where it has none or they are not of
    these rows (a table made of several segments keeps the first one's metadata)."""
    raw = (table.schema.metadata or {}).get(STATS_KEY)
    if raw is None:
        return None
    stats = json.loads(raw)
    return stats if stats.get("rows") == table.num_rows else None


def step_numbers(column, present: set, starts: np.ndarray, rows: int) -> dict[str, np.ndarray]:
    """The numbers that pool each step's samples, shape (len(starts),), over the ``rows`` rows in step
    order (``starts`` as ``mean_std`` takes them; an empty step gets NaN): ``column(name)`` gives a column's
    values in that order as float64, ``present`` the columns there are. The diagnostics of
    ``STEP_NUMBERS`` whose columns are present (``analysis.steps.compute_step_diagnostics`` says what each
    means) and, with ``mask_positions`` and ``response_len``, ``mask_positions`` and ``mask_untrained``:
    the sums of the positions and the untrained ones of the samples with a loss mask (whole numbers)."""
    bounds = list(zip(starts.tolist(), np.append(starts[1:], rows).tolist()))
    out = {}
    if {"lr_pairs", "lr_negative"} <= present:
        pairs, negative = segment_sums(column("lr_pairs"), starts), segment_sums(column("lr_negative"), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["neg_log_ratio_share"] = np.where(pairs != 0, negative / pairs, np.nan)
    if {F.REWARD, "response_len", "response_chars"} <= present:
        reward, tokens, chars = column(F.REWARD), column("response_len"), column("response_chars")
        tokens = np.where(tokens >= 0, tokens, np.nan)  # a new array: the column may be a view
        out["reward_len_corr"] = np.array([_reward_length_correlation(reward[a:b], tokens[a:b], chars[a:b])
                                           if b > a else np.nan for a, b in bounds], dtype=np.float64)
    if set(EV_COLUMNS) <= present:
        parts = [column(c) for c in EV_COLUMNS]
        out["explained_variance"] = np.array([pool_explained_variance(*(p[a:b] for p in parts)) if b > a else np.nan
                                              for a, b in bounds], dtype=np.float64)
    if "truncated" in present:
        out["truncated_share"] = mean_std(column("truncated"), starts)[1]  # (a mean of 0s and 1s, NaN left out)
    if {"mask_positions", "response_len"} <= present:
        positions = column("mask_positions")
        has = positions >= 0
        untrained = np.where(has, positions - column("response_len"), 0.0)
        # sums of whole numbers (exact in any order); a NaN left out, as pandas' sum does
        out["mask_positions"], out["mask_untrained"] = (segment_sums(np.where(np.isnan(v), 0.0, v), starts)
                                                        for v in (np.where(has, positions, 0.0), untrained))
    return out


def _reward_length_correlation(reward: np.ndarray, tokens: np.ndarray, chars: np.ndarray) -> float:
    """Pearson correlation of one step's rewards and lengths (tokens, NaN where unknown, when any
    sample has them, else characters); NaN with fewer than ``MIN_CORR_SAMPLES`` or a constant side."""
    length = tokens if not np.isnan(tokens).all() else chars
    keep = ~np.isnan(length) & np.isfinite(reward)
    x, y = reward[keep], length[keep]
    if len(x) < MIN_CORR_SAMPLES or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))


def group_counts(key_codes: np.ndarray, reward: np.ndarray, step_codes: np.ndarray, steps: int) -> dict[str, np.ndarray]:
    """The GRPO groups of each step 0..steps-1 as float64 counts (whole numbers), from the samples in a group
    (``analysis.steps.compute_group_stats`` says which): ``key_codes`` their prompt's code (any code, the
    same for the same prompt), ``reward`` float64, ``step_codes`` their step's code. ``prompt_groups``,
    ``group_samples`` (samples in groups), ``zero_std_groups`` (groups of 2 or more whose rewards are all
    equal, NaN equal to NaN) and ``multi_groups`` (groups of 2 or more)."""
    if not len(key_codes):
        return {name: np.zeros(steps) for name in ("prompt_groups", "group_samples", "zero_std_groups", "multi_groups")}
    group = _group_codes(key_codes, step_codes, steps)
    n_groups = int(group.max()) + 1
    first = _first_rows(group, n_groups)
    ref = reward[first][group]
    differs = ~((reward == ref) | (np.isnan(reward) & np.isnan(ref)))  # NaN equal to NaN, as nunique(dropna=False)
    size = np.bincount(group, minlength=n_groups)
    multi = size >= 2
    step_of = step_codes[first]

    def per_step(weights=None):
        return np.bincount(step_of, weights=weights, minlength=steps).astype(np.float64)

    return {"prompt_groups": per_step(), "group_samples": per_step(size), "multi_groups": per_step(multi),
            "zero_std_groups": per_step(multi & (np.bincount(group, weights=differs, minlength=n_groups) == 0))}


def _first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """For each code 0..n-1 (each present in ``codes``), the position of its first occurrence: the least
    position of each code, by ``np.minimum.at`` (unbuffered, so every position counts; a fancy-index assignment
    with repeated indices leaves which write wins unspecified). 2M codes: 0.03 s, as that assignment."""
    first = np.full(n, len(codes), np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
    return first


def _group_codes(key_codes: np.ndarray, step_codes: np.ndarray, n_steps: int) -> np.ndarray:
    """A code per sample, the same for two samples exactly when their prompt (``key_codes``, 0..k-1) and step
    are: the prompt's own code when each prompt is met in one step only (a run's usual shape, checked),
    else a code of the pair."""
    first_step = step_codes[_first_rows(key_codes, int(key_codes.max()) + 1)]
    if (first_step[key_codes] == step_codes).all():
        return key_codes
    return np.unique(key_codes * np.int64(n_steps) + step_codes, return_inverse=True)[1].reshape(-1)
