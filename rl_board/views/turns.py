"""The turn view: an agent sample's conversation as a transcript (``transcript.build_transcript``).

Every text from disk is shown with ``st.code`` (literal text, never HTML or Markdown); labels
are escaped. The reward and its components come first; reasoning and long tool results are
folded."""

from __future__ import annotations

import json
import math

import pandas as pd
import streamlit as st

from .. import fields as F
from ..transcript import build_transcript, reward_components
from ..text import escape_markdown


def _number(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def render(row, record: tuple[dict, dict]) -> None:
    """Draw the conversation of one sample: ``row`` its row of the step's samples, ``record`` its
    (canonical, other fields) read from the source."""
    canonical, others = record
    blocks = build_transcript(canonical.get(F.MESSAGES) or [])
    components = reward_components(row)
    columns = st.columns(min(1 + len(components), 6))
    columns[0].metric("Reward", _number(row[F.REWARD]))
    for column, (name, value) in zip(columns[1:], components.items()):
        column.metric(escape_markdown(name), _number(value))
    turns, calls = row.get(F.extra_column(F.NUM_TURNS)), row.get(F.extra_column(F.NUM_TOOL_CALLS))
    st.caption(f"{len(blocks)} turns · {_number(turns)} assistant turns · {_number(calls)} tool calls. "
               "Turns marked trained are the policy's own tokens.")
    for block in blocks:
        with st.container(border=True, key=f"turn-{block.number}"):
            st.caption(f"{block.number}. " + escape_markdown(block.label))
            if block.reasoning:
                with st.expander("Reasoning"):
                    st.code(block.reasoning, language=None, wrap_lines=True)
            if block.fold:
                with st.expander(f"Tool result ({block.chars:,} characters)"):
                    st.code(block.content, language=None, wrap_lines=True)
            elif block.content or not block.tool_calls:
                st.code(block.content if block.content else "(empty)", language=None, wrap_lines=True)
            if block.cut:
                st.caption(f"Showing the first {len(block.content):,} of {block.chars:,} characters.")
            for call in block.tool_calls:
                st.caption("→ " + escape_markdown(call.name) + (f" (call {escape_markdown(call.call_id)})"
                                                               if call.call_id else ""))
                st.code(call.arguments or "(no arguments)", language="json", wrap_lines=True)
    extras = {F.extra_name(c): row[c] for c in F.extra_columns(row.index)
              if row[c] == row[c] and not F.extra_name(c).startswith(("reward/", "rewards/"))}
    if extras:
        st.caption("Extra fields of this sample")
        st.dataframe(pd.DataFrame([extras]), hide_index=True)
    shown = {k: v for k, v in others.items() if not isinstance(v, (int, float))}
    if shown:
        with st.expander("Other fields of this sample"):
            st.code(json.dumps(shown, ensure_ascii=False, indent=2, default=str), language="json", wrap_lines=True)
