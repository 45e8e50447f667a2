"""The Diff area: the loaded run (A) against a run under the root (B, the loaded run itself for early
against late steps), prompt by prompt; regressions and improvements as tables, the unchanged folded, and
a clicked prompt's samples of both sides side by side with a word diff, each opening in the Batch area
(a sample of another run B loads that run first)."""

from __future__ import annotations

import streamlit as st

from ..analysis.diff import (
    FAR_STEPS,
    early_and_late_steps,
    no_match_reason,
    prompt_keys_of,
    split_diff_table,
)
from ..analysis.marks import compute_finding_marks
from ..analysis.prompts import build_word_diff_html, compute_prompt_samples, compute_word_diff, describe_prompt_sample
from ..analysis.provider import ROOT_RUN, RootError
from ..analysis.run import Run
from ..analysis.search import parse_steps
from ..analysis.tables import cut_cells, strip_pad
from ..base.location import folder_path
from ..base.text import cut_text, escape_markdown
from . import background, clicks, keys, links, state
from .sidebar import Settings

SHOWN_PER_SIDE = 8  # samples of the opened prompt drawn per side
_TITLES = {"regressions": "Worse in B (most negative first)", "improvements": "Better in B (most positive first)"}


def _runs(run: Run, settings: Settings) -> tuple[dict, str]:
    """(the runs B may be: name -> folder, the loaded run's name among them)."""
    root = folder_path(settings.root)
    folders = {name: root if name == ROOT_RUN else root / name for name in settings.runs}
    here = run.path.resolve()
    name = next((n for n, folder in folders.items() if folder.resolve() == here), None)
    if name is None:
        name = str(run.path)
        folders = {name: run.path, **folders}
    return folders, name


def _number(value) -> str:
    return f"{value:.4g}" if value == value else "–"  # NaN: no reward on that side


def _signed(value) -> str:
    return f"{value:+.3g}" if value == value else "no reward"


def _steps(text: str, label: str):
    """Typed steps ``A:B`` as (first, last); every step when empty; None (a message shown) when unreadable."""
    if not text.strip():
        return None, None
    try:
        return parse_steps(text)
    except ValueError as exc:
        st.warning(f"{label}: {exc}")
        return None


def render(run: Run, settings: Settings) -> None:
    folders, here = _runs(run, settings)
    names = list(folders)
    state.keep_choice(keys.DIFF_RUN, names, here)
    left, middle, right = st.columns([2, 1, 1])
    other = left.selectbox("Run B (A is the loaded run)", names, key=keys.DIFF_RUN,
                           help="Any run under the root, read with the same settings; the loaded run itself "
                                "to compare its early steps with its late ones.")
    steps_a = _steps(middle.text_input("A's steps", key=keys.DIFF_STEPS, placeholder="all (or 1:10)"), "A's steps")
    steps_b = _steps(right.text_input("B's steps", key=keys.DIFF_STEPS_B, placeholder="all (or 90:100)"),
                     "B's steps")
    if steps_a is None or steps_b is None:
        return
    if other == here and steps_a == (None, None) and steps_b == (None, None):  # B = A over every step: a no-op
        default = early_and_late_steps(run.steps.index)
        if default is None:
            st.info("Run B is the loaded run, which has one step: pick another run B to compare with.")
            return
        steps_a, steps_b = default
        st.caption(f"Run B is the loaded run: its early steps {steps_a[0]}:{steps_a[1]} (A) against its late "
                   f"steps {steps_b[0]}:{steps_b[1]} (B). Pick another run B or type steps to change that.")
    if other == here:
        run_b = run
    else:
        try:
            run_b = state.get_run(str(folders[other]), settings)
        except (RootError, OSError) as exc:
            st.warning(f"Can't read {escape_markdown(other)}.")
            st.text(str(exc))
            return
    diff = state.get_diff(run, run_b, steps_a, steps_b)
    marks, unmarked = _marks(diff, run_b)
    tables = split_diff_table(diff, marks)
    on = ("the user content of their chat template (pads removed)" if diff.prompt_match == "user content"
          else "their text with pads removed")
    st.caption(f"{diff.matched:,} prompts in both, {diff.only_a:,} only in A, {diff.only_b:,} only in B: "
               f"{len(tables['regressions']):,} worse in B, {len(tables['improvements']):,} better, "
               f"{len(tables['unchanged']):,} unchanged. Prompts are matched by {on}; "
               "delta = B's mean reward − A's; steps apart = B's mean step of the prompt's samples − A's "
               "(absolute). Click a row to see its samples side by side.")
    if not diff.matched:
        st.info("No prompt is in both: pick other runs or steps.")
        st.text(no_match_reason(diff))
        return
    if diff.step_distance is not None and diff.step_distance >= FAR_STEPS:
        st.warning(f"A's and B's samples of a prompt are {diff.step_distance:.4g} steps apart on average: the "
                   "training between those steps may explain a change as much as what sets B apart.")
    if unmarked:
        st.caption(unmarked)
    elif marks is not None and marks.kinds:
        st.caption(f"{len(marks.kinds):,} of the better prompts carry a finding of B that says its reward was "
                   "hacked (B's findings column): their B samples are its evidence, or B's response shown holds "
                   "its spreading phrase" + (f" (phrases looked for in the {marks.checked:,} most improved of "
                                             f"{marks.improvements:,})" if marks.checked < marks.improvements else "")
                   + ". Better by the hack?")
    clicked = None
    for name, title in _TITLES.items():
        table = tables[name]
        if table.empty:
            continue
        st.markdown(f"**{title}**: {len(table):,}")
        clicked = _table(name, table, steps_a, steps_b) or clicked
    if not tables["unchanged"].empty:
        with st.expander(f"Unchanged: {len(tables['unchanged']):,}"):
            clicked = _table("unchanged", tables["unchanged"], steps_a, steps_b) or clicked
    _opened(run, run_b, diff, clicked, steps_a, steps_b, settings)


def _marks(diff, run_b: Run):
    """(the improvements' marks by B's findings, or None; why there are none yet, or None)."""
    if not (diff.table["delta"].to_numpy(dtype=float) > 0).any():
        return None, None
    try:
        found = background.get_findings(run_b, wait=background.findings_wait())
    except Exception as exc:  # noqa: BLE001 - a check that failed costs only the marks
        return None, f"B's findings could not be checked ({type(exc).__name__}): the better prompts are not marked."
    if found is None:
        return None, "B's findings are still being checked: the better prompts are marked once they are (rerun)."
    return compute_finding_marks(diff, run_b, found), None


def _table(name: str, table, steps_a, steps_b):
    """Draw one table; the prompt key of a row clicked since it was last drawn, if any."""
    key = f"diff_table_{name}-{steps_a}-{steps_b}-{len(table)}"
    event = st.dataframe(cut_cells(table.reset_index(drop=True)), hide_index=True, on_select="rerun",
                         selection_mode=clicks.ROW_CLICK, key=key)
    row = clicks.row_clicked(key, event.selection)
    return table.index[row] if row is not None and row < len(table) else None


def _opened(run_a: Run, run_b: Run, diff, clicked, steps_a, steps_b, settings: Settings) -> None:
    """The opened prompt's samples of A and of B side by side, each against the other side's response shown."""
    table = diff.table
    options = list(table.index)
    if clicked is not None:
        state.set_choice(keys.DIFF_PROMPT, clicked)
    state.run_choice(keys.DIFF_PROMPT, options, options[0])  # a new diff opens its first prompt
    key = st.selectbox("Prompt opened", options, key=keys.DIFF_PROMPT,
                       format_func=lambda k: f"{_signed(table.at[k, 'delta'])} · "
                                             f"{cut_text(' '.join(str(table.at[k, 'prompt']).split()), 90)[0]}")
    row = table.loc[key]
    st.code(cut_text(strip_pad(row["prompt"], settings.pad_token) or "")[0], language=None, wrap_lines=True)
    sides = {}
    for name, run, steps in (("A", run_a, steps_a), ("B", run_b, steps_b)):
        samples = compute_prompt_samples({name: run}, prompt_keys_of(diff, name.lower(), key), settings.kl_estimator,
                                         settings.pad_token)
        first, last = steps
        keep = samples["step"].between(first if first is not None else -2**62, last if last is not None else 2**62)
        sides[name] = samples[keep]
    shown = {}
    for name in ("A", "B"):
        label = row[f"{name.lower()}_sample"]
        found = sides[name][sides[name]["label"] == label]
        shown[name] = found.iloc[0]["response"] if len(found) else ""
    columns = st.columns(2)
    names, _ = _runs(run_a, settings)
    b_name = next((n for n, folder in names.items() if folder.resolve() == run_b.path.resolve()), None)
    for column, name, other in ((columns[0], "A", "B"), (columns[1], "B", "A")):
        rows = sides[name]
        with column:
            st.caption(f"**{name}**: {min(SHOWN_PER_SIDE, len(rows))} of {len(rows)} samples, mean reward "
                       f"{_number(row[f'{name.lower()}_reward_mean'])}; words only in {other}'s response shown struck "
                       f"through, words only in this one on green")
            for i, (_, sample) in enumerate(rows.head(SHOWN_PER_SIDE).iterrows()):
                _open_button(name, i, sample, run_a if name == "A" else run_b, run_a, b_name)
                st.html(build_word_diff_html(compute_word_diff(shown[other], sample["response"]),
                                             describe_prompt_sample(sample, settings.kl_estimator)))


def _open_button(side: str, i: int, sample, run: Run, loaded: Run, b_name: str | None) -> None:
    """The button that opens ``sample`` (a row of ``compute_prompt_samples``) in the batch and sample views:
    in the loaded run, or (a sample of another run B) with that run loaded, as a link to it would."""
    help_ = f"Show {sample['source']} (step {int(sample['step'])}) in the batch and sample views"
    if run is loaded:
        st.button("Open in Batch", key=f"diff-open-{side}-{i}", help=help_, on_click=state.open_sample,
                  args=(int(sample["step"]), sample["label"]))
    elif b_name is not None:
        fields = (state.loaded_run() or (None, ()))[1]
        st.button("Open in Batch", key=f"diff-open-{side}-{i}", help=help_ + f" of {b_name} (loads it)",
                  on_click=links.open_in_run, args=(b_name, str(run.path), fields, str(sample["source"])))
