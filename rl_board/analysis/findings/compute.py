"""Every check over a run, ranked (``compute_findings``), and the findings kept in the run's cache folder
while its snapshot is unchanged (``get_findings``)."""

from __future__ import annotations

import json
import os
import threading

import numpy as np

from ...base import fields as F
from ..run import Run
from .agents import _agent_rows, _tool_call_loops, _tool_use_collapse, _turn_faults_rising
from .batches import _dead_groups, _empty_responses, compute_evaluation
from .common import (
    KINDS,
    RANKING,
    Check,
    Finding,
    Findings,
    _reward_rose,
    before_onset,
    compute_empty,
    compute_onset,
    compute_windows,
    rows_frame,
    rows_in_log_order,
)
from .garbled import _garbled_output
from .phrases import _WordIds
from .reward import (
    COMPONENT_MARKERS,
    _component_phrases,
    _not_recomposed,
    _numeric_fields,
    _repetition,
    _spreading_phrases,
    _tracked_fields,
)
from .training import (
    _critic,
    _entropy_collapse,
    _kl_runaway,
    _length_growth,
    _lengths,
    _mismatch,
)
from .vision import _images_dropped


def _checks(run: Run, windows_ok: bool, recompose_note: str = "") -> tuple[Check, ...]:
    samples = run._samples
    responses = bool(samples["response_chars"].notna().any() or (samples["response_len"] >= 0).any())
    few = "" if windows_ok else "needs at least 2 steps with samples"
    agents = bool(_agent_rows(samples).any())
    reasons = {
        "reward_with_spreading_phrases": few or ("" if responses else "no responses logged"),
        "length_growth_with_reward": few or ("" if _lengths(run) is not None else "no response lengths logged"),
        "entropy_collapse": few or ("" if samples["entropy_mean"].notna().any() else "no entropy logged"),
        "training_inference_mismatch": "" if samples["mismatch_kl"].notna().any()
        else "no sampler log-probs beside the trainer's (rollout_logprobs and logprobs)",
        "dead_groups": compute_evaluation(run) or ("" if samples["prompt_key"].notna().any() else "no prompts logged"),
        "empty_responses": "" if responses else "no responses logged",
        "component_with_spreading_phrases": few or ("" if responses else "no responses logged") or (
            "" if any(n != "ref_reward" and any(m in n.lower() for m in COMPONENT_MARKERS)
                      for n, _ in _numeric_fields(samples)) else "no numeric field named like a reward or a score"),
        "kl_runaway": "" if samples["kl_mean"].notna().any() else "no log-probs with reference log-probs",
        "repetition_with_reward": few or ("" if responses else "no responses logged"),
        "critic_cannot_fit": "" if "explained_variance" in run.steps and run.steps["explained_variance"].notna().any()
        else "no values with token rewards logged",
        "tool_use_collapse": few or ("" if agents else "no turns logged"),
        "tool_call_loops": "" if agents else "no turns logged",
        "reward_tracks_field": few or ("" if _numeric_fields(samples) else "no other numeric fields logged"),
        "garbled_output": "" if responses else "no responses logged",
        "images_dropped": "" if F.extra_column("images_dropped") in samples
        else "no samples with both images and the tokens they were trained on",
        "turn_faults_rising": few or ("" if agents else "no turns logged"),
        "reward_not_recomposed": recompose_note,
    }
    return tuple(Check(kind, not reasons[kind], reasons[kind]) for kind in RANKING)


FINDINGS_FILE = "findings.json"  # in the run's cache folder: the findings of its current snapshot


FINDINGS_VERSION = 8  # 8: early = before the onset, onsets by a two-level split; 7: dead_groups not on evaluations; 6: reward_not_recomposed; 5: turn_faults_rising; 4: images_dropped; bump when a definition changes: kept findings of an older one are not used


def get_findings(run: Run, stop: threading.Event | None = None) -> Findings:
    """``compute_findings`` of ``run``, kept in its cache folder for the snapshot it was computed on
    (the manifest's version), so re-opening an unchanged run does not check it again. ``Cancelled`` when
    ``stop`` is set before the checks end (nothing is kept then)."""
    if run.cache is None:
        return compute_findings(run, stop)
    folder, stamp = run.cache
    path = folder / FINDINGS_FILE
    try:
        kept = json.loads(path.read_text())
        if kept["version"] == FINDINGS_VERSION and tuple(kept["stamp"]) == tuple(stamp) \
                and kept["samples"] == len(run._samples):
            return _findings_from_json(kept["findings"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = compute_findings(run, stop)
    try:
        tmp = path.with_name(f".tmp-{os.getpid()}-{FINDINGS_FILE}")
        tmp.write_text(json.dumps({"version": FINDINGS_VERSION, "stamp": list(stamp), "samples": len(run._samples),
                                   "findings": _findings_to_json(found)}))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):  # a cache that can't be written only means checking again next time
        pass
    return found


def build_findings_json(found: Findings, settings: dict) -> dict:
    """What ``rl-board findings --json`` prints and ``Run.findings()`` returns (docs/schemas/findings.json):
    ``settings`` (how the run was read), the findings most worrying first (``to_json(full=True)``), and
    ``not_checked``: each kind no check could run for on this run, with the reason (no KL logged, too few
    steps…)."""
    return {"settings": settings, "findings": found.to_json(full=True),
            "not_checked": [{"kind": c.kind, "reason": c.note} for c in found.checks if not c.ran]}


def _findings_to_json(found: Findings) -> dict:
    return {"findings": [{"kind": f.kind, "first_step": f.first_step, "last_step": f.last_step,
                          "evidence": f.evidence, "samples": list(f.samples), "message": f.message,
                          "labels": [int(label) for label in f.labels], "focus_step": f.focus_step,
                          "phrases": [list(p) for p in f.phrases], "onset_step": f.onset_step,
                          "amount": f.amount} for f in found.findings],
            "checks": [[c.kind, c.ran, c.note] for c in found.checks],
            "words_from_tokens": found.words_from_tokens}


def _findings_from_json(raw: dict) -> Findings:
    findings = tuple(Finding(f["kind"], f["first_step"], f["last_step"], f["evidence"], tuple(f["samples"]),
                             f["message"], tuple(f["labels"]), f["focus_step"], tuple(map(tuple, f["phrases"])),
                             f["onset_step"], f["amount"])
                     for f in raw["findings"])
    return Findings(findings, tuple(Check(kind, ran, note) for kind, ran, note in raw["checks"]),
                    raw["words_from_tokens"])


class Cancelled(Exception):
    """The checks were stopped before they ended (``stop`` was set: the page left the run)."""


def compute_findings(run: Run, stop: threading.Event | None = None) -> Findings:
    """Every finding of the eighteen checks on ``run``, ranked (``rank_findings``; see the module's
    definitions). Reads the words of the early and late windows' samples (when the reward or a reward
    component rose) and every response's words as ids (garbled output) from the run's segments; only a
    raised ``kl_runaway`` reads log lines again (the late window's token lists, for the tokens carrying
    the KL). With ``stop``, raises ``Cancelled`` as soon as it is set (checked between the checks and
    between the samples a check reads again)."""
    samples = run._samples
    if samples.empty:
        return Findings((), tuple(Check(kind, False, "no samples") for kind in KINDS))
    early_steps, late_steps = compute_windows(run)
    step = samples[F.STEP].to_numpy()
    early_rows = rows_in_log_order(samples, np.isin(step, early_steps))
    late_rows = rows_in_log_order(samples, np.isin(step, late_steps))
    early, late = rows_frame(samples, early_rows), rows_frame(samples, late_rows)
    reward_onset = compute_onset(run, samples[F.REWARD])
    early_reward = before_onset(early, reward_onset)  # the early window of the findings about the reward rising
    rose, r_early, r_late = _reward_rose(early_reward, late)
    both = rows_frame(samples, np.concatenate([early_rows, late_rows]))  # responses 0.. early, len(early).. late
    from_tokens = bool(both["has_tokens"].to_numpy(dtype=bool).any())
    kept: list[_WordIds] = []

    def words(early_part: int) -> _WordIds:  # read once, only when a check needs them
        if not kept:
            kept.append(_WordIds(*run.word_ids(both)))
        return kept[0].without(early_part, len(early))

    checks = [
        lambda: [_spreading_phrases(run, early_reward, late, rose, r_early, r_late,
                                    words(len(early_reward)) if rose else None, from_tokens, reward_onset)],
        lambda: [_length_growth(run, early_reward, late, rose, r_early, r_late, reward_onset)],
        lambda: [_entropy_collapse(run, early, late)],
        lambda: [_mismatch(run)],
        lambda: [_dead_groups(run)],
        lambda: [_empty_responses(run, compute_empty(run))],
        lambda: _component_phrases(run, early, late, words, from_tokens),
        lambda: [_kl_runaway(run, early, late, stop)],
        lambda: [_repetition(run, early_reward, late, rose, r_early, r_late, reward_onset)],
        lambda: [_critic(run)],
        lambda: [_tool_use_collapse(run, early, late)],
        lambda: [_tool_call_loops(run)],
        lambda: _tracked_fields(run, early, late),
        lambda: [_garbled_output(run, early_steps, late_steps)],
        lambda: [_images_dropped(run)],
        lambda: _turn_faults_rising(run, early, late),
        lambda: [recompose(_not_recomposed(run))],
    ]
    notes = []

    def recompose(got):  # the finding, its note kept for the checks
        notes.append(got[1])
        return got[0]

    found = []
    for check in checks:
        if stop is not None and stop.is_set():
            raise Cancelled
        found += check()
    if stop is not None and stop.is_set():  # a check cut short (kl_runaway's reads) is not a result
        raise Cancelled
    return Findings(rank_findings([f for f in found if f is not None]),
                    _checks(run, len(early_steps) + len(late_steps) > 0 and early_steps != late_steps, notes[0]),
                    from_tokens and bool(kept))


def rank_findings(findings: list[Finding]) -> tuple[Finding, ...]:
    """``findings`` by ``RANKING``, then, within a kind, larger ``size`` first (stable)."""
    return tuple(sorted(findings, key=lambda f: (RANKING.index(f.kind), -f.size)))
