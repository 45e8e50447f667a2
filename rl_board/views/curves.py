"""Curves over steps: rewards, KL, response length, diagnostics and extra fields, each a mean with a
± scaled-std band (smoothed on request), and the per-step table of every series."""

from __future__ import annotations

from functools import partial

import streamlit as st

from ..analysis.figures import ALIGN_PROGRESS, ALIGN_STEP, align_runs_by, build_curve_figure, build_runs_figure
from ..analysis.provider import ROOT_RUN, RootError
from ..analysis.run import Run
from ..analysis.steps import DIAGNOSTIC_CURVES, curve_frame, dense_steps
from ..analysis.tables import KL_PREFIX, neutralise_frame
from ..analysis.traits import compute_run_traits
from ..base import fields as F
from ..base.location import folder_path
from ..base.text import alert_body, escape_markdown
from . import keys, state
from .sidebar import Settings

#: Diagnostic curves drawn until the user picks others (each chart costs every rerun).
DEFAULT_DIAGNOSTICS = ("entropy", "mismatch_kl", "explained_variance")
EXTRA_CHART_PX = 260  # height of each extra field's own chart


def render(run: Run, settings: Settings) -> None:
    steps = curve_frame(run.steps)

    def curve(where, names, title, key, **kw):  # a clicked point opens its step's batch
        where.plotly_chart(build_curve_figure(steps, names, title, settings.std_scale, settings.zero_shift,
                                              smoothing=settings.smoothing, band_clip=settings.band_clip, **kw),
                           key=key, on_select=partial(state.step_clicked, key, run.steps.index),
                           selection_mode="points")

    columns = st.columns(3)
    if settings.show_reward_curves:
        names = [n for n in settings.reward_fields if f"{n}_mean" in steps]
        if not settings.show_comparison:
            names = [n for n in names if not n.startswith("ref_")]
        if names or f"{F.REWARD}_mean" in steps:
            curve(columns[0], names, "Rewards", "curve_rewards")
        else:
            columns[0].info("No reward logged in this run: no reward curve.")
    if settings.use_log_ratio:
        kl, title = "log_ratio", "Log-ratio (mean per sample)"
    else:
        kl, title = KL_PREFIX[settings.kl_estimator], f"KL ({settings.kl_estimator}, mean per sample)"
    if f"{kl}_mean" in steps:
        curve(columns[1], [kl], title, "curve_kl")
    elif compute_run_traits(run.steps, run._samples).token_lists:
        columns[1].info("No reference log-probabilities (ref_logprobs) in this run: no KL curve.")
    else:
        columns[1].info("No per-token log-probabilities in this run: no KL curve.")
    length = next(((name, unit) for name, unit in (("response_len", "tokens"), ("response_chars", "characters"))
                   if f"{name}_mean" in steps), None)
    if length is None:
        columns[2].info("No responses in this run: no length curve.")
    else:
        curve(columns[2], [length[0]], f"Response length ({length[1]})", "curve_len")

    available = [name for name in DIAGNOSTIC_CURVES if steps.get(f"{name}_mean") is not None
                 and steps[f"{name}_mean"].notna().any()]
    if available:
        default = [name for name in DEFAULT_DIAGNOSTICS if name in available] or available[:3]
        state.run_choice(keys.DIAGNOSTIC_CURVES, available, default)
        chosen = st.multiselect("Diagnostic curves", available, key=keys.DIAGNOSTIC_CURVES,
                                format_func=DIAGNOSTIC_CURVES.__getitem__,
                                help="What goes wrong in RL runs, one number per step: docs, What the numbers mean.")
        grid = st.columns(3)
        for i, name in enumerate(chosen):
            curve(grid[i % 3], [name], DIAGNOSTIC_CURVES[name], f"curve_diag_{name}")
    if run.extras:
        state.run_choice(keys.EXTRA_CURVES, run.extras, run.extras[:3])
        chosen = st.multiselect("Extra field curves", run.extras, key=keys.EXTRA_CURVES,
                                help="Fields of your logs beyond the board's own: mean ± std per step.")
        grid = st.columns(3)  # one small chart each: fields on different scales never share an axis
        for i, name in enumerate(chosen):
            curve(grid[i % 3], [F.extra_column(name)], name, f"curve_extra_{i}",
                  labels={F.extra_column(name): name}, height=EXTRA_CHART_PX)
    if st.toggle("Per-step table of every series", key=keys.SHOW_STEP_TABLE):
        table = dense_steps(run.steps).rename(columns=lambda c: c.replace(F.EXTRA_PREFIX, ""))
        st.dataframe(table)
        st.download_button("Download CSV", lambda: neutralise_frame(table).to_csv().encode(), file_name=f"{run.path.name}-steps.csv",
                           mime="text/csv", key="steps_csv", on_click="ignore")


_ALIGNED_FOR = "compare_aligned_for"  # (run, compared runs) the alignment was chosen for


def render_comparison(run: Run, settings: Settings) -> None:
    """Other runs overlaid on this one's curves (the batch view stays on this run): the runs under the
    root (as the sidebar listed them), the runs opened before in this session, or any run folder typed
    (one the board may read: inside ``RL_BOARD_ROOTS`` when it is set)."""
    root = folder_path(settings.root)
    here = run.path.resolve()
    names = {name: root if name == ROOT_RUN else root / name for name in settings.runs}
    for path in state.recent_runs():  # runs opened before, wherever they are: named by their path
        if all(folder_path(path).resolve() != folder.resolve() for folder in names.values()):
            names[path] = folder_path(path)
    others = [name for name, folder in names.items() if folder.resolve() != here]
    state.run_choice(keys.COMPARE_RUNS, others, [])
    left, right = st.columns([2, 1])
    chosen = left.multiselect("Compare with runs", others, key=keys.COMPARE_RUNS,
                              placeholder="Runs under this root or opened before",
                              help="Their curves are drawn over this run's, aligned by step; the batch "
                                   "stays on this run.")
    typed = right.text_input("Or a run folder's path", key=keys.COMPARE_PATH, placeholder="/runs/other_trainer/run_7",
                             help="Any run folder the board may read (inside RL_BOARD_ROOTS when it is set), "
                                  "in any format it reads.").strip()
    compared = [(name, names[name]) for name in chosen]
    if typed and folder_path(typed).resolve() != here:
        compared.append((typed, folder_path(typed)))
    if not compared:
        st.info("Pick a run to draw its curves over this run's: one under this root or opened before in this "
                "session (above, left), or type the path of any run folder you may read (right).")
        return
    this = next((name for name, folder in names.items() if folder.resolve() == here), str(run.path))
    steps = {run.path.name if this == ROOT_RUN else this: curve_frame(run.steps)}  # named as the runs list names it
    for name, folder in compared:
        try:
            other = state.get_run(str(folder), settings)
        except (RootError, OSError) as exc:
            st.warning(alert_body(f"Can't read {escape_markdown(name)}.", str(exc)))
            continue
        steps[name] = curve_frame(other.steps)
    if len(steps) < 2:
        return
    automatic = align_runs_by(steps)
    choices = {ALIGN_STEP: "step", ALIGN_PROGRESS: "progress (% of each run's steps)"}
    aligned_for = (str(run.path), tuple(steps))  # other runs compared: start from their automatic alignment
    if st.session_state.get(keys.COMPARE_ALIGN) not in choices or st.session_state.get(_ALIGNED_FOR) != aligned_for:
        st.session_state[keys.COMPARE_ALIGN] = automatic
    st.session_state[_ALIGNED_FOR] = aligned_for
    align = st.radio("Align runs by", list(choices), format_func=choices.__getitem__, horizontal=True,
                     key=keys.COMPARE_ALIGN,
                     help="Progress puts each run's first step at 0 % and its last at 100 %, so runs of very "
                          "different lengths read side by side; hover shows the step.")
    if automatic == ALIGN_PROGRESS:
        spans = ", ".join(f"{escape_markdown(name)}: steps {int(f.index.min())}–{int(f.index.max())}"
                          for name, f in steps.items())
        st.caption(f"The step ranges differ a lot ({spans}).")
    kl = KL_PREFIX[settings.kl_estimator]
    series = [("reward", "Reward"), (kl, f"KL ({settings.kl_estimator})"),
              ("response_len", "Response length (tokens)"), ("response_chars", "Response length (characters)")]
    common = set.intersection(*(set(F.extra_columns(frame.columns)) for frame in steps.values()))
    series += [(column[:-len("_mean")], F.extra_name(column[:-len("_mean")])) for column in sorted(common)
               if column.endswith("_mean")]
    shown = [(name, title) for name, title in series if any(f"{name}_mean" in f for f in steps.values())]
    grid = st.columns(3)
    for i, (name, title) in enumerate(shown):
        grid[i % 3].plotly_chart(build_runs_figure(steps, name, title, settings.std_scale, settings.zero_shift,
                                                   settings.smoothing, align), key=f"compare_{name}")
