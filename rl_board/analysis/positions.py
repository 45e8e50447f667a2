"""One step by position: the mean KL, entropy and advantage at each token position, and the reward
by response-length bucket. Pure functions over a step's samples (no Streamlit)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..base import fields as F
from ..derive.metrics import SampleTokens, compute_gae, kl_per_token

LENGTH_BUCKETS = 8  # equal-width response-length buckets of a step, at most


def compute_position_profile(samples: list[SampleTokens], estimator: str = "k3", gamma: float = 1.0,
                             lam: float = 0.95, advantages: list[float | None] | None = None) -> pd.DataFrame:
    """Per token position t (0-based, over each sample's counted positions), indexed by t:

    - ``samples``: how many samples have a counted position t;
    - ``kl_mean``: the mean KL (``estimator``) at t over the samples where it is finite;
    - ``entropy_mean``: the mean logged entropy at t (NaN ignored);
    - ``advantage_mean``: the mean advantage at t: GAE (``gamma``, ``lam``, as the token view) for a
      sample with values and token rewards, else the sample's own ``advantages`` entry (a per-sample
      advantage, as GRPO logs it) at each of its positions; NaN ignored.
    """
    width = max((int((~s.is_pad).sum()) for s in samples), default=0)
    grids = {name: np.full((len(samples), width), np.nan) for name in ("kl", "entropy", "advantage")}
    present = np.zeros((len(samples), width), bool)
    for i, sample in enumerate(samples):
        n = int((~sample.is_pad).sum())
        present[i, :n] = True
        grids["kl"][i, :n] = kl_per_token(sample.logprobs, sample.ref_logprobs, estimator)[:n]
        if sample.entropy is not None:
            grids["entropy"][i, :n] = sample.entropy[:n]
        if np.isfinite(sample.values[:n]).any() and np.isfinite(sample.token_rewards[:n]).any():
            grids["advantage"][i, :n] = compute_gae(sample.token_rewards[:n], sample.values[:n], gamma, lam)[0]
        elif advantages is not None and advantages[i] is not None:
            grids["advantage"][i, :n] = advantages[i]
    out = pd.DataFrame({"samples": present.sum(axis=0)}, index=pd.RangeIndex(width, name="position"))
    for name, grid in grids.items():
        grid = np.where(np.isfinite(grid), grid, np.nan)
        count = np.isfinite(grid).sum(axis=0)
        total = np.nansum(grid, axis=0)
        out[f"{name}_mean"] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return out


def compute_reward_by_length(samples: pd.DataFrame, buckets: int = LENGTH_BUCKETS) -> tuple[pd.DataFrame, str]:
    """(one row per non-empty response-length bucket of ``samples`` (one step's rows of
    ``Run._samples``), the unit). Length is the counted tokens (``response_len``) when any sample has
    them, else the response's characters (pads removed). The range [min, max] of the lengths is cut
    into ``buckets`` buckets of equal integer width w = ceil((max − min + 1) / buckets): bucket k holds
    lengths min + k·w … min + (k+1)·w − 1. Columns: ``low``, ``high`` (the bucket's lengths),
    ``samples`` (with a length and a finite reward), ``reward_mean``, ``reward_std`` (population)."""
    tokens = samples["response_len"].to_numpy(dtype=float) if "response_len" in samples else np.zeros(0)
    tokens = np.where(tokens >= 0, tokens, np.nan)
    use_tokens = len(tokens) and np.isfinite(tokens).any()
    length = tokens if use_tokens else samples.get("response_chars", pd.Series(np.nan, index=samples.index)
                                                   ).to_numpy(dtype=float)
    reward = samples[F.REWARD].to_numpy(dtype=float)
    keep = np.isfinite(length) & np.isfinite(reward)
    length, reward = length[keep], reward[keep]
    columns = ["low", "high", "samples", "reward_mean", "reward_std"]
    unit = "tokens" if use_tokens else "characters"
    if not len(length):
        return pd.DataFrame(columns=columns), unit
    low = int(length.min())
    width = max(1, math.ceil((int(length.max()) - low + 1) / buckets))
    which = ((length - low) // width).astype(int)
    rows = []
    for k in np.unique(which):
        picked = reward[which == k]
        rows.append((low + k * width, low + (k + 1) * width - 1, len(picked), float(picked.mean()),
                     float(picked.std())))
    return pd.DataFrame(rows, columns=columns), unit
