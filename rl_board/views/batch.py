"""One step's batch: the step picker, reward distributions, the sortable table and the sample picker."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..figures import build_gap_figure, build_reward_bars_figure, build_reward_hist_figure
from ..loader import Run
from ..tables import SORT_KEYS, build_batch_table, describe_samples, sort_samples, step_grid
from . import keys
from .sidebar import Settings

_PICKER_CONTEXT = "sample_picker_context"  # (step, sort, direction) the picker was last drawn for
_LAST_CLICK = "batch_table_last_click"  # (context, row) of the last table click acted on


def render_step_picker(run: Run) -> int:
    """A slider on an even step grid, a select box when the steps are irregular."""
    steps, even = step_grid(run.steps.index)
    if st.session_state.get(keys.STEP) not in steps:
        st.session_state[keys.STEP] = steps[-1]
    if even and len(steps) > 1:
        return st.slider("Step", steps[0], steps[-1], step=steps[1] - steps[0], key=keys.STEP)
    return st.selectbox("Step", steps, key=keys.STEP)


def render(run: Run, step: int, settings: Settings) -> tuple[pd.DataFrame, int | None]:
    """Draw the batch of ``step``; returns its samples in the order the user sorted them, and
    the position of the table row the user clicked, if any."""
    left, right = st.columns([3, 1])
    sort_by = left.selectbox("Sort samples by", list(SORT_KEYS), key=keys.SORT_BY)
    descending = right.toggle("Highest first", value=True, key=keys.SORT_DESCENDING)
    ordered = sort_samples(run.step_samples(step), sort_by, descending, settings.kl_estimator)

    if settings.show_charts:
        charts = st.columns(3 if settings.show_comparison else 1)
        if settings.show_comparison:
            charts[0].plotly_chart(build_reward_bars_figure(ordered), key="batch_bars")
            charts[1].plotly_chart(build_gap_figure(ordered), key="batch_gap")
        charts[-1].plotly_chart(build_reward_hist_figure(ordered if settings.show_comparison
                                                         else ordered.drop(columns=["ref_reward"])),
                                key="batch_hist")
    clicked = None
    if settings.show_table:
        # a new table per step and sort, so a click never points into a reordered batch
        event = st.dataframe(build_batch_table(ordered, settings.system_marker, settings.pad_token,
                                               settings.kl_estimator),
                             hide_index=True, on_select="rerun", selection_mode="single-row",
                             key=f"batch_table-{step}-{sort_by}-{descending}")
        rows = event.selection.rows
        clicked = rows[0] if rows else None
    return ordered, clicked


def render_sample_picker(ordered: pd.DataFrame, step: int, clicked: int | None = None):
    """Pick one sample of the sorted batch; returns its label in ``Run.samples``.

    A new step or sort starts at the top of the table: sorting by KL shows the highest-KL
    sample. Clicking a table row picks that sample.
    """
    labels = list(ordered.index)
    context = (step, st.session_state.get(keys.SORT_BY), st.session_state.get(keys.SORT_DESCENDING))
    if st.session_state.get(keys.SAMPLE) not in labels or st.session_state.get(_PICKER_CONTEXT) != context:
        st.session_state[keys.SAMPLE] = labels[0]
    if clicked is not None and (context, clicked) != st.session_state.get(_LAST_CLICK):
        st.session_state[keys.SAMPLE] = labels[clicked]
    st.session_state[_LAST_CLICK] = (context, clicked)
    st.session_state[_PICKER_CONTEXT] = context
    names = dict(zip(labels, describe_samples(ordered)))
    return st.selectbox("Sample (in table order)", labels, format_func=names.__getitem__, key=keys.SAMPLE)
