"""Links that reopen a view: the address bar always holds
``?root=ROOT&run=RUN&area=AREA&step=STEP&sample=FILE:LINE&sort=SORT&kl=ESTIMATOR`` (``FILE:LINE#K`` for one
of a line's several samples, ``fields.address``), plus the Diff area's choice once made (``diff_run=RUN_B``,
``diff_steps=A:B``, ``diff_steps_b=A:B``) and how the run was
read when that is not the default (``split=SPLIT``, ``fields=reward=my_score,response=answer``, ``pad=TOKEN``,
``eos=TOKEN``, ``none`` for no token, ``max=N``, ``tokenizer=PATH``). Opening such a link loads that run,
read that way, without a click and shows that area, step and sample. A parameter that does not fit (an unknown run, a step or sample not in
the run) gets a short message saying what is shown instead."""

from __future__ import annotations

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ..analysis.provider import KL_ESTIMATORS, ROOT_RUN, FieldMappingError, parse_field_mapping
from ..analysis.run import Run
from ..analysis.tables import sort_choices
from ..base import fields as F
from ..base.defaults import EOS_TOKEN, PAD_TOKEN
from ..base.location import folder_path
from ..base.text import alert_body
from . import keys, state

_PENDING = "link_pending"  # what the opening link asked for, until the run it names is loaded
_NOTES = "link_notes"
_WRITTEN = "link_written"  # the address this session last put in the address bar
_PARAMS = ("root", "run", "split", "area", "step", "sample", "sort", "kl", "fields", "pad", "eos", "max",
           "tokenizer", "diff_run", "diff_steps", "diff_steps_b")
#: the Diff area's choice: address parameter -> widget (written while set, read into the widget as is)
_DIFF_PARAMS = {"diff_run": keys.DIFF_RUN, "diff_steps": keys.DIFF_STEPS, "diff_steps_b": keys.DIFF_STEPS_B}
_VIEW = ("area", "step", "sample", "sort")  # what back and forward show again, in the run shown
NO_TOKEN = "none"  # pad=none, eos=none: no pad (or EOS) token

#: The page's areas as the address names them.
AREAS = {"overview": keys.OVERVIEW, "batch": keys.BATCH, "explore": keys.EXPLORE, "trainer": keys.TRAINER,
         "compare": keys.COMPARE, "diff": keys.DIFF}


def _went_back() -> bool:
    """Whether this run is the browser's back or forward button (Streamlit reruns with that entry's address)."""
    return bool(getattr(get_script_run_ctx(), "is_history_navigation", False))


def read() -> None:
    """On a session's first run: put the link's root, run, read options and estimator into the widgets'
    state (before they are drawn) and keep its area, step, sample and sort for when the run is loaded.

    On the browser's back or forward to an address that differs from the one last written only in its
    area, step, sample and sort: those are shown again. Any other (another run, read another way, another
    estimator or Diff choice) is not followed: the address is written again to name what is shown."""
    params = {key: st.query_params.get(key) for key in _PARAMS}
    if _PENDING in st.session_state:
        written = st.session_state.get(_WRITTEN)
        if written and _went_back() and all(params[k] == written.get(k) for k in _PARAMS if k not in _VIEW):
            st.session_state[_PENDING] = {**{k: v for k, v in params.items() if k in _VIEW and v},
                                          "run": written["run"], "loaded": True}
            st.session_state[_NOTES] = []
        return
    st.session_state[_PENDING] = {k: v for k, v in params.items() if v is not None and (v or k in ("pad", "eos"))}
    st.session_state[_NOTES] = []
    unknown = sorted(set(st.query_params) - set(_PARAMS))
    if unknown:
        _note(f"Parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
              f"{'are' if len(unknown) > 1 else 'is'} not one the page knows ({', '.join(_PARAMS)}): left out.")
    if params["root"]:
        st.session_state[keys.ROOT] = params["root"]
    if params["run"]:
        st.session_state[keys.RUN] = params["run"]
    if params["kl"]:
        if params["kl"] in KL_ESTIMATORS:
            st.session_state[keys.KL_ESTIMATOR] = params["kl"]
        else:
            _note(f"KL estimator {params['kl']!r} is not one of {', '.join(KL_ESTIMATORS)}; showing k3.")
    if params["fields"]:
        try:
            parse_field_mapping(params["fields"])
        except FieldMappingError as exc:
            _note(f"Field mapping {params['fields']!r} can't be used ({exc}); the run is read without it.")
        else:
            st.session_state[keys.FIELD_MAP] = params["fields"]
    if params["pad"] is not None:
        st.session_state[keys.DROP_PAD] = params["pad"] not in ("", NO_TOKEN)
        if st.session_state[keys.DROP_PAD]:
            st.session_state[keys.PAD_TOKEN] = params["pad"]
    if params["eos"] is not None:
        st.session_state[keys.EOS_TOKEN] = "" if params["eos"] == NO_TOKEN else params["eos"]
    if params["split"]:
        st.session_state[keys.SPLIT] = params["split"]  # a split the run doesn't have gives way to its default
    if params["tokenizer"]:
        st.session_state[keys.TOKENIZER] = params["tokenizer"]
    for param, widget in _DIFF_PARAMS.items():  # a run B not under the root gives way to the default
        if params[param]:
            st.session_state[widget] = params[param]
    if params["max"]:
        if params["max"].isdigit():
            st.session_state[keys.MAX_SAMPLES] = int(params["max"])
        else:
            _note(f"Max samples per step {params['max']!r} is not a whole number; reading every sample.")


def _note(text: str) -> None:
    st.session_state.setdefault(_NOTES, []).append(text)


def wanted_run(runs: list[str], default: str | None = None, cut: bool = False) -> None:
    """Before the run picker is drawn: a linked run that is not under the root (or that the runs list did
    not reach: ``cut``, its walk stopped early) is named and not loaded; the picker falls back to
    ``default`` (the first run when None)."""
    wanted = st.session_state.get(_PENDING, {}).get("run")
    if wanted and wanted not in runs:
        _note(f"Run {wanted!r} was not reached: the runs list stopped before it looked at every folder under "
              "this root (its note says where); type the run's folder as the root to open it." if cut else
              f"Run {wanted!r} is not under this root, so no run is loaded: pick one below or in the sidebar.")
        st.session_state[_PENDING] = {}
    state.keep_choice(keys.RUN, runs, runs[0] if default is None else default)


def diff_run_not_found(runs: list[str]) -> None:
    """Before the Diff area's run B is drawn: a linked run B that is not under the root is named (the
    area then compares the loaded run with itself), never replaced silently."""
    pending = st.session_state.get(_PENDING, {})
    wanted = pending.pop("diff_run", None)
    if wanted is not None and wanted not in runs:
        _note(f"Diff run B {wanted!r} is not under this root; run B is the loaded run until you pick one.")


def autoload(run_dir: str | None, fields) -> None:
    """Load the linked run without a click."""
    pending = st.session_state.get(_PENDING, {})
    if pending.get("run") and run_dir and not pending.get("loaded"):
        pending["loaded"] = True
        state.set_loaded_run(run_dir, fields if fields is not None else ())


def _find_sample(run: Run, source: str):
    """The label of the sample at ``source`` (its address: "file:line", or "file:line#K" for one of a line's
    samples), or None."""
    got = F.parse_address(source)
    if got is None or got[0] not in run.files:
        return None
    name, line, position = got
    samples = run._samples
    in_line = (samples[F.FILE] == run.files.index(name)) & (samples[F.LINE] == line)
    hit = samples.index[in_line & (samples.get(F.POSITION, -1) == position)]
    if not len(hit) and position < 0:  # a link made before lines of several samples had positions: the first
        hit = samples.index[in_line]
    return hit[0] if len(hit) else None


def apply(run: Run) -> None:
    """Once the linked run is loaded (before the areas are drawn): its area, step, sample and sort, each
    message saying what is shown instead of what does not fit."""
    pending = st.session_state.get(_PENDING, {})
    if not pending.get("loaded") or pending.get("applied"):
        return
    pending["applied"] = True
    steps = [int(s) for s in run.steps.index]
    label = _find_sample(run, pending["sample"]) if pending.get("sample") else None
    sample_step = None if label is None else int(run._samples.at[label, "step"])
    if pending.get("step"):
        text = pending["step"]
        step = int(text) if text.lstrip("-").isdigit() else None
        if step is None or step not in steps:
            shown = sample_step if sample_step is not None else (
                steps[-1] if step is None else min(steps, key=lambda s: (abs(s - step), s)))
            _note(f"Step {text!r} is not in this run; showing step {shown}"
                  + (f", the step of sample {pending['sample']!r}." if sample_step is not None else "."))
            step = shown
        elif sample_step is not None and sample_step != step:
            _note(f"Sample {pending['sample']!r} is in step {sample_step}, not step {step}; showing step "
                  f"{sample_step}.")
        st.session_state[keys.STEP] = step
    if label is not None:
        state.open_sample(sample_step, label)
    elif pending.get("sample"):
        shown = st.session_state.get(keys.STEP, steps[-1])
        _note(f"Sample {pending['sample']!r} is not in this run; showing the top of step {shown}'s table.")
    if pending.get("sort"):
        if pending["sort"] in sort_choices(run.extras, run._samples):
            st.session_state[keys.SORT_BY] = pending["sort"]
        else:
            _note(f"Sort {pending['sort']!r} is not offered for this run; sorting by reward.")
    if pending.get("area") in AREAS:
        state.show_area(AREAS[pending["area"]], "sample" if label is not None else None)
    elif pending.get("area"):
        _note(f"Area {pending['area']!r} is not one of {', '.join(AREAS)}; showing {keys.OVERVIEW}.")
        state.show_area(keys.OVERVIEW)
    elif pending.get("step") or pending.get("sample"):  # a link from before the page had areas: a batch
        state.show_area(keys.BATCH, "sample" if label is not None else "step")


def open_in_run(run: str, run_dir: str, fields: tuple, sample: str) -> None:
    """A click (a callback) on a sample of another run under the root (the Diff area's run B): that run
    picked and loaded, and sample ``sample`` (its ``FILE:LINE`` address) shown in the batch and sample
    views once it is, as a link to it would (a sample no longer in the run is named, the batch shown)."""
    st.session_state[keys.RUN] = run
    state.set_loaded_run(run_dir, fields)
    st.session_state[_PENDING] = {"run": run, "area": "batch", "sample": sample, "loaded": True}
    st.session_state[_NOTES] = []


def run_under_root(path, root: str) -> str | None:
    """``path`` (a run's folder) as the runs list names it under ``root``: its path relative to the root
    at any depth, ``ROOT_RUN`` for the root itself; None when it is not under the root."""
    here, top = str(path.resolve()), str(folder_path(root).resolve())
    if here == top:
        return ROOT_RUN
    prefix = top if top.endswith("/") else top + "/"
    return here[len(prefix):] if here.startswith(prefix) else None


def _shown_address(run: Run) -> str | None:
    """The address of the sample the batch shows: one opened elsewhere and not drawn yet, else the
    picker's; None when the picker's is not of the step chosen (the step's first sample is shown then)."""
    opened = state.opened_sample()
    if opened is not None and opened in run._samples.index:
        return F.addresses(run.files, run._samples.loc[[opened]])[0]
    source, step = st.session_state.get(keys.SAMPLE), st.session_state.get(keys.STEP)
    label = None if source is None else _find_sample(run, str(source))
    if label is None or (step is not None and int(run._samples.at[label, F.STEP]) != int(step)):
        return None
    return str(source)


def show_notes() -> None:
    """The messages about the opening link, as text; shown once everything the link asked for was tried."""
    notes = st.session_state.get(_NOTES)
    if notes:
        st.warning(alert_body("This link could not be followed exactly:", "\n".join(notes)))
        pending = st.session_state.get(_PENDING, {})
        if pending.get("applied") or not pending.get("run"):
            st.session_state[_NOTES] = []


def write(settings, run: Run) -> None:
    """Put the current view into the address bar: the loaded run and how it was read, the open area, and
    the step, sample, sort and estimator chosen."""
    relative = run_under_root(run.path, settings.root)
    if relative is not None:  # the root the link was made under stays (a colleague's Diff run B is under it)
        params = {"root": settings.root, "run": relative}
    else:  # the sidebar's root box was edited since the run was loaded: the run's own folder names it
        params = {"root": str(run.path.parent), "run": run.path.name}
    area = st.session_state.get(keys.AREA)
    if area is not None:
        params["area"] = next(slug for slug, label in AREAS.items() if label == area)
    for key, widget in (("step", keys.STEP), ("sample", keys.SAMPLE), ("sort", keys.SORT_BY),
                        ("kl", keys.KL_ESTIMATOR)):
        if st.session_state.get(widget) is not None:
            params[key] = str(st.session_state[widget])
    sample = _shown_address(run)
    if sample is None:
        params.pop("sample", None)
    else:
        params["sample"] = sample
    if run.splits:
        params["split"] = run.split
    options = run.options
    if options.fields:
        params["fields"] = ",".join(f"{canonical}={source}" for canonical, source in options.fields)
    if options.pad_token != PAD_TOKEN:
        params["pad"] = options.pad_token or NO_TOKEN
    if options.eos_token != EOS_TOKEN:
        params["eos"] = options.eos_token or NO_TOKEN
    if settings.max_per_step:
        params["max"] = str(settings.max_per_step)
    if settings.tokenizer:
        params["tokenizer"] = settings.tokenizer
    for param, widget in _DIFF_PARAMS.items():
        if st.session_state.get(widget):
            params[param] = str(st.session_state[widget])
    # st.query_params is the address the browser had when it asked for this rerun: an earlier rerun, still
    # running then, may have put another one in the address bar since (a step slider pressed fast). So the
    # address is written when it differs from either; an unchanged one is not written again (each write
    # is an entry in the browser's history).
    written = st.session_state.get(_WRITTEN)
    if dict(st.query_params) != params or (written is not None and written != params):
        st.query_params.from_dict(params)
    st.session_state[_WRITTEN] = params
