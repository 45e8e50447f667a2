"""Explore the whole run: a regular expression over a text field, a numeric range and a step range;
the matches of every step in one table (click one to open it below), how often they occur per
step, and an export of them."""

from __future__ import annotations

import math
from functools import partial

import streamlit as st

from ..analysis.figures import build_matches_figure
from ..analysis.provider import ANY, ANY_TAG
from ..analysis.run import Run
from ..analysis.search import (
    Query,
    compute_first_matches,
    compute_matches_per_step,
    compute_search,
    fault_choices,
    search_fields,
)
from ..analysis.tables import (
    KL_PREFIX,
    build_batch_table,
    build_export_csv,
    cut_cells,
    has_images,
    sort_choices,
    sort_samples,
)
from ..base import fields as F
from ..base.text import escape_markdown
from . import clicks, keys, state
from .sidebar import Settings
from .tags import tagged as get_tagged
from .tags import with_tags

NO_FILTER = "(no numeric filter)"
SHOWN_DEFAULT = 200  # matches listed; the count and the curve cover all


def _number(text: str, label: str):
    """A typed bound: a float, None when empty; a message and None when it is not a number."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        st.warning(f"{label}: {text!r} is not a number; ignored.")
        return None
    return value if math.isfinite(value) else None


def _fault_label(kind: str | None) -> str:
    return "(with faults or not)" if kind is None else "(any fault)" if kind == ANY else kind


def render(run: Run, settings: Settings) -> None:
    left, right = st.columns([3, 1])
    pattern = left.text_input("Regular expression (RE2 syntax; (?i) for case-insensitive)", key=keys.EXPLORE_REGEX,
                              placeholder=r"^\W*$   finds empty or punctuation-only texts")
    fields = search_fields(run)
    state.keep_choice(keys.EXPLORE_FIELD, fields, "response")
    text_field = right.selectbox("in", fields, key=keys.EXPLORE_FIELD,
                                 help="messages: any turn's content or tool-call arguments")
    numeric = {"reward": F.REWARD, "KL mean": f"{KL_PREFIX[settings.kl_estimator]}_mean",
               "log-ratio mean": "log_ratio_mean", "response length": "response_len", "reward gap": "reward_gap",
               **({"images": "images"} if has_images(run._samples) else {}),
               **{name: F.extra_column(name) for name in run.extras}}
    a, b, c, d = st.columns([2, 1, 1, 2])
    state.run_choice(keys.EXPLORE_COLUMN, [NO_FILTER, *numeric], NO_FILTER)
    column = a.selectbox("Numeric filter", [NO_FILTER, *numeric], key=keys.EXPLORE_COLUMN)
    low = _number(b.text_input("from", key=keys.EXPLORE_LOW), "from")
    high = _number(c.text_input("to", key=keys.EXPLORE_HIGH), "to")
    steps = [int(s) for s in run.steps.index]
    state.run_choice(keys.EXPLORE_STEPS, steps, (steps[0], steps[-1]))
    first, last = (d.select_slider("Steps", steps, value=(steps[0], steps[-1]), key=keys.EXPLORE_STEPS)
                   if len(steps) > 1 else (steps[0], steps[0]))
    ranges = {numeric[column]: (low, high)} if column != NO_FILTER and (low is not None or high is not None) else {}
    truncated = st.checkbox("Only truncated responses", key=keys.EXPLORE_TRUNCATED,
                            help="No EOS token among the counted positions, which fill the per-token lists: "
                                 "the response ran out of room.") or None
    book = get_tagged(run)
    tag = None
    if book is not None and book.entries:
        tag = st.selectbox("Tagged", [None, ANY_TAG, *book.names()], key=keys.EXPLORE_TAG,
                           format_func=lambda t: "(tagged or not)" if t is None else "(any tag or note)" if t == ANY_TAG
                           else t)
    faults = fault_choices(run._samples)
    fault = None
    if faults:
        state.keep_choice(keys.EXPLORE_FAULT, faults, None)
        fault = st.selectbox("Turn faults", faults, key=keys.EXPLORE_FAULT, format_func=_fault_label,
                             help="Only trajectories with this fault (docs: Why a trajectory failed).")
    query = Query(pattern or None, text_field, settings.pad_token, ranges, (first, last), truncated, tag=tag,
                  fault=fault)
    try:
        keep, scan = compute_search(run, query, book)
    except ValueError as exc:
        st.error("Can't search with this pattern.")
        st.text(str(exc))
        return
    count = int(keep.sum())
    if scan is not None and scan.note():
        st.warning(escape_markdown(scan.note()[0].upper() + scan.note()[1:] + "."))
    st.caption(f"{count:,} of {len(run._samples):,} samples match")
    if not count:
        return
    st.plotly_chart(build_matches_figure(compute_matches_per_step(run, keep)), key="explore_per_step")
    x, y, z = st.columns([2, 1, 1])
    orders = ["log order", *[c for c in sort_choices(run.extras, run._samples) if c != "log order"]]
    state.run_choice(keys.EXPLORE_ORDER, orders, "log order")
    order = x.selectbox("Order matches by", orders, key=keys.EXPLORE_ORDER)
    descending = y.toggle("Highest first", value=True, key="explore_descending")
    shown = int(z.number_input("Show the first", 1, 100_000, SHOWN_DEFAULT, key=keys.EXPLORE_TOP))
    if order == "log order":  # only the rows listed are copied
        ordered = compute_first_matches(run, keep, shown, last_first=descending)
    else:
        ordered = sort_samples(run._samples[keep], order, descending, settings.kl_estimator).head(shown)
    ordered = run.with_text(ordered)
    table = build_batch_table(with_tags(run, ordered), settings.system_marker, settings.pad_token, settings.kl_estimator)
    table.insert(0, F.STEP, ordered[F.STEP])
    key = f"explore_table-{hash(query.__repr__())}-{order}-{descending}-{shown}"
    event = st.dataframe(cut_cells(table), hide_index=True, on_select="rerun", selection_mode=clicks.ROW_CLICK,
                         key=key)
    clicked = clicks.row_clicked(key, event.selection)
    if clicked is not None and clicked < len(ordered):
        label = ordered.index[clicked]
        state.open_sample(int(ordered.loc[label, F.STEP]), label)
    name = run.path.name
    left, right = st.columns(2)
    left.download_button("Download these matches (CSV)", partial(build_export_csv, table.drop(columns=F.STEP), ordered, name),
                         file_name=f"{name}-matches.csv", mime="text/csv", key="explore_csv", on_click="ignore")
    right.download_button("Download their log lines (JSONL)", partial(run.source_lines, ordered.index),
                          file_name=f"{name}-matches.jsonl", mime="application/jsonl", key="explore_jsonl", on_click="ignore")
