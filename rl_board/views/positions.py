"""One step by position: mean KL, entropy and advantage at each token position, and the reward by
response-length bucket. Computed on request: it reads every sample of the step."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..analysis.figures import build_length_bucket_figure, build_position_figure
from ..analysis.positions import compute_position_profile, compute_reward_by_length
from ..analysis.provider import compute_sample_tokens
from ..analysis.run import Run
from ..base import fields as F
from . import keys
from .sidebar import Settings

ADVANTAGE = F.extra_column("advantage")  # a per-sample advantage, as GRPO trainers log it


def render(run: Run, step: int, samples: pd.DataFrame, settings: Settings) -> None:
    """``samples``: the step's samples (as the batch shows them)."""
    if not st.toggle("By position (reads every sample of the step)", key=keys.SHOW_POSITIONS,
                     help="Mean KL, entropy and advantage at each token position, and the reward by "
                          "response-length bucket."):
        return
    buckets, unit = compute_reward_by_length(samples)
    records = run.records(samples.index)
    kept = [(i, r) for i, r in enumerate(records) if r is not None]
    tokens = [compute_sample_tokens(r[0], settings.pad_token, settings.eos_token) for _, r in kept]
    advantages = None
    if ADVANTAGE in samples:
        values = samples[ADVANTAGE].to_numpy(dtype=float)
        advantages = [float(values[i]) if values[i] == values[i] else None for i, _ in kept]
    profile = compute_position_profile([t for t in tokens], settings.kl_estimator,
                                       float(st.session_state.get(keys.GAMMA, 1.0)),
                                       float(st.session_state.get(keys.LAMBDA, 0.95)), advantages)
    columns = st.columns(4)
    shown = False
    for where, (column, title) in zip(columns, (
            ("kl_mean", f"KL ({settings.kl_estimator}) by position"), ("entropy_mean", "Entropy by position"),
            ("advantage_mean", "Advantage by position"))):
        if len(profile) and profile[column].notna().any():
            where.plotly_chart(build_position_figure(profile, column, title), key=f"position_{column}")
            shown = True
    if not shown:
        columns[0].info("No per-token lists in this step: nothing by position.")
    if len(buckets):
        columns[3].plotly_chart(build_length_bucket_figure(buckets, unit), key="reward_by_length")
