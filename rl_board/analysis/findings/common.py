"""What every finding shares: the ``Finding`` and ``Findings`` records, the kinds, their ranking and
severity, the early and late windows, a response's words, and the onset of a finding (definition 14)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...base import fields as F
from ..run import Run

KINDS = ("reward_with_spreading_phrases", "length_growth_with_reward", "entropy_collapse",
         "training_inference_mismatch", "dead_groups", "empty_responses", "component_with_spreading_phrases",
         "kl_runaway", "repetition_with_reward", "critic_cannot_fit", "tool_use_collapse", "tool_call_loops",
         "reward_tracks_field", "garbled_output", "images_dropped", "turn_faults_rising", "reward_not_recomposed")


#: The order findings are listed in: hacks of the reward first (total, one component, repetition, a
#: feature the reward pays for), then the policy running away from the reference or producing token
#: soup, then what wastes or misleads training, then what concerns only some samples or agents.
RANKING = ("reward_with_spreading_phrases", "component_with_spreading_phrases", "repetition_with_reward",
           "reward_tracks_field", "kl_runaway", "garbled_output", "length_growth_with_reward", "critic_cannot_fit",
           "entropy_collapse", "training_inference_mismatch", "tool_use_collapse", "tool_call_loops",
           "dead_groups", "empty_responses", "reward_not_recomposed", "images_dropped", "turn_faults_rising")


SEVERITY = {**dict.fromkeys(RANKING[:6], "high"), **dict.fromkeys(RANKING[6:10], "medium"),
            **dict.fromkeys(RANKING[10:], "low")}


#: The kinds that carry an ``onset_step`` (definition 14).
ONSET_KINDS = ("reward_with_spreading_phrases", "length_growth_with_reward", "component_with_spreading_phrases",
               "kl_runaway", "repetition_with_reward", "reward_tracks_field", "garbled_output", "turn_faults_rising",
               "entropy_collapse", "tool_use_collapse")


WINDOW_FRACTION = 4  # each window holds ceil(S / 4) of the S steps with samples


ONSET_EXPLAINED = 0.6  # of the step means' variance a split in two levels explains, at least: an onset


ONSET_BACK = 0.25  # of the jump between the two levels: a step past it just before the split starts the change


#: Every character ``str.split()`` splits on (Python's whitespace), as an RE2 class: a text that is
#: only these has no words. (``derive`` splits the words with pyarrow, on the same characters.)
_BLANK = r"^[\x{9}-\x{d}\x{1c}-\x{1f}\x{85}\p{Z}]*$"


@dataclass(frozen=True)
class Finding:
    """One finding. ``to_json(full=True)`` is the contract of ``findings --json``; ``message`` is one line for
    people; ``labels`` are the ``samples`` as rows of ``Run._samples``; ``focus_step`` the step the
    evidence centres on; ``phrases`` the phrases' tokens (findings 1 and 7); ``onset_step`` when it
    began (definition 14, kinds of ``ONSET_KINDS``); ``amount`` how much, in words; ``size`` orders the
    findings of one kind (larger first)."""

    kind: str
    first_step: int
    last_step: int
    evidence: dict
    samples: tuple[str, ...]
    message: str = ""
    labels: tuple = ()
    focus_step: int | None = None
    phrases: tuple[tuple[str, ...], ...] = ()
    onset_step: int | None = None
    amount: str = ""  # made of numbers and our words only: no text from the logs (the page shows it as Markdown)
    size: float = 0.0

    @property
    def severity(self) -> str:
        """How much it should worry a practitioner: "high", "medium" or "low" (``SEVERITY``)."""
        return SEVERITY[self.kind]

    @property
    def detail(self) -> str:
        """How much and since when, in words: the second half of the finding's line."""
        since = f"since step {self.onset_step}" if self.onset_step is not None else ""
        return "; ".join(part for part in (self.amount, since) if part)

    def to_json(self, full: bool = False) -> dict:
        """The finding's five fields of issue 16; with ``full`` (what ``findings --json`` prints) also
        its ``severity`` and, for the kinds of ``ONSET_KINDS``, its ``onset_step``."""
        out = {"kind": self.kind, "first_step": self.first_step, "last_step": self.last_step,
               "evidence": self.evidence, "samples": list(self.samples)}
        if full:
            out["severity"] = self.severity
            if self.kind in ONSET_KINDS:
                out["onset_step"] = self.onset_step
        return out


@dataclass(frozen=True)
class Check:
    """Whether one check could run on this run, and why not (``note``)."""

    kind: str
    ran: bool
    note: str = ""


@dataclass(frozen=True)
class Findings:
    """What ``compute_findings`` found, ranked (``RANKING``, then size), and which checks ran."""

    findings: tuple[Finding, ...]
    checks: tuple[Check, ...]
    words_from_tokens: bool = False  # some words came from token lists (phrases join without spaces)

    def to_json(self, full: bool = False) -> list[dict]:
        return [f.to_json(full) for f in self.findings]


def compute_windows(run: Run) -> tuple[list[int], list[int]]:
    """(the first quarter's steps, the late window's), each the first / last ceil(S/4) of the S
    steps with samples, ascending; both empty for a run without samples."""
    steps = sorted(int(s) for s in pd.unique(run._samples[F.STEP]))
    k = math.ceil(len(steps) / WINDOW_FRACTION)
    return steps[:k], steps[len(steps) - k:]


def compute_words(run: Run, frame: pd.DataFrame) -> tuple[list[list[str]], list[bool]]:
    """(each response's words, whether they came from its tokens) for ``frame`` (rows of
    ``run._samples``, in their order), from the run's segments (``Run.words``): no file is read. A
    sample with neither tokens nor a response has no words."""
    words = [w if w is not None else [] for w in run.words(frame)]
    return words, frame["has_tokens"].to_numpy(dtype=bool).tolist()


def compute_empty(run: Run) -> np.ndarray:
    """Whether each sample of ``run._samples`` has no words; bool, shape (samples,). Counts the words
    in the segments (``Run.word_counts``): no text or file is read."""
    return run.word_counts() <= 0


def _mean(values) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else math.nan


def _std(values) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.std()) if len(values) else math.nan


def _json_number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _ids(run: Run, frame: pd.DataFrame) -> tuple[str, ...]:
    return tuple(F.addresses(run.files, frame))


def _log_order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values([F.STEP, F.FILE, F.LINE], kind="stable")


def rows_in_log_order(samples: pd.DataFrame, keep: np.ndarray) -> np.ndarray:
    """The positions in ``samples`` of the rows ``keep`` marks, in log order (step, file, line; ties in
    their order), as ``_log_order`` sorts them."""
    rows = np.flatnonzero(keep)
    order = np.lexsort(tuple(samples[name].to_numpy()[rows] for name in (F.LINE, F.FILE, F.STEP)))
    return rows[order]


def rows_frame(samples: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """``samples.iloc[rows]`` with every column taken as ``store.columns.take`` takes it: a column of one
    value (broadcast) stays one value, not 8 bytes a row; the index is those rows' labels. The findings'
    windows hold half of a run's rows: as copies, at 2M samples, some 700 MB of columns of one value."""
    from ...store.columns import frame, take

    columns = {}
    for name in samples.columns:
        column = samples[name]
        values = column.to_numpy() if isinstance(column.array, pd.arrays.NumpyExtensionArray) else column
        columns[name] = take(values, rows)
    out = frame(columns)
    out.index = samples.index[rows]
    return out


def _reward_rose(early: pd.DataFrame, late: pd.DataFrame) -> tuple[bool, float, float]:
    r_early, r_late = _mean(early[F.REWARD]), _mean(late[F.REWARD])
    rise = r_late - r_early
    return bool(rise > 0 and rise >= _std(early[F.REWARD])), r_early, r_late


def _percent(share) -> str:
    return f"{float(share) * 100:.0f} %"


def _rise(early: float, late: float, std: float) -> str:
    """A rise in words: its size, and in early stds when there is one."""
    return f"+{late - early:.3g}" + (f" ({(late - early) / std:.3g} early std)" if std > 0 else "")


def _share_of_steps(count: int, total: int, what: str) -> str:
    return f"{count} of {total} {what} ({count / total * 100:.3g} %)" if total else ""


def compute_onset(run: Run, values: pd.Series, falls: bool = False) -> int | None:
    """Definition 14: when the series ``values`` (one per row of ``run._samples``) changed level, or None.
    Its step means m_1..m_S (steps with a value, ascending; NaN left out) are split in two at the k
    (1 <= k < S) that minimises the squared distance of each mean to its part's mean (a, before; b, after;
    the first such k); there is an onset when b > a (b < a with ``falls``) and the split explains at least
    ``ONSET_EXPLAINED`` of the means' variance (1 - that distance / sum of (m_i - mean)^2). The onset is the
    first step of the after part, moved back over the steps just before it whose means are past
    a + ``ONSET_BACK`` * (b - a) (a ramp's start), keeping at least one step before it."""
    means = values.astype(float).groupby(run._samples[F.STEP], sort=True).mean().dropna()
    steps, m = means.index.to_numpy(), means.to_numpy(dtype=float)
    if len(m) < 2:
        return None
    m = m - m.mean()  # centred: the sums of squares below lose no digits to a large level
    total = float((m * m).sum())
    if not total > 0:
        return None
    k = np.arange(1, len(m))
    head, squares = np.cumsum(m)[:-1], np.cumsum(m * m)[:-1]
    a, b = head / k, (m.sum() - head) / (len(m) - k)
    spread = (squares - k * a * a) + ((m * m).sum() - squares - (len(m) - k) * b * b)
    i = int(np.argmin(spread))
    jump = b[i] - a[i]
    if not ((jump < 0) if falls else (jump > 0)) or not 1 - spread[i] / total >= ONSET_EXPLAINED:
        return None
    past = a[i] + ONSET_BACK * jump
    start = i + 1
    while start > 1 and (m[start - 1] < past if falls else m[start - 1] > past):
        start -= 1
    return int(steps[start])


def before_onset(frame: pd.DataFrame, onset: int | None) -> pd.DataFrame:
    """The rows of ``frame`` (the first quarter's samples, in log order) whose step is before ``onset``: the
    early window of a finding whose series has that onset (definition 14); all of them for None."""
    return frame if onset is None else frame[frame[F.STEP].to_numpy() < onset]


def _top_samples(run: Run, frame: pd.DataFrame, column: str, count: int, lowest: bool = False) -> tuple:
    """The ``count`` rows of ``frame`` with the highest ``column`` (the lowest with ``lowest``; NaN left out),
    then file and line."""
    have = frame[frame[column].notna()]
    return tuple(have.sort_values([column, F.FILE, F.LINE], ascending=[lowest, True, True], kind="stable")
                 .index[:count])


def _typical_samples(frame: pd.DataFrame, values: pd.Series, count: int) -> tuple:
    """The ``count`` rows of ``frame`` whose ``values`` (a series over ``run._samples``) are nearest their mean over
    ``frame`` (NaN left out), then the higher reward, then file and line: what the window is like."""
    own = values[frame.index].astype(float)
    have = frame[own.notna().to_numpy()]
    if have.empty:
        return ()
    order = pd.DataFrame({"distance": (own[have.index] - _mean(own)).abs().to_numpy(),
                          "reward": have[F.REWARD].to_numpy(dtype=float), F.FILE: have[F.FILE].to_numpy(),
                          F.LINE: have[F.LINE].to_numpy()}, index=have.index)
    return tuple(order.sort_values(["distance", "reward", F.FILE, F.LINE], ascending=[True, False, True, True],
                                   kind="stable", na_position="last").index[:count])
