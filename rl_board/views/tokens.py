"""The chosen sample token by token: a table and a heatmap scaled per row."""

from __future__ import annotations

import streamlit as st

from ..figures import MAX_HEATMAP_TOKENS, build_token_heatmap_figure
from ..metrics import compute_sample_tokens
from ..tables import TOKEN_METRICS, compute_token_table
from . import keys
from .sidebar import Settings


def render(record: dict, settings: Settings) -> None:
    """Draw one sample's tokens; ``record`` is its canonical record (``Run.record``)."""
    sample = compute_sample_tokens(record, settings.pad_token, settings.eos_token)
    if not len(sample.tokens):
        st.info("This sample has no per-token lists (a response-level log).")
        return
    if sample.lengths_differ:
        st.warning("Per-token list lengths disagree: " +
                   ", ".join(f"{k} {v}" for k, v in sample.lengths.items()) +
                   f". Showing the first {len(sample.tokens)} positions.")
    table = compute_token_table(sample, settings.kl_estimator, drop_pad=settings.pad_token is not None)
    available = [m for m in TOKEN_METRICS if table[m].notna().any()]
    chosen = st.multiselect("Token metrics", TOKEN_METRICS, default=available, key=keys.TOKEN_METRICS)
    shown = [m for m in chosen if m in available]
    st.dataframe(table[["token", *shown]], key="token_table")
    if shown:
        if len(table) > MAX_HEATMAP_TOKENS:
            st.caption(f"The heatmap shows the first {MAX_HEATMAP_TOKENS} of {len(table)} tokens; the table has all.")
        st.plotly_chart(build_token_heatmap_figure(table, shown), key="token_heatmap")
