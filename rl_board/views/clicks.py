"""Clicks in the page's tables of samples: which row a click picked, and the batch table's marked row.

A table is drawn with ``on_select="rerun"`` and ``ROW_CLICK``; its selection lives in Streamlit's session
state under the table's key. Streamlit reports a selection, not a click: these helpers tell a new click
from a selection already seen (``row_clicked``), and keep the batch table's mark on the sample shown
(``mark_row``) so that a click on another row is one (``table_click``). Split out of ``state`` (the
page's caches and the rest of its session state), which uses ``MARKED`` to forget a run's mark.
"""

from __future__ import annotations

import streamlit as st

MARKED = "batch_table_marked"  # (table key, row) the batch table was last drawn with marked


#: How a table of samples is selected: a click on any cell picks its row, as does the row's checkbox.
ROW_CLICK = ("single-row", "single-cell")


def _selection(table_key: str) -> dict:
    return (st.session_state.get(table_key) or {}).get("selection") or {}


def table_click(table_key: str) -> int | None:
    """Before the batch table ``table_key`` is drawn: the row the user clicked since it was last drawn
    (a cell of any row, or a row other than the one it marked), if any."""
    selection = _selection(table_key)
    cells, rows = selection.get("cells") or [], selection.get("rows") or []
    if cells:  # ``mark_row`` clears the cells: one here is a new click
        return int(cells[0][0])
    marked = st.session_state.get(MARKED)
    if not rows or marked == (table_key, rows[0]):
        return None
    return rows[0]


def mark_row(table_key: str, row: int) -> None:
    """Before the batch table ``table_key`` is drawn: select its ``row`` (the sample shown), no cell."""
    selection = _selection(table_key)
    if selection.get("rows") != [row] or selection.get("cells"):
        st.session_state[table_key] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    st.session_state[MARKED] = (table_key, row)


_SEEN = "table_selections"  # table key -> (rows, cells, the row picked) of its selection when last read
_SEEN_KEPT = 16  # tables remembered (each search, sort and group draws a table of its own)


def row_clicked(table_key: str, selection) -> int | None:
    """The row a click in table ``table_key`` (drawn with ``ROW_CLICK``; ``selection`` its event's
    selection) picked since its selection was last read: any cell of a row, or the row's checkbox (the
    one that changed, when both did); None when nothing changed."""
    rows = [int(r) for r in selection.get("rows") or []]
    cells = [(int(c[0]), str(c[1])) for c in selection.get("cells") or []]
    seen = st.session_state.setdefault(_SEEN, {})
    before_rows, before_cells, before = seen.pop(table_key, ([], [], None))
    clicked = None
    if cells and cells != before_cells:
        clicked = cells[0][0]
    elif rows and rows != before_rows:
        clicked = rows[0]
    picked = clicked if clicked is not None else (before if rows or cells else None)
    seen[table_key] = (rows, cells, picked)
    for old in list(seen)[:-_SEEN_KEPT]:
        del seen[old]
    return clicked


def row_picked(table_key: str) -> int | None:
    """The row last picked in table ``table_key`` (``row_clicked``) while it is still selected; None once
    the selection is cleared."""
    return st.session_state.get(_SEEN, {}).get(table_key, ([], [], None))[2]
