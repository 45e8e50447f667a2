"""Curves over steps: rewards, KL, response length and extra fields, each with a mean ± scaled-std band."""

from __future__ import annotations

import streamlit as st

from .. import fields as F
from ..figures import build_curve_figure
from ..loader import Run
from ..tables import KL_PREFIX
from . import keys
from .sidebar import Settings


def render(run: Run, settings: Settings) -> None:
    steps = run.steps
    columns = st.columns(3)
    if settings.show_reward_curves:
        names = [n for n in settings.reward_fields if f"{n}_mean" in steps]
        if not settings.show_comparison:
            names = [n for n in names if not n.startswith("ref_")]
        columns[0].plotly_chart(build_curve_figure(steps, names, "Rewards", settings.std_scale,
                                                   settings.zero_shift), key="curve_rewards")
    if settings.use_log_ratio:
        kl, title = "log_ratio", "Log-ratio (mean per sample)"
    else:
        kl, title = KL_PREFIX[settings.kl_estimator], f"KL ({settings.kl_estimator}, mean per sample)"
    if f"{kl}_mean" in steps:
        columns[1].plotly_chart(build_curve_figure(steps, [kl], title, settings.std_scale, settings.zero_shift),
                                key="curve_kl")
    else:
        columns[1].info("No per-token log-probabilities in this run: no KL curve.")
    length = next(((name, unit) for name, unit in (("response_len", "tokens"), ("response_chars", "characters"))
                   if f"{name}_mean" in steps), None)
    if length is None:
        columns[2].info("No responses in this run: no length curve.")
    else:
        columns[2].plotly_chart(build_curve_figure(steps, [length[0]], f"Response length ({length[1]})",
                                                   settings.std_scale, settings.zero_shift), key="curve_len")
    if run.extras:
        chosen = st.multiselect("Extra field curves", run.extras, default=run.extras[:3], key=keys.EXTRA_CURVES,
                                help="Fields of your logs beyond the board's own: mean ± std per step.")
        if chosen:
            st.plotly_chart(build_curve_figure(steps, [F.extra_column(n) for n in chosen], "Extra fields",
                                               settings.std_scale, settings.zero_shift,
                                               labels={F.extra_column(n): n for n in chosen}), key="curve_extras")
