"""Findings that the reward is being hacked: the total reward with spreading phrases (1), one reward
component with spreading phrases (7), repetition paid for (9) and a field the reward tracks (13)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd

from ...base import fields as F
from ..transcript import WEIGHT_PREFIX, component_names
from .common import (
    Finding,
    _ids,
    _json_number,
    _mean,
    _percent,
    _rise,
    _std,
    _top_samples,
    before_onset,
    compute_onset,
)
from .phrases import _find_phrases, _phrase_samples, _phrase_text

# a hack of one component is often spread over several keywords, none of which reaches half of the
# late responses (a real TRL keyword hack: each of its four keywords stays below it)
COMPONENT_PHRASE_MIN_SHARE = Fraction(1, 10)  # of the late responses


COMPONENT_MARKERS = ("reward", "score")  # a numeric field whose name has one of these is a reward component


REPETITION_MIN = 0.1  # mean 4-gram repetition over L: a tenth of a response's 4-grams repeat


REPETITION_GROWTH = 2  # ... and twice what it was over E (natural text repeats a little)


REPETITION_SAMPLES = 3


TRACK_CORRELATION = 0.8  # Pearson correlation of a field with the reward: the reward follows the field closely


TRACK_GROWTH = 1.5  # mean of the field over L / over E: and the policy is producing more of it


TRACK_SAMPLES = 3  # late samples shown, the highest values of the field first


TRACK_RESTATES = 0.95  # |correlation| from which a field restates the outcome the reward pays for (verl's acc)


#: a field whose name has one of these is computed from the reward (TRL's ``advantage``: the reward minus its
#: group's mean, about 0 over any window, so its late / early ratio is noise): never a feature it pays for
DERIVED_MARKERS = ("advantage",)


def _spreading_phrases(run, early, late, rose, r_early, r_late, words, from_tokens, onset):
    phrases = _find_phrases(words, len(early), late[F.REWARD].to_numpy(dtype=float)) if rose else []
    if not phrases:
        return None
    labels = _phrase_samples(late, phrases, run._samples[F.REWARD])
    joiner = "" if from_tokens else " "
    top, early_share, late_share, _ = phrases[0]
    more = f" (and {len(phrases) - 1} more phrase{'s' if len(phrases) > 2 else ''})" if len(phrases) > 1 else ""
    message = (f"reward rose from {r_early:.3g} to {r_late:.3g} while \"{_phrase_text(top, joiner)}\" spread from "
               f"{_percent(early_share)} to {_percent(late_share)} of responses{more} — possible reward hacking")
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    return Finding(
        "reward_with_spreading_phrases", steps[0], steps[-1],
        {"reward_early": _json_number(r_early), "reward_late": _json_number(r_late),
         "phrases": [{"tokens": list(g), "share_early": float(e), "share_late": float(lt)}
                     for g, e, lt, _ in phrases]},
        _ids(run, run._samples.loc[labels]), message, tuple(labels), steps[-1], tuple(p[0] for p in phrases),
        onset, "reward " + _rise(r_early, r_late, _std(early[F.REWARD])))


def compute_reward_components(samples: pd.DataFrame, rows: pd.Index) -> list[tuple[str, str]]:
    """The reward components of definition 7 as (name, column of ``samples``): the numeric fields other
    than ``reward`` and ``ref_reward`` whose name contains one of ``COMPONENT_MARKERS`` (any case),
    with at least two distinct values over ``rows`` (E and L)."""
    return [(name, column) for name, column in _numeric_fields(samples)
            if name != "ref_reward" and not name.startswith(WEIGHT_PREFIX)
            and any(m in name.lower() for m in COMPONENT_MARKERS)
            and samples.loc[rows, column].dropna().nunique() >= 2]


def _numeric_fields(samples: pd.DataFrame) -> list[tuple[str, str]]:
    """The samples' numeric fields besides ``reward`` with any value, as (name, column): the canonical
    scalars, then the extras, in column order."""
    named = [(name, name) for name in F.SCALAR_FIELDS if name in samples]
    named += [(F.extra_name(c), c) for c in F.extra_columns(samples.columns)]
    return [(name, column) for name, column in named if samples[column].notna().any()]


def _component_phrases(run, quarter, late, words, from_tokens) -> list[Finding]:
    out = []
    both = quarter.index.append(late.index)
    for name, column in compute_reward_components(run._samples, both):
        values = run._samples[column].astype(float)
        onset = compute_onset(run, values)
        early = before_onset(quarter, onset)
        c_early, c_late, c_std = _mean(values[early.index]), _mean(values[late.index]), _std(values[early.index])
        rise = c_late - c_early
        if not (rise > 0 and rise >= c_std):
            continue
        phrases = _find_phrases(words(len(early)), len(early), values[late.index].to_numpy(), COMPONENT_PHRASE_MIN_SHARE)
        if not phrases:
            continue
        labels = _phrase_samples(late, phrases, values)
        joiner = "" if from_tokens else " "
        top, early_share, late_share, _ = phrases[0]
        more = f" (and {len(phrases) - 1} more phrase{'s' if len(phrases) > 2 else ''})" if len(phrases) > 1 else ""
        message = (f"reward component {name} rose from {c_early:.3g} to {c_late:.3g} while "
                   f"\"{_phrase_text(top, joiner)}\" spread from {_percent(early_share)} to {_percent(late_share)} "
                   f"of responses{more} — possible hacking of that component")
        steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
        out.append(Finding(
            "component_with_spreading_phrases", steps[0], steps[-1],
            {"component": name, "early": _json_number(c_early), "late": _json_number(c_late),
             "phrases": [{"tokens": list(g), "share_early": float(e), "share_late": float(lt)}
                         for g, e, lt, _ in phrases]},
            _ids(run, run._samples.loc[labels]), message, tuple(labels), steps[-1], tuple(p[0] for p in phrases),
            onset, "component " + _rise(c_early, c_late, c_std),
            rise / c_std if c_std > 0 else math.inf))
    return out


def _repetition(run, early, late, rose, r_early, r_late, onset):
    p_early, p_late = _mean(early["repeat_4gram"]), _mean(late["repeat_4gram"])
    if not (rose and p_late >= REPETITION_MIN and p_late >= REPETITION_GROWTH * p_early):
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    labels = _top_samples(run, late, "repeat_4gram", REPETITION_SAMPLES)
    message = (f"4-gram repetition grew from {p_early:.3g} to {p_late:.3g} (share of a response's 4-grams that "
               f"repeat) while reward rose from {r_early:.3g} to {r_late:.3g} — the policy may be repeating itself "
               "for reward")
    return Finding("repetition_with_reward", steps[0], steps[-1],
                   {"repetition_early": _json_number(p_early), "repetition_late": _json_number(p_late)},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, steps[-1],
                   onset_step=onset,
                   amount=f"repetition {p_late / p_early:.3g}× the early" if p_early > 0 else "", size=p_late)


def compute_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of ``x`` and ``y`` over the places where both are finite; NaN with fewer than
    2 such places or a constant side."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 2:
        return math.nan
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return float((dx * dy).sum()) / denominator if denominator > 0 else math.nan


def compute_restates_reward(values: np.ndarray, reward: np.ndarray, correlation: float) -> bool:
    """Whether a field restates the outcome the reward pays for rather than a feature it may be paying
    for: its |correlation| with the reward is >= ``TRACK_RESTATES``, or it is a 0/1 field (both values
    taken) that the reward separates, every sample with one value having a higher reward than every
    sample with the other (the field is 1 exactly above or exactly below some reward: the reward is a
    step function of it plus what the other value's samples do not reach). Over the samples with both
    values finite."""
    if abs(correlation) >= TRACK_RESTATES:
        return True
    ok = np.isfinite(values) & np.isfinite(reward)
    values, reward = values[ok], reward[ok]
    ones, zeros = values == 1, values == 0
    if not (ones | zeros).all() or not ones.any() or not zeros.any():
        return False
    return bool(reward[ones].min() > reward[zeros].max() or reward[zeros].min() > reward[ones].max())


def _tracked_fields(run, quarter, late) -> list[Finding]:
    samples = run._samples
    components = {name for name, _ in compute_reward_components(samples, quarter.index.append(late.index))}
    reward = samples[F.REWARD].to_numpy(dtype=float)
    out = []
    for name, column in _numeric_fields(samples):
        if name in components or any(m in name.lower() for m in DERIVED_MARKERS):
            continue
        values = samples[column].astype(float)
        # the correlation first: it needs no window, and most fields fail it (no step means to split for them)
        correlation = compute_correlation(values.to_numpy(), reward)
        if not correlation >= TRACK_CORRELATION or compute_restates_reward(values.to_numpy(), reward, correlation):
            continue
        onset = compute_onset(run, values)
        early = before_onset(quarter, onset)
        f_early, f_late = _mean(values[early.index]), _mean(values[late.index])
        if not (f_early > 0 and f_late >= TRACK_GROWTH * f_early):
            continue
        steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
        message = (f"reward follows {name} (correlation {correlation:.3g}), which grew from {f_early:.3g} to "
                   f"{f_late:.3g} — the reward may be paying for that feature rather than the task")
        labels = _top_samples(run, late, column, TRACK_SAMPLES)
        out.append(Finding("reward_tracks_field", steps[0], steps[-1],
                           {"field": name, "correlation": correlation, "early": f_early, "late": f_late},
                           _ids(run, samples.loc[list(labels)]), message, labels, focus_step=steps[-1], onset_step=onset,
                           amount=f"correlation {correlation:.3g}; {f_late / f_early:.3g}× the early mean",
                           size=correlation))
    return out


RECOMPOSE_TOLERANCE = 1e-6  # |total - Σ w·c| at most this (absolute): the total is the weighted sum


RECOMPOSE_MIN_SHARE = 0.5  # fitted weights are accepted when they reproduce more than this share of the totals


RECOMPOSE_SAMPLES = 100  # samples a reward_not_recomposed finding names (its evidence gives the count)


RECOMPOSE_ROUNDS = 20  # trimmed refits of the weights at most


RECOMPOSE_WINDOWS = 64  # runs of consecutive samples whose own fit is a candidate


RECOMPOSE_DECIMALS = 3  # each fitted candidate is also tried rounded to this many decimals


RECOMPOSE_MAX_COMPONENTS = 32  # a run with more reward components is not checked (its note says so)


def compute_recompose_components(samples: pd.DataFrame) -> list[tuple[str, str]]:
    """The reward components the total is checked against, as (name, column of ``samples``): the extras
    ``transcript.component_names`` keeps, each with a value on some sample, in column order."""
    extras = {F.extra_name(c): c for c in F.extra_columns(samples.columns) if samples[c].notna().any()}
    return [(n, extras[n]) for n in component_names(extras)]


def compute_fitted_weights(values: np.ndarray, totals: np.ndarray) -> np.ndarray | None:
    """The weights w reproducing the most totals (|total - values @ w| <= ``RECOMPOSE_TOLERANCE``; ties: the
    first candidate), or None unless they reproduce more than ``RECOMPOSE_MIN_SHARE`` of the n rows. The
    candidates, each tried rounded to ``RECOMPOSE_DECIMALS`` decimals just before it (weights as people
    write them: 1, 0.5, 0.25): (a) all weights 1 (a plain sum); (b) least squares (``numpy.linalg.lstsq``)
    over every row, then refitted on the floor(n/2) + 1 rows of smallest |residual| (ties: first rows) until
    that set repeats or a fit reproduces every total of the rows it was fitted on, up to ``RECOMPOSE_ROUNDS``
    refits (a half of the rows where one component is 0 fits it no weight); (c) least squares over each of
    the first ``RECOMPOSE_WINDOWS`` runs of k + 1 consecutive rows (k components). A candidate reproducing
    every total ends the search."""
    n, k = values.shape
    need = math.floor(RECOMPOSE_MIN_SHARE * n) + 1
    best, most = None, 0

    def take(candidate) -> bool:  # True: every total reproduced, nothing can do better
        nonlocal best, most
        for weights in (np.round(candidate, RECOMPOSE_DECIMALS), candidate):
            got = int((np.abs(totals - values @ weights) <= RECOMPOSE_TOLERANCE).sum())
            if got > most:
                best, most = weights, got
        return most == n

    if take(np.ones(k)):
        return best
    rows = np.arange(n)
    for _ in range(RECOMPOSE_ROUNDS):
        weights = np.linalg.lstsq(values[rows], totals[rows], rcond=None)[0]
        if take(weights):
            return best
        residuals = np.abs(totals - values @ weights)
        if (residuals[rows] <= RECOMPOSE_TOLERANCE).all():  # exact on the rows it was fitted on: a refit is the same
            break
        kept = _smallest(residuals, need)
        if np.array_equal(kept, rows):
            break
        rows = kept
    for start in range(0, min(n, RECOMPOSE_WINDOWS * (k + 1)), k + 1):
        if take(np.linalg.lstsq(values[start:start + k + 1], totals[start:start + k + 1], rcond=None)[0]):
            return best
    return best if most >= need else None


def _smallest(residuals: np.ndarray, count: int) -> np.ndarray:
    """The positions of the ``count`` smallest ``residuals``, ascending; of those equal to the largest
    kept, the first (a partition, not a sort: linear in the rows)."""
    cut = np.partition(residuals, count - 1)[count - 1]
    below = np.flatnonzero(residuals < cut)
    equal = np.flatnonzero(residuals == cut)[:count - len(below)]
    return np.sort(np.concatenate([below, equal]))


def _not_recomposed(run) -> tuple[Finding | None, str]:
    """(the reward_not_recomposed finding or None, why the check did not run or "")."""
    from .common import rows_in_log_order
    samples = run._samples
    components = compute_recompose_components(samples)
    if not components:
        return None, "no reward components logged"
    if len(components) > RECOMPOSE_MAX_COMPONENTS:
        return None, f"{len(components)} reward components: more than {RECOMPOSE_MAX_COMPONENTS} are not checked"
    names = [n for n, _ in components]
    values = np.column_stack([samples[c].to_numpy(dtype=float) for _, c in components])
    weight_columns = [F.extra_column(WEIGHT_PREFIX + n.split("/", 1)[1]) if "/" in n else None for n in names]
    if all(c is not None and c in samples for c in weight_columns):  # weights logged, the total made from them
        weights = np.column_stack([samples[c].to_numpy(dtype=float) for c in weight_columns])
        logged = np.isfinite(weights).all(axis=1)
        if not logged.any():
            return None, "no sample logs all its components' weights"
        keys = [tuple(w) for w in weights[logged]]
        counts: dict[tuple, int] = {}
        for key in keys:
            counts[key] = counts.get(key, 0) + 1
        usual = max(counts, key=counts.get)  # the most common; ties: the first met
        differ = logged & ~(np.abs(weights - np.array(usual)) <= RECOMPOSE_TOLERANCE).all(axis=1)
        return _recompose_finding(run, rows_in_log_order(samples, differ), names, dict(zip(names, usual)),
                                  "logged", int(logged.sum())), ""
    totals = samples[F.REWARD].to_numpy(dtype=float)
    checked = np.isfinite(totals) & np.isfinite(values).all(axis=1)
    if checked.sum() <= 2 * len(components):
        return None, (f"{int(checked.sum())} samples with a total and every component: the weights of "
                      f"{len(components)} are fitted on more than twice as many")
    weights = compute_fitted_weights(values[checked], totals[checked])
    if weights is None:
        return None, (f"no weights reproduce more than {RECOMPOSE_MIN_SHARE:.0%} of the totals from the components "
                      f"within {RECOMPOSE_TOLERANCE:g}: the total is not a weighted sum of them")
    bad = checked.copy()
    bad[checked] = ~(np.abs(totals[checked] - values[checked] @ weights) <= RECOMPOSE_TOLERANCE)
    return _recompose_finding(run, rows_in_log_order(samples, bad), names,
                              dict(zip(names, (float(w) for w in weights))), "fitted", int(checked.sum())), ""


def _recompose_finding(run, rows, names, weights, how, checked) -> Finding | None:
    if not len(rows):
        return None
    shown = rows[:RECOMPOSE_SAMPLES]
    labels = tuple(run._samples.index[shown])
    steps = sorted(int(s) for s in pd.unique(run._samples[F.STEP].to_numpy()[rows]))
    if how == "logged":
        message = (f"{len(rows)} of {checked} samples log reward weights that differ from the run's usual ones "
                   f"({', '.join(names)})")
    else:
        message = (f"the reward of {len(rows)} of {checked} samples is not the weighted sum of its components "
                   f"({', '.join(names)}) with the weights that reproduce the others")
    return Finding("reward_not_recomposed", steps[0], steps[-1],
                   {"count": len(rows), "checked": checked, "weights": weights, "weights_from": how,
                    "components": names},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, steps[-1],
                   amount=f"{len(rows)} of {checked} samples", size=len(rows) / checked)
