"""The runs list: the page's first screen, every run under the root with one click to open it."""

from __future__ import annotations

import os

import streamlit as st

from ..analysis.provider import describe_runs
from ..base.access import ROOTS_ENV, RootError
from ..base.text import escape_markdown
from . import keys, state

MAX_ROWS = 200  # runs drawn as rows; the sidebar's picker offers every run
_COLUMNS = ("Format", "Splits", "Steps", "Samples", "Files", "Size", "Last write")
_WIDTHS = (3, 1.2, 1.4, 0.8, 0.9, 1.2, 0.9, 1.4)


def _open(run: str, run_dir: str, fields: tuple) -> None:
    """A row's click (a callback: before the sidebar is drawn again): pick the run and load it."""
    st.session_state[keys.RUN] = run
    state.set_loaded_run(run_dir, fields)


def render(settings) -> None:
    """The runs under the root, a row each (name as a button that opens it), and the folders of logs
    no reader reads, with the reason."""
    from .sidebar import run_dir_of

    if settings.discovery is None:
        st.info("Type a root folder in the sidebar: a folder of runs (at any depth) or a run folder.")
        return
    try:
        found = state.get_run_details(settings.root, tuple(settings.runs), os.environ.get(ROOTS_ENV))
    except RootError as exc:  # the folder went away since the sidebar listed it
        st.error("Can't list the runs of this root folder.")
        st.text(str(exc))
        return
    st.subheader("Runs")
    rows = describe_runs(found.runs)
    st.caption(f"{len(rows)} run{'s' if len(rows) != 1 else ''} under {escape_markdown(str(found.root))}. "
               "Click a run to open it. Steps and samples are known once a run was read (else from its file "
               "names, or –).")
    header = st.columns(_WIDTHS)
    for column, name in zip(header, ("Run", *_COLUMNS)):
        column.markdown(f"**{name}**")
    fields = settings.fields
    for index, row in enumerate(rows[:MAX_ROWS]):
        cells = st.columns(_WIDTHS, vertical_alignment="center")
        name = row["Run"]
        label = escape_markdown("(the root folder itself)" if name == "." else name)
        cells[0].button(label, key=f"{keys.OPEN_RUN}{index}", disabled=fields is None, on_click=_open,
                        args=(name, run_dir_of(settings.root, name), fields if fields is not None else ()))
        for cell, column in zip(cells[1:], _COLUMNS):
            cell.text(row[column])
    if len(rows) > MAX_ROWS:
        st.caption(f"The first {MAX_ROWS} runs are shown; the sidebar's Run picker offers all {len(rows)}.")
    for unclaimed in found.unclaimed:
        st.text(f"Not read: {unclaimed.name}/ — {unclaimed.reason}.")
    for note in found.notes:
        st.caption(escape_markdown(note))
