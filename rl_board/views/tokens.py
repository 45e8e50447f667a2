"""The chosen sample token by token: its text coloured by a metric, a table and a heatmap."""

from __future__ import annotations

import streamlit as st

from ..analysis.figures import MAX_HEATMAP_TOKENS, build_token_heatmap_figure
from ..analysis.provider import SampleTokens, TokenizerError, compute_sample_tokens, load_tokenizer
from ..analysis.tables import TOKEN_METRIC_LABELS, TOKEN_METRICS, compute_token_table, default_heatmap_rows
from ..base.colors import build_token_text_html, metric_scale, visible_token
from . import keys, state
from .sidebar import Settings

HEATMAP_RANGE = 64  # positions the heatmap draws at first; a longer response gets a range slider


def _label(metric: str) -> str:
    return TOKEN_METRIC_LABELS.get(metric, metric)


def sample_tokens(record: dict, settings: Settings, tokenizer_path: str | None) -> tuple[SampleTokens, bool]:
    """(one sample's tokens and per-token numbers (``metrics.compute_sample_tokens``), its token ids
    decoded with the tokenizer at ``tokenizer_path`` (the run's); whether the tokens are ids no
    tokenizer decoded). A warning when the tokenizer can't be used now."""
    try:
        tokenizer = load_tokenizer(tokenizer_path)
    except TokenizerError as exc:  # the file changed since the run was read
        st.warning(str(exc))
        tokenizer = None
    sample = compute_sample_tokens(record, settings.pad_token, settings.eos_token, tokenizer)
    return sample, sample.from_ids and tokenizer is None


def render(record: dict, settings: Settings, tokenizer_path: str | None = None) -> None:
    """Draw one sample's tokens; ``record`` is its canonical record (``Run.record_parts``), its token ids
    decoded with the tokenizer at ``tokenizer_path`` (the run's)."""
    sample, _ = sample_tokens(record, settings, tokenizer_path)
    if not len(sample.tokens):
        st.info("This sample has no per-token lists (a response-level log).")
        return
    if sample.lengths_differ:
        st.warning("Per-token list lengths disagree: " +
                   ", ".join(f"{k} {v}" for k, v in sample.lengths.items()) +
                   f". Showing the first {len(sample.tokens)} positions.")
    gamma, lam = 1.0, 0.95
    if (sample.values == sample.values).any():  # a critic: GAE controls
        left, right = st.columns(2)
        gamma = left.number_input("γ (discount of GAE and of the return-to-go)", 0.0, 1.0, 1.0, 0.01,
                                  key=keys.GAMMA)
        lam = right.number_input("GAE λ", 0.0, 1.0, 0.95, 0.01, key=keys.LAMBDA)
    table = compute_token_table(sample, settings.kl_estimator, drop_pad=settings.pad_token is not None,
                                gamma=gamma, lam=lam)
    available = [m for m in TOKEN_METRICS if table[m].notna().any()]
    if not available:  # token ids without any per-token number: the tokens alone
        st.info("This sample logs its tokens but no per-token numbers (log-probs, KL, values, advantages).")
        st.dataframe(table[["token"]].assign(token=table["token"].map(visible_token)), key="token_table")
        return
    state.run_choice(keys.COLOR_BY, available, "kl" if "kl" in available else available[0])
    color_by = st.selectbox("Colour the response by", available, key=keys.COLOR_BY, format_func=_label)
    values = table[color_by].to_numpy(dtype=float)
    counted = table["counted"].to_numpy(dtype=bool)
    if sample.has_mask:
        st.caption("Positions the loss mask leaves out (the prompt, tool results) are dimmed; the colours are "
                   "scaled over the trained ones.")
    st.html(build_token_text_html(table["token"].tolist(), values, color_by,
                                  metric_scale(color_by, values[counted], settings.kl_estimator),
                                  dimmed=~counted if sample.has_mask else None))
    st.dataframe(table[["token", *available, *(["counted"] if sample.has_mask else [])]]
                 .assign(token=table["token"].map(visible_token)), key="token_table")
    state.run_choice(keys.TOKEN_METRICS, list(TOKEN_METRICS), default_heatmap_rows(available))
    chosen = st.multiselect("Heatmap rows", TOKEN_METRICS, key=keys.TOKEN_METRICS, format_func=_label,
                            help="The metrics drawn in the heatmap, one row each; the table above has them all.")
    shown = [m for m in chosen if m in available]
    if shown:
        drawn = table
        if len(table) > HEATMAP_RANGE:  # a long response: the heatmap draws a range of positions
            last = len(table) - 1
            kept = st.session_state.get(keys.TOKEN_RANGE)
            if not (isinstance(kept, (tuple, list)) and len(kept) == 2 and 0 <= kept[0] <= kept[1] <= last):
                st.session_state[keys.TOKEN_RANGE] = (0, HEATMAP_RANGE - 1)  # a new, shorter sample: start over
            first, end = st.slider("Heatmap positions", 0, last, key=keys.TOKEN_RANGE,
                                   help=f"Token positions drawn (at most {MAX_HEATMAP_TOKENS}); the table above "
                                        "has them all.")
            end = min(end, first + MAX_HEATMAP_TOKENS - 1)
            drawn = table.iloc[first:end + 1]
            st.caption(f"The heatmap shows positions {table.index[first]}–{table.index[end]} of "
                       f"{len(table)}; move the range to see others.")
        st.plotly_chart(build_token_heatmap_figure(drawn, shown, settings.kl_estimator), key="token_heatmap")
