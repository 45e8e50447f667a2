"""RL Logging Board: page configuration, the sidebar, and the views in order. No logic here."""

import streamlit as st

from rl_board.loader import RootError
from rl_board.views import batch, curves, report, sample, sidebar, state, tokens

st.set_page_config(page_title="RL Logging Board", layout="wide")
st.title("RL Logging Board")

settings = sidebar.render()
if settings.load and settings.run_dir:
    state.set_loaded_run_dir(settings.run_dir)
run_dir = state.loaded_run_dir()
if run_dir is None or run_dir != settings.run_dir:
    st.info("Pick a run in the sidebar and press **Load**.")
    st.stop()

try:
    run = state.get_run(run_dir, settings.pad_token, settings.max_per_step, refresh=settings.load)
except RootError as exc:  # the folder went away since it was picked
    st.error("Can't read this run.")
    st.text(str(exc))
    st.stop()
if settings.auto_refresh_seconds:
    state.follow(run_dir, settings.pad_token, settings.max_per_step, settings.auto_refresh_seconds)
report.render(run)
if not run.report.lines_ok:
    st.stop()

if settings.show_charts:
    curves.render(run, settings)
st.subheader("Batch")
step = batch.render_step_picker(run)
ordered, order, clicked = batch.render(run, step, settings)
chosen = batch.render_sample_picker(ordered, order, clicked)
if settings.show_pair:
    st.subheader("Sample")
    sample.render(run, ordered.loc[chosen], step, settings)
if settings.show_heatmap:
    st.subheader("Tokens")
    tokens.render(run, chosen, settings)
