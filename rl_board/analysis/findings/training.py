"""Findings about the training's health: length growth with the reward (2), entropy collapse (3),
training-inference mismatch (4), KL runaway (8) and critics that can't fit (10)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd

from ...base import fields as F
from ..run import Run
from .common import (
    Finding,
    _ids,
    _json_number,
    _mean,
    _share_of_steps,
    _top_samples,
    _typical_samples,
    before_onset,
    compute_onset,
)

LENGTH_GROWTH = 1.5  # mean length L / mean length E


EVIDENCE_SAMPLES = 3  # samples shown for a length growth or an entropy collapse


ENTROPY_FRACTION = 0.5  # mean entropy L <= this * mean entropy E


MISMATCH_KL_MAX = 1e-3  # a step's mean mismatch KL above this is flagged


MISMATCH_SAMPLES = 3


KL_RUNAWAY = 0.5  # k3 per token over L (0.5 at a log-ratio of about 0.86 nat): far from the reference


KL_TOKENS = 5  # tokens named in a KL finding's evidence


KL_SAMPLES = 3


KL_CANDIDATES = 100  # late samples with the largest summed KL among which the evidence is chosen


# of the steps with an explained variance: below 0 the values predict returns worse than their mean does,
# which a learning critic does now and then, but not on a quarter of the steps
CRITIC_NEGATIVE_SHARE = Fraction(1, 4)


def _lengths(run: Run) -> tuple[pd.Series, str] | None:
    """Each sample's length as ``response_len_mean`` counts it, and its unit; None without any."""
    samples = run._samples
    tokens = samples["response_len"].astype(float)
    if (tokens >= 0).any():
        return tokens.where(tokens >= 0), "tokens"
    chars = samples["response_chars"].astype(float)
    return (chars, "characters") if chars.notna().any() else None


def _length_growth(run, early, late, rose, r_early, r_late, onset):
    lengths = _lengths(run)
    if not rose or lengths is None:
        return None
    values, unit = lengths
    l_early, l_late = _mean(values[early.index]), _mean(values[late.index])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.float64(l_late) / np.float64(l_early)
    if not ratio >= LENGTH_GROWTH:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    message = (f"responses grew {ratio:.2g}× longer ({l_early:.3g} → {l_late:.3g} {unit}) while reward rose from "
               f"{r_early:.3g} to {r_late:.3g} — the policy may be lengthening answers for reward")
    labels = _typical_samples(late, values, EVIDENCE_SAMPLES)
    return Finding("length_growth_with_reward", steps[0], steps[-1],
                   {"length_early": _json_number(l_early), "length_late": _json_number(l_late)},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, focus_step=steps[-1], onset_step=onset,
                   amount=f"{ratio:.3g}× longer", size=float(ratio))


def _entropy_collapse(run, quarter, late):
    onset = compute_onset(run, run._samples["entropy_mean"], falls=True)
    early = before_onset(quarter, onset)
    e_early, e_late = _mean(early["entropy_mean"]), _mean(late["entropy_mean"])
    if not e_late <= ENTROPY_FRACTION * e_early:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    message = (f"entropy fell from {e_early:.3g} to {e_late:.3g} per token between the early steps and the "
               "last quarter — the policy is collapsing onto few tokens (less exploration)")
    labels = _top_samples(run, late, "entropy_mean", EVIDENCE_SAMPLES, lowest=True)
    return Finding("entropy_collapse", steps[0], steps[-1],
                   {"entropy_early": _json_number(e_early), "entropy_late": _json_number(e_late)},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, focus_step=steps[-1], onset_step=onset,
                   amount=f"{(1 - e_late / e_early) * 100:.3g} % lower" if e_early else "")


def _mismatch(run):
    if "mismatch_kl_mean" not in run.steps:
        return None
    per_step = run.steps["mismatch_kl_mean"].astype(float)
    flagged = per_step[per_step > MISMATCH_KL_MAX]  # NaN is not above it
    if flagged.empty:
        return None
    top = float(flagged.max())
    focus = int(flagged.index[flagged.to_numpy() == top][0])
    samples = run._samples[(run._samples[F.STEP] == focus) & run._samples["mismatch_kl"].notna()]
    ordered = samples.sort_values(["mismatch_kl", F.FILE, F.LINE], ascending=[False, True, True], kind="stable")
    labels = tuple(ordered.index[:MISMATCH_SAMPLES])
    steps = [int(s) for s in flagged.index]
    message = (f"sampler and trainer disagree: mismatch KL above {MISMATCH_KL_MAX:g} at {len(steps)} "
               f"step{'s' if len(steps) != 1 else ''} (largest {top:.3g} at step {focus}) — check the inference "
               "engine's precision and weight sync, or correct for it (importance sampling)")
    known = int(per_step.notna().sum())
    return Finding("training_inference_mismatch", steps[0], steps[-1], {"steps": steps, "max": top},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, focus,
                   amount=_share_of_steps(len(steps), known, "steps"))


def compute_kl_tokens(run: Run, frame: pd.DataFrame, stop=None) -> list[tuple[str, float]]:
    """The ``KL_TOKENS`` token strings carrying most of the summed per-token k3 of ``frame``'s samples
    (their counted positions, NaN left out), with their share of that sum, largest first, then by
    token. Reads those samples' token lists again from their source (a sample that can't be read is
    left out; once ``stop``, a ``threading.Event``, is set, the samples not read yet are)."""
    return _kl_tokens(run, frame, (), stop)[0]


def _kl_tokens(run: Run, frame: pd.DataFrame, keep, stop=None) -> tuple[list[tuple[str, float]], dict]:
    """(``compute_kl_tokens``, for each label of ``keep`` read: its own summed k3 by token string), one read."""
    from ...derive.metrics import kl_per_token

    keep = set(keep)
    totals: dict[str, float] = {}
    kept: dict = {}
    labels = frame.index[frame["kl_sum"].notna().to_numpy()]
    for label, tokens in zip(labels, run.samples_tokens(labels, stop)):
        if tokens is None:
            continue
        kl = kl_per_token(tokens.logprobs, tokens.ref_logprobs, "k3")
        ok = ~tokens.is_pad & ~np.isnan(kl)
        own = kept.setdefault(label, {}) if label in keep else None
        for token, value in zip(np.asarray(tokens.tokens, dtype=object)[ok].tolist(), kl[ok].tolist()):
            totals[token] = totals.get(token, 0.0) + value
            if own is not None:
                own[token] = own.get(token, 0.0) + value
    whole = math.fsum(totals.values())
    if not whole > 0:
        return [], kept
    best = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:KL_TOKENS]
    return [(token, value / whole) for token, value in best], kept


def _kl_candidates(frame: pd.DataFrame) -> pd.Index:
    """The ``KL_CANDIDATES`` rows of ``frame`` with the largest ``kl_sum`` (NaN left out), then file and line."""
    have = frame[frame["kl_sum"].notna()]
    return have.sort_values(["kl_sum", F.FILE, F.LINE], ascending=[False, True, True],
                            kind="stable").index[:KL_CANDIDATES]


def compute_kl_samples(frame: pd.DataFrame, named: set[str], own: dict) -> tuple:
    """The evidence of a KL runaway (the late window's samples ``frame``): of the ``KL_CANDIDATES`` with the
    largest summed k3 (``kl_sum``; then file and line), the ``KL_SAMPLES`` with the most k3 on the ``named``
    tokens (``own``: each candidate's summed k3 by token), more than 0; ties in candidate order. A sample
    with a high KL per token but few tokens (an empty answer's EOS) carries little of the late KL and none
    of its named tokens: it is not shown."""
    candidates = _kl_candidates(frame)
    on_named = [(math.fsum(v for t, v in own.get(label, {}).items() if t in named), i, label)
                for i, label in enumerate(candidates)]
    return tuple(label for value, _, label in sorted(on_named, key=lambda x: (-x[0], x[1]))[:KL_SAMPLES]
                 if value > 0)


def _kl_runaway(run, quarter, late, stop=None):
    onset = compute_onset(run, run._samples["kl_mean"])
    early = before_onset(quarter, onset)
    k_early, k_late = _mean(early["kl_mean"]), _mean(late["kl_mean"])
    if not k_late >= KL_RUNAWAY:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    tokens, own = _kl_tokens(run, late, _kl_candidates(late), stop)
    labels = compute_kl_samples(late, {t for t, _ in tokens}, own)
    message = (f"KL to the reference reached {k_late:.3g} per token over the last quarter of the steps (from "
               f"{k_early:.3g}) — the policy is running away from its reference (raise the KL penalty or check it)")
    return Finding("kl_runaway", steps[0], steps[-1],
                   {"kl_early": _json_number(k_early), "kl_late": _json_number(k_late),
                    "tokens": [{"token": t, "share": share} for t, share in tokens]},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, steps[-1],
                   onset_step=onset,
                   amount=f"KL {k_late:.3g} per token"
                   + (f", {k_late / k_early:.3g}× the early" if k_early > 0 else ""), size=k_late)


def _critic(run):
    if "explained_variance" not in run.steps:
        return None
    per_step = run.steps["explained_variance"].astype(float).dropna()
    below = per_step[per_step < 0]
    if below.empty or Fraction(len(below), len(per_step)) < CRITIC_NEGATIVE_SHARE:
        return None
    steps = [int(s) for s in below.index]
    low = float(below.min())
    focus = int(below.index[below.to_numpy() == low][0])
    message = (f"the critic explains less than nothing at {len(steps)} of {len(per_step)} steps (explained "
               f"variance below 0, lowest {low:.3g} at step {focus}) — its values predict returns worse than "
               "their mean; check the value head's learning rate and warm-up")
    return Finding("critic_cannot_fit", steps[0], steps[-1], {"steps": steps, "min": low}, (), message,
                   focus_step=focus, amount=_share_of_steps(len(steps), len(per_step), "steps"),
                   size=len(steps) / len(per_step))
