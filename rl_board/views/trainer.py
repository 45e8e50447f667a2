"""The trainer's own scalars beside the rollouts: found near the run (or at the sidebar's path),
grouped by prefix, drawn on the rollout step axis, with warning badges that open their step."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd
import streamlit as st

from ..access import RootError, check_allowed
from ..figures import build_curve_figure
from ..loader import Run
from ..scalars import ScalarsError, discover
from ..scalars.signs import Thresholds, compute_signs
from ..text import escape_markdown
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
    path = Path(settings.metrics_path).expanduser() if settings.metrics_path else discover(run.path)
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
    groups = sorted({_prefix(name) for name in scalars.series})
    left, right = st.columns([1, 3])
    state.run_choice(keys.METRICS_GROUP, groups, groups[0])
    group = left.selectbox("Group", groups, key=keys.METRICS_GROUP)
    names = [n for n in scalars.series if _prefix(n) == group]
    state.run_choice(f"{keys.METRICS_SERIES}-{group}", names, names[:3])
    chosen = right.multiselect("Series", names, key=f"{keys.METRICS_SERIES}-{group}")
    grid = st.columns(3)
    for i, name in enumerate(chosen):
        points = scalars.series[name]
        frame = pd.DataFrame({"s_mean": [v for _, v in points]}, index=[s for s, _ in points])
        grid[i % 3].plotly_chart(
            build_curve_figure(frame, ["s"], name, 0.0, settings.zero_shift, labels={"s": name},
                               smoothing=settings.smoothing),
            key=f"trainer_curve-{name}", selection_mode="points",
            on_select=partial(state.step_clicked, f"trainer_curve-{name}", rollout_steps))
