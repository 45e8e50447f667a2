"""The whole page: configuration, the sidebar and every view in order. No logic here.

``rl-board serve`` runs this file as the Streamlit script; the repository's ``app.py``
calls ``render_page`` so ``streamlit run app.py`` draws the same page.
"""

import streamlit as st

from rl_board import workers
from rl_board.access import check_roots
from rl_board.loader import RootError, TokenizerError
from rl_board.text import escape_markdown
from rl_board import fields as F
from rl_board.views import (batch, curves, drivers, explore, keys, links, positions, report, sample, sidebar, state,
                            tokens, trainer, turns)
from rl_board.views import findings, prompts, tags


def render_page() -> None:
    st.set_page_config(page_title="RL Logging Board", layout="wide")
    st.title("RL Logging Board")
    try:
        check_roots()
    except RootError as exc:  # a blank or unusable RL_BOARD_ROOTS: refuse everything, never allow all
        st.error("The board is misconfigured: no folder can be opened.")
        st.text(str(exc))
        return

    workers.warm_up()  # parsing workers ready before Load is pressed (a no-op while they run)
    links.read()
    settings = sidebar.render()
    links.autoload(settings.run_dir, settings.fields)
    if settings.load and settings.run_dir and settings.fields is not None:
        state.set_loaded_run(settings.run_dir, settings.fields)
    loaded = state.loaded_run()
    if loaded is None:
        links.show_notes()
        st.info("Pick a run in the sidebar and press **Load**.")
        return
    run_dir, fields = loaded
    if settings.run_dir != run_dir:  # the sidebar is being edited: the loaded run stays until Load
        st.caption(f"Showing {escape_markdown(run_dir)}. Press Load to open the run picked in the sidebar.")

    if st.sidebar.button("Clear this run's cache", key="clear_cache",
                         help="Delete the parsed rows the board keeps for this run (never your logs); the "
                              "next read parses its files again."):
        state.clear_run_cache(run_dir, settings, fields)
    try:
        run = state.get_run(run_dir, settings, fields, refresh=settings.load)
    except RootError as exc:  # the folder went away since it was picked
        st.error("Can't read this run.")
        st.text(str(exc))
        return
    except TokenizerError as exc:  # the tokenizer typed in the sidebar can't be used
        st.error("Can't use this tokenizer.")
        st.text(str(exc))
        return
    if settings.auto_refresh_seconds:
        state.follow(run_dir, settings, fields)
    if run.splits:
        st.selectbox("Split", run.splits, index=run.splits.index(run.split), key=keys.SPLIT,
                     help="The part of the run to read: its format keeps train and eval rollouts apart.")
    report.render(run)
    if not run.report.lines_ok:
        return

    links.apply(run)
    links.show_notes()
    findings_panel = st.container()  # at the top, filled last: the checks run while the rest draws
    state.start_findings(run)
    if settings.show_charts:
        curves.render(run, settings)
        st.subheader("Trainer metrics")
        trainer.render(run, settings)
    st.subheader("Explore")
    explore.render(run, settings)
    tags.render_list(run, settings)
    st.subheader("Batch")
    _step_views(run, settings)
    with findings_panel:
        findings.render(run)


@st.fragment
def _step_views(run, settings) -> None:
    """Everything that depends on the chosen step and sample. A fragment: moving the step, sorting or
    picking a sample reruns only this part, so the curves above are neither rebuilt nor redrawn."""
    if note := state.step_note():
        st.info(note)
    step = batch.render_step_picker(run)
    ordered, order, clicked = batch.render(run, step, settings)
    drivers.render(run, step, ordered, settings)
    positions.render(run, step, ordered, settings)
    chosen = batch.render_sample_picker(ordered, order, clicked, settings.kl_estimator)
    record = state.get_record(run, chosen) if settings.show_pair or settings.show_heatmap else None
    if isinstance(record, Exception):
        st.warning("Can't read this sample again: its file changed or went away. Press Refresh.")
        st.text(str(record))
        record = None
    if settings.show_pair:
        st.subheader("Sample")
        if record is not None and record[0].get(F.MESSAGES):
            turns.render(ordered.loc[chosen], record, settings, run.options.tokenizer)
        else:
            sample.render(run, ordered.loc[chosen], step, settings, record)
        tags.render_editor(run, chosen)
        prompts.render(run, chosen, settings)
    if settings.show_heatmap and record is not None:
        st.subheader("Tokens")
        tokens.render(record[0], settings, run.options.tokenizer)
    links.write(settings.root, run, step, chosen)


if __name__ == "__main__":  # run as the script of ``streamlit run``
    render_page()
