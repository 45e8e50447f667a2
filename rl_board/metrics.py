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

import json
from dataclasses import dataclass

import numpy as np

from . import fields as F

KL_ESTIMATORS = ("k3", "k2", "k1")

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


def token_positions(lengths: dict[str, int], tokens: list | None, pad_token: str | None) -> tuple[int, int]:
    """(n, valid) for one sample: n positions (the shortest numeric list present, else the
    token count), of which the first ``valid`` come before the first pad token."""
    n = min(lengths.values()) if lengths else (len(tokens) if tokens is not None else 0)
    valid = n
    if pad_token is not None and tokens is not None:
        try:
            valid = min(n, tokens.index(pad_token, 0, n))
        except ValueError:
            pass
    return n, valid


#: Per-sample aggregates of ``compute_log_ratio_aggregates``, in order.
LOG_RATIO_AGGREGATES = ("log_ratio_mean", "log_ratio_sum", "kl_mean", "kl_sum", "k2_mean", "k2_sum")


def compute_log_ratio_aggregates(logprobs: list, ref_logprobs: list) -> dict[str, np.ndarray]:
    """NaN-ignoring mean and sum of log-ratio, k3 and k2 per sample, shape (samples,).

    ``logprobs[i]`` and ``ref_logprobs[i]`` are sample i's arrays already cut to the
    positions that count (same length), or None when the sample lacks either; a
    sample with no finite value gets NaN.
    """
    samples = len(logprobs)
    lengths = np.fromiter((0 if a is None else len(a) for a in logprobs), dtype=np.int64, count=samples)
    seg = np.repeat(np.arange(samples), lengths)
    kept = [a for a in logprobs if a is not None]
    logp = np.concatenate(kept).astype(np.float64) if kept else np.zeros(0)
    kept = [a for a in ref_logprobs if a is not None]
    ref = np.concatenate(kept).astype(np.float64) if kept else np.zeros(0)
    out = {}
    for name, per_token in (("log_ratio", logp - ref), ("kl", kl_per_token(logp, ref, "k3")),
                            ("k2", kl_per_token(logp, ref, "k2"))):
        ok = ~np.isnan(per_token)
        total = np.bincount(seg[ok], weights=per_token[ok], minlength=samples)
        count = np.bincount(seg[ok], minlength=samples)
        out[f"{name}_sum"] = np.where(count > 0, total, np.nan)
        out[f"{name}_mean"] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
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
    rollout_logprobs: np.ndarray | None = None  # the sampler's (vLLM/SGLang) log-probs, when logged
    entropy: np.ndarray | None = None

    @property
    def lengths_differ(self) -> bool:
        return len(set(self.lengths.values())) > 1


def compute_sample_tokens(row: dict, pad_token: str | None = None) -> SampleTokens:
    """Cut one sample's lists (``row``: one parsed log line) to its n positions; a
    non-numeric entry shows as NaN."""
    numeric = {name: row.get(name) if isinstance(row.get(name), list) else None for name in F.TOKEN_FIELDS}
    lengths = {name: len(v) for name, v in numeric.items() if v is not None}
    tokens = row.get(F.TOKENS) if isinstance(row.get(F.TOKENS), list) else None
    n, valid = token_positions(lengths, tokens, pad_token)
    if tokens is not None:
        lengths[F.TOKENS] = len(tokens)
    cut = [t if isinstance(t, str) else json.dumps(t) for t in tokens[:n]] if tokens is not None else []
    cut += [""] * (n - len(cut))

    def arr(name):
        v = numeric[name]
        if v is None:
            return np.full(n, np.nan)
        return np.array([x if isinstance(x, (int, float)) and not isinstance(x, bool) else np.nan
                         for x in v[:n]], dtype=np.float64)

    is_pad = np.zeros(n, dtype=bool)
    is_pad[valid:] = True
    return SampleTokens(cut, arr("logprobs"), arr("ref_logprobs"), arr("values"), arr("token_rewards"),
                        is_pad, lengths, arr("rollout_logprobs"), arr("entropy"))
