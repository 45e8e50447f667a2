"""The one place that touches Streamlit's caches, and its session state (but the tables' clicks: ``clicks``,
and the widgets kept across areas: ``kept``).

A run is read by a ``RunSource`` kept in ``st.cache_resource`` (one per folder and
load settings, shared by sessions, never copied); its latest snapshot is what
every view draws. Session state holds only the user's choices.

Every ``st.cache_*`` use of the page stays in this module, and every ``st.session_state`` use but the
tables' clicks (``clicks``) and the kept widgets (``kept``) (docs/contributing/architecture.md), so a view never caches or remembers
anything on its own. Its two halves are the cached reads (run, scalars, findings, tags) and the user's
navigation (areas, steps, samples, widgets).
"""

from __future__ import annotations

import time
from dataclasses import replace

import streamlit as st

from ..analysis.offered import ALL_TRAITS, RunTraits, compute_run_traits
from ..analysis.provider import SourceChanged, TokenizerError, cluster, load_tokenizer, resolve_tokenizer
from ..analysis.run import Run
from ..analysis.source import RunSource
from ..base.access import RootError
from . import clicks, keys
from .background import CHECKS, CHECKS_LOCK, kept_checks, run_key
from .widget_memory import KEPT

_PROGRESS_EVERY = 0.1  # seconds between progress bar updates


@st.cache_resource(max_entries=4, show_spinner=False)
def get_source(run_dir: str, pad_token: str | None, max_per_step: int | None,
               fields: tuple[tuple[str, str], ...] = (), eos_token: str | None = None,
               split: str | None = None, tokenizer: str | None = None) -> RunSource:
    """The reader of one run folder for these load settings (and split; ``tokenizer`` None: the one
    found near the run). Its workers keep the responses' words at the cold read: the findings, which the
    page runs after each read, read them at once."""
    return RunSource(run_dir, pad_token, max_per_step, fields=fields, eos_token=eos_token, split=split,
                     tokenizer=tokenizer, keep_words=True)


@st.cache_data(ttl=10, max_entries=8, show_spinner=False)
def get_run_details(root: str, runs: tuple[str, ...], allowed: str | None = None):
    """The runs under ``root`` with their files and counts (``store.discovery``), kept ten seconds: the
    runs list's sizes and counts may be that late. ``runs`` (the names found now) and ``allowed`` (the
    allowed folders setting) are part of the key, so a new run is listed at once."""
    from ..analysis.provider import discover_runs

    return discover_runs(root)


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


def usable_tokenizer(settings):
    """``settings`` with the tokenizer typed (or linked) if it can be used, else without it (the run is then
    read with the one found next to it, or none), and why it can't be used (None if it can): outside the
    allowed folders, not found, or no tokenizer."""
    if not settings.tokenizer:
        return settings, None
    try:
        load_tokenizer(str(resolve_tokenizer(settings.tokenizer)))
    except (RootError, TokenizerError) as exc:
        return replace(settings, tokenizer=None), str(exc)
    return settings, None


def _read(run_dir: str, settings, fields: tuple, refresh: bool, split: str | None) -> Run:
    source = get_source(run_dir, settings.pad_token, settings.max_per_step, fields, settings.eos_token, split,
                        settings.tokenizer)
    if refresh or source.latest is None:
        bar = st.progress(0.0, text="Reading rollout files…")
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= _PROGRESS_EVERY or done >= total:
                last[0] = now
                on_ray = (f", {cluster.LAST_READ.get('done', 0)} of {cluster.LAST_READ['tasks']} Ray tasks"
                          if cluster.address() and cluster.LAST_READ.get("tasks") else "")  # RL_BOARD_RAY
                bar.progress(min(done / total, 1.0) if total else 1.0,
                             text=f"Reading rollout files… {done / 2**20:,.0f} of {total / 2**20:,.0f} MiB{on_ray}")

        try:
            source.refresh(progress)
        finally:  # a read that fails leaves no bar behind
            bar.empty()
    return source.latest


def clear_run_cache(run_dir: str, settings, fields: tuple = ()) -> None:
    """Delete the cache of the loaded run; the next read parses its files again."""
    get_source(run_dir, settings.pad_token, settings.max_per_step, fields, settings.eos_token,
               st.session_state.get(keys.SPLIT), settings.tokenizer).clear_cache()


@st.cache_resource(max_entries=8, show_spinner=False)
def _scalars(path: str, signature: tuple):
    from ..analysis.provider import load_scalars

    return load_scalars(path)


def get_scalars(path):
    """The trainer's scalars at ``path``, read again whenever its files change (so with the run's refresh)."""
    from ..analysis.provider import signature

    return _scalars(str(path), signature(path))


_STEP_NOTE = "step_note"
_GO_TO_AREA = "go_to_area"  # an area to open before the tabs are next drawn (a click anywhere asked for it)
_SCROLL_TO = "scroll_to"  # what to bring into view once the batch area is drawn: "step" or "sample"


def show_area(area: str, scroll_to: str | None = None) -> None:
    """Open ``area`` (a ``keys`` area label) before the tabs are next drawn; ``scroll_to`` ("step" or
    "sample") is brought into view once drawn. Safe in a callback and while the page draws."""
    st.session_state[_GO_TO_AREA] = area
    if scroll_to:
        st.session_state[_SCROLL_TO] = scroll_to
    else:
        st.session_state.pop(_SCROLL_TO, None)


def open_requested_area() -> None:
    """Before the tabs are drawn: open the area a click asked for, if any."""
    area = st.session_state.pop(_GO_TO_AREA, None)
    if area is not None:
        st.session_state[keys.AREA] = area


def area_requested() -> bool:
    """Whether a click asked for an area after the tabs were drawn (the page then draws again)."""
    return _GO_TO_AREA in st.session_state


def scroll_target() -> str | None:
    """What to bring into view in the batch area ("step", "sample"), once; None when nothing was opened."""
    return st.session_state.pop(_SCROLL_TO, None)


def go_to_step(target: int, steps, show: bool = True) -> None:
    """Move the batch to the logged rollout step nearest ``target`` and (``show``) open the batch area
    there; say so when it is not ``target`` itself."""
    from ..analysis.provider import nearest_step

    step = nearest_step(int(round(target)), [int(s) for s in steps])
    st.session_state[keys.STEP] = step
    st.session_state[_STEP_NOTE] = (None if step == int(round(target)) else
                                    f"No rollouts were logged at step {int(round(target))}; showing step {step}, "
                                    "the nearest one.")
    if show:
        show_area(keys.BATCH, "step")


def step_clicked(chart_key: str, steps) -> None:
    """``on_select`` callback of a chart over steps: the point clicked opens its step's batch. (A callback
    acts once per click; a selection read while drawing would act again on every rerun.)"""
    points = ((st.session_state.get(chart_key) or {}).get("selection") or {}).get("points") or []
    if points:
        go_to_step(points[0]["x"], steps)


def step_note() -> str | None:
    """The message of the last ``go_to_step`` that could not land exactly (shown once)."""
    return st.session_state.pop(_STEP_NOTE, None)


_NONE = object()


def _set(key: str, value) -> None:
    """Give widget ``key`` ``value`` before it is drawn, only when that changes it: a value written sets the
    browser's widget too, and one written on every run could undo a newer input still on its way."""
    if st.session_state.get(key, _NONE) != value:
        st.session_state[key] = value


def keep_choice(key: str, options: list, default, renewed: bool = False) -> None:
    """Before widget ``key`` is drawn: keep the user's choice while it is still offered, else ``default``.

    ``renewed``: Streamlit takes the widget for a new one (a slider whose range changed), which would start
    at its own default: the choice is then written back."""
    value = st.session_state.get(key, _NONE)
    if value is _NONE or value not in options:
        st.session_state[key] = default
    elif renewed:
        st.session_state[key] = value


_DEFAULTS = "choice_defaults"  # widget key -> the run's default it was last drawn with


def run_choice(key: str, options: list, default) -> None:
    """Before a widget whose options depend on the run is drawn (drawn with no default of its own):
    the user's choice where it still applies, else this run's ``default``.

    A value equal to the default the widget was last drawn with is not the user's choice: it becomes the
    new run's default. For a multiselect (``default`` a list), the chosen items still offered are kept;
    when none is, the run's default is shown (an emptied choice stays empty). A range (``default`` a
    tuple: a range slider's ends, the slider drawn with ``value=default``) is kept when both its ends
    are offered, else forgotten."""
    defaults = st.session_state.setdefault(_DEFAULTS, {})
    before = defaults.get(key, _NONE)
    value = st.session_state.get(key, _NONE)
    chosen = value is not _NONE and value != before
    if isinstance(default, list):
        kept = [v for v in value if v in options] if chosen and isinstance(value, list) else []
        _set(key, kept if kept or (chosen and value == []) else default)
    elif isinstance(default, tuple):  # a range widget knows it is one by its own default: leave it that
        if not (chosen and isinstance(value, (tuple, list)) and all(v in options for v in value)):
            st.session_state.pop(key, None)
    else:
        _set(key, value if chosen and value in options else default)
    defaults[key] = default


_STEPS = "drawn_steps"  # (first, last, count) of the steps the step picker was last drawn with


def choose_step(steps: list[int], follow_newest: bool) -> None:
    """Before the step picker is drawn: the step the user is on, kept while new steps arrive; the
    newest step at first, or whenever a newer one arrives while ``follow_newest`` is on."""
    drawn, now = st.session_state.get(_STEPS), (steps[0], steps[-1], len(steps))
    st.session_state[_STEPS] = now
    if follow_newest and drawn is not None and drawn[1] != steps[-1]:
        st.session_state[keys.STEP] = steps[-1]
    keep_choice(keys.STEP, steps, steps[-1], renewed=drawn != now)


_PICKER_CONTEXT = "sample_picker_context"  # (step, sort, direction, group) the sample picker was last drawn for
_OPEN_SAMPLE = "open_sample"  # a sample (label in Run._samples) to show once the picker is drawn


def open_sample(step: int, label, show: bool = True) -> None:
    """Show sample ``label`` of ``step`` in the batch, sample and token views (its row marked) and
    (``show``) open the batch area with the sample in view (before they are drawn)."""
    st.session_state[keys.STEP] = step
    st.session_state[_OPEN_SAMPLE] = label
    if show:
        show_area(keys.BATCH, "sample")


def opened_sample():
    """The sample ``open_sample`` asked for, not drawn yet (its label in ``Run._samples``), or None."""
    return st.session_state.get(_OPEN_SAMPLE)


def show_drivers() -> None:
    """Show "What drives this step" when the batch is next drawn (a step opened from a finding)."""
    st.session_state[keys.SHOW_DRIVERS] = True


def choose_sample(ordered, context: tuple, clicked: int | None) -> str:
    """Set the sample picker (``keys.SAMPLE``, a sample's ``source`` "file:line": it names the same sample
    in every snapshot of the run) before it is drawn, and return it: a sample opened elsewhere, else the
    row the user just clicked, else the top of the table when the step or sort changed, else what it
    showed (kept while the run grows)."""
    sources = list(ordered["source"])
    opened = st.session_state.pop(_OPEN_SAMPLE, None)
    value = st.session_state.get(keys.SAMPLE)
    if opened is not None and opened in ordered.index:
        value = ordered.at[opened, "source"]
    elif clicked is not None and clicked < len(sources):
        value = sources[clicked]
    elif st.session_state.get(_PICKER_CONTEXT) != context:
        value = sources[0]
    if value not in sources:
        value = sources[0]
    _set(keys.SAMPLE, value)
    st.session_state[_PICKER_CONTEXT] = context
    return value


_LABELS = "drawn_labels"  # select box key -> (value, its label) when last drawn


def relabel(key: str, label: str) -> None:
    """Before select box ``key`` is drawn: when its value is the one drawn last but that value's
    ``label`` changed (a setting changed what it shows), write the value back, so the browser shows the
    new label (it keeps showing the label it was sent until the value is set again)."""
    value = st.session_state.get(key, _NONE)
    drawn = st.session_state.setdefault(_LABELS, {})
    if value is not _NONE and drawn.get(key, (value, label)) != (value, label) and drawn[key][0] == value:
        st.session_state[key] = value
    drawn[key] = (value, label)


_TRAITS = "run_traits"  # the loaded run's RunTraits: what the sidebar offers


def run_traits() -> RunTraits:
    """What the loaded run has (``traits.RunTraits``); everything while no run is loaded."""
    return st.session_state.get(_TRAITS, ALL_TRAITS)


def note_traits(run: Run) -> bool:
    """Keep what ``run`` has for the sidebar; whether that changed since the sidebar was drawn (the page
    is then drawn again, so it offers only what this run has)."""
    traits = compute_run_traits(run.steps, run._samples)
    changed = st.session_state.get(_TRAITS, ALL_TRAITS) != traits
    st.session_state[_TRAITS] = traits
    return changed


def kept_value(key: str, default):
    """The value widget ``key`` had when last drawn (``default`` if never): for a control the page does
    not draw for this run, whose choice stays for the next run that has it."""
    return st.session_state.get(key, default)


def loaded_run() -> tuple[str, tuple] | None:
    """(the folder, the field mapping) the user loaded last, if any."""
    return st.session_state.get(keys.LOADED_RUN)


#: What belongs to one run: forgotten when another run is loaded (its newest step and first sample show).
_PER_RUN = (keys.STEP, keys.SAMPLE, _STEPS, _PICKER_CONTEXT, clicks.MARKED, _OPEN_SAMPLE)


_RECENT = "recent_runs"  # run folders loaded in this session, the latest first
RECENT_KEPT = 8


def recent_runs() -> list[str]:
    """The run folders loaded in this session, the latest first (at most ``RECENT_KEPT``)."""
    return list(st.session_state.get(_RECENT, []))


def set_loaded_run(run_dir: str, fields: tuple) -> None:
    recent = [r for r in st.session_state.get(_RECENT, []) if r != run_dir]
    st.session_state[_RECENT] = [run_dir, *recent][:RECENT_KEPT]
    if st.session_state.get(keys.LOADED_RUN) not in (None, (run_dir, fields)):
        for key in _PER_RUN:
            st.session_state.pop(key, None)
            st.session_state.get(KEPT, {}).pop(key, None)
    st.session_state[keys.LOADED_RUN] = (run_dir, fields)


def get_record(run: Run, label):
    """One sample's record in two parts (``Run.record_parts``), or the exception that says why it can't be read."""
    try:
        return run.record_parts(label)
    except (OSError, SourceChanged) as exc:
        return exc


def get_images(run: Run, record: tuple[dict, dict] | None) -> list[dict]:
    """The images of a sample whose record was read (``Run.images_of``); [] without a record."""
    return [] if record is None else run.images_of(record[0])


THUMBNAIL_SIDE = 240  # pixels: the longer side of an image drawn in a turn


@st.cache_data(max_entries=512, show_spinner=False)
def get_thumbnail(data: bytes, side: int = THUMBNAIL_SIDE) -> tuple[bytes, int] | None:
    """(a PNG of an image at most ``side`` pixels a side, its width in pixels) (``base.images.thumbnail``),
    made once; None when it can't be made."""
    from ..base.images import dimensions, thumbnail

    png = thumbnail(data, side)
    return None if png is None else (png, dimensions(png)[0])


_FINDINGS_RUN = "_rlb_findings_run"  # session state: the run key whose checks this session is showing


def start_findings(run: Run) -> None:
    """Start ``findings.compute_findings`` of the run in a thread of its own (once per snapshot), so
    the checks run while the rest of the page draws; the checks of the run this session showed before
    are cancelled when no other session is showing it."""
    key = run_key(run)
    checks = kept_checks(key, run)
    before = st.session_state.get(_FINDINGS_RUN)
    if before == key:
        return
    with CHECKS_LOCK:
        checks.viewers += 1
        left = CHECKS.get(before) if before is not None else None
        if left is not None:
            left.viewers -= 1
            if left.viewers <= 0 and not left.done.is_set():
                left.stop.set()
    st.session_state[_FINDINGS_RUN] = key


@st.cache_data(max_entries=8, show_spinner="Reading the early and late steps…")
def _window_ngrams(key: tuple, _run: Run):
    from ..analysis.findings import compute_window_ngrams

    return compute_window_ngrams(_run)


def get_window_ngrams(run: Run):
    """``findings.compute_window_ngrams`` of the run (late vs early steps), computed once per snapshot."""
    return _window_ngrams(run_key(run), run)


def follow(run_dir: str, settings, fields: tuple) -> None:
    """Re-read the run every ``settings.auto_refresh_seconds`` and rerun the page when new lines arrived."""

    @st.fragment(run_every=settings.auto_refresh_seconds)
    def _poll() -> None:
        source = get_source(run_dir, settings.pad_token, settings.max_per_step, fields, settings.eos_token,
                            st.session_state.get(keys.SPLIT), settings.tokenizer)
        before = source.latest
        source.refresh()
        if before is None or source.latest.report != before.report:
            st.rerun(scope="app")

    _poll()


@st.cache_resource(max_entries=16, show_spinner=False)
def _tagged(key: tuple, stamp: tuple | None, _run: Run):
    from ..analysis.provider import TagsError, load_tags
    from ..analysis.tagged import compute_tagged

    try:
        return compute_tagged(_run, load_tags(_run.path))
    except TagsError as exc:
        return exc


def get_tagged(run: Run):
    """``tags.compute_tagged`` of the run's tags file as it is now (read again whenever it changes, in
    any session), or the ``TagsError`` that says why it can't be read. Don't mutate it."""
    from ..analysis.provider import stamp

    return _tagged(run_key(run), stamp(run.path), run)


@st.cache_resource(max_entries=4, show_spinner="Lining the prompts up…")
def _diff(key_a: tuple, key_b: tuple, steps_a: tuple, steps_b: tuple, _a: Run, _b: Run):
    from ..analysis.diff import compute_diff

    return compute_diff(_a, _b, steps_a, steps_b)


def get_diff(a: Run, b: Run, steps_a: tuple, steps_b: tuple):
    """``diff.compute_diff`` of two runs' snapshots (by prompt), once per pair and step ranges. Don't
    mutate it."""
    return _diff(run_key(a), run_key(b), steps_a, steps_b, a, b)


def set_choice(key: str, value) -> None:
    """Give widget ``key`` ``value`` before it is drawn (a click elsewhere chose it)."""
    _set(key, value)
