"""One step's batch: the step picker, reward distributions, the sortable table and the sample picker."""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from ..analysis.figures import build_gap_figure, build_reward_bars_figure, build_reward_hist_figure
from ..analysis.provider import ANY
from ..analysis.run import Run
from ..analysis.search import fault_choices, filter_faults
from ..analysis.tables import (
    build_batch_table,
    build_export_csv,
    build_group_table,
    cut_cells,
    describe_samples,
    sort_choices,
    sort_samples,
    step_grid,
)
from . import clicks, keys, state
from .sidebar import Settings
from .tags import with_tags


def render_step_picker(run: Run, follow_newest: bool = False) -> int:
    """A slider on an even step grid, a select box when the steps are irregular. The step stays put while
    new steps arrive, unless ``follow_newest``."""
    steps, even = step_grid(run.steps.index)
    state.choose_step(steps, follow_newest)
    if even and len(steps) > 1:
        return st.slider("Step", steps[0], steps[-1], step=steps[1] - steps[0], key=keys.STEP)
    return st.selectbox("Step", steps, key=keys.STEP)


#: What the reward views say for samples of a format that logs no reward.
NO_REWARD = ("No reward is logged for these samples (prime-rl's token exports log none): they are counted and "
             "shown, and left out of the reward statistics.")


def render(run: Run, step: int, settings: Settings) -> tuple[pd.DataFrame, tuple]:
    """Draw the batch of ``step``. Returns its samples in the order the user sorted them and what that
    order is (step, sort key, descending, prompt group). Chooses the sample shown (``state.choose_sample``):
    a click on a table row picks it, and the table marks the row of the sample shown."""
    left, right = st.columns([3, 1])
    choices = sort_choices(run.extras, run._samples)
    state.run_choice(keys.SORT_BY, choices, "reward" if "reward" in choices else choices[0])
    sort_by = left.selectbox("Sort samples by", choices, key=keys.SORT_BY,
                             help="Only what this run logged is offered. Extra fields of your logs (verl's acc, "
                                  "TRL's reward functions…) are listed after the board's own.")
    descending = right.toggle("Highest first", value=True, key=keys.SORT_DESCENDING)
    ordered = sort_samples(run.step_samples(step), sort_by, descending, settings.kl_estimator)
    faults = fault_choices(ordered)
    if len(faults) > 2:  # some sample of the step has a fault
        state.keep_choice(keys.BATCH_FAULT, faults, None)
        fault = st.selectbox("Turn faults", faults, key=keys.BATCH_FAULT,
                             format_func=lambda k: "(all samples)" if k is None else "(any fault)" if k == ANY else k,
                             help="Only the samples whose trajectory has this fault (docs: Why a trajectory failed).")
        ordered = filter_faults(ordered, fault if fault in faults else None)

    rewarded = "has_reward" not in ordered or bool(ordered["has_reward"].any())
    if settings.show_charts and not rewarded:
        st.info(NO_REWARD)
    if settings.show_charts and rewarded:
        compare = settings.show_comparison and bool(ordered["ref_reward"].notna().any())
        charts = st.columns(3 if compare else 1)
        if compare:
            charts[0].plotly_chart(build_reward_bars_figure(ordered), key="batch_bars")
            charts[1].plotly_chart(build_gap_figure(ordered), key="batch_gap")
        elif settings.show_comparison:
            st.caption("No ref_reward in this step: no comparison with the reference model.")
        charts[-1].plotly_chart(build_reward_hist_figure(ordered if compare else ordered.drop(columns=["ref_reward"])),
                                key="batch_hist")
    group = None
    if not settings.show_table:
        state.choose_sample(ordered, (step, sort_by, descending, group), None)
        return ordered, (step, sort_by, descending, group)
    if st.toggle("Group by prompt (GRPO groups)", key=keys.GROUP_BATCH,
                 help="One row per prompt; groups whose rewards are all equal carry no learning signal in "
                      "GRPO and come first. Pick a group to see its samples."):
        groups = build_group_table(ordered, settings.system_marker, settings.pad_token)
        key = f"group_table-{step}"
        event = st.dataframe(cut_cells(groups), hide_index=True, on_select="rerun", selection_mode=clicks.ROW_CLICK,
                             key=key)
        clicks.row_clicked(key, event.selection)
        picked = clicks.row_picked(key)
        if picked is not None and picked < len(groups):
            group = groups.index[picked]
            ordered = ordered[ordered["prompt_key"] == group]
            st.caption(f"The {len(ordered)} samples of the chosen group:")
    order = (step, sort_by, descending, group)
    # a new table per step, sort and group, so a click never points into a reordered batch
    key = f"batch_table-{step}-{sort_by}-{descending}-{group}-{settings.kl_estimator}"
    chosen = state.choose_sample(ordered, order, clicks.table_click(key))
    clicks.mark_row(key, list(ordered["source"]).index(chosen))
    table = build_batch_table(with_tags(run, ordered), settings.system_marker, settings.pad_token,
                              settings.kl_estimator)
    st.dataframe(cut_cells(table), hide_index=True, on_select="rerun", selection_mode=clicks.ROW_CLICK, key=key)
    name = run.path.name
    left, right = st.columns(2)
    left.download_button("Download this table (CSV)", partial(build_export_csv, table, ordered, name),
                         file_name=f"{name}-step{step}.csv", mime="text/csv", key="batch_csv", on_click="ignore")
    right.download_button("Download its log lines (JSONL)", partial(run.source_lines, ordered.index),
                          file_name=f"{name}-step{step}.jsonl", mime="application/jsonl", key="batch_jsonl",
                          on_click="ignore")
    return ordered, order


def render_sample_picker(ordered: pd.DataFrame, estimator: str = "k3"):
    """Pick one sample of the sorted batch (the choice ``render`` made is preselected); returns its label
    in ``Run._samples``. Its labels are drawn afresh on every run: they show the KL by the chosen estimator
    and the length by the current pad and EOS tokens."""
    sources = list(ordered["source"])
    names = dict(zip(sources, describe_samples(ordered, estimator)))
    state.relabel(keys.SAMPLE, names.get(st.session_state.get(keys.SAMPLE), ""))
    chosen = st.selectbox("Sample (in table order)", sources, format_func=names.__getitem__, key=keys.SAMPLE)
    return ordered.index[sources.index(chosen)]
