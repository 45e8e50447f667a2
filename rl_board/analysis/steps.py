"""Per-step statistics of a run: each series' mean, std, min and max per step, the step-level
diagnostics that pool a step's samples (critic explained variance, reward-length correlation, the
share of tokens the policy likes less than the reference, truncation), GRPO group statistics, and the
frame the curves draw from."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..base import fields as F
from ..derive.metrics import pool_explained_variance

#: Per-step statistics: base name -> the per-sample column averaged.
STEP_SERIES = {**{name: name for name in F.REWARD_FIELDS}, "kl": "kl_mean", "k2": "k2_mean",
               "log_ratio": "log_ratio_mean", "kl_sum": "kl_sum", "log_ratio_sum": "log_ratio_sum",
               "response_len": "response_len", "response_chars": "response_chars",
               "ref_response_chars": "ref_response_chars", "mismatch_kl": "mismatch_kl",
               "entropy": "entropy_mean", "repeat_4gram": "repeat_4gram"}


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


MIN_CORR_SAMPLES = 3  # fewer samples than this: no correlation


def compute_step_stats(samples: pd.DataFrame) -> pd.DataFrame:
    """Per step, indexed by step ascending: ``samples`` (count); for each series of
    ``STEP_SERIES`` and each extra field (``extra:NAME``) with any value, ``{name}_mean`` and
    population ``{name}_std`` (NaN ignored); and the ``STEP_DIAGNOSTICS`` (see
    ``compute_step_diagnostics``). ``kl_mean`` is the mean over samples of each sample's mean k3."""
    steps = samples[F.STEP]
    columns = {**STEP_SERIES, **{c: c for c in F.extra_columns(samples.columns)}}
    series = {name: samples[column].astype(float) for name, column in columns.items() if column in samples}
    if "response_len" in series:
        series["response_len"] = series["response_len"].where(series["response_len"] >= 0)
    # one block of all the series (a copy): pandas' grouped mean of a block of 3 or more columns can round
    # otherwise than of one column alone, and the summary's digits are a contract
    values = pd.DataFrame({name: s for name, s in series.items() if s.notna().any()}, index=samples.index)
    out = steps.groupby(steps, sort=True).size().rename("samples").to_frame()
    if len(values.columns):
        grouped = values.groupby(steps, sort=True)
        out = out.join(grouped.mean().add_suffix("_mean")).join(grouped.std(ddof=0).add_suffix("_std"))
    if len(samples):
        out = out.join(compute_step_diagnostics(samples))
        if "prompt_key" in samples:
            out = out.join(compute_group_stats(samples))
        if "mask_positions" in samples and (samples["mask_positions"] >= 0).any():
            out = out.join(compute_masked_share(samples))
    out.index.name = F.STEP
    return out


def compute_masked_share(samples: pd.DataFrame) -> pd.Series:
    """Per step (index), ``masked_share``: over the step's samples that have a loss mask, their
    untrained positions (positions - counted ones) ÷ all their positions; NaN for a step where no
    sample has one (or they have no position)."""
    positions = samples["mask_positions"].to_numpy(dtype=float)
    has = positions >= 0
    frame = pd.DataFrame({"positions": np.where(has, positions, 0.0),
                          "untrained": np.where(has, positions - samples["response_len"].to_numpy(dtype=float), 0.0)},
                         index=samples.index)
    totals = frame.groupby(samples[F.STEP], sort=True).sum()
    return (totals["untrained"] / totals["positions"].where(totals["positions"] > 0)).rename("masked_share")


def compute_group_stats(samples: pd.DataFrame) -> pd.DataFrame:
    """Per step (index), the GRPO groups: samples of the step with the same prompt text (pads
    removed, ``prompt_key``) form a group; samples without a prompt are in none.

    - ``prompt_groups``: distinct prompts among the step's samples that have one;
    - ``group_size_mean``: mean samples per group;
    - ``zero_std_groups``: groups of at least 2 samples whose rewards are all equal (NaN equal to
      NaN): they carry no learning signal in GRPO;
    - ``zero_std_share``: ``zero_std_groups`` over the groups of at least 2 samples (NaN with none).

    A sample without a reward (``has_reward`` false: its format logs none) is in no group.
    """
    have = samples.loc[samples["prompt_key"].notna() & rewarded(samples), [F.STEP, "prompt_key", F.REWARD]]
    steps = pd.Index(sorted(samples[F.STEP].unique()), name=F.STEP)
    if have.empty:
        return pd.DataFrame({"prompt_groups": 0, "group_size_mean": np.nan, "zero_std_groups": 0,
                             "zero_std_share": np.nan}, index=steps)
    grouped = have.groupby([F.STEP, "prompt_key"], sort=False)[F.REWARD]
    groups = pd.DataFrame({"size": grouped.size(), "distinct": grouped.nunique(dropna=False)})
    multi = groups["size"] >= 2
    per_step = groups.groupby(level=0)
    out = pd.DataFrame({
        "prompt_groups": per_step.size(),
        "group_size_mean": per_step["size"].mean(),
        "zero_std_groups": (multi & (groups["distinct"] == 1)).groupby(level=0).sum(),
        "multi_groups": multi.groupby(level=0).sum(),
    }).reindex(steps)
    out["prompt_groups"] = out["prompt_groups"].fillna(0).astype(int)
    out["zero_std_groups"] = out["zero_std_groups"].fillna(0).astype(int)
    out["zero_std_share"] = out["zero_std_groups"] / out["multi_groups"].where(out["multi_groups"] > 0)
    return out.drop(columns="multi_groups")


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
        pairs, negative = column("lr_pairs"), column("lr_negative")
        out["neg_log_ratio_share"] = [negative[a:b].sum() / total if (total := pairs[a:b].sum()) else np.nan
                                      for a, b in bounds]
    if has((F.REWARD, "response_len", "response_chars")):
        reward, tokens, chars = column(F.REWARD), column("response_len"), column("response_chars")
        tokens = np.where(tokens >= 0, tokens, np.nan)  # a new array: the column may be a view
        out["reward_len_corr"] = [_reward_length_correlation(reward[a:b], tokens[a:b], chars[a:b])
                                  for a, b in bounds]
    if has(_EV_COLUMNS):
        parts = [column(c) for c in _EV_COLUMNS]
        out["explained_variance"] = [pool_explained_variance(*(p[a:b] for p in parts)) for a, b in bounds]
    if has(("truncated",)):
        flags = column("truncated")
        out["truncated_share"] = [np.nanmean(part) if (part := flags[a:b])[~np.isnan(part)].size else np.nan
                                  for a, b in bounds]
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
