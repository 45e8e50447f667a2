"""The sidebar: where the run comes from, how it is read, and what the page shows."""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st

from ..analysis.provider import (
    KL_ESTIMATORS,
    ROOT_RUN,
    FieldMappingError,
    NoRunsError,
    RootError,
    Thresholds,
    describe_folder,
    discover_runs,
    parse_field_mapping,
)
from ..base import fields as F
from ..base.defaults import AUTO, EOS_TOKEN, PAD_TOKEN
from ..base.location import folder_path
from . import keys, links, state

DEFAULT_ROOT = "./rollout_samples"
DEFAULT_PAD = AUTO  # the defaults of every command too (``defaults``): the run's tokenizer's, else PAD_TOKEN
DEFAULT_EOS = AUTO
BAND_PERCENTILE = 95  # std bands are capped at this percentile of their steps' half-widths, unless turned off
ROOT_ENV = "RL_BOARD_ROOT"  # set by ``rl-board serve ROOT``: the root shown first
DEFAULT_RUN = "ppo_demo"  # picked first when the root has it (docs/getting-started.md walks through it)
#: The sidebar's sections of options set once, closed until opened.
SECTION_CURVES = "Curve bands and smoothing"
SECTION_TOKENS = "Tokens and text"
SECTION_TRAINER = "Trainer metrics"
SECTION_SHOW = "Show on the page"


def run_dir_of(root: str, run: str) -> str:
    """The folder of run ``run`` (a path relative to ``root``, a folder or a URL; "." for the root itself)."""
    return str(folder_path(root) / run) if run != ROOT_RUN else str(folder_path(root))  # a URL root too


@dataclass(frozen=True)
class Settings:
    """What the user chose in the sidebar."""

    root: str  # the root folder as typed, surrounding whitespace removed
    runs: list[str]  # the runs under it, at any depth, by relative path (empty when it can't be used)
    metrics_path: str  # the trainer metrics to show ("" = found near the run)
    thresholds: object  # scalars.signs.Thresholds
    run_dir: str | None  # the folder picked (not necessarily loaded yet)
    load: bool  # Load or Refresh was pressed on this run
    max_per_step: int | None
    fields: tuple[tuple[str, str], ...] | None  # the field mapping typed, (canonical, source) pairs; None if bad
    auto_refresh_seconds: int | None
    follow_newest: bool  # a refresh that brings a newer step shows it
    show_reward_curves: bool
    reward_fields: list[str]
    std_scale: float
    band_clip: float | None  # the percentile of its steps' at which a std band's half-width is capped; None: not
    zero_shift: bool
    smoothing: float  # TensorBoard-style EMA weight; 0 = off
    show_comparison: bool
    kl_estimator: str
    use_log_ratio: bool
    pad_token: str | None  # None unless "drop pad token" is on
    eos_token: str | None  # None when the EOS box is empty
    tokenizer: str | None  # the tokenizer typed (a tokenizer.json or a model folder); None: found near the run
    system_marker: str | None
    show_charts: bool
    show_table: bool
    show_pair: bool
    show_heatmap: bool
    discovery: object = None  # store.discovery.Discovery of the root (names only), None when it can't be used


def render() -> Settings:
    """The sidebar, top to bottom: the run and how it is read, the curves' settings, the tokens', the
    trainer's metrics and what the page shows."""
    side = st.sidebar
    run = _run_section(side)
    curves = _curve_settings(side)
    tokens = _token_settings(side)
    trainer = _trainer_settings(side)
    shown = side.expander(SECTION_SHOW)
    return Settings(
        **run, **curves, **tokens, **trainer,
        show_charts=shown.checkbox("Charts", value=True, key=keys.SHOW_CHARTS),
        show_table=shown.checkbox("Batch table", value=True, key=keys.SHOW_TABLE),
        show_pair=shown.checkbox("Sample pair", value=True, key=keys.SHOW_PAIR),
        show_heatmap=shown.checkbox("Token view and heatmap", value=True, key=keys.SHOW_HEATMAP),
    )


def _run_section(side) -> dict:
    """The Run header: the root, the run, how many samples per step, the field mapping, Load and
    Refresh, auto-refresh. ``Settings`` fields."""
    side.header("Run")
    if keys.ROOT not in st.session_state:  # the default once; a link's root (links.read) is set in the state
        st.session_state[keys.ROOT] = os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    root = side.text_input("Root folder (runs at any depth under it, or a run folder)",
                           key=keys.ROOT).strip()  # a pasted path often brings an invisible space
    run_dir, load, discovery = None, False, None
    try:
        discovery = discover_runs(root, details=False)
        runs = discovery.names()
    except NoRunsError as exc:  # say what the folder holds and what to try
        side.error("No run in this folder.")
        side.text(str(exc).split(" Expected layout")[0] + "\n" + describe_folder(root))
        runs = []
    except RootError as exc:
        side.error("Can't use this root folder.")
        side.text(str(exc))
        runs = []
    if runs:
        links.wanted_run(runs, DEFAULT_RUN if DEFAULT_RUN in runs else runs[0], cut=discovery.cut)
        run = side.selectbox("Run", runs, key=keys.RUN,
                             format_func=lambda r: "(the root folder itself)" if r == ROOT_RUN else r)
        run_dir = run_dir_of(root, run)
    max_samples = side.number_input("Max samples per step (0 = all)", min_value=0, value=0, step=16,
                                    key=keys.MAX_SAMPLES,
                                    help="Keeps the first N samples of each step, in file then line order.")
    mapping = side.text_input("Field mapping (optional)", key=keys.FIELD_MAP, placeholder="reward=my_score, response=answer",
                              help="CANONICAL=SOURCE pairs, comma-separated: read the board's field CANONICAL from "
                                   "your key SOURCE. verl's input/output/score/gts and TRL's completion are "
                                   "recognised without a mapping.")
    try:
        fields = parse_field_mapping(mapping)
    except FieldMappingError as exc:
        side.error("Can't use this field mapping.")
        side.text(str(exc))
        fields = None
    left, right = side.columns(2)
    load = left.button("Load", key=keys.LOAD, type="primary", disabled=run_dir is None or fields is None)
    load |= right.button("Refresh", key=keys.REFRESH, disabled=run_dir is None or fields is None,
                         help="Read lines appended since the last read, and new files.")
    auto = side.toggle("Auto-refresh", key=keys.AUTO_REFRESH)
    seconds = side.number_input("every (seconds)", min_value=2, value=10, key=keys.AUTO_REFRESH_SECONDS,
                                disabled=not auto)
    follow_newest = side.toggle("Follow the newest step", key=keys.FOLLOW_NEWEST,
                                help="When a refresh brings a newer step, show it. Off: the step and sample you "
                                     "are looking at stay while the run grows.")

    return dict(root=root, runs=runs, run_dir=run_dir, load=load, max_per_step=int(max_samples) or None,
                fields=fields, auto_refresh_seconds=int(seconds) if auto else None, follow_newest=follow_newest,
                discovery=discovery)


def _curve_settings(side) -> dict:
    """The Settings header and the curves' section: reward fields, the reference, the KL estimator,
    std bands and smoothing. ``Settings`` fields."""
    side.header("Settings")
    show_reward = side.checkbox("Reward curves", value=True, key=keys.SHOW_REWARD_CURVES)
    traits = state.run_traits()  # only what the loaded run has is offered (everything before a run is loaded)
    offered = list(traits.reward_fields) or [F.REWARD]
    state.run_choice(keys.REWARD_FIELDS, offered, [n for n in (F.REWARD, "ref_reward") if n in offered])
    reward_fields = side.multiselect("Reward fields", offered, key=keys.REWARD_FIELDS,
                                     help="The reward fields this run logged, drawn on the Rewards curve.")
    comparison = traits.reference and side.checkbox("Compare with the reference model", value=True,
                                                    key=keys.SHOW_COMPARISON)
    if traits.ref_logprobs:
        estimator = side.selectbox("KL estimator", KL_ESTIMATORS, key=keys.KL_ESTIMATOR,
                                   help="k3 = exp(d) − 1 − d with d = ref_logp − logp (what OpenRLHF and verl "
                                        "train with); k2 = ½·log_ratio²; k1 = log_ratio.")
        use_log_ratio = side.checkbox("Log-ratio instead of KL on the KL curve", key=keys.USE_LOG_RATIO)
    else:  # no KL in this run: the choice stays for the next run that has one
        estimator, use_log_ratio = state.kept_value(keys.KL_ESTIMATOR, KL_ESTIMATORS[0]), False
    # options set once and seldom changed: in sections of their own, closed until opened
    bands = side.expander(SECTION_CURVES)
    std_scale = bands.slider("Std band × (variance scaling)", 0.0, 3.0, 1.0, 0.1, key=keys.STD_SCALE)
    clip_bands = bands.checkbox(f"Clip std bands at their {BAND_PERCENTILE}th percentile", value=True,
                                key=keys.CLIP_BANDS,
                                help="A band's half-width at any step is at most its value at this percentile "
                                     "of the run's steps, so one step's spike does not stretch the axis. Off: "
                                     "the whole std.")
    zero_shift = bands.checkbox("Zero shift (curves start at 0)", key=keys.ZERO_SHIFT)
    smoothing = bands.slider("Smoothing", 0.0, 0.99, 0.0, 0.01, key=keys.SMOOTHING,
                             help="Exponential moving average with debiasing, as TensorBoard smooths; "
                                  "0 = off. The raw curve stays, faint.")
    return dict(show_reward_curves=show_reward, reward_fields=reward_fields, std_scale=float(std_scale),
                band_clip=BAND_PERCENTILE if clip_bands else None, zero_shift=zero_shift,
                smoothing=float(smoothing), show_comparison=comparison, kl_estimator=estimator,
                use_log_ratio=use_log_ratio)


def _token_settings(side) -> dict:
    """The tokens' section: pad and EOS tokens, the tokenizer, the system prompt. ``Settings`` fields."""
    text = side.expander(SECTION_TOKENS)
    drop_pad = text.checkbox("Drop pad token", value=True, key=keys.DROP_PAD)
    pad = text.text_input("Pad token", value=DEFAULT_PAD, key=keys.PAD_TOKEN, disabled=not drop_pad,
                          help="Positions from the first pad token on are not counted, and pads are removed "
                               f"from the texts shown. auto: the pad_token of the tokenizer_config.json beside the "
                               f"run's tokenizer.json (its EOS when it has none), else {PAD_TOKEN}.")
    eos = text.text_input("EOS token", value=DEFAULT_EOS, key=keys.EOS_TOKEN,
                          help="The model's end-of-sequence action: counted (it carries the reward), and "
                               "nothing after it is. When it equals the pad token, its first occurrence is "
                               f"the EOS. auto: that tokenizer_config.json's eos_token, else {EOS_TOKEN}. Empty: no EOS.")
    tokenizer = text.text_input("Tokenizer (empty: found next to the run)", key=keys.TOKENIZER,
                                placeholder="/models/Qwen3-8B or …/tokenizer.json",
                                help="Decodes runs that log token ids (prime-rl's token exports, NeMo-RL): a "
                                     "tokenizer.json or a model folder holding one, read from disk only. Empty: "
                                     "the tokenizer.json lying in the run folder or one of the two folders "
                                     "above it (never in a folder beside them).").strip()
    drop_system = text.checkbox("Drop system prompt", key=keys.DROP_SYSTEM)
    marker = text.text_input("System prompt ends with", value="<|im_end|>", key=keys.SYSTEM_MARKER,
                             disabled=not drop_system)
    return dict(pad_token=(pad or None) if drop_pad else None, eos_token=eos or None, tokenizer=tokenizer or None,
                system_marker=(marker or None) if drop_system else None)


def _trainer_settings(side) -> dict:
    """The trainer's section: where its metrics are, and the warning signs' thresholds. ``Settings`` fields."""
    trainer = side.expander(SECTION_TRAINER)
    metrics_path = trainer.text_input("Metrics file or folder (empty: found near the run)", key=keys.METRICS_PATH,
                                      help="trainer_state.json (TRL), TensorBoard event files, verl's file logger "
                                           "or a JSONL of metrics.").strip()
    trainer.caption("Warning thresholds")
    thresholds = Thresholds(
        ratio_max=trainer.number_input("Policy ratio above", 1.0, 1e6, Thresholds.ratio_max, key="sign_ratio"),
        clip_max=trainer.number_input("Clip fraction above", 0.0, 1.0, Thresholds.clip_max, key="sign_clip"),
        spike_k=trainer.number_input("Spike: robust deviations above the median", 1.0, 100.0, Thresholds.spike_k,
                                     key="sign_spike"),
        entropy_fraction=trainer.number_input("Entropy below this fraction of its early mean", 0.0, 1.0,
                                              Thresholds.entropy_fraction, key="sign_entropy"),
        kl_noise_k=trainer.number_input("Negative KL: below 0 by this many noise scales", 0.0, 100.0,
                                        Thresholds.kl_noise_k, key="sign_kl_noise"))
    return dict(metrics_path=metrics_path, thresholds=thresholds)
