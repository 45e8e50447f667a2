"""Findings about a step's batch: dead GRPO groups (5) and empty responses (6)."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import PurePosixPath

import numpy as np
import pandas as pd

from ...base import fields as F
from .common import Finding, _ids, _log_order, _percent, _share_of_steps

GROUPED_SHARE = Fraction(1, 2)  # of a step's samples in groups of >= 2: GRPO-shaped


DEAD_GROUP_SHARE = Fraction(1, 2)  # of those groups with all rewards equal: a dead step


DEAD_STEP_SHARE = Fraction(1, 10)  # of the GRPO-shaped steps dead: raised


#: a split whose name begins with one of these words (its first part before "/", "_" or "-") holds evaluations:
#: verl's ``validation``, prime-rl's ``eval/all``, tinker's ``eval_L``, rLLM's ``val`` and ``test``, SkyRL's ``eval``
EVALUATION_SPLIT = re.compile(r"^(?:eval|evaluation|val|valid|validation|test)(?:[/_-]|$)", re.I)


#: a run folder without splits named so holds evaluations (verl's ``val_data``); not ``test``, which folders of
#: runs made to try something are often named
EVALUATION_FOLDER = re.compile(r"^(?:eval|evaluation|val|valid|validation)(?:[_-]|$)", re.I)


#: readers whose every file is an evaluation unless its split says ``train`` (vf-eval's results.jsonl,
#: prime-rl's evals of checkpoints)
EVALUATION_READERS = ("verifiers-v0",)


EMPTY_SHARE = Fraction(1, 20)  # of a step's samples with no words


EMPTY_SAMPLES = 3


def compute_dead_steps(samples: pd.DataFrame) -> tuple[list[int], list[int]]:
    """(the GRPO-shaped steps, the dead ones) of definition 5, ascending."""
    rewarded = samples["has_reward"].astype(bool) if "has_reward" in samples else True
    have = samples[samples["prompt_key"].notna() & rewarded]  # a sample without a reward is in no group
    sizes = samples.groupby(F.STEP, sort=True).size()
    if have.empty:
        return [], []
    grouped = have.groupby([F.STEP, "prompt_key"], sort=False)[F.REWARD]
    groups = pd.DataFrame({"size": grouped.size(), "distinct": grouped.nunique(dropna=False)})
    groups = groups[groups["size"] >= 2]
    per_step = pd.DataFrame({"size": groups["size"].to_numpy(), "dead": (groups["distinct"] == 1).to_numpy(),
                             "groups": 1}, index=groups.index.get_level_values(0)).groupby(level=0, sort=True).sum()
    steps = per_step.index.to_numpy()
    # every step's shares at once, compared exactly (a / b >= p / q as a * q >= p * b)
    in_groups, step_size = per_step["size"].to_numpy(np.int64), sizes.reindex(steps).to_numpy(np.int64)
    is_shaped = in_groups * GROUPED_SHARE.denominator >= GROUPED_SHARE.numerator * step_size
    is_dead = is_shaped & (per_step["dead"].to_numpy(np.int64) * DEAD_GROUP_SHARE.denominator
                           >= DEAD_GROUP_SHARE.numerator * per_step["groups"].to_numpy(np.int64))
    shaped, dead = [int(step) for step in steps[is_shaped]], [int(step) for step in steps[is_dead]]
    return shaped, dead


def compute_evaluation(run) -> str:
    """Why ``run``'s samples are evaluations, on which nothing is trained ("" when they are not): the split
    read is named like one (``EVALUATION_SPLIT``), or, for a run without splits, its folder is (verl's
    ``val_data`` opened alone), or the run is of a format that holds only evaluations (``EVALUATION_READERS``)
    and its split is not ``train``."""
    split = run.split or ""
    if EVALUATION_SPLIT.match(split):
        return f"split {split!r} is an evaluation (nothing is trained on it)"
    folder = PurePosixPath(str(run.path).rstrip("/")).name
    if not split and EVALUATION_FOLDER.match(folder):
        return f"folder {folder!r} is named like an evaluation (nothing is trained on it)"
    if run.report.reader in EVALUATION_READERS and not split.startswith("train"):
        return f"{run.report.reader} results are evaluations (nothing is trained on them)"
    return ""


def _dead_groups(run):
    if compute_evaluation(run):
        return None
    shaped, dead = compute_dead_steps(run._samples)
    if not dead or Fraction(len(dead), len(shaped)) < DEAD_STEP_SHARE:
        return None
    message = (f"{len(dead)} of {len(shaped)} GRPO-shaped steps have at least half of their prompt groups with all "
               "rewards equal — those groups give no learning signal (too easy or too hard)")
    return Finding("dead_groups", dead[0], dead[-1], {"steps": dead}, (), message, focus_step=dead[0],
                   amount=_share_of_steps(len(dead), len(shaped), "GRPO-shaped steps"))


def _empty_responses(run, empty: np.ndarray):
    samples = run._samples
    per_step = pd.DataFrame({"empty": empty, F.STEP: samples[F.STEP].to_numpy()}).groupby(F.STEP, sort=True)["empty"]
    counts, sizes = per_step.sum(), per_step.size()
    steps = [int(s) for s in counts.index if Fraction(int(counts[s]), int(sizes[s])) >= EMPTY_SHARE]
    if not steps:
        return None
    hits = _log_order(samples[empty & samples[F.STEP].isin(steps).to_numpy()])
    labels = tuple(hits.index[:EMPTY_SAMPLES])
    message = (f"{len(steps)} step{'s' if len(steps) != 1 else ''} with at least {_percent(EMPTY_SHARE)} empty "
               f"responses (no words besides pad and EOS), first at step {steps[0]}")
    return Finding("empty_responses", steps[0], steps[-1], {"steps": steps}, _ids(run, samples.loc[list(labels)]),
                   message, labels, steps[0], amount=_share_of_steps(len(steps), len(sizes), "steps"))
