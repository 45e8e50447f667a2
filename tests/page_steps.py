"""What a person does on the page, as the AppTest tests do it: open a root, pick a run, Load, open an area."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO
from streamlit.testing.v1 import AppTest

from rl_board.views import keys

APP = str(REPO / "app.py")


def open_page(root: Path, run: str | None = None, **params) -> AppTest:
    """The page (with ``params`` in its address), ``root`` typed in, ``run`` picked when given."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(params)
    at.run()
    at.sidebar.text_input(key=keys.ROOT).input(str(root)).run()
    if run is not None:
        at.sidebar.selectbox(key=keys.RUN).select(run).run()
    return at


def open_area(at: AppTest, area: str) -> AppTest:
    """Open one of the page's areas (a tab), as a click on its tab does."""
    at.session_state[keys.AREA] = area
    at.run()
    assert not at.exception, at.exception
    return at


def load(at: AppTest, area: str | None = keys.BATCH) -> AppTest:
    """Press Load, then open ``area`` (the batch and sample by default; None: stay)."""
    at.sidebar.button(key=keys.LOAD).click().run()
    assert not at.exception, at.exception
    return open_area(at, area) if area else at


def load_run(root: Path, run: str, area: str = keys.BATCH) -> AppTest:
    """Load ``run`` of ``root`` and open ``area`` (the batch and sample, by default)."""
    return load(open_page(root, run), area)
