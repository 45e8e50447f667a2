"""Per-step statistics of a run: each series' mean, std, min and max per step, the step-level
diagnostics that pool a step's samples (critic explained variance, reward-length correlation, the
share of tokens the policy likes less than the reference, truncation), GRPO group statistics, and the
frame the curves draw from."""

from __future__ import annotations

from itertools import chain

import numpy as np
import pandas as pd

from ..base import fields as F
from ..derive.step_stats import (
    STEP_SERIES,
    group_counts,
    mean_std,
    series_values,
    step_numbers,
    step_starts,
)

#: Per-step diagnostics that pool a step's samples (one number per step, no spread).
STEP_DIAGNOSTICS = ("neg_log_ratio_share", "reward_len_corr", "explained_variance", "truncated_share")


#: Step-level series (no spread) that ``curve_frame`` also offers as ``{name}_mean``.
STEP_LEVEL_SERIES = (*STEP_DIAGNOSTICS, "zero_std_share", "masked_share")


#: The diagnostic curves: series name (``{name}_mean`` in ``curve_frame``) -> title.
DIAGNOSTIC_CURVES = {
    "entropy": "Entropy (mean per sample)",
    "mismatch_kl": "Mismatch KL (sampler ‖ trainer)",
    "explained_variance": "Critic explained variance (γ = λ = 1)",
    "neg_log_ratio_share": "Share of tokens with log-ratio < 0",
    "reward_len_corr": "Reward–length correlation (Pearson)",
    "repeat_4gram": "4-gram repetition (mean per sample)",
    "zero_std_share": "GRPO groups with all rewards equal (share)",
    "masked_share": "Untrained share of positions (loss mask)",
    "truncated_share": "Truncated responses (share: no EOS, lists full)",
}


def curve_frame(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with each step-level series (``STEP_LEVEL_SERIES``) also as ``{name}_mean``, so every
    series draws alike."""
    present = [name for name in STEP_LEVEL_SERIES if name in steps]
    return steps.assign(**{f"{name}_mean": steps[name] for name in present})


def dense_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` with its sparse columns (``_sparse_stats``) as plain float64 ones, for a table shown whole
    (Arrow, which the page's tables go through, takes no sparse column)."""
    sparse = [c for c in steps.columns if isinstance(steps[c].dtype, pd.SparseDtype)]
    return steps.astype({c: float for c in sparse}) if sparse else steps


SPARSE_SHARE = 0.5  # an extra with a value at fewer than this share of the steps: its step stats sparse


def compute_step_stats(samples: pd.DataFrame, whole: tuple[dict, ...] = ()) -> pd.DataFrame:
    """Per step, indexed by step ascending: ``samples`` (count); for each series of
    ``STEP_SERIES`` and each extra field (``extra:NAME``) with any value, ``{name}_mean`` and
    population ``{name}_std`` of the step's values in row order, NaN left out, by the board's own
    definition (``derive.step_stats``: ``np.add.reduceat`` sums, a step's numbers depend on its own rows
    alone); and the ``STEP_DIAGNOSTICS`` (see ``compute_step_diagnostics``). ``kl_mean`` is the mean over
    samples of each sample's mean k3. An extra with a value at fewer than ``SPARSE_SHARE`` of the steps
    has its two columns as pandas' sparse arrays (``_sparse_stats``; the same numbers, NaN where a step
    has none, without storing the NaN).

    ``whole``: the statistics the parsing workers computed, one segment each
    (``derive.step_stats.segment_step_stats``); a step all of whose rows one segment holds takes that
    segment's numbers (the same bits: the same rows, in the same order, by the same kernel), and only the
    other steps are computed here, from their rows."""
    steps = samples[F.STEP]
    codes, index = _step_codes(steps)
    counted = codes if codes.min(initial=0) >= 0 else codes[codes >= 0]  # (-1: no step, not counted)
    out = pd.DataFrame({"samples": np.bincount(counted, minlength=len(index))}, index=index)
    known, given = _given_stats(whole, index, out["samples"].to_numpy())
    sparse = _sparse_extras(samples, codes, known, given)
    columns = {**STEP_SERIES, **{c: c for c in F.extra_columns(samples.columns) if c not in sparse}}
    order, starts = _open_rows(codes, known)
    means, stds = {}, {}
    for name, column in columns.items():
        if column not in samples or _no_value(samples[column], name == "response_len"):
            continue
        values = _floats(samples[column], order)
        counts, mean, std = _with_given(mean_std(series_values(name, values), starts), given.get(name))
        if counts.any():  # (a series with no value anywhere: no columns)
            means[f"{name}_mean"], stds[f"{name}_std"] = mean, std
    if means:
        out = out.join(pd.DataFrame({**means, **stds}, index=index))
    if sparse:
        out = out.join(_sparse_stats(sparse, codes, index, given))
    if len(samples):
        numbers = _with_numbers(_step_numbers(samples, order, starts), known, given)
        out = out.join(_diagnostics_frame(numbers, index))
        if "prompt_key" in samples:
            open_rows = ~np.r_[known, True][codes] if known.any() else None
            out = out.join(compute_group_stats(samples, (codes, index), open_rows, given.get(_GROUPS)))
        if "mask_positions" in samples and (samples["mask_positions"] >= 0).any():
            out = out.join(_masked_share(numbers, index))
    out.index.name = F.STEP
    return out


def compute_masked_share(samples: pd.DataFrame) -> pd.Series:
    """Per step (index), ``masked_share``: over the step's samples that have a loss mask, their
    untrained positions (positions - counted ones) ÷ all their positions; NaN for a step where no
    sample has one (or they have no position)."""
    codes, index = _step_codes(samples[F.STEP])
    return _masked_share(_step_numbers(samples, *step_starts(codes, len(index))), index)


def _masked_share(numbers: dict, index: pd.Index) -> pd.Series:
    positions, untrained = numbers["mask_positions"], numbers["mask_untrained"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.Series(np.where(positions > 0, untrained / positions, np.nan), index=index, name="masked_share")


def _step_numbers(samples: pd.DataFrame, order: np.ndarray | slice, starts: np.ndarray) -> dict[str, np.ndarray]:
    """``derive.step_stats.step_numbers`` of the rows ``order`` takes (each step's from ``starts``)."""
    rows = len(range(len(samples))[order]) if isinstance(order, slice) else len(order)
    return step_numbers(lambda name: _floats(samples[name], order), set(samples.columns), starts, rows)


def _floats(column: pd.Series, order: np.ndarray | slice) -> np.ndarray:
    """``column.to_numpy(dtype=float)[order]``, the rows taken before they are made floats: where every step
    is one segment's (``order`` empty), no column of every row is made for none of them."""
    return np.asarray(column.to_numpy()[order], dtype=float)


def _with_numbers(numbers: dict, known: np.ndarray, given: dict) -> dict:
    """``numbers`` computed for the open steps, with the ``known`` steps' from their segments (``given``'s
    ``_NUMBERS``: each number's codes and values); a known step whose segment had none: NaN (a sum: 0)."""
    if not known.any():
        return numbers
    found = given.get(_NUMBERS, {})
    for name, values in numbers.items():
        values[known] = 0.0 if name.startswith("mask_") else np.nan
        if name in found:
            values[found[name][0]] = found[name][1]
    return numbers


def _diagnostics_frame(numbers: dict, index: pd.Index) -> pd.DataFrame:
    return pd.DataFrame({name: numbers.get(name, np.full(len(index), np.nan)) for name in STEP_DIAGNOSTICS},
                        index=index)


def compute_group_stats(samples: pd.DataFrame, step_codes: tuple | None = None, open_rows: np.ndarray | None = None,
                        given: tuple | None = None) -> pd.DataFrame:
    """Per step (index), the GRPO groups: samples of the step with the same prompt text (pads
    removed, ``prompt_key``) form a group; samples without a prompt are in none.

    - ``prompt_groups``: distinct prompts among the step's samples that have one;
    - ``group_size_mean``: mean samples per group;
    - ``zero_std_groups``: groups of at least 2 samples whose rewards are all equal (NaN equal to
      NaN): they carry no learning signal in GRPO;
    - ``zero_std_share``: ``zero_std_groups`` over the groups of at least 2 samples (NaN with none).

    A sample without a reward (``has_reward`` false: its format logs none) is in no group.
    ``step_codes``: ``_step_codes`` of the samples' steps, when the caller has them. ``open_rows``: the rows
    counted here (None: all); ``given``: each count's (codes, values) at the other steps, as their segments counted them
    (``derive.step_stats.group_counts``). Each number is a count or a ratio of two: the same bits
    whoever counts.
    """
    step_codes, steps = step_codes or _step_codes(samples[F.STEP])
    have = (samples["prompt_key"].notna() & rewarded(samples)).to_numpy() & (step_codes >= 0)
    if open_rows is not None:
        have &= open_rows
    # numpy on codes rather than pandas' groupby and nunique over (step, prompt), without hashing the pairs
    # and then the (pair, reward)s
    have = slice(None) if have.all() else have  # (no copy of each column then)
    counts = group_counts(pd.factorize(samples["prompt_key"].to_numpy()[have])[0],
                          samples[F.REWARD].to_numpy(dtype=float)[have], step_codes[have], len(steps))
    for name, (codes, values) in (given or {}).items():
        counts[name][codes] = values
    prompt_groups, multi_groups, zero_std = (counts[c] for c in ("prompt_groups", "multi_groups", "zero_std_groups"))
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({
            "prompt_groups": prompt_groups.astype(int),
            "group_size_mean": np.where(prompt_groups > 0, counts["group_samples"] / prompt_groups, np.nan),
            "zero_std_groups": zero_std.astype(int),
            "zero_std_share": np.where(multi_groups > 0, zero_std / multi_groups, np.nan),
        }, index=steps)


def _sparse_extras(samples: pd.DataFrame, codes: np.ndarray, known: np.ndarray,
                   given: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The extra-field columns that have a value at fewer than ``SPARSE_SHARE`` of the steps, each as
    (the rows with a value whose step is not ``known``, their values as float64): their step stats are kept
    sparse. A ``known`` step has a value where its segment counted one (``given``)."""
    out, steps = {}, len(known)
    open_rows = ~np.r_[known, True][codes] if known.any() else codes >= 0  # (code -1, no step: in no step)
    for column in F.extra_columns(samples.columns):
        if _no_value(samples[column], False):
            continue
        with_value = len(given[column][0]) if column in given else 0
        if known.all():
            rows, values = np.zeros(0, np.int64), np.zeros(0)
        else:
            values = samples[column].to_numpy(dtype=float)
            rows = np.flatnonzero(~np.isnan(values) & open_rows)
            values = values[rows]
            # the steps with a value counted by a bincount of their codes (0..steps-1), not by sorting them
            with_value += np.count_nonzero(np.bincount(codes[rows], minlength=steps))
        if with_value and with_value < SPARSE_SHARE * steps:
            out[column] = (rows, values)  # (the whole column, kept for each, would cost a run's extras whole)
    return out


_NUMBERS, _GROUPS = "numbers", "groups"  # a segment's step numbers and group counts (``segment_step_stats``)


def _given_stats(whole: tuple[dict, ...], index: pd.Index, samples: np.ndarray) -> tuple[np.ndarray, dict]:
    """(for each step of ``index``, whether one segment of ``whole`` holds all its ``samples`` (rows); for each
    series, (codes, counts, means, stds) of the steps so held where it has a value, and under ``_NUMBERS``
    and ``_GROUPS`` each step number's and group count's (codes, values) of those steps). The segments' lists
    are joined first and looked at once (10,240,000 samples in 1,250 segments: 0.045 s, not 0.10 s a segment
    at a time); each value is kept as its segment gave it."""
    n = len(index)
    known = np.zeros(n, bool)
    given: dict = {_NUMBERS: {}, _GROUPS: {}}
    if not whole or not n:
        return known, given
    sizes = np.array([len(part["steps"]) for part in whole], np.int64)
    first = np.cumsum(sizes) - sizes  # each segment's first step among all segments' steps
    steps = np.array(list(chain.from_iterable(part["steps"] for part in whole)), np.int64)
    held = np.array(list(chain.from_iterable(part["samples"] for part in whole)), np.int64)
    ascending = index.to_numpy()
    at = np.minimum(np.searchsorted(ascending, steps), n - 1)
    here = (ascending[at] == steps) & (samples[at] == held)  # the step whole in this segment
    known[at[here]] = True

    def kept(places: np.ndarray, *values: list) -> tuple:
        keep = here[places]
        return (at[places[keep]], *(np.asarray(v)[keep] for v in values))

    names = dict.fromkeys(chain.from_iterable(part["series"] for part in whole))
    for name in names:
        parts = [(i, found) for i, part in enumerate(whole) if (found := part["series"].get(name)) is not None]
        places = np.concatenate([first[i] + np.asarray(found[0], np.int64) for i, found in parts])
        given[name] = kept(places, *(list(chain.from_iterable(found[k] for _, found in parts)) for k in (1, 2, 3)))
    for key in (_NUMBERS, _GROUPS):
        for name in dict.fromkeys(chain.from_iterable(part[key] for part in whole)):
            parts = [i for i, part in enumerate(whole) if name in part[key]]
            places = np.concatenate([np.arange(first[i], first[i] + sizes[i]) for i in parts])
            values = np.array(list(chain.from_iterable(whole[i][key][name] for i in parts)), float)
            given[key][name] = kept(places, values)
    return known, given


def _open_rows(codes: np.ndarray, known: np.ndarray) -> tuple[np.ndarray | slice, np.ndarray]:
    """``step_starts`` of the rows whose step is not ``known`` (a known step: an empty segment)."""
    if not known.any():
        return step_starts(codes, len(known))
    rows = np.flatnonzero(~np.r_[known, True][codes])  # (code -1, no step: never open)
    order, starts = step_starts(codes[rows], len(known))
    return rows[order], starts


def _with_given(computed: tuple, given: tuple | None) -> tuple:
    """(counts, means, stds) ``computed`` for the open steps (a known step's: 0, NaN, NaN), with the known
    steps' ``given`` ((codes, counts, means, stds) where the series has a value) put in place."""
    if given is not None:
        for target, numbers in zip(computed, given[1:]):
            target[given[0]] = numbers
    return computed


def _sparse_stats(sparse: dict, codes: np.ndarray, index: pd.Index, given: dict | None = None) -> pd.DataFrame:
    """``{column}_mean`` and ``{column}_std`` of each sparse extra (``_sparse_extras``: the rows of the steps
    no segment's numbers are ``given`` for) per step, as compute_step_stats defines them, held as pandas'
    sparse arrays (NaN not stored): a run of 200,000 steps each with one of 300 extras holds 400,000
    numbers, not 120 million."""
    stats = {}
    for column, (rows, values) in sparse.items():
        order, starts = step_starts(codes[rows], len(index))  # (rows ascending: each step's in row order)
        _, mean, std = _with_given(mean_std(values[order], starts), (given or {}).get(column))
        for suffix, full in (("_mean", mean), ("_std", std)):
            stats[column + suffix] = pd.arrays.SparseArray(full, fill_value=np.nan)
    return pd.DataFrame(stats, index=index)


def _no_value(column: pd.Series, lengths: bool) -> bool:
    """Whether ``column`` is one number broadcast (the snapshot keeps a column of one value so) that is
    NaN, or with ``lengths`` negative (unknown): a series with no value, told without converting it."""
    values = column.to_numpy()
    if values.dtype.kind not in "fiu" or not len(values) or values.strides[0]:
        return False
    one = float(values[0])
    return np.isnan(one) or (lengths and one < 0)


def _step_codes(steps: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """(each sample's step as a code 0..n-1, -1 for none; the n steps ascending, named ``step``):
    without hashing when the samples are in step order, as a run's are."""
    values = steps.to_numpy()
    if values.dtype.kind in "iu" and (len(values) < 2 or bool((values[1:] >= values[:-1]).all())):
        starts = np.r_[0, np.flatnonzero(values[1:] != values[:-1]) + 1] if len(values) else np.zeros(0, np.int64)
        codes = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(values)]))  # (one pass, no cumsum)
        return codes, pd.Index(values[starts], name=F.STEP)
    codes, uniques = pd.factorize(values, sort=True)
    return codes, pd.Index(uniques, name=F.STEP)


def rewarded(samples: pd.DataFrame) -> pd.Series:
    """Whether each sample has a reward (NaN included); every sample of a frame without ``has_reward``."""
    return samples["has_reward"].astype(bool) if "has_reward" in samples else pd.Series(True, index=samples.index)


def compute_step_diagnostics(samples: pd.DataFrame) -> pd.DataFrame:
    """Per step (index), from the per-sample columns (NaN where not computable):

    - ``neg_log_ratio_share``: of the counted positions where logprob and ref_logprob are both
      finite, pooled over the step, the share with logprob - ref_logprob < 0;
    - ``reward_len_corr``: Pearson correlation of reward and length over the step's samples;
      length is ``response_len`` (counted tokens) when any sample of the step has one, else
      ``response_chars`` (pads removed); samples without a length or with a non-finite reward
      are left out; NaN with fewer than ``step_stats.MIN_CORR_SAMPLES`` (3) samples or a constant side;
    - ``explained_variance``: 1 - Var(returns - values) / Var(returns) over the step's pooled
      positions (see ``metrics.compute_sample_aggregates``); NaN when Var(returns) = 0;
    - ``truncated_share``: of the step's samples whose ``truncated`` flag is known, the share that
      are truncated (no EOS among the counted positions, which fill the lists); NaN with none known.
    """
    codes, index = _step_codes(samples[F.STEP])
    return _diagnostics_frame(_step_numbers(samples, *step_starts(codes, len(index))), index)
