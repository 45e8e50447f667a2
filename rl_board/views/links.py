"""Links that reopen a view: the address bar always holds
``?root=ROOT&run=RUN&step=STEP&sample=FILE:LINE&sort=SORT&kl=ESTIMATOR``, and opening such a link
loads that run without a click and shows that step and sample. A parameter that does not fit
(an unknown run, a step or sample not in the run) gets a short message and the nearest valid view."""

from __future__ import annotations

import streamlit as st

from .. import fields as F
from ..loader import ROOT_RUN, Run
from ..metrics import KL_ESTIMATORS
from ..tables import sort_choices
from . import keys, state

_PENDING = "link_pending"  # what the opening link asked for, until the run it names is loaded
_NOTES = "link_notes"


def read() -> None:
    """On a session's first run: put the link's root, run and estimator into the widgets' state
    (before they are drawn) and keep its step, sample and sort for when the run is loaded."""
    if _PENDING in st.session_state:
        return
    params = {key: st.query_params.get(key) for key in ("root", "run", "step", "sample", "sort", "kl")}
    st.session_state[_PENDING] = {k: v for k, v in params.items() if v}
    st.session_state[_NOTES] = []
    if params["root"]:
        st.session_state[keys.ROOT] = params["root"]
    if params["run"]:
        st.session_state[keys.RUN] = params["run"]
    if params["kl"]:
        if params["kl"] in KL_ESTIMATORS:
            st.session_state[keys.KL_ESTIMATOR] = params["kl"]
        else:
            _note(f"KL estimator {params['kl']!r} is not one of {', '.join(KL_ESTIMATORS)}; showing k3.")


def _note(text: str) -> None:
    st.session_state.setdefault(_NOTES, []).append(text)


def wanted_run(runs: list[str]) -> None:
    """Before the run picker is drawn: a linked run that is not under the root is named, and the
    picker falls back to the first run."""
    wanted = st.session_state.get(_PENDING, {}).get("run")
    if wanted and wanted not in runs:
        _note(f"Run {wanted!r} is not under this root; showing {runs[0]!r}.")
        st.session_state[_PENDING] = {}
    state.keep_choice(keys.RUN, runs, runs[0])


def autoload(run_dir: str | None, fields) -> None:
    """Load the linked run without a click."""
    pending = st.session_state.get(_PENDING, {})
    if pending.get("run") and run_dir and not pending.get("loaded"):
        pending["loaded"] = True
        state.set_loaded_run(run_dir, fields if fields is not None else ())


def apply(run: Run) -> None:
    """Once the linked run is loaded (before the batch is drawn): its step, sample and sort."""
    pending = st.session_state.get(_PENDING, {})
    if not pending.get("loaded") or pending.get("applied"):
        return
    pending["applied"] = True
    steps = [int(s) for s in run.steps.index]
    if pending.get("step"):
        try:
            step = int(pending["step"])
        except ValueError:
            step = None
        if step is None or step not in steps:
            nearest = steps[-1] if step is None else min(steps, key=lambda s: (abs(s - step), s))
            _note(f"Step {pending['step']!r} is not in this run; showing step {nearest}.")
            step = nearest
        st.session_state[keys.STEP] = step
    if pending.get("sample"):
        name, _, line = pending["sample"].rpartition(":")
        samples = run.samples
        hit = samples.index[(samples[F.FILE] == (run.files.index(name) if name in run.files else -1))
                            & (samples[F.LINE] == (int(line) if line.isdigit() else -1))]
        if len(hit):
            state.open_sample(int(samples.loc[hit[0], F.STEP]), hit[0])
        else:
            _note(f"Sample {pending['sample']!r} is not in this run; showing the top of the table.")
    if pending.get("sort"):
        if pending["sort"] in sort_choices(run.extras):
            st.session_state[keys.SORT_BY] = pending["sort"]
        else:
            _note(f"Sort {pending['sort']!r} is not offered for this run; sorting by reward.")


def show_notes() -> None:
    """The messages about the opening link, as text; shown once everything the link asked for was tried."""
    notes = st.session_state.get(_NOTES)
    if notes:
        st.warning("This link could not be followed exactly:")
        st.text("\n".join(notes))
        pending = st.session_state.get(_PENDING, {})
        if pending.get("applied") or not pending.get("run"):
            st.session_state[_NOTES] = []


def write(root: str, run: Run, step: int | None = None, label=None) -> None:
    """Put the current view into the address bar."""
    params = {"root": root, "run": ROOT_RUN if run.path.resolve() == _root_dir(root) else run.path.name}
    if step is not None:
        params["step"] = str(step)
    if label is not None and label in run.samples.index:
        row = run.samples.loc[label]
        params["sample"] = f"{run.files[int(row[F.FILE])]}:{int(row[F.LINE])}"
    for key, widget in (("sort", keys.SORT_BY), ("kl", keys.KL_ESTIMATOR)):
        if st.session_state.get(widget) is not None:
            params[key] = str(st.session_state[widget])
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)


def _root_dir(root: str):
    from pathlib import Path

    return Path(root).expanduser().resolve()
