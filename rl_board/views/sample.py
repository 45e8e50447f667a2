"""The chosen sample beside the reference: prompt, response, ref response, reward gap, lengths."""

from __future__ import annotations

import math

import streamlit as st

from ..loader import Run
from ..tables import length_change, strip_pad, strip_system_prompt
from .sidebar import Settings


def _text(label: str, value) -> None:
    """Model output as plain text: never Markdown, never HTML."""
    st.caption(label)
    st.code(value if isinstance(value, str) else "(none)", language=None, wrap_lines=True)


def _number(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def render(run: Run, row, step: int, settings: Settings) -> None:
    """Draw one sample: ``row`` is its row of the step's samples, texts included."""
    _text("Prompt", strip_system_prompt(row["prompt"], settings.system_marker))
    has_ref = settings.show_comparison and isinstance(row["ref_response"], str)
    columns = st.columns(2 if has_ref else 1)
    with columns[0]:
        _text(f"Response · reward {_number(row['reward'])}", strip_pad(row["response"], settings.pad_token))
    if has_ref:
        with columns[1]:
            _text(f"Reference response · ref reward {_number(row['ref_reward'])}",
                  strip_pad(row["ref_response"], settings.pad_token))
    metrics = st.columns(4)
    metrics[0].metric("Reward gap (reward − ref)", _number(row["reward_gap"]))
    tokens, tokens_delta = length_change(run.steps, step, "response_len_mean")
    metrics[1].metric("Step mean response length (tokens)", _number(tokens),
                      None if math.isnan(tokens_delta) else f"{tokens_delta:+.3g} vs previous step")
    chars, chars_delta = length_change(run.steps, step, "response_chars_mean")
    metrics[2].metric("Step mean response length (chars)", _number(chars),
                      None if math.isnan(chars_delta) else f"{chars_delta:+.3g} vs previous step")
    if settings.show_comparison:
        ref, ref_delta = length_change(run.steps, step, "ref_response_chars_mean")
        metrics[3].metric("Step mean ref response length (chars)", _number(ref),
                          None if math.isnan(ref_delta) else f"{ref_delta:+.3g} vs previous step")
