"""Per-step statistics of a run: each series' mean, std, min and max per step, the step-level
diagnostics that pool a step's samples (critic explained variance, reward-length correlation, the
share of tokens the policy likes less than the reference, truncation), GRPO group statistics, and the
frame the curves draw from."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..base import fields as F
from ..derive.metrics import pool_explained_variance
from ..derive.step_stats import STEP_SERIES, mean_std, segment_sums, series_values, step_starts

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


MIN_CORR_SAMPLES = 3  # fewer samples than this: no correlation


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
        values = samples[column].to_numpy(dtype=float)[order]
        counts, mean, std = _with_given(mean_std(series_values(name, values), starts), given.get(name))
        if counts.any():  # (a series with no value anywhere: no columns)
            means[f"{name}_mean"], stds[f"{name}_std"] = mean, std
    if means:
        out = out.join(pd.DataFrame({**means, **stds}, index=index))
    if sparse:
        out = out.join(_sparse_stats(sparse, codes, index, given))
    if len(samples):
        out = out.join(compute_step_diagnostics(samples))
        if "prompt_key" in samples:
            out = out.join(compute_group_stats(samples, (codes, index)))
        if "mask_positions" in samples and (samples["mask_positions"] >= 0).any():
            out = out.join(compute_masked_share(samples))
    out.index.name = F.STEP
    return out


def compute_masked_share(samples: pd.DataFrame) -> pd.Series:
    """Per step (index), ``masked_share``: over the step's samples that have a loss mask, their
    untrained positions (positions - counted ones) ÷ all their positions; NaN for a step where no
    sample has one (or they have no position)."""
    codes, index = _step_codes(samples[F.STEP])
    order, starts = step_starts(codes, len(index))
    positions = samples["mask_positions"].to_numpy(dtype=float)[order]
    has = positions >= 0
    untrained = np.where(has, positions - samples["response_len"].to_numpy(dtype=float)[order], 0.0)
    # sums of whole numbers (exact in any order); a NaN left out, as pandas' sum does
    positions, untrained = (segment_sums(np.where(np.isnan(v), 0.0, v), starts)
                            for v in (np.where(has, positions, 0.0), untrained))
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.Series(np.where(positions > 0, untrained / positions, np.nan), index=index, name="masked_share")


def compute_group_stats(samples: pd.DataFrame, step_codes: tuple | None = None) -> pd.DataFrame:
    """Per step (index), the GRPO groups: samples of the step with the same prompt text (pads
    removed, ``prompt_key``) form a group; samples without a prompt are in none.

    - ``prompt_groups``: distinct prompts among the step's samples that have one;
    - ``group_size_mean``: mean samples per group;
    - ``zero_std_groups``: groups of at least 2 samples whose rewards are all equal (NaN equal to
      NaN): they carry no learning signal in GRPO;
    - ``zero_std_share``: ``zero_std_groups`` over the groups of at least 2 samples (NaN with none).

    A sample without a reward (``has_reward`` false: its format logs none) is in no group.
    ``step_codes``: ``_step_codes`` of the samples' steps, when the caller has them.
    """
    step_codes, steps = step_codes or _step_codes(samples[F.STEP])
    have = (samples["prompt_key"].notna() & rewarded(samples)).to_numpy() & (step_codes >= 0)
    if not have.any():
        return pd.DataFrame({"prompt_groups": 0, "group_size_mean": np.nan, "zero_std_groups": 0,
                             "zero_std_share": np.nan}, index=steps)
    # numpy on codes rather than pandas' groupby and nunique over (step, prompt): each number is a count
    # or a ratio of two, so the same bits, without hashing the pairs and then the (pair, reward)s
    have = slice(None) if have.all() else have  # (no copy of each column then)
    step_codes = step_codes[have]
    group = _group_codes(pd.factorize(samples["prompt_key"].to_numpy()[have])[0], step_codes, len(steps))
    n_groups = int(group.max()) + 1
    first = _first_rows(group, n_groups)
    reward = samples[F.REWARD].to_numpy(dtype=float)[have]
    ref = reward[first][group]
    differs = ~((reward == ref) | (np.isnan(reward) & np.isnan(ref)))  # NaN equal to NaN, as nunique(dropna=False)
    size = np.bincount(group, minlength=n_groups)
    multi = size >= 2
    step_of = step_codes[first]

    def per_step(weights=None):
        return np.bincount(step_of, weights=weights, minlength=len(steps))

    prompt_groups, multi_groups = per_step(), per_step(multi)
    zero_std = per_step(multi & (np.bincount(group, weights=differs, minlength=n_groups) == 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({
            "prompt_groups": prompt_groups.astype(int),
            "group_size_mean": np.where(prompt_groups > 0, per_step(size) / prompt_groups, np.nan),
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


def _given_stats(whole: tuple[dict, ...], index: pd.Index, samples: np.ndarray) -> tuple[np.ndarray, dict]:
    """(for each step of ``index``, whether one segment of ``whole`` holds all its ``samples`` (rows); for each
    series, (codes, counts, means, stds) of the steps so held where it has a value)."""
    n = len(index)
    known, given = np.zeros(n, bool), {}
    ascending = index.to_numpy()
    for part in whole:
        steps = np.asarray(part["steps"])
        at = np.minimum(np.searchsorted(ascending, steps), max(n - 1, 0))
        whole_here = (ascending[at] == steps) & (samples[at] == np.asarray(part["samples"])) if n else steps < 0
        if not whole_here.any():
            continue
        known[at[whole_here]] = True
        for name, (where, *numbers) in part["series"].items():
            keep = whole_here[where]
            given.setdefault(name, []).append((at[np.asarray(where)[keep]],
                                               *(np.asarray(x)[keep] for x in numbers)))
    return known, {name: tuple(np.concatenate(x) for x in zip(*parts)) for name, parts in given.items()}


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
        new = np.r_[True, values[1:] != values[:-1]] if len(values) else np.zeros(0, bool)
        codes = np.cumsum(new)
        codes -= 1
        return codes, pd.Index(values[new], name=F.STEP)
    codes, uniques = pd.factorize(values, sort=True)
    return codes, pd.Index(uniques, name=F.STEP)


def _first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """For each code 0..n-1 (each present in ``codes``), the position of its first occurrence: the least
    position of each code, by ``np.minimum.at`` (unbuffered, so every position counts; a fancy-index assignment
    with repeated indices leaves which write wins unspecified). 2M codes: 0.03 s, as that assignment."""
    first = np.full(n, len(codes), np.int64)
    np.minimum.at(first, codes, np.arange(len(codes), dtype=np.int64))
    return first


def _group_codes(key_codes: np.ndarray, step_codes: np.ndarray, n_steps: int) -> np.ndarray:
    """A code per sample, the same for two samples exactly when their prompt (``key_codes``) and step
    are: the prompt's own code when each prompt is met in one step only (a run's usual shape, checked),
    else a code of the pair."""
    first_step = step_codes[_first_rows(key_codes, int(key_codes.max()) + 1)]
    if (first_step[key_codes] == step_codes).all():
        return key_codes
    return pd.factorize(key_codes * np.int64(n_steps) + step_codes)[0]


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
      are left out; NaN with fewer than ``MIN_CORR_SAMPLES`` samples or a constant side;
    - ``explained_variance``: 1 - Var(returns - values) / Var(returns) over the step's pooled
      positions (see ``metrics.compute_sample_aggregates``); NaN when Var(returns) = 0;
    - ``truncated_share``: of the step's samples whose ``truncated`` flag is known, the share that
      are truncated (no EOS among the counted positions, which fill the lists); NaN with none known.
    """
    has = set(samples.columns).issuperset
    steps = samples[F.STEP].to_numpy()
    ordered = len(steps) < 2 or bool((steps[1:] >= steps[:-1]).all())  # a run's samples are, by step
    order = slice(None) if ordered else np.argsort(steps, kind="stable")  # (no copy of each column then)
    steps = steps[order]
    starts = np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]]) if len(steps) else np.zeros(0, np.int64)
    bounds = list(zip(starts.tolist(), np.r_[starts[1:], len(steps)].tolist()))

    def column(name):  # the column in step order, as float64: each step is then one slice
        return samples[name].to_numpy(dtype=float)[order]

    out = pd.DataFrame(np.nan, index=pd.Index(steps[starts]), columns=list(STEP_DIAGNOSTICS))
    if has(("lr_pairs", "lr_negative")):
        pairs, negative = segment_sums(column("lr_pairs"), starts), segment_sums(column("lr_negative"), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["neg_log_ratio_share"] = np.where(pairs != 0, negative / pairs, np.nan)
    if has((F.REWARD, "response_len", "response_chars")):
        reward, tokens, chars = column(F.REWARD), column("response_len"), column("response_chars")
        tokens = np.where(tokens >= 0, tokens, np.nan)  # a new array: the column may be a view
        out["reward_len_corr"] = [_reward_length_correlation(reward[a:b], tokens[a:b], chars[a:b])
                                  for a, b in bounds]
    if has(_EV_COLUMNS):
        parts = [column(c) for c in _EV_COLUMNS]
        out["explained_variance"] = [pool_explained_variance(*(p[a:b] for p in parts)) for a, b in bounds]
    if has(("truncated",)):
        out["truncated_share"] = mean_std(column("truncated"), starts)[1]  # (a mean of 0s and 1s, NaN left out)
    return out


_EV_COLUMNS = ("ev_n", "ret_sum", "ret_m2", "res_sum", "res_m2")


def _reward_length_correlation(reward: np.ndarray, tokens: np.ndarray, chars: np.ndarray) -> float:
    """Pearson correlation of one step's rewards and lengths (tokens, NaN where unknown, when any
    sample has them, else characters); see ``compute_step_diagnostics``."""
    length = tokens if not np.isnan(tokens).all() else chars
    keep = ~np.isnan(length) & np.isfinite(reward)
    x, y = reward[keep], length[keep]
    if len(x) < MIN_CORR_SAMPLES or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan
    x, y = x - x.mean(), y - y.mean()
    return float((x * y).sum() / np.sqrt((x * x).sum() * (y * y).sum()))
