"""Checks on load: numbers a log should never hold, counted and named for the load report.

- A log-probability above 0 (``logprobs``, ``ref_logprobs``, ``rollout_logprobs``) is a probability
  above 1: every value of the lists as logged is checked (pads included), NaN never counts.
- Per-token lists of different lengths in one sample: the board uses the first *n* positions (*n* the
  shortest list), which is right for a writer that logs one token more, and wrong for one that
  misaligned its lists.
- ``eos_never_seen``: the samples have tokens, yet the EOS token (``--eos-token``; the run's tokenizer's
  by default) is among the counted positions of none of them: the EOS is likely the wrong one (a
  Llama-3 run read with Qwen's ``<|endoftext|>`` reads ``truncated_share`` 1.0), and every response
  counts as truncated. Not checked with the EOS turned off.
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

    kind: str  # "{list}_above_0", "lengths_differ" or "eos_never_seen"
    values: int  # values found (for lengths_differ and eos_never_seen: samples)
    samples: int  # samples holding them
    first: str  # FILE:LINE of the first such sample (step, file, line order)
    largest: float | None  # the largest value found (log-probability checks)
    message: str


def count_checks(samples: pd.DataFrame, eos_token: str | None = None) -> dict[str, int]:
    """Every check's count (0 when clean): ``{list}_above_0`` (values) for each log-prob list,
    ``lengths_differ`` (samples) and ``eos_never_seen`` (the samples with tokens, when the EOS token
    ``eos_token`` is in none of them), as the summary prints them."""
    out = {}
    for name in F.LOGPROB_FIELDS:
        column = f"{name}_above_0"
        out[column] = int(samples[column].sum()) if column in samples else 0
    out["lengths_differ"] = int(samples["lengths_differ"].sum()) if "lengths_differ" in samples else 0
    out["eos_never_seen"] = _without_eos(samples, eos_token)
    return out


def _without_eos(samples: pd.DataFrame, eos_token: str | None) -> int:
    """The samples with tokens when none of them holds ``eos_token`` among its counted positions, else
    0 (and 0 without an EOS token or without tokens)."""
    if eos_token is None or "has_tokens" not in samples or "eos_seen" not in samples:
        return 0
    has = samples["has_tokens"].to_numpy(dtype=bool)
    return 0 if samples["eos_seen"].to_numpy(dtype=bool)[has].any() else int(has.sum())


def compute_data_checks(samples: pd.DataFrame, files: tuple[str, ...], eos_token: str | None = None) -> list[DataCheck]:
    """The checks that found something in ``samples`` (rows of ``Run._samples``; ``files`` names their
    ``file`` index; ``eos_token`` the run's EOS), each with a message naming the list, the count and the
    first sample."""
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
    missing = _without_eos(samples, eos_token)
    if missing:
        where = first(samples["has_tokens"].to_numpy(dtype=bool))
        found.append(DataCheck("eos_never_seen", missing, missing, where, None,
                               f"The EOS token {eos_token!r} is in none of the {_count(missing, 'sample')} with "
                               f"tokens (first at {where}): every response reads as truncated. Is it this model's "
                               "EOS? Set it in the sidebar's EOS token box, or --eos-token, or put the model's "
                               "tokenizer_config.json beside its tokenizer.json."))
    return found


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
