"""The chosen sample beside the reference: prompt, response, ref response, reward gap, lengths,
and the fields of its source the board has no place for (extras, text fields shown whole, other values)."""

from __future__ import annotations

import json
import math

import pandas as pd
import streamlit as st

from ..analysis.figures import build_prompt_history_figure
from ..analysis.run import Run
from ..analysis.tables import (
    build_batch_table,
    cut_cells,
    length_change,
    prompt_history,
    strip_pad,
    strip_system_prompt,
)
from ..analysis.transcript import reward_parts
from ..base import fields as F
from ..base.text import cut_text, escape_markdown
from . import keys
from .sidebar import Settings

TEXT_FIELD_HEIGHT = 400  # pixels of the scrolling box a long text field is shown in, whole
TEXT_FIELD_BOX_CHARS, TEXT_FIELD_BOX_LINES = 2_000, 20  # a text field longer than either is shown in that box


def _text(label: str, value) -> None:
    """Model output as plain text: never Markdown, never HTML; a long text is cut, the whole of it
    one click away."""
    st.caption(escape_markdown(label))
    if not isinstance(value, str):
        st.code("(none)", language=None, wrap_lines=True)
        return
    shown, cut = cut_text(value)
    st.code(shown, language=None, wrap_lines=True)
    if cut:
        st.caption(f"Showing the first {len(shown):,} of {len(value):,} characters.")
        st.download_button("Download the whole text", value.encode(), file_name="text.txt", mime="text/plain",
                           key=f"whole-{label}", on_click="ignore")


def show_text_field(label: str, value: str) -> None:
    """A text field of the source (a judge's rationale) as plain text, never cut: a long one (over
    ``TEXT_FIELD_BOX_CHARS`` characters or ``TEXT_FIELD_BOX_LINES`` lines) whole in a box of ``TEXT_FIELD_HEIGHT``
    pixels that scrolls, a short one as it is."""
    st.caption(escape_markdown(label))
    if len(value) <= TEXT_FIELD_BOX_CHARS and value.count("\n") < TEXT_FIELD_BOX_LINES:
        st.code(value, language=None, wrap_lines=True)
        return
    with st.container(height=TEXT_FIELD_HEIGHT):
        st.code(value, language=None, wrap_lines=True)


def _known(value) -> bool:
    return not (value is None or (isinstance(value, float) and math.isnan(value)))


def _number(value) -> str:
    return f"{value:.4g}" if _known(value) else "–"


def render(run: Run, row, step: int, settings: Settings, record: tuple[dict, dict] | None) -> None:
    """Draw one sample: ``row`` is its row of the step's samples, texts included; ``record`` its
    (canonical, other fields) from the source, when it could be read."""
    _text("Prompt", strip_pad(strip_system_prompt(row["prompt"], settings.system_marker), settings.pad_token))
    has_ref = settings.show_comparison and isinstance(row["ref_response"], str)
    columns = st.columns(2 if has_ref else 1)
    with columns[0]:
        _text(f"Response · reward {_number(row['reward'])}", strip_pad(row["response"], settings.pad_token))
    if has_ref:
        with columns[1]:
            _text(f"Reference response · ref reward {_number(row['ref_reward'])}",
                  strip_pad(row["ref_response"], settings.pad_token))
    shown = []  # only the numbers this sample and run have: no "–" for what was never logged
    if settings.show_comparison and _known(row["reward_gap"]):
        shown.append(("Reward gap (reward − ref)", _number(row["reward_gap"]), None))
    lengths = [("Step mean response length (tokens)", "response_len_mean"),
               ("Step mean response length (chars)", "response_chars_mean")]
    if settings.show_comparison:
        lengths.append(("Step mean ref response length (chars)", "ref_response_chars_mean"))
    for label, name in lengths:
        now, delta = length_change(run.steps, step, name)
        if _known(now):
            shown.append((label, _number(now), None if math.isnan(delta) else f"{delta:+.3g} vs previous step"))
    for column, (label, value, delta) in zip(st.columns(4), shown):
        # a shorter response is neither good nor bad: the change is not coloured
        column.metric(label, value, delta, delta_color="off")
    parts = reward_parts(row)
    if parts:
        st.caption("Reward components of this sample (weight: as the trainer logged it)")
        st.dataframe(pd.DataFrame(parts, columns=["component", "value", "weight"]), hide_index=True,
                     key="reward_parts")  # names shown as text
    extras = {F.extra_name(c): row[c] for c in F.extra_columns(row.index) if row[c] == row[c]}
    if extras:
        st.caption("Extra fields of this sample")
        st.dataframe(pd.DataFrame([extras]), hide_index=True)  # column names are shown as text
    others = {k: v for k, v in (record[1] if record else {}).items() if not isinstance(v, (int, float))}
    for name, value in others.items():
        if isinstance(value, str):  # a text field (a judge's rationale): whole, in a scrolling box
            show_text_field(name, value)
        else:
            _text(name, json.dumps(value, ensure_ascii=False, default=str))

    if st.toggle("This prompt over training", key=keys.SHOW_HISTORY,
                 help="Every sample with the same prompt text (pads removed), at every step."):
        history = prompt_history(run._samples, row.name)
        if history.empty:
            st.info("This sample has no prompt.")
            return
        st.caption(f"{len(history)} samples in {history['step'].nunique()} steps share this prompt.")
        st.plotly_chart(build_prompt_history_figure(history), key="prompt_history_curve")
        texts = run.with_text(history)
        table = build_batch_table(texts, settings.system_marker, settings.pad_token, settings.kl_estimator)
        table.insert(0, "step", texts["step"])
        st.dataframe(cut_cells(table.drop(columns=["prompt"], errors="ignore")), hide_index=True,
                     key="prompt_history_table")
