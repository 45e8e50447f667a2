"""Which improvements of a diff carry a finding of run B: the prompts B got better on whose B samples are
the evidence of a hacked reward (a spreading phrase, a field the reward tracks), so a "better" prompt that
may be better only by the hack is marked (``diff --json``'s ``b_findings``, the page's column)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .diff import PromptDiff, in_steps, match_keys
from .run import Run

#: The kinds of B's findings that mark an improvement: the reward hacked (a spreading phrase, a component's
#: phrase, repetition, a field the reward tracks), so a "better" prompt may be better only by the hack.
MARK_KINDS = ("reward_with_spreading_phrases", "component_with_spreading_phrases", "repetition_with_reward",
              "reward_tracks_field")
MARK_ROWS = 1_000  # improvements (most positive first) whose shown B response is looked at for a finding's phrases


@dataclass(frozen=True)
class FindingMarks:
    """``kinds``: match key -> the kinds of B's findings (``MARK_KINDS``, in the findings' order) that an
    improvement's B samples carry; ``checked``: the improvements whose shown response was looked at for
    phrases (the first ``MARK_ROWS``, most positive first), of ``improvements``."""

    kinds: dict
    checked: int
    improvements: int


def compute_finding_marks(diff: PromptDiff, run_b: Run, findings) -> FindingMarks:
    """Which improvements of ``diff`` (delta > 0) carry a finding of B (``findings``: B's ``Findings``; only
    ``MARK_KINDS``): one of the prompt's B samples in B's steps is one of the finding's evidence samples, or,
    for a finding with phrases (spreading phrases), the B response the diff shows (B's highest reward) holds
    one of them, as words (the findings' words: tokens, else whitespace-separated) in a row."""
    from .findings.common import compute_words

    table = diff.table
    delta = table["delta"].to_numpy(dtype=float)
    better = np.flatnonzero(delta > 0)
    better = better[np.argsort(-delta[better], kind="stable")]
    improved = set(table.index[better].tolist())
    kinds: dict = {}
    chosen = [f for f in findings.findings if f.kind in MARK_KINDS]
    if not improved or not chosen:
        return FindingMarks(kinds, 0, len(better))
    keys_b = match_keys(run_b, diff.by)[0]
    if diff.user_keys is not None:
        keys_b = keys_b.map(diff.user_keys[1])
    kept = pd.Series(in_steps(run_b._samples, diff.steps_b), index=run_b._samples.index)
    checked = better[:MARK_ROWS]
    shown = table["b_sample"].to_numpy()[checked]
    words = compute_words(run_b, run_b._samples.loc[shown])[0] if any(f.phrases for f in chosen) else []
    sizes = sorted({len(phrase) for f in chosen for phrase in f.phrases})
    grams = [{size: set(zip(*(said[i:] for i in range(size)))) for size in sizes} for said in words]
    for finding in chosen:
        hit = {keys_b.at[label] for label in finding.labels
               if label in keys_b.index and kept.at[label] and keys_b.at[label] in improved}
        for phrase in finding.phrases:
            hit.update(table.index[at] for at, held in zip(checked.tolist(), grams) if tuple(phrase) in held[len(phrase)])
        for key in hit:
            kinds.setdefault(key, []).append(finding.kind)
    return FindingMarks({key: tuple(dict.fromkeys(got)) for key, got in kinds.items()}, len(checked), len(better))
