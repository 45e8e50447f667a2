"""The trainer's own scalars beside the rollouts: found near the run (or at the sidebar's path),
grouped by prefix, drawn on the rollout step axis, with warning badges that open their step."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd
import streamlit as st

from ..analysis.figures import build_curve_figure, build_overlay_figure
from ..analysis.provider import ScalarsError, compute_signs, default_series, discover
from ..analysis.run import Run
from ..analysis.steps import DIAGNOSTIC_CURVES, curve_frame
from ..analysis.tables import KL_PREFIX
from ..base.access import RootError, check_allowed
from ..base.text import escape_markdown
from . import keys, state
from .sidebar import Settings

NO_PREFIX = "(no prefix)"


def _prefix(name: str) -> str:
    return name.split("/", 1)[0] + "/" if "/" in name else NO_PREFIX


def render(run: Run, settings: Settings) -> None:
    if settings.metrics_path:
        try:
            check_allowed(settings.metrics_path)  # before anything is looked at: no existence oracle
        except RootError as exc:
            st.warning("Can't use this metrics path.")
            st.text(str(exc))
            return
    path = Path(settings.metrics_path).expanduser() if settings.metrics_path else discover(run.location or run.path)
    if path is None:
        st.caption("No trainer metrics found in the run folder, its parent or grandparent (trainer_state.json, "
                   "TensorBoard event files or a metrics JSONL); type a path in the sidebar to show them.")
        return
    try:
        scalars = state.get_scalars(path)
    except (ScalarsError, RootError, OSError) as exc:
        st.warning("Can't read these trainer metrics.")
        st.text(str(exc))
        return
    st.text(f"{scalars.source}: {scalars.path} · {len(scalars.series)} series · "
            f"{scalars.non_finite} non-finite values (gaps)")
    thresholds = settings.thresholds
    signs = compute_signs(scalars.series, thresholds)
    rollout_steps = run.steps.index
    for i, sign in enumerate(signs):
        st.button(f"⚠ {sign.kind}: {escape_markdown(sign.series)} at step {sign.step}", key=f"sign-{i}",
                  help=escape_markdown(sign.message), on_click=state.go_to_step, args=(sign.step, rollout_steps))
    if not scalars.series:
        return
    names = list(scalars.series)
    defaults = default_series(names) or names[:3]
    groups = sorted({_prefix(name) for name in names})
    left, right = st.columns([1, 3])
    chosen_groups = _multiselect(left, "Groups", groups, sorted({_prefix(n) for n in defaults}), keys.METRICS_GROUP,
                                 help="Series are grouped by the prefix of their name (actor/, critic/…); pick "
                                      "any number of groups.")
    offered = [n for n in names if _prefix(n) in chosen_groups]
    chosen = _multiselect(right, "Series", offered, [n for n in defaults if n in offered], keys.METRICS_SERIES,
                          help="Shown first: the reward, KL, entropy, loss and clip fraction the trainer logged.")
    grid = st.columns(3)
    for i, name in enumerate(chosen):
        grid[i % 3].plotly_chart(  # a clicked point opens its step's batch
            build_curve_figure(_frame(scalars.series[name]), ["s"], name, 0.0, settings.zero_shift, labels={"s": name},
                               smoothing=settings.smoothing),
            key=f"trainer_curve-{name}", selection_mode="points",
            on_select=partial(state.step_clicked, f"trainer_curve-{name}", rollout_steps))
    _render_overlay(run, scalars, chosen or defaults, settings)


def _frame(points) -> pd.DataFrame:
    """A trainer series as a frame ``build_curve_figure`` draws (column ``s_mean``, indexed by step)."""
    return pd.DataFrame({"s_mean": [v for _, v in points]}, index=[s for s, _ in points])


def _multiselect(where, label: str, options: list, default: list, key: str, help: str) -> list:
    """A multiselect that keeps the user's picks still offered, else starts at ``default``."""
    if key in st.session_state:
        st.session_state[key] = [o for o in st.session_state[key] if o in options]
    else:
        st.session_state[key] = list(default)
    return where.multiselect(label, options, key=key, help=help)


def _render_overlay(run: Run, scalars, suggested: list[str], settings: Settings) -> None:
    """One trainer series drawn over one rollout curve, on the same step axis (two y axes)."""
    curves = curve_frame(run.steps)
    rollout = {label: name for label, name in _rollout_series(settings).items() if f"{name}_mean" in curves
               and curves[f"{name}_mean"].notna().any()}
    if not rollout:
        return
    left, right = st.columns(2)
    over = left.selectbox("Overlay on the rollout curve", [NO_OVERLAY, *rollout], key=keys.METRICS_OVERLAY,
                          help="Draw a trainer series over a curve of the rollouts, on one step axis.")
    if over == NO_OVERLAY:
        return
    names = list(scalars.series)
    series = right.selectbox("Trainer series", names, index=names.index(suggested[0]) if suggested else 0,
                             key=keys.METRICS_OVERLAY_SERIES)
    st.plotly_chart(build_overlay_figure(curves, rollout[over], over, _frame(scalars.series[series]), series,
                                         settings.smoothing), key="trainer_overlay")


NO_OVERLAY = "(none)"


def _rollout_series(settings: Settings) -> dict[str, str]:
    """The rollout curves a trainer series can be drawn over: label -> series of ``steps.curve_frame``."""
    kl = KL_PREFIX[settings.kl_estimator]
    return {"reward (mean per step)": "reward", f"KL ({settings.kl_estimator}, mean per sample)": kl,
            "response length (tokens)": "response_len", "response length (characters)": "response_chars",
            "entropy (mean per sample)": "entropy", "mismatch KL": "mismatch_kl",
            **{f"{title}": name for name, title in DIAGNOSTIC_CURVES.items() if name not in ("entropy", "mismatch_kl")}}
