"""Findings about agents: tool use that collapses (11), tool calls repeated in a loop (12) and a turn fault
whose share rises (16)."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd

from ...base import fields as F
from ...derive.faults import KINDS as FAULT_KINDS
from ...derive.faults import kind_bit
from ..run import Run
from ..search import fault_kinds
from .common import (
    Finding,
    _ids,
    _json_number,
    _log_order,
    _mean,
    _percent,
    _share_of_steps,
    _top_samples,
    before_onset,
    compute_onset,
)

COLLAPSE_SAMPLES = 3  # late samples with turns shown, the fewest tool calls first


TOOL_USE_FRACTION = 0.5  # mean tool calls L <= this * mean tool calls E: the agent stopped using its tools


TOOL_USE_MIN = 0.5  # mean tool calls per sample over E: below it the agent hardly used tools to begin with


LOOP_REPEATS = 3  # the same call (name and arguments) this often in one sample: it is not reading the results


LOOP_STEP_SHARE = Fraction(1, 10)  # of a step's samples looping


LOOP_SAMPLES = 3


FAULT_SHARE_LATE = Fraction(1, 10)  # of the late window's samples with turns having the fault, at least
FAULT_RISE = 2  # and at least this many times its early share
FAULT_SAMPLES = 3


def _agent_rows(samples: pd.DataFrame) -> pd.Series:
    return samples["has_messages"].astype(bool) if "has_messages" in samples else pd.Series(False, samples.index)


def _tool_use_collapse(run, quarter, late):
    column = F.extra_column(F.NUM_TOOL_CALLS)
    if column not in run._samples:
        return None
    agents = _agent_rows(run._samples)
    onset = compute_onset(run, run._samples[column].where(agents), falls=True)
    early = before_onset(quarter, onset)
    c_early = _mean(early.loc[agents[early.index].to_numpy(), column])
    c_late = _mean(late.loc[agents[late.index].to_numpy(), column])
    if not (c_early >= TOOL_USE_MIN and c_late <= TOOL_USE_FRACTION * c_early):
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    labels = _top_samples(run, late[agents[late.index].to_numpy()], column, COLLAPSE_SAMPLES, lowest=True)
    message = (f"tool calls per sample fell from {c_early:.3g} to {c_late:.3g} between the early steps and the last "
               "quarter — the agent stopped using its tools")
    return Finding("tool_use_collapse", steps[0], steps[-1],
                   {"calls_early": _json_number(c_early), "calls_late": _json_number(c_late)},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, focus_step=steps[-1], onset_step=onset, amount=f"{(1 - c_late / c_early) * 100:.3g} % fewer calls",
                   size=1 - c_late / c_early)


def compute_loops(run: Run) -> np.ndarray:
    """Whether each sample of ``run._samples`` loops (definition 12); bool, shape (samples,)."""
    samples = run._samples
    loops = np.zeros(len(samples), bool)
    agents = np.flatnonzero(_agent_rows(samples).to_numpy())
    if not len(agents):
        return loops
    calls = run.tool_call_lists(samples.iloc[agents])
    for place, made in zip(agents.tolist(), calls):
        if len(made) >= LOOP_REPEATS:
            loops[place] = max(Counter(made).values()) >= LOOP_REPEATS
    return loops


def _tool_call_loops(run):
    samples = run._samples
    loops = compute_loops(run)
    if not loops.any():
        return None
    per_step = pd.DataFrame({"loops": loops, F.STEP: samples[F.STEP].to_numpy()}).groupby(F.STEP, sort=True)["loops"]
    counts, sizes = per_step.sum(), per_step.size()
    steps = [int(s) for s in counts.index if Fraction(int(counts[s]), int(sizes[s])) >= LOOP_STEP_SHARE]
    if not steps:
        return None
    hits = _log_order(samples[loops & samples[F.STEP].isin(steps).to_numpy()])
    labels = tuple(hits.index[:LOOP_SAMPLES])
    message = (f"{len(steps)} step{'s' if len(steps) != 1 else ''} where at least {_percent(LOOP_STEP_SHARE)} of the "
               f"samples make one tool call (same name and arguments) {LOOP_REPEATS} times or more, first at step "
               f"{steps[0]} — the agent is looping instead of reading the results")
    return Finding("tool_call_loops", steps[0], steps[-1], {"steps": steps}, _ids(run, samples.loc[list(labels)]),
                   message, labels, steps[0], amount=_share_of_steps(len(steps), len(sizes), "steps"),
                   size=len(steps) / len(sizes))


def _turn_faults_rising(run, quarter, late) -> list[Finding]:
    """Definition 16, one finding per fault kind whose share of the samples with turns rose."""
    agents = _agent_rows(run._samples).to_numpy()
    if not agents.any():
        return []
    bits = fault_kinds(run._samples)
    in_late = np.isin(run._samples.index, late.index) & agents
    n_late = int(in_late.sum())
    if not n_late:
        return []
    found = []
    for kind in FAULT_KINDS:
        has = (bits & kind_bit(kind)) != 0
        indicator = pd.Series(np.where(agents, has.astype(float), np.nan), index=run._samples.index)
        onset = compute_onset(run, indicator)
        in_early = np.isin(run._samples.index, before_onset(quarter, onset).index) & agents
        n_early = int(in_early.sum())
        if not n_early:
            continue
        share_early = Fraction(int((has & in_early).sum()), n_early)
        share_late = Fraction(int((has & in_late).sum()), n_late)
        if share_late < FAULT_SHARE_LATE or share_late < FAULT_RISE * share_early:
            continue
        hits = _log_order(run._samples[has & in_late])
        labels = tuple(hits.index[:FAULT_SAMPLES])
        steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
        message = (f"{kind} in {_percent(share_late)} of the late trajectories against {_percent(share_early)} early"
                   " — open one to see which turn failed")
        found.append(Finding("turn_faults_rising", steps[0], steps[-1],
                             {"fault": kind, "share_early": float(share_early), "share_late": float(share_late)},
                             _ids(run, run._samples.loc[list(labels)]), message, labels, steps[0],
                             onset_step=onset,
                             amount=f"{_percent(share_late)} of late trajectories", size=float(share_late - share_early)))
    return found
