"""What a loaded run has, so the page offers only the fields, controls and metrics that apply to it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..base import fields as F


@dataclass(frozen=True)
class RunTraits:
    """What one run logged (any sample, any step)."""

    reward_fields: tuple[str, ...]  # the reward fields (``fields.REWARD_FIELDS``) with a value at some step
    reference: bool  # a reference model's output: ``ref_reward`` or ``ref_response``
    token_lists: bool  # per-token numeric lists (log-probs, values, entropy…)
    ref_logprobs: bool  # per-token log-probabilities of the policy and of the reference: a KL per token


#: What a run whose traits are not known yet offers: everything (the page draws again once it knows).
ALL_TRAITS = RunTraits(F.REWARD_FIELDS, True, True, True)


def _any_value(frame: pd.DataFrame, column: str) -> bool:
    return column in frame and bool(np.isfinite(pd.to_numeric(frame[column], errors="coerce")).any())


def compute_run_traits(steps: pd.DataFrame, samples: pd.DataFrame) -> RunTraits:
    """The traits of a run from its per-step table (``Run.steps``: ``{name}_mean`` columns) and its
    samples (``Run._samples``: ``n_tokens``, its positions in per-token numeric lists, 0 without them;
    ``kl_mean``, NaN without both log-prob lists)."""
    return RunTraits(
        reward_fields=tuple(name for name in F.REWARD_FIELDS if _any_value(steps, f"{name}_mean")),
        reference=_any_value(steps, "ref_reward_mean") or _any_value(steps, "ref_response_chars_mean"),
        token_lists="n_tokens" in samples and bool((samples["n_tokens"] > 0).any()),
        ref_logprobs=_any_value(samples, "kl_mean"),
    )
