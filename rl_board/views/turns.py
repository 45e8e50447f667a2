"""The turn view: an agent sample's conversation as a transcript (``transcript.build_transcript``): a
failing turn is marked with its fault and why, and what the trainer logged about each turn is shown
under its label.

Every text from disk is shown with ``st.code`` (literal text, never HTML or Markdown); labels
are escaped. The reward and its components come first; reasoning and long tool results are
folded. When the sample has per-token lists and its turns say where their tokens lie, each
trained turn's tokens are drawn coloured by a metric (``transcript.build_turn_tokens``: every
token escaped), decoded with the run's tokenizer."""

from __future__ import annotations

import json
import math

import pandas as pd
import streamlit as st

from ..analysis.tables import TOKEN_METRIC_LABELS, compute_token_table
from ..analysis.transcript import (
    TurnTokens,
    build_transcript,
    build_turn_tokens,
    count_turns,
    reward_parts,
    turn_metrics,
    turn_spans,
)
from ..base import fields as F
from ..base.text import escape_markdown
from . import keys, state
from .sample import show_text_field
from .tokens import sample_tokens


def _number(value) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def _turn_tokens(canonical: dict, settings, tokenizer_path: str | None) -> TurnTokens | None:
    """The coloured tokens of the sample's trained turns, with the metric picker; None when the sample
    has no per-token lists with a loss mask, or its turns don't say where their tokens lie."""
    messages = canonical.get(F.MESSAGES) or []
    if settings is None or turn_spans(messages, 0) is None or not isinstance(canonical.get(F.LOSS_MASK), list):
        return None
    sample, undecoded = sample_tokens(canonical, settings, tokenizer_path)
    if not len(sample.tokens) or not sample.has_mask:
        return None
    table = compute_token_table(sample, settings.kl_estimator)
    metrics = turn_metrics(table)
    if not metrics:
        return None
    metric = st.selectbox("Colour the trained turns' tokens by", metrics, key=keys.TURN_COLOR_BY,
                          format_func=lambda m: TOKEN_METRIC_LABELS.get(m, m),
                          index=metrics.index("kl") if "kl" in metrics else 0)
    got = build_turn_tokens(messages, table, metric, settings.kl_estimator)
    st.caption("Each trained turn's tokens, coloured on one scale over the sample's trained tokens; "
               "the template's tokens before a completion are dimmed (not trained)."
               + (" Token ids are shown as #ID (see the load report)." if undecoded else ""))
    st.html(got.legend)
    return got


def image_caption(image: dict) -> str:
    """What is known of an image, as plain text: mime, width × height, bytes; or why it isn't shown."""
    facts = [image["mime"] or "image"]
    if image["width"] is not None:
        facts.append(f"{image['width']} × {image['height']}")
    if image["size"] is not None:
        facts.append(f"{image['size']:,} bytes")
    return " · ".join(facts) + (f" — not shown: {image['note']}" if image["note"] else "")


def render_image(image: dict, key: str) -> None:
    """One image at its place: a thumbnail with its size, the whole image a click away; without bytes,
    why (and its URL or path as text, never fetched)."""
    thumb = state.get_thumbnail(image["data"]) if image["data"] is not None else None
    if thumb is not None:
        png, width = thumb  # drawn at its own width: a small image is not stretched
        st.image(png, output_format="PNG", width=width)
        st.caption(escape_markdown(image_caption(image)))
        with st.popover("View whole", key=f"{key}-whole"):
            st.image(image["data"])
    else:
        st.caption(escape_markdown(image_caption(image) if image["note"] else image_caption(image) + " — can't be decoded"))
    if image["url"] and image["data"] is None:
        st.code(image["url"], language=None, wrap_lines=True)


def _content(block, images: list[dict]) -> None:
    """A turn's content, its images at their places (the texts between them as literal text)."""
    if not block.images:
        st.code(block.content if block.content else "(empty)", language=None, wrap_lines=True)
        return
    for k, piece in enumerate(block.pieces):
        if piece:
            st.code(piece, language=None, wrap_lines=True)
        if k < len(block.images):
            render_image(images[block.images[k]], f"image-{block.number}-{k}")


def render(row, record: tuple[dict, dict], settings=None, tokenizer_path: str | None = None,
           images: list[dict] | None = None) -> None:
    """Draw the conversation of one sample: ``row`` its row of the step's samples, ``record`` its
    (canonical, other fields) read from the source, ``images`` its images (``Run.images_of``), each
    drawn at its place; with ``settings`` (the sidebar's), the trained turns' tokens are coloured,
    decoded with the tokenizer at ``tokenizer_path`` (the run's)."""
    canonical, others = record
    images = images or []
    blocks = build_transcript(canonical.get(F.MESSAGES) or [], images)
    components = reward_parts(row)
    columns = st.columns(min(1 + len(components), 6))
    columns[0].metric("Reward", _number(row[F.REWARD]))
    for column, (name, value, weight) in zip(columns[1:], components):
        shown = name if weight is None else f"{name} · weight {_number(weight)}"
        column.metric(escape_markdown(shown), _number(value))
    turns, calls = count_turns(canonical.get(F.MESSAGES) or [])  # the conversation drawn, whatever its format
    shown = f" · {len(images)} image{'' if len(images) == 1 else 's'}" if images else ""
    st.caption(f"{len(blocks)} turns · {turns} assistant turn{'' if turns == 1 else 's'} · "
               f"{calls} tool call{'' if calls == 1 else 's'}{shown}. "
               "Turns marked trained are the policy's own tokens.")
    coloured = _turn_tokens(canonical, settings, tokenizer_path)
    for block in blocks:
        with st.container(border=True, key=f"turn-{block.number}"):
            st.caption(f"{block.number}. " + escape_markdown(block.label))
            for why in block.faults:
                st.error(escape_markdown(why), icon="⚠️")
            if block.logged:
                st.caption(" · ".join(escape_markdown(f"{name}: {value}") for name, value in block.logged))
            if block.reasoning:
                with st.expander("Reasoning"):
                    st.code(block.reasoning, language=None, wrap_lines=True)
            if block.fold:
                with st.expander(f"Tool result ({block.chars:,} characters)"):
                    _content(block, images)
            elif block.content or not block.tool_calls:
                _content(block, images)
            if block.cut:
                st.caption(f"Showing the first {len(block.content):,} of {block.chars:,} characters.")
            for call in block.tool_calls:
                st.caption("→ " + escape_markdown(call.name) + (f" (call {escape_markdown(call.call_id)})"
                                                               if call.call_id else ""))
                st.code(call.arguments or "(no arguments)", language="json", wrap_lines=True)
            if coloured is not None and block.number in coloured.html:
                st.html(coloured.html[block.number])
    extras = {F.extra_name(c): row[c] for c in F.extra_columns(row.index)
              if row[c] == row[c] and not F.extra_name(c).startswith(("reward/", "rewards/"))}
    if extras:
        st.caption("Extra fields of this sample")
        st.dataframe(pd.DataFrame([extras]), hide_index=True)
    for name, value in others.items():
        if isinstance(value, str):  # a text field (a judge's rationale): whole, in a scrolling box
            show_text_field(name, value)
    shown = {k: v for k, v in others.items() if not isinstance(v, (int, float, str))}
    if shown:
        with st.expander("Other fields of this sample"):
            st.code(json.dumps(shown, ensure_ascii=False, indent=2, default=str), language="json", wrap_lines=True)
