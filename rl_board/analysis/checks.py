"""Checks on load: numbers a log should never hold, counted and named for the load report.

- A log-probability above 0 (``logprobs``, ``ref_logprobs``, ``rollout_logprobs``) is a probability
  above 1: every value of the lists as logged is checked (pads included), NaN never counts.
- Per-token lists of different lengths in one sample: the board uses the first *n* positions (*n* the
  shortest list), which is right for a writer that logs one token more, and wrong for one that
  misaligned its lists.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..base import fields as F


@dataclass(frozen=True)
class DataCheck:
    """One kind of impossible or suspicious number found in a run."""

    kind: str  # "{list}_above_0" or "lengths_differ"
    values: int  # values found (for lengths_differ: samples)
    samples: int  # samples holding them
    first: str  # FILE:LINE of the first such sample (step, file, line order)
    largest: float | None  # the largest value found (log-probability checks)
    message: str


def count_checks(samples: pd.DataFrame) -> dict[str, int]:
    """Every check's count (0 when clean): ``{list}_above_0`` (values) for each log-prob list and
    ``lengths_differ`` (samples), as the summary prints them."""
    out = {}
    for name in F.LOGPROB_FIELDS:
        column = f"{name}_above_0"
        out[column] = int(samples[column].sum()) if column in samples else 0
    out["lengths_differ"] = int(samples["lengths_differ"].sum()) if "lengths_differ" in samples else 0
    return out


def compute_data_checks(samples: pd.DataFrame, files: tuple[str, ...]) -> list[DataCheck]:
    """The checks that found something in ``samples`` (rows of ``Run.samples``; ``files`` names their
    ``file`` index), each with a message naming the list, the count and the first sample."""
    found = []

    def first(mask) -> str:
        at = int(np.flatnonzero(mask)[0])
        return F.addresses(files, samples.iloc[at:at + 1])[0]

    for name in F.LOGPROB_FIELDS:
        column = f"{name}_above_0"
        if column not in samples:
            continue
        counts = samples[column].to_numpy(dtype=np.int64)
        total = int(counts.sum())
        if not total:
            continue
        largest = float(np.nanmax(samples[f"{name}_max"].to_numpy(dtype=float)))
        where = first(counts > 0)
        prob = math.exp(largest) if largest < 700 else math.inf
        holding = int((counts > 0).sum())
        found.append(DataCheck(column, total, holding, where, largest,
                               f"{name}: {_count(total, 'value')} above 0 in {_count(holding, 'sample')} "
                               f"(first at {where}). A log-probability is never above 0: the largest, "
                               f"{largest:.4g}, is a probability of {prob:.4g}."))
    if "lengths_differ" in samples:
        differ = samples["lengths_differ"].to_numpy(dtype=bool)
        if differ.any():
            count = int(differ.sum())
            where = first(differ)
            found.append(DataCheck("lengths_differ", count, count, where, None,
                                   f"{_count(count, 'sample')} with per-token lists of different "
                                   f"lengths (first at {where}): each uses its first n positions, n the shortest "
                                   "numeric list."))
    return found


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
