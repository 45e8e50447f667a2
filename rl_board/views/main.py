"""The whole page: configuration, the sidebar, the load report and the page's areas, one tab each.
No logic here.

``rl-board serve`` runs this file as the Streamlit script; the repository's ``app.py``
calls ``render_page`` so ``streamlit run app.py`` draws the same page.

Adding a view to an area is one line: a view of the whole run goes into ``AREAS`` as
``render(run, settings)``; a view of the chosen sample goes into ``SAMPLE_VIEWS`` as
``render(run, picked, settings)`` (``picked``: a ``Picked``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import pandas as pd
import streamlit as st

from rl_board.analysis.provider import RootError, TokenizerError, workers
from rl_board.base import fields as F
from rl_board.base.access import check_roots
from rl_board.base.defaults import AUTO, setting_problems
from rl_board.base.text import alert_body, escape_markdown
from rl_board.views import (
    batch,
    curves,
    diff,
    drivers,
    explore,
    findings,
    kept,
    keys,
    links,
    positions,
    prompts,
    report,
    runs,
    sample,
    share,
    sidebar,
    state,
    tags,
    tokens,
    trainer,
    turns,
)


class Picked(NamedTuple):
    """The batch area's choice, as the views of one sample get it."""

    step: int
    ordered: pd.DataFrame  # the step's samples (texts included) in the order the user sorted them
    label: object  # the chosen sample's label in ``Run._samples``
    row: pd.Series  # its row of ``ordered``
    record: tuple[dict, dict] | None  # its (canonical record, other fields) read from its source; None if unreadable


def _sample_pair(run, picked: Picked, settings) -> None:
    """The sample beside its reference, or an agent sample's conversation as a transcript."""
    if settings.show_pair:
        st.subheader("Sample")
        if picked.record is not None and picked.record[0].get(F.MESSAGES):
            turns.render(picked.row, picked.record, settings, run.options.tokenizer,
                         state.get_images(run, picked.record))
        else:
            sample.render(run, picked.row, picked.step, settings, picked.record)


def _sample_tokens(run, picked: Picked, settings) -> None:
    if settings.show_heatmap and picked.record is not None:
        st.subheader("Tokens")
        tokens.render(picked.record[0], settings, run.options.tokenizer)


#: The views of the chosen sample, in order below the sample picker: ``render(run, picked, settings)``.
SAMPLE_VIEWS = (_sample_pair, tags.render_sample, _sample_tokens, prompts.render_sample)

_STEP_ANCHOR = "batch_step"  # the containers a click brings into view (CSS class st-key-<key>)
_SAMPLE_ANCHOR = "batch_sample"


@st.fragment
def _batch_area(run, settings) -> None:
    """Everything that depends on the chosen step and sample. A fragment: moving the step, sorting or
    picking a sample reruns only this part, so nothing else is rebuilt or redrawn."""
    scroll = state.scroll_target()
    with st.container(key=_STEP_ANCHOR):
        if note := state.step_note():
            st.info(note)
        step = batch.render_step_picker(run, settings.follow_newest)
    ordered, order = batch.render(run, step, settings)
    drivers.render(run, step, ordered, settings)
    positions.render(run, step, ordered, settings)
    with st.container(key=_SAMPLE_ANCHOR):
        chosen = batch.render_sample_picker(ordered, settings.kl_estimator)
        record = state.get_record(run, chosen)
        if isinstance(record, Exception):
            st.warning("Can't read this sample again: its file changed or went away. Press Refresh.")
            st.text(str(record))
            record = None
        picked = Picked(step, ordered, chosen, ordered.loc[chosen], record)
        for view in SAMPLE_VIEWS:
            view(run, picked, settings)
    links.write(settings, run)
    if scroll:
        _scroll_into_view(_SAMPLE_ANCHOR if scroll == "sample" else _STEP_ANCHOR)


def _overview(run, settings) -> None:
    """The findings panel at the top (filled last: the checks run while the curves draw), then the curves."""
    panel = st.container()
    if settings.show_charts:
        curves.render(run, settings)
    with panel:
        findings.render(run)


#: The page's areas, one tab each, in order: the views each draws, ``render(run, settings)``. Only the open
#: area is drawn.
AREAS = {
    keys.OVERVIEW: (_overview,),
    keys.BATCH: (_batch_area,),
    keys.EXPLORE: (explore.render, tags.render_list),
    keys.TRAINER: (trainer.render,),
    keys.COMPARE: (curves.render_comparison,),
    keys.DIFF: (diff.render,),
}


_SCROLLS = "scrolls"  # how many scrolls were asked for: each script differs, so the browser runs each


def _scroll_into_view(anchor: str) -> None:
    """Bring the container ``anchor`` into view once it is drawn (a script of the board's own, no data)."""
    count = st.session_state[_SCROLLS] = st.session_state.get(_SCROLLS, 0) + 1
    st.html(f"""<script>/* {count} */ (() => {{
      let tries = 0;
      const go = () => {{
        const el = document.querySelector(".st-key-{anchor}");
        if (el && !el.closest('[data-stale="true"]')) {{
          el.style.scrollMarginTop = "4rem";  /* below the page's header bar */
          el.scrollIntoView({{block: "start"}});
        }} else if (++tries < 100) {{
          setTimeout(go, 50);
        }}
      }};
      go();
    }})();</script>""", unsafe_allow_javascript=True)


def render_page() -> None:
    st.set_page_config(page_title="RL Logging Board", layout="wide")
    st.title("RL Logging Board")
    try:
        check_roots()
    except RootError as exc:  # a blank or unusable RL_BOARD_ROOTS: refuse everything, never allow all
        st.error("The board is misconfigured: no folder can be opened.")
        st.text(str(exc))
        return
    bad, capped = setting_problems()
    if bad:  # a bound that can't be used: refuse, never read with one the admin did not mean
        st.error("The board is misconfigured: a setting of its environment can't be used.")
        st.text("\n".join(bad))
        return
    for line in capped:
        st.caption(escape_markdown(line))
    kept.restore_widgets()  # the choices in areas not drawn last time (only the open area is drawn)
    try:
        workers.warm_up()  # parsing workers ready before Load is pressed (a no-op while they run)
        links.read()
        _render(sidebar.render())
    finally:
        kept.remember_widgets()


def _render(settings) -> None:
    links.autoload(settings.run_dir, settings.fields)
    if settings.load and settings.run_dir and settings.fields is not None:
        state.set_loaded_run(settings.run_dir, settings.fields)
    loaded = state.loaded_run()
    if loaded is None:
        links.show_notes()
        runs.render(settings)
        return
    run_dir, fields = loaded
    settings, unusable = state.usable_tokenizer(settings)
    if unusable:  # the run still opens: its token ids are decoded with the tokenizer found next to it, or shown as #ID
        st.warning(alert_body("Can't use this tokenizer: the run is read without it (with the one found next to "
                              "the run, if any; token ids are shown as #ID otherwise).", unusable))
    if settings.run_dir != run_dir:  # the sidebar is being edited: the loaded run stays until Load
        st.caption(f"Showing {escape_markdown(run_dir)}. Press Load to open the run picked in the sidebar.")

    if st.sidebar.button("Clear this run's cache", key="clear_cache",
                         help="Delete the parsed rows the board keeps for this run (never your logs); the "
                              "next read parses its files again."):
        state.clear_run_cache(run_dir, settings, fields)
    try:
        run = state.get_run(run_dir, settings, fields, refresh=settings.load)
    except RootError as exc:  # the folder went away since it was picked
        st.error(alert_body("Can't read this run.", str(exc)))
        return
    except TokenizerError as exc:  # the tokenizer typed in the sidebar can't be used
        st.error(alert_body("Can't use this tokenizer.", str(exc)))
        return
    if settings.auto_refresh_seconds:
        state.follow(run_dir, settings, fields)
    if AUTO in (settings.pad_token, settings.eos_token):  # the tokens the run was read with, not the word
        st.sidebar.caption(escape_markdown(f"auto: pad {run.options.pad_token or 'none'}, EOS "
                                           f"{run.options.eos_token or 'none'} (the run's tokenizer_config.json, "
                                           "else the default)"))
    settings = replace(settings, pad_token=run.options.pad_token, eos_token=run.options.eos_token)
    if run.splits:
        st.selectbox("Split", run.splits, index=run.splits.index(run.split), key=keys.SPLIT,
                     help="The part of the run to read: its format keeps train and eval rollouts apart.")
    report.render(run)
    if not run.report.lines_ok:
        return
    state.start_findings(run)  # in a thread of its own: the checks run while the page draws (and reruns)
    if state.note_traits(run):  # the sidebar was drawn for another run: draw it again for this one
        st.rerun()
    share.render(run, settings)

    links.apply(run)
    links.diff_run_not_found(settings.runs)
    links.show_notes()
    state.open_requested_area()
    kept.area_drawn(st.session_state.get(keys.AREA, next(iter(AREAS))))
    tabs = st.tabs(list(AREAS), key=keys.AREA, on_change="rerun")
    for tab, views in zip(tabs, AREAS.values()):
        if tab.open:
            with tab:
                for view in views:
                    view(run, settings)
    links.write(settings, run)
    if state.area_requested():  # a click in this area opens another: draw the page again with it open
        st.rerun()


if __name__ == "__main__":  # run as the script of ``streamlit run``
    render_page()
