"""Derived numbers: per-token log-ratio, KL and probabilities; per-sample and per-step aggregates.

Definitions (the README repeats them for users):

- A sample's token positions are its first ``n`` positions, ``n`` the length of
  the shortest numeric per-token list present. With a pad token set, positions
  at and after its first occurrence in ``response_tokens`` are left out of every
  aggregate.
- ``log_ratio = logprob - ref_logprob`` (the k1 estimator).
- KL(policy || ref) per token, on tokens sampled from the policy, by the k3
  estimator: with ``d = ref_logprob - logprob``, ``k3 = exp(d) - 1 - d`` (>= 0).
  ``k2 = 0.5 * log_ratio**2`` is offered too.
- ``prob = exp(logprob)``, ``ref_prob = exp(ref_logprob)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from . import fields as F

KL_ESTIMATORS = ("k3", "k2", "k1")

#: Per-sample columns added by ``compute_sample_aggregates``.
AGGREGATE_COLUMNS = (
    "n_tokens", "response_len", "lengths_differ",
    "log_ratio_mean", "log_ratio_sum", "kl_mean", "kl_sum", "k2_mean", "k2_sum",
)


def kl_per_token(logprobs: np.ndarray, ref_logprobs: np.ndarray, estimator: str = "k3") -> np.ndarray:
    """KL(policy || ref) per token by ``estimator`` (k1, k2 or k3); float, shape of the inputs."""
    log_ratio = np.asarray(logprobs, dtype=np.float64) - np.asarray(ref_logprobs, dtype=np.float64)
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    if estimator == "k3":
        d = -log_ratio
        return np.expm1(d) - d
    raise ValueError(f"unknown KL estimator {estimator!r}; use one of {KL_ESTIMATORS}")


def _list_parts(column) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(values, starts, lengths, present) of a list column; absent lists have length 0."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(array, pa.ChunkedArray):  # a table with no chunks
        array = pa.array([], type=array.type)
    offsets = np.asarray(array.offsets).astype(np.int64)
    present = ~np.asarray(array.is_null())
    starts = offsets[:-1]
    lengths = np.where(present, np.diff(offsets), 0)
    values = array.values
    return values, starts, lengths, present


def _segments(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For lists of ``lengths``: each position's list index and its index inside the list."""
    seg = np.repeat(np.arange(len(lengths)), lengths)
    first = np.cumsum(lengths) - lengths
    return seg, np.arange(len(seg)) - first[seg]


def _nan_sum_mean(seg: np.ndarray, x: np.ndarray, n_samples: int) -> tuple[np.ndarray, np.ndarray]:
    ok = ~np.isnan(x)
    total = np.bincount(seg[ok], weights=x[ok], minlength=n_samples)
    count = np.bincount(seg[ok], minlength=n_samples)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return np.where(count > 0, total, np.nan), mean


def compute_sample_aggregates(table: pa.Table, pad_token: str | None = None) -> dict[str, np.ndarray]:
    """Per-sample aggregates for every row of ``table`` (columns of ``parse.SCHEMA``).

    Returns arrays of shape (rows,): ``n_tokens`` (positions, int32),
    ``response_len`` (positions before the pad, int32, -1 when nothing tells),
    ``lengths_differ`` (bool), and NaN-ignoring mean and sum of log-ratio, k3
    and k2 over the positions before the pad (NaN when there are none).
    """
    rows = table.num_rows
    lists = {name: _list_parts(table[name]) for name in F.TOKEN_FIELDS}
    present_lengths = [np.where(p, ln, np.iinfo(np.int64).max) for _, _, ln, p in lists.values()]
    any_numeric = np.logical_or.reduce([p for *_, p in lists.values()]) if rows else np.zeros(0, bool)
    n = np.where(any_numeric, np.minimum.reduce(present_lengths), 0) if rows else np.zeros(0, np.int64)

    tok_values, tok_starts, tok_lengths, tok_present = _list_parts(table[F.TOKENS])
    counted = np.where(any_numeric, n, tok_lengths)  # response-level runs: count the tokens
    usable = np.where(any_numeric, n, np.where(tok_present, tok_lengths, 0))
    valid = usable.copy()
    if pad_token is not None and len(tok_values):
        hits = np.flatnonzero(np.asarray(pc.equal(tok_values, pad_token).fill_null(False)))
        hits = hits[(hits >= tok_starts.min(initial=0))]
        owner = np.searchsorted(tok_starts, hits, side="right") - 1
        inside = (owner >= 0) & (hits - tok_starts[np.maximum(owner, 0)] < tok_lengths[np.maximum(owner, 0)])
        owner, hits = owner[inside], hits[inside]
        first_owner, first_index = np.unique(owner, return_index=True)
        pad_pos = hits[first_index] - tok_starts[first_owner]
        valid[first_owner] = np.minimum(valid[first_owner], pad_pos)

    lengths_differ = np.zeros(rows, dtype=bool)
    for _, _, ln, p in list(lists.values()) + [(None, None, tok_lengths, tok_present)]:
        lengths_differ |= p & any_numeric & (ln != n)

    out = {
        "n_tokens": n.astype(np.int32),
        "response_len": np.where(any_numeric | tok_present, np.minimum(valid, counted), -1).astype(np.int32),
        "lengths_differ": lengths_differ,
    }
    lp_values, lp_starts, _, lp_present = lists["logprobs"]
    ref_values, ref_starts, _, ref_present = lists["ref_logprobs"]
    both = lp_present & ref_present
    seg, pos = _segments(np.where(both, valid, 0))
    logp = np.asarray(lp_values, dtype=np.float64)[lp_starts[seg] + pos] if len(seg) else np.zeros(0)
    ref = np.asarray(ref_values, dtype=np.float64)[ref_starts[seg] + pos] if len(seg) else np.zeros(0)
    log_ratio = logp - ref
    for name, per_token in (("log_ratio", log_ratio), ("kl", kl_per_token(logp, ref, "k3")),
                            ("k2", kl_per_token(logp, ref, "k2"))):
        total, mean = _nan_sum_mean(seg, per_token, rows)
        out[f"{name}_sum"], out[f"{name}_mean"] = total, mean
    return out


@dataclass(frozen=True)
class SampleTokens:
    """One sample's per-token view: arrays of shape (n,), n from the definitions above.

    ``tokens`` is cut to n, or padded with "" when shorter. ``is_pad`` marks the
    positions at and after the first pad token; absent lists are all-NaN.
    """

    tokens: list[str]
    logprobs: np.ndarray
    ref_logprobs: np.ndarray
    values: np.ndarray
    token_rewards: np.ndarray
    is_pad: np.ndarray
    lengths: dict[str, int]

    @property
    def lengths_differ(self) -> bool:
        return len(set(self.lengths.values())) > 1


def compute_sample_tokens(row: dict, pad_token: str | None = None) -> SampleTokens:
    """Cut one sample's lists (``row``: field name -> list or None) to its n positions."""
    numeric = {name: row.get(name) for name in F.TOKEN_FIELDS}
    lengths = {name: len(v) for name, v in numeric.items() if v is not None}
    tokens = row.get(F.TOKENS)
    if lengths:
        n = min(lengths.values())
    else:
        n = len(tokens) if tokens is not None else 0
    if tokens is not None:
        lengths[F.TOKENS] = len(tokens)
    cut = list(tokens[:n]) if tokens is not None else []
    cut += [""] * (n - len(cut))

    def arr(name):
        v = numeric[name]
        return np.asarray(v[:n], dtype=np.float64) if v is not None else np.full(n, np.nan)

    is_pad = np.zeros(n, dtype=bool)
    if pad_token is not None and pad_token in cut:
        is_pad[cut.index(pad_token):] = True
    return SampleTokens(cut, arr("logprobs"), arr("ref_logprobs"), arr("values"), arr("token_rewards"),
                        is_pad, lengths)


#: Rows of the token table and heatmap, in display order.
TOKEN_METRICS = ("token_reward", "log_ratio", "kl", "value", "logp", "ref_logp", "prob", "ref_prob")


def compute_token_table(sample: SampleTokens, estimator: str = "k3", drop_pad: bool = False) -> pd.DataFrame:
    """One row per token position, one column per metric of ``TOKEN_METRICS``."""
    frame = pd.DataFrame({
        "token": sample.tokens,
        "token_reward": sample.token_rewards,
        "log_ratio": sample.logprobs - sample.ref_logprobs,
        "kl": kl_per_token(sample.logprobs, sample.ref_logprobs, estimator),
        "value": sample.values,
        "logp": sample.logprobs,
        "ref_logp": sample.ref_logprobs,
        "prob": np.exp(sample.logprobs),
        "ref_prob": np.exp(sample.ref_logprobs),
    })
    frame.index.name = "position"
    return frame[~sample.is_pad] if drop_pad else frame


#: Per-step statistics: base name -> the per-sample column averaged.
STEP_SERIES = {**{name: name for name in F.REWARD_FIELDS}, "kl": "kl_mean", "k2": "k2_mean",
               "log_ratio": "log_ratio_mean", "kl_sum": "kl_sum", "log_ratio_sum": "log_ratio_sum",
               "response_len": "response_len"}


def compute_step_stats(samples: pd.DataFrame) -> pd.DataFrame:
    """Per step, indexed by step ascending: ``samples`` (count) and, for each series of
    ``STEP_SERIES`` with any value, ``{name}_mean`` and population ``{name}_std``
    (NaN ignored). ``kl_mean`` is the mean over samples of each sample's mean k3."""
    steps = samples[F.STEP]
    out = pd.DataFrame({"samples": samples.groupby(steps, sort=True).size()})
    for name, column in STEP_SERIES.items():
        if column not in samples:
            continue
        values = samples[column]
        if column == "response_len":
            values = values.where(values >= 0)
        values = values.astype(float)
        if not values.notna().any():
            continue
        grouped = values.groupby(steps, sort=True)
        out[f"{name}_mean"] = grouped.mean()
        out[f"{name}_std"] = grouped.std(ddof=0)
    for name in ("response_chars", "ref_response_chars"):
        if name in samples and samples[name].notna().any():
            out[f"{name}_mean"] = samples[name].groupby(steps, sort=True).mean()
    out.index.name = F.STEP
    return out
