"""Warning signs in the trainer's scalars, after TRL's PPO logging guide: what to watch and when.

Series are matched by name (``NAME_RULES``, covering TRL, verl and OpenRLHF's names); each rule
has a documented threshold (``Thresholds``). Every sign names the series and the step.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

#: Which series each sign reads, by a regular expression over the series name (case-insensitive).
#: TRL logs e.g. ``loss``, ``kl``, ``objective/kl``, ``entropy``, ``clip_ratio/region_mean``,
#: ``policy/clipfrac``; verl ``actor/pg_loss``, ``critic/vf_loss``, ``actor/ppo_kl``,
#: ``actor/pg_clipfrac``, ``actor/entropy``, ``actor/kl_coef``; OpenRLHF ``policy_loss``,
#: ``critic_loss``, ``kl``, ``clip_ratio``, ``entropy``, ``kl_coef``.
NAME_RULES = {
    "loss": r"loss",
    "kl": r"(^|/)(approx_|ppo_)?kl(_mean)?$",
    "ratio": r"(^|/)(policy_|importance_)?ratio(_mean|_max)?$",
    "clip": r"^(?!completions/).*(clipfrac|clip_frac(tion)?|clip_ratio)",
    "entropy": r"entropy",
    "spike": r"loss|(^|/)(approx_|ppo_)?kl(_mean|_coef)?$|grad_norm|kl_coef",
}


@dataclass(frozen=True)
class Thresholds:
    """The settings of the signs (the page's sidebar shows them)."""

    ratio_max: float = 10.0  # a policy ratio above this: the policy moved too far (TRL's bad example: 200)
    clip_max: float = 0.3  # a clip fraction above this: most updates are being clipped
    spike_k: float = 6.0  # a spike: this many robust deviations above the trailing median
    spike_window: int = 20  # points in the trailing window (at least 5 needed)
    entropy_fraction: float = 0.2  # entropy collapse: below this fraction of its early mean


@dataclass(frozen=True)
class Sign:
    kind: str  # "non-finite loss", "negative KL", "ratio", "clip fraction", "spike", "entropy collapse"
    series: str
    step: int
    value: float
    message: str


def _matches(rule: str, name: str) -> bool:
    return re.search(NAME_RULES[rule], name, flags=re.IGNORECASE) is not None


def compute_signs(series: dict[str, list[tuple[int, float]]], thresholds: Thresholds = Thresholds()) -> list[Sign]:
    """Every sign in ``series`` (name -> ascending (step, value)); each at the first step it shows,
    ordered by step then series."""
    signs = []
    for name, points in series.items():
        steps = [s for s, _ in points]
        values = np.array([v for _, v in points], dtype=float)
        finite = np.isfinite(values)

        def first(mask, kind, text):
            hits = np.flatnonzero(mask)
            if len(hits):
                i = int(hits[0])
                signs.append(Sign(kind, name, steps[i], float(values[i]), text.format(value=values[i])))

        if _matches("loss", name):
            first(~finite, "non-finite loss", "{value} — the loss is no longer a number")
        if _matches("kl", name):
            first(finite & (values < 0), "negative KL", "{value:.4g} < 0 — a KL estimate should stay positive")
        if _matches("ratio", name):
            first(finite & (values > thresholds.ratio_max), "ratio",
                  f"{{value:.4g}} > {thresholds.ratio_max:g} — the policy moved too far from the one that sampled")
        if _matches("clip", name):
            first(finite & (values > thresholds.clip_max), "clip fraction",
                  f"{{value:.3g}} > {thresholds.clip_max:g} — most updates are clipped")
        if _matches("spike", name):
            first(spikes(values, thresholds.spike_k, thresholds.spike_window), "spike",
                  f"{{value:.4g}} — far above its median of the {thresholds.spike_window} points before")
        if _matches("entropy", name):
            early = early_mean(values)
            if early and early > 0:
                first(finite & (values < thresholds.entropy_fraction * early), "entropy collapse",
                      f"{{value:.4g}} < {thresholds.entropy_fraction:g} × its early mean {early:.4g}")
    return sorted(signs, key=lambda s: (s.step, s.series, s.kind))


def spikes(values: np.ndarray, k: float = 6.0, window: int = 20) -> np.ndarray:
    """Where a value is a spike: with m and MAD the median and median absolute deviation of the
    ``window`` finite values before it (at least 5), a value above m + k · 1.4826 · MAD; when
    MAD is 0, above m + k · 0.1 · |m| (and never when m is 0 too)."""
    out = np.zeros(len(values), dtype=bool)
    history: list[float] = []
    for i, value in enumerate(values):
        if not math.isfinite(value):
            continue
        if len(history) >= 5:
            recent = np.array(history[-window:])
            median = float(np.median(recent))
            scale = 1.4826 * float(np.median(np.abs(recent - median)))
            if scale == 0:
                scale = 0.1 * abs(median)
            out[i] = scale > 0 and value - median > k * scale
        history.append(value)
    return out


def early_mean(values: np.ndarray) -> float | None:
    """The mean of a series' first finite values: the first tenth of them, at least 3 (None with fewer)."""
    finite = values[np.isfinite(values)]
    count = max(3, len(finite) // 10)
    return float(finite[:count].mean()) if len(finite) >= count else None
