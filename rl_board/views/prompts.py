"""The same prompt across steps and runs: every response to the open sample's prompt (or one found by
its text) in this run and in other runs under the root, side by side, each with a word diff against a
chosen response, its reward and KL."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from ..analysis.prompts import (
    build_prompt_runs_figure,
    build_word_diff_html,
    compute_prompt_choices,
    compute_prompt_samples,
    compute_word_diff,
    describe_prompt_sample,
)
from ..analysis.provider import ROOT_RUN, RootError
from ..analysis.run import Run
from ..analysis.tables import cut_cells, strip_pad, strip_system_prompt
from ..base import fields as F
from ..base.location import folder_path
from ..base.text import cut_text, escape_markdown
from . import keys, state
from .sidebar import Settings

MAX_OTHER_RUNS = 3  # runs beside the loaded one: each is a column
SHOWN_PER_RUN = 8  # responses drawn per run until the user asks for more


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _other_runs(run: Run, settings: Settings) -> dict[str, Path]:
    """The runs under the root (as the sidebar lists them) other than ``run``: name -> folder."""
    root = folder_path(settings.root)
    here = run.path.resolve()
    folders = {name: root if name == ROOT_RUN else root / name for name in settings.runs}
    return {name: folder for name, folder in folders.items() if folder.resolve() != here}


def _pick_prompt(run: Run, label, settings: Settings):
    """(the prompt key, its text) the user wants: the open sample's, or one found by a regular
    expression; None when there is none (the reason shown)."""
    pattern = st.text_input("Another prompt: a regular expression over this run's prompts, or a prompt key "
                            "(empty: the open sample's prompt)", key=keys.PROMPT_FIND, placeholder="(?i)colour")
    if not pattern:
        key = run._samples.at[label, "prompt_key"]
        if pd.isna(key):
            st.info("This sample has no prompt.")
            return None
        return key, run.with_text(run._samples.loc[[label]])["prompt"].iloc[0]
    try:
        choices = compute_prompt_choices(run, pattern, settings.pad_token)
    except ValueError as exc:
        st.error("Can't search with this pattern.")
        st.text(str(exc))
        return None
    if choices.attrs.get("note"):
        st.warning(escape_markdown(choices.attrs["note"][0].upper() + choices.attrs["note"][1:] + "."))
    if choices.empty:
        st.info("No prompt of this run matches.")
        return None
    state.keep_choice(keys.PROMPT_PICK, list(choices.index), choices.index[0])
    key = st.selectbox("Prompt", list(choices.index), key=keys.PROMPT_PICK,
                       format_func=lambda k: (f"{cut_text(' '.join(str(choices.at[k, 'prompt']).split()), 90)[0]} · "
                                              f"{choices.at[k, 'samples']} samples in {choices.at[k, 'steps']} steps"))
    return key, choices.at[key, "prompt"]


def render(run: Run, label, settings: Settings) -> None:
    """Draw the responses to the open sample's prompt (``label`` in ``run._samples``) across steps and runs."""
    if not st.toggle("Same prompt across steps and runs (word diff)", key=keys.SHOW_PROMPT_COMPARE,
                     help="Every response to this prompt, in every step of this run and of the runs you pick, "
                          "each with a word diff against the one you choose, its reward and KL."):
        return
    picked = _pick_prompt(run, label, settings)
    if picked is None:
        return
    key, prompt = picked
    st.caption(f"Prompt (key {int(key)}):")
    st.code(cut_text(strip_pad(strip_system_prompt(prompt, settings.system_marker), settings.pad_token) or "")[0],
            language=None, wrap_lines=True)

    others = _other_runs(run, settings)
    runs = {run.path.name: run}
    if others:
        default = [name for name in st.session_state.get(keys.COMPARE_RUNS) or [] if name in others]
        chosen = st.multiselect("Also in runs", list(others), default=default[:MAX_OTHER_RUNS], key=keys.PROMPT_RUNS,
                                max_selections=MAX_OTHER_RUNS,
                                help="Other runs under the root, read with the same settings; the prompt is found "
                                     "by its text (pads removed).")
        for name in chosen:
            try:
                runs[name if name not in runs else f"{name} (2)"] = state.get_run(str(others[name]), settings)
            except RootError as exc:
                st.warning(f"Can't read {escape_markdown(name)}.")
                st.text(str(exc))
    books = {name: state.get_tagged(r) for name, r in runs.items()}
    samples = compute_prompt_samples(runs, key, settings.kl_estimator, settings.pad_token,
                                     {name: book for name, book in books.items() if not isinstance(book, Exception)})
    if samples.empty:
        st.info("No sample has this prompt.")
        return
    ids = [f"{name} · {source}" for name, source in zip(samples["run"], samples["source"])]
    samples.index = ids
    here = run.path.name
    opened = f"{here} · {F.addresses(run.files, run._samples.loc[[label]])[0]}"
    per_run = samples.groupby("run", sort=False)["step"].agg(["size", "nunique"])
    st.caption(", ".join(f"{escape_markdown(name)}: {_count(size, 'response')} in {_count(steps, 'step')}"
                         for name, (size, steps) in per_run.iterrows()))
    st.plotly_chart(build_prompt_runs_figure(samples), key="prompt_runs_curve")

    state.keep_choice(keys.PROMPT_REFERENCE, ids, opened if opened in ids else ids[0])
    names = {i: describe_prompt_sample(samples.loc[i], settings.kl_estimator) for i in ids}
    reference = st.selectbox("Compare every response with", ids, key=keys.PROMPT_REFERENCE,
                             format_func=names.__getitem__,
                             help="Words only in this response are struck through on red, words only in the "
                                  "other on green.")
    steps = sorted(int(s) for s in samples["step"].unique())
    left, right = st.columns([3, 1])
    first, last = steps[0], steps[-1]
    if len(steps) > 1:
        wanted = st.session_state.get(keys.PROMPT_STEPS)
        if not (isinstance(wanted, (tuple, list)) and len(wanted) == 2 and set(wanted) <= set(steps)):
            st.session_state[keys.PROMPT_STEPS] = (first, last)
        first, last = left.select_slider("Steps", steps, key=keys.PROMPT_STEPS)
    shown = int(right.number_input("Responses per run", 1, 500, SHOWN_PER_RUN, key=keys.PROMPT_SHOWN))
    within = samples[(samples["step"] >= first) & (samples["step"] <= last)]

    base = samples.at[reference, "response"]
    present = list(within["run"].unique())
    columns = st.columns(len(present)) if 1 < len(present) <= 1 + MAX_OTHER_RUNS else [st.container()] * len(present)
    for column, name in zip(columns, present):
        rows = within[within["run"] == name]
        with column:
            st.caption(f"**{escape_markdown(name)}**: {min(shown, len(rows))} of {_count(len(rows), 'response')}, in "
                       "step order")
            for i, row in rows.head(shown).iterrows():
                diff = compute_word_diff(base, row["response"])
                head = names[i] + (" · the chosen response" if i == reference else
                                   f" · {diff.similarity:.0%} same words, +{diff.added_words} −{diff.removed_words}")
                st.html(build_word_diff_html(diff, head))
    with st.expander(f"All {len(samples)} responses as a table"):
        table = samples.drop(columns=["label"]).rename(columns={"kl": f"KL mean ({settings.kl_estimator})"})
        st.dataframe(cut_cells(table), hide_index=True, key="prompt_samples_table")


def render_sample(run: Run, picked, settings: Settings) -> None:
    """``render`` for the chosen sample (a view of ``main.SAMPLE_VIEWS``; ``picked``: the batch's choice)."""
    if settings.show_pair:
        render(run, picked.label, settings)
