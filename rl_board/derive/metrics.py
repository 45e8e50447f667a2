"""Derived numbers: per-token log-ratio, KL and probabilities; per-sample and per-step aggregates.

Definitions (docs/numbers.md repeats them for users):

- A sample's token positions are its first ``n`` positions, ``n`` the length of
  the shortest numeric per-token list present. Its *counted* positions: with a
  loss mask, the positions where it is true (and nothing else decides); else, with a
  pad token P, those before the first P in its tokens; with an EOS token E, those
  up to and including the first E. When P = E the first occurrence is the EOS: it
  counts, everything after it does not. Every aggregate reads the counted positions
  only. A sample's tokens are its ``response_tokens``, else its ``token_ids`` as
  strings (``rl_board.derive.tokenizer``).
- ``log_ratio = logprob - ref_logprob`` (the k1 estimator).
- KL(policy || ref) per token, on tokens sampled from the policy, by the k3
  estimator: with ``d = ref_logprob - logprob``, ``k3 = exp(d) - 1 - d`` (>= 0).
  ``k2 = 0.5 * log_ratio**2`` is offered too.
- ``prob = exp(logprob)``, ``ref_prob = exp(ref_logprob)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ..base import fields as F

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


def token_positions(lengths: dict[str, int], tokens: list | None, pad_token: str | None,
                    eos_token: str | None = None) -> tuple[int, int]:
    """(n, counted) for one sample: n positions (the shortest numeric list present, else the
    token count), of which the first ``counted`` count (see the module's definitions)."""
    n = min(lengths.values()) if lengths else (len(tokens) if tokens is not None else 0)
    counted = n
    if tokens is not None:
        if eos_token is not None:
            try:
                counted = tokens.index(eos_token, 0, n) + 1
            except ValueError:
                pass
        if pad_token is not None and pad_token != eos_token:  # P = E: the first one is the EOS, which counts
            try:
                counted = min(counted, tokens.index(pad_token, 0, n))
            except ValueError:
                pass
    return n, counted


#: Per-sample aggregates of ``compute_sample_aggregates``, in order, all float64:
#: mean and sum of log-ratio, k3 and k2 (NaN ignored); positions where logprob and ref_logprob
#: are both finite and, of those, where the log-ratio is negative; the mean mismatch k3 against
#: the sampler's log-probs; the mean entropy; and, over positions where values and token rewards
#: are both finite, the count, sum and sum of squared deviations of returns (gamma = lambda = 1)
#: and of residuals (return - value), which ``tables`` pools into a step's explained variance.
SAMPLE_AGGREGATES = ("log_ratio_mean", "log_ratio_sum", "kl_mean", "kl_sum", "k2_mean", "k2_sum",
                     "lr_pairs", "lr_negative", "mismatch_kl", "entropy_mean",
                     "ev_n", "ret_sum", "ret_m2", "res_sum", "res_m2")


@dataclass
class TokenColumns:
    """Every sample's per-token lists of a block, flat: ``samples`` (how many), and for each list
    name its values (float64, samples one after another, each cut to its counted positions) and
    the sample each value belongs to (ascending)."""

    samples: int
    columns: dict[str, tuple[np.ndarray, np.ndarray]]


class _Segments:
    """The values of several per-token lists at the positions of the samples that have all of them."""

    def __init__(self, columns: TokenColumns, names: tuple[str, ...]):
        self.samples = columns.samples
        self._every = None  # each sample's count of values, once asked for
        if not all(name in columns.columns for name in names):
            self.seg, self.arrays = np.zeros(0, np.int64), [np.zeros(0) for _ in names]
            return
        parts = [columns.columns[name] for name in names]
        # a sample's lists are cut to one length, so equal owner arrays mean aligned positions
        if all(np.array_equal(parts[0][1], ids) for _, ids in parts[1:]):
            self.seg, self.arrays = parts[0][1], [values for values, _ in parts]
            return
        owners = [set(np.unique(ids).tolist()) for _, ids in parts]
        common = set.intersection(*owners)
        keep = np.fromiter(sorted(common), np.int64, len(common))
        masks = [np.isin(ids, keep) for _, ids in parts]
        self.seg = parts[0][1][masks[0]]
        self.arrays = [values[mask] for (values, _), mask in zip(parts, masks)]

    def count(self, mask: np.ndarray) -> np.ndarray:
        if mask.all():  # every value (no NaN: the common case): one count serves every aggregate
            if self._every is None:
                self._every = np.bincount(self.seg, minlength=self.samples).astype(np.float64)
            return self._every
        return np.bincount(self.seg[mask], minlength=self.samples).astype(np.float64)

    def total(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if mask.all():
            return np.bincount(self.seg, weights=values, minlength=self.samples)
        return np.bincount(self.seg[mask], weights=values[mask], minlength=self.samples)

    def sum_and_mean(self, values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the sum, NaN without values; the mean) of each sample's ``values`` where ``mask``."""
        count, total = self.count(mask), self.total(values, mask)
        some = count > 0
        return np.where(some, total, np.nan), np.where(some, total / np.maximum(count, 1), np.nan)

    def mean(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.sum_and_mean(values, mask)[1]


def compute_sample_aggregates(columns: TokenColumns) -> dict[str, np.ndarray]:
    """Every column of ``SAMPLE_AGGREGATES`` per sample, shape (samples,), from the samples'
    per-token lists (``fields.TOKEN_FIELDS``), each cut to its sample's counted positions (so the
    lists of one sample have one length). A sample with no value to aggregate gets NaN (counts 0).
    """
    out = {}
    pair = _Segments(columns, ("logprobs", "ref_logprobs"))
    logp, ref = pair.arrays
    log_ratio = logp - ref
    for name, per_token in (("log_ratio", log_ratio), ("kl", kl_per_token(logp, ref, "k3")),
                            ("k2", kl_per_token(logp, ref, "k2"))):
        out[f"{name}_sum"], out[f"{name}_mean"] = pair.sum_and_mean(per_token, ~np.isnan(per_token))
    finite = np.isfinite(log_ratio)
    out["lr_pairs"] = pair.count(finite)
    out["lr_negative"] = pair.count(finite & (log_ratio < 0))

    mismatch = _Segments(columns, ("logprobs", "rollout_logprobs"))
    d = mismatch.arrays[0] - mismatch.arrays[1]  # log p_trainer - log p_sampler, on the sampler's tokens
    k3 = np.expm1(d) - d
    out["mismatch_kl"] = mismatch.mean(k3, np.isfinite(k3))

    entropy = _Segments(columns, ("entropy",))
    out["entropy_mean"] = entropy.mean(entropy.arrays[0], ~np.isnan(entropy.arrays[0]))

    critic = _Segments(columns, ("values", "token_rewards"))
    values, rewards = critic.arrays
    ok = np.isfinite(values) & np.isfinite(rewards)
    seg, values, rewards = critic.seg[ok], values[ok], rewards[ok]
    returns = _reverse_cumsum(rewards, seg)
    residuals = returns - values
    n = np.bincount(seg, minlength=critic.samples).astype(np.float64)
    out["ev_n"] = n
    for name, x in (("ret", returns), ("res", residuals)):
        total = np.bincount(seg, weights=x, minlength=critic.samples)
        mean = total / np.maximum(n, 1)
        out[f"{name}_sum"] = total
        out[f"{name}_m2"] = np.bincount(seg, weights=(x - mean[seg]) ** 2, minlength=critic.samples)
    return out


def _reverse_cumsum(values: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Per position, the sum of ``values`` from it to the end of its segment (``seg`` sorted)."""
    if not len(values):
        return values
    reverse = np.cumsum(values[::-1])[::-1]  # sum from each position to the very end
    last = np.flatnonzero(np.r_[seg[1:] != seg[:-1], True])  # each segment's last position
    after = np.r_[reverse[1:], 0.0][last]  # what lies beyond each segment's end
    return reverse - after[np.searchsorted(last, np.arange(len(values)))]


def pool_explained_variance(n: np.ndarray, ret_sum: np.ndarray, ret_m2: np.ndarray, res_sum: np.ndarray,
                            res_m2: np.ndarray) -> float:
    """1 - Var(returns - values) / Var(returns) over the pooled positions of several samples, from
    their counts, sums and sums of squared deviations (Chan et al.'s parallel variance); population
    variances; NaN when no position or Var(returns) = 0."""
    keep = n > 0
    n, ret_sum, ret_m2, res_sum, res_m2 = (a[keep] for a in (n, ret_sum, ret_m2, res_sum, res_m2))
    total = n.sum()
    if not total:
        return float("nan")

    def m2(sums, m2s):
        return m2s.sum() + (n * (sums / n - sums.sum() / total) ** 2).sum()

    var_ret = m2(ret_sum, ret_m2) / total
    if var_ret == 0:
        return float("nan")
    return float(1.0 - (m2(res_sum, res_m2) / total) / var_ret)


@dataclass(frozen=True)
class SampleTokens:
    """One sample's per-token view: arrays of shape (n,), n from the definitions above.

    ``tokens`` is cut to n, or padded with "" when shorter. ``is_pad`` marks the
    positions that are not counted (after the EOS, from the pad token on, or, with a loss
    mask, where it is false: ``has_mask``); absent lists are all-NaN.
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
    has_mask: bool = False  # counted positions come from a loss mask (untrained ones are shown, dimmed)
    logged: dict[str, np.ndarray] = field(default_factory=dict)  # ``fields.LOGGED_TOKEN_FIELDS`` present
    from_ids: bool = False  # the tokens are token ids (decoded, or ``#ID`` without a tokenizer)

    @property
    def lengths_differ(self) -> bool:
        return len(set(self.lengths.values())) > 1


def compute_sample_tokens(row: dict, pad_token: str | None = None, eos_token: str | None = None,
                          tokenizer=None) -> SampleTokens:
    """Cut one sample's lists (``row``: its canonical record) to its n positions; a
    non-numeric entry shows as NaN. ``is_pad`` marks the positions that are not counted. Token
    ids (without ``response_tokens``) are decoded with ``tokenizer``, each on its own but for the
    byte-level pieces of one character, which are joined (``tokenizer.token_pieces``)."""
    from .tokenizer import token_pieces

    numeric = {name: row.get(name) if isinstance(row.get(name), list) else None for name in F.TOKEN_FIELDS}
    lengths = {name: len(v) for name, v in numeric.items() if v is not None}
    tokens = row.get(F.TOKENS) if isinstance(row.get(F.TOKENS), list) else None
    ids = row.get(F.TOKEN_IDS)
    from_ids = tokens is None and isinstance(ids, list) and all(type(i) is int for i in ids)
    if from_ids:
        tokens = token_pieces(tokenizer, ids)
    mask = row.get(F.LOSS_MASK)
    mask = mask if isinstance(mask, list) and all(
        v is None or isinstance(v, (bool, int, float)) for v in mask) else None
    if mask is not None:
        n = min(lengths.values()) if lengths else (len(tokens) if tokens is not None else 0)
    else:
        n, valid = token_positions(lengths, tokens, pad_token, eos_token)
    if tokens is not None:
        lengths[F.TOKENS if not from_ids else F.TOKEN_IDS] = len(tokens)
    if mask is not None:
        lengths[F.LOSS_MASK] = len(mask)
    cut = [t if isinstance(t, str) else json.dumps(t) for t in tokens[:n]] if tokens is not None else []
    cut += [""] * (n - len(cut))

    def arr(name):
        v = numeric[name]
        if v is None:
            return np.full(n, np.nan)
        out = np.array([x if isinstance(x, (int, float)) and not isinstance(x, bool) else np.nan
                        for x in v[:n]], dtype=np.float64)
        return np.concatenate([out, np.full(n - len(out), np.nan)]) if len(out) < n else out

    if mask is not None:
        trained = np.array([bool(v) for v in mask[:n]] + [False] * max(0, n - len(mask)), dtype=bool)
        is_pad = ~trained
    else:
        is_pad = np.zeros(n, dtype=bool)
        is_pad[valid:] = True
    logged = {name: arr(name) for name in F.LOGGED_TOKEN_FIELDS if numeric[name] is not None}
    return SampleTokens(cut, arr("logprobs"), arr("ref_logprobs"), arr("values"), arr("token_rewards"),
                        is_pad, lengths, arr("rollout_logprobs"), arr("entropy"), mask is not None, logged,
                        from_ids)


def compute_gae(token_rewards: np.ndarray, values: np.ndarray, gamma: float = 1.0,
                lam: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """(GAE advantages, returns = advantages + values) over one sample's counted positions,
    shape (n,): delta_t = r_t + gamma * V_{t+1} - V_t (V = 0 after the last position),
    A_t = delta_t + gamma * lambda * A_{t+1}."""
    rewards = np.asarray(token_rewards, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    advantages = np.zeros(len(rewards))
    running, next_value = 0.0, 0.0
    for t in range(len(rewards) - 1, -1, -1):
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * running
        advantages[t] = running
        next_value = values[t]
    return advantages, advantages + values


def compute_return_to_go(token_rewards: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """The empirical discounted return from each position to the end: G_t = sum_{k >= t} gamma^(k - t) r_k,
    over one sample's counted positions, shape (n,). A NaN reward makes every G_t before it NaN."""
    rewards = np.asarray(token_rewards, dtype=np.float64)
    out = np.zeros(len(rewards))
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out
