"""The one place that touches Streamlit's caches and session state.

A run is read by a ``RunSource`` kept in ``st.cache_resource`` (one per folder and
load settings, shared by sessions, never copied); its latest snapshot is what
every view draws. Session state holds only the user's choices.
"""

from __future__ import annotations

import time

import streamlit as st
from concurrent.futures import Future, ThreadPoolExecutor

from ..loader import Run, RunSource, SourceChanged
from . import keys

_PROGRESS_EVERY = 0.1  # seconds between progress bar updates


@st.cache_resource(max_entries=4, show_spinner=False)
def get_source(run_dir: str, pad_token: str | None, max_per_step: int | None,
               fields: tuple[tuple[str, str], ...] = (), eos_token: str | None = None,
               split: str | None = None) -> RunSource:
    """The reader of one run folder for these load settings (and split)."""
    return RunSource(run_dir, pad_token, max_per_step, fields=fields, eos_token=eos_token, split=split)


def get_run(run_dir: str, settings, fields: tuple = (), refresh: bool = False) -> Run:
    """The run as last read with the sidebar's load settings and the split picked on the page; read
    (what is new in) its files first when ``refresh`` or never read. A picked split the run doesn't
    have (one of another run) gives way to the run's default split."""
    split = st.session_state.get(keys.SPLIT)
    run = _read(run_dir, settings, fields, refresh, split)
    if split is not None and split not in run.splits:
        st.session_state.pop(keys.SPLIT, None)
        run = _read(run_dir, settings, fields, refresh, None)
    return run


def _read(run_dir: str, settings, fields: tuple, refresh: bool, split: str | None) -> Run:
    source = get_source(run_dir, settings.pad_token, settings.max_per_step, fields, settings.eos_token, split)
    if refresh or source.latest is None:
        bar = st.progress(0.0, text="Reading rollout files…")
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= _PROGRESS_EVERY or done >= total:
                last[0] = now
                bar.progress(min(done / total, 1.0) if total else 1.0,
                             text=f"Reading rollout files… {done / 2**20:,.0f} of {total / 2**20:,.0f} MiB")

        source.refresh(progress)
        bar.empty()
    return source.latest


def clear_run_cache(run_dir: str, settings, fields: tuple = ()) -> None:
    """Delete the cache of the loaded run; the next read parses its files again."""
    get_source(run_dir, settings.pad_token, settings.max_per_step, fields, settings.eos_token,
               st.session_state.get(keys.SPLIT)).clear_cache()


@st.cache_resource(max_entries=8, show_spinner=False)
def _scalars(path: str, signature: tuple):
    from ..scalars import load_scalars

    return load_scalars(path)


def get_scalars(path):
    """The trainer's scalars at ``path``, read again whenever its files change (so with the run's refresh)."""
    from ..scalars import signature

    return _scalars(str(path), signature(path))


_STEP_NOTE = "step_note"


def go_to_step(target: int, steps) -> None:
    """Move the batch to the logged rollout step nearest ``target`` (before the step picker is
    drawn); say so when it is not ``target`` itself."""
    from ..scalars import nearest_step

    step = nearest_step(int(round(target)), [int(s) for s in steps])
    st.session_state[keys.STEP] = step
    st.session_state[_STEP_NOTE] = (None if step == int(round(target)) else
                                    f"No rollouts were logged at step {int(round(target))}; showing step {step}, "
                                    "the nearest one.")


def step_note() -> str | None:
    """The message of the last ``go_to_step`` that could not land exactly (shown once)."""
    return st.session_state.pop(_STEP_NOTE, None)


def keep_choice(key: str, options: list, default) -> None:
    """Let widget ``key`` keep the user's choice while it is still offered, else show ``default``."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = default


_PICKER_CONTEXT = "sample_picker_context"  # (step, sort, direction) the sample picker was last drawn for
_LAST_CLICK = "batch_table_last_click"  # (context, row) of the last table click acted on
_OPEN_SAMPLE = "open_sample"  # a sample (label in Run.samples) to show once the picker is drawn


def open_sample(step: int, label) -> None:
    """Show sample ``label`` of ``step`` in the batch, sample and token views (before they are drawn)."""
    st.session_state[keys.STEP] = step
    st.session_state[_OPEN_SAMPLE] = label


def choose_sample(labels: list, context: tuple, clicked: int | None) -> None:
    """Set the sample picker (``keys.SAMPLE``) before it is drawn: the top of the table when the
    step or sort changed, the clicked row when the user just clicked one, else what it showed."""
    if st.session_state.get(_PICKER_CONTEXT) != context:
        st.session_state[keys.SAMPLE] = labels[0]
    keep_choice(keys.SAMPLE, labels, labels[0])
    if clicked is not None and (context, clicked) != st.session_state.get(_LAST_CLICK):
        st.session_state[keys.SAMPLE] = labels[clicked]
    if st.session_state.get(_OPEN_SAMPLE) in labels:
        st.session_state[keys.SAMPLE] = st.session_state.pop(_OPEN_SAMPLE)
    st.session_state[_LAST_CLICK] = (context, clicked)
    st.session_state[_PICKER_CONTEXT] = context


def loaded_run() -> tuple[str, tuple] | None:
    """(the folder, the field mapping) the user loaded last, if any."""
    return st.session_state.get(keys.LOADED_RUN)


def set_loaded_run(run_dir: str, fields: tuple) -> None:
    st.session_state[keys.LOADED_RUN] = (run_dir, fields)


def get_record(run: Run, label):
    """One sample's record (``Run.record``), or the exception that says why it can't be read."""
    try:
        return run.record(label)
    except (OSError, SourceChanged) as exc:
        return exc


def _run_key(run: Run) -> tuple:
    """A cheap key of one snapshot of a run: where it is, how it was read, and what the load read."""
    options = run.options
    return (str(run.path), options.pad_token, options.eos_token, options.fields, hash(run.report), id(run),
            len(run.samples))


_FINDINGS_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rl-board-findings")


@st.cache_resource(max_entries=8, show_spinner=False)
def _findings(key: tuple, _run: Run) -> Future:
    from ..findings import get_findings as kept_or_computed

    return _FINDINGS_THREAD.submit(kept_or_computed, _run)


def start_findings(run: Run) -> None:
    """Start ``findings.compute_findings`` of the run in a thread of its own (once per snapshot), so
    the checks run while the rest of the page draws."""
    _findings(_run_key(run), run)


def get_findings(run: Run):
    """``findings.compute_findings`` of the run (started by ``start_findings``, or now), once done."""
    return _findings(_run_key(run), run).result()


@st.cache_data(max_entries=8, show_spinner="Reading the early and late steps…")
def _window_ngrams(key: tuple, _run: Run):
    from ..findings import compute_window_ngrams

    return compute_window_ngrams(_run)


def get_window_ngrams(run: Run):
    """``findings.compute_window_ngrams`` of the run (late vs early steps), computed once per snapshot."""
    return _window_ngrams(_run_key(run), run)


def follow(run_dir: str, settings, fields: tuple) -> None:
    """Re-read the run every ``settings.auto_refresh_seconds`` and rerun the page when new lines arrived."""

    @st.fragment(run_every=settings.auto_refresh_seconds)
    def _poll() -> None:
        source = get_source(run_dir, settings.pad_token, settings.max_per_step, fields, settings.eos_token,
                            st.session_state.get(keys.SPLIT))
        before = source.latest
        source.refresh()
        if before is None or source.latest.report != before.report:
            st.rerun(scope="app")

    _poll()
