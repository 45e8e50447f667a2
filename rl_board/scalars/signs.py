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


#: The series a page shows first, by what they mean, in this order (case-insensitive regular
#: expressions over the name; a name with std, min or max is a spread, not the series itself).
MEANING_RULES = {
    "reward": r"reward|(^|/)score(/|$)",
    # kl, approx_kl, ppo_kl, ref_kl, kl_k3 (an estimator named), kl_div, kl_penalty, kl_loss; not kl_coef
    "KL": r"(^|[/_])kl(_k[123]|_div(ergence)?|_penalty)?(_mean|_loss)?($|/)|(^|/)kl/",
    "entropy": r"entropy",
    "loss": r"^(?!.*kl).*loss",  # the policy's loss, not a KL term of it
    "clip fraction": NAME_RULES["clip"],
}
_SPREAD = re.compile(r"std|(^|[/_])(min|max)($|[/_])", re.IGNORECASE)


def default_series(names) -> list[str]:
    """One series per meaning of ``MEANING_RULES`` (reward, KL, entropy, loss, clip fraction), in that
    order: of the names that match it and are not a spread or already taken, the shortest (then the
    first by name). Meanings no series has are skipped."""
    chosen: list[str] = []
    for rule in MEANING_RULES.values():
        matching = [n for n in names if re.search(rule, n, flags=re.IGNORECASE) and not _SPREAD.search(n)
                    and n not in chosen]
        if matching:
            chosen.append(min(matching, key=lambda n: (len(n), n)))
    return chosen


@dataclass(frozen=True)
class Thresholds:
    """The settings of the signs (the page's sidebar shows them)."""

    ratio_max: float = 10.0  # a policy ratio above this: the policy moved too far (TRL's bad example: 200)
    clip_max: float = 0.3  # a clip fraction above this: most updates are being clipped
    spike_k: float = 6.0  # a spike: this many noise scales above the trailing trend
    spike_window: int = 20  # points in the trailing window (at least 5 needed)
    kl_noise_k: float = 3.0  # a negative KL: below 0 by more than this many of the series' noise scales
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

        def first(mask, kind, text):  # called within this series' iteration only
            hits = np.flatnonzero(mask)
            if len(hits):
                i = int(hits[0])
                signs.append(Sign(kind, name, steps[i], float(values[i]), text.format(value=values[i])))  # noqa: B023

        if _matches("loss", name):
            first(~finite, "non-finite loss", "{value} — the loss is no longer a number")
        if _matches("kl", name):
            noise = series_noise(values)
            first(finite & (values < -thresholds.kl_noise_k * noise), "negative KL",
                  f"{{value:.4g}} < 0 by more than {thresholds.kl_noise_k:g} × the series' noise ({noise:.2g}) — "
                  "a KL estimate should stay positive")
        if _matches("ratio", name):
            first(finite & (values > thresholds.ratio_max), "ratio",
                  f"{{value:.4g}} > {thresholds.ratio_max:g} — the policy moved too far from the one that sampled")
        if _matches("clip", name):
            first(finite & (values > thresholds.clip_max), "clip fraction",
                  f"{{value:.3g}} > {thresholds.clip_max:g} — most updates are clipped")
        if _matches("spike", name):
            first(spikes(values, thresholds.spike_k, thresholds.spike_window, np.asarray(steps, dtype=float)),
                  "spike", f"{{value:.4g}} — far above the trend of the {thresholds.spike_window} points before, "
                           "and back after it")
        if _matches("entropy", name):
            early = early_mean(values)
            if early and early > 0:
                first(finite & (values < thresholds.entropy_fraction * early), "entropy collapse",
                      f"{{value:.4g}} < {thresholds.entropy_fraction:g} × its early mean {early:.4g}")
    return sorted(signs, key=lambda s: (s.step, s.series, s.kind))


def series_noise(values: np.ndarray) -> float:
    """The noise of a series around its own trend: 1.4826 × the median absolute deviation of its
    first differences (finite values, in order) ÷ √2, a robust standard deviation that a steady
    trend does not inflate; 0 with fewer than two differences."""
    finite = values[np.isfinite(values)]
    if len(finite) < 3:
        return 0.0
    steps = np.diff(finite)
    return float(1.4826 * np.median(np.abs(steps - np.median(steps))) / math.sqrt(2))


def trend_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of the Theil–Sen line through (x, y): the median of the pairwise slopes,
    then the median of y − slope·x; robust to a few outliers."""
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    ok = dx != 0
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok])) if ok.any() else 0.0
    return slope, float(np.median(y - slope * x))


def spikes(values: np.ndarray, k: float = 6.0, window: int = 20, steps: np.ndarray | None = None) -> np.ndarray:
    """Where a value is a spike: over the ``window`` finite values before it (at least 5), the
    Theil–Sen trend predicts it; the scale is the largest of 1.4826 × the median absolute residual
    around that trend, the noise of the window's first differences (``series_noise``) and 2 % of the
    window's median level; the value is a spike when it lies more than ``k`` scales above the
    prediction and the next finite value comes back below the prediction plus half that excess (so
    the newest value waits for the next). A steady rise, or a rise that goes on, is no spike."""
    values = np.asarray(values, dtype=float)
    steps = np.arange(len(values), dtype=float) if steps is None else np.asarray(steps, dtype=float)
    out = np.zeros(len(values), dtype=bool)
    finite = np.flatnonzero(np.isfinite(values))
    for n, i in enumerate(finite[:-1]):  # the newest value has no next one yet
        if n < 5:
            continue
        before = finite[max(0, n - window):n]
        x, y = steps[before], values[before]
        slope, intercept = trend_line(x, y)
        predicted = intercept + slope * steps[i]
        scale = max(1.4826 * float(np.median(np.abs(y - (intercept + slope * x)))), series_noise(y),
                    0.02 * abs(float(np.median(y))))
        excess = values[i] - predicted
        # a spike comes back down
        out[i] = scale > 0 and excess > k * scale and values[finite[n + 1]] - predicted < excess / 2
    return out


def early_mean(values: np.ndarray) -> float | None:
    """The mean of a series' first finite values: the first tenth of them, at least 3 (None with fewer)."""
    finite = values[np.isfinite(values)]
    count = max(3, len(finite) // 10)
    return float(finite[:count].mean()) if len(finite) >= count else None
