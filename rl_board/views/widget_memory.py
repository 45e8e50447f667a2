"""The choices of the page kept across its areas: only the open area is drawn, and Streamlit forgets the
values of the widgets it did not draw; they are kept at the end of each run and given back at the
start of the next, and written again when their area opens. With ``state`` and ``clicks``, the
only module that touches ``st.session_state`` for the page.
"""

from __future__ import annotations

import streamlit as st
from streamlit.errors import StreamlitAPIException

from . import keys

KEPT = "kept_widgets"  # widget key -> its value at the end of the last full run
_NOT_KEPT = {keys.LOAD, keys.REFRESH}  # buttons: their state can't be set


def _widget_keys() -> list[str]:
    return [value for name, value in vars(keys).items()
            if name.isupper() and isinstance(value, str) and value not in _NOT_KEPT]


_UNDRAWN, _DRAWN_AREA = "undrawn_widgets", "drawn_area"  # keys given back while hidden; the area last drawn


def restore_widgets() -> None:
    """At the start of a run: give back their values to the widgets (``keys``) the last run did not draw
    (their area was closed, or the page stopped early), which Streamlit forgets."""
    undrawn = st.session_state.setdefault(_UNDRAWN, set())
    for key, value in st.session_state.get(KEPT, {}).items():
        if key not in st.session_state:
            st.session_state[key] = value
            undrawn.add(key)


def area_drawn(area: str) -> None:
    """Before the open ``area`` is drawn, when the browser last drew another: write the values given back
    to hidden widgets again. Streamlit sends a widget's value to the browser only when written in the run
    that draws it (the batch's sort showed "reward" while the page sorted by KL); hidden, no input to them
    can be on its way."""
    if st.session_state.get(_DRAWN_AREA) != area:
        for key in st.session_state.pop(_UNDRAWN, set()):
            if key in st.session_state:
                try:
                    st.session_state[key] = st.session_state[key]
                except StreamlitAPIException:  # drawn already in this run (the sidebar's): the browser has it
                    pass
    st.session_state[_DRAWN_AREA] = area


def remember_widgets() -> None:
    """At the end of a run (however it ends): the values of the widgets (``keys``), for ``restore_widgets``."""
    st.session_state[KEPT] = {key: st.session_state[key] for key in _widget_keys() if key in st.session_state}
