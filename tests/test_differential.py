"""Randomized differential tests of the vectorised code: each number computed a block at a time (numpy,
Arrow) equals the same number worked out sample by sample from its written definition (docs/numbers.md),
on many random samples with seeds fixed so a failure can be replayed."""

import math
import random

import numpy as np
import pandas as pd
import pytest

from rl_board.analysis.steps import compute_group_stats
from rl_board.base import fields as F
from rl_board.derive.samples import derive
from rl_board.readers.base import ReadOptions
from rl_board.readers.canonical import build_rows

VOCAB = ["a", "b", "c", "P", "E"]  # P and E are the pad and EOS tokens the options below may name


def _random_sample(rng: random.Random) -> dict:
    """One sample's lists: tokens, two per-token lists of their own lengths and a loss mask, each possibly
    absent (a mask only where there are per-token lists, where the docs define it)."""
    tokens = [rng.choice(VOCAB) for _ in range(rng.randint(0, 9))] if rng.random() < 0.85 else None
    base = len(tokens) if tokens is not None else rng.randint(0, 9)
    logprobs = [-rng.random() for _ in range(max(0, base + rng.randint(-2, 2)))] if rng.random() < 0.7 else None
    ref = [-rng.random() for _ in range(max(0, base + rng.randint(-2, 1)))] if rng.random() < 0.4 else None
    mask = None
    if (logprobs is not None or ref is not None) and rng.random() < 0.3:
        mask = [rng.random() < 0.6 for _ in range(max(0, base + rng.randint(-3, 2)))]
    return {"tokens": tokens, "logprobs": logprobs, "ref_logprobs": ref, "loss_mask": mask}


def _by_definition(s: dict, pad: str | None, eos: str | None) -> tuple[int, int, float]:
    """(n_tokens, response_len, truncated) of one sample as docs/numbers.md defines them."""
    lists = [len(s[name]) for name in ("logprobs", "ref_logprobs") if s[name] is not None]
    tokens = s["tokens"]
    n = min(lists) if lists else (len(tokens) if tokens is not None else 0)
    if s["loss_mask"] is not None:  # exactly the positions below n where the mask is true
        counted = sum(1 for i in range(min(n, len(s["loss_mask"]))) if s["loss_mask"][i])
    else:
        counted = n
        for i, token in enumerate((tokens or [])[:n]):
            if eos is not None and token == eos:  # the EOS counts, what follows does not (P = E: it is the EOS)
                counted = i + 1
                break
            if pad is not None and token == pad:  # the pad and what follows do not count
                counted = i
                break
    response_len = counted if (lists or tokens is not None) else -1
    if eos is None or tokens is None or s["loss_mask"] is not None:
        flag = math.nan
    else:
        flag = 1.0 if eos not in tokens[:counted] and counted == n else 0.0
    return (n if lists else 0), response_len, flag


@pytest.mark.parametrize("pad, eos", [("P", "E"), ("E", "E"), (None, "E"), ("P", None), (None, None)])
@pytest.mark.parametrize("seed", range(4))
def test_lengths_and_truncation_match_their_definitions(pad, eos, seed):
    """derive's n_tokens, response_len and truncated equal the per-sample definitions on 300 random samples
    (tokens, per-token lists of other lengths, loss masks, pads and EOS anywhere, each possibly absent)."""
    rng = random.Random(seed * 101 + len(str(pad)) * 7 + len(str(eos)))
    samples = [_random_sample(rng) for _ in range(300)]
    rows = build_rows({F.STEP: [1] * len(samples), F.REWARD: [0.0] * len(samples),
                       F.TOKENS: [s["tokens"] for s in samples], "logprobs": [s["logprobs"] for s in samples],
                       "ref_logprobs": [s["ref_logprobs"] for s in samples],
                       F.LOSS_MASK: [s["loss_mask"] for s in samples]}, {})
    got = derive(rows, ReadOptions(pad_token=pad, eos_token=eos))
    expected = [_by_definition(s, pad, eos) for s in samples]
    assert got["n_tokens"].to_pylist() == [e[0] for e in expected]
    assert got["response_len"].to_pylist() == [e[1] for e in expected]
    flags = got["truncated"].to_numpy(zero_copy_only=False)
    want = np.array([e[2] for e in expected])
    assert np.array_equal(flags, want, equal_nan=True), [(i, samples[i], flags[i], want[i])
                                                          for i in np.flatnonzero(~((flags == want)
                                                                                    | (np.isnan(flags) & np.isnan(want))))][:3]


@pytest.mark.parametrize("seed", range(5))
def test_group_stats_match_pandas_groupby(seed):
    """compute_group_stats equals pandas' groupby over (step, prompt) on random runs: prompts spread over
    several steps, samples without a prompt or a logged reward (in no group), NaN rewards equal to NaN."""
    rng = np.random.default_rng(seed)
    n = 2_000
    frame = pd.DataFrame({
        F.STEP: rng.choice([3, 1, 7, 2, 9], n),
        "prompt_key": pd.array(rng.integers(0, 60, n), dtype="Int64"),
        F.REWARD: rng.choice([0.0, 1.0, 0.5, np.nan], n, p=[0.45, 0.35, 0.1, 0.1]),
        "has_reward": rng.random(n) < 0.95,
    })
    frame.loc[rng.random(n) < 0.05, "prompt_key"] = pd.NA
    got = compute_group_stats(frame)
    kept = frame[frame["prompt_key"].notna() & frame["has_reward"]]
    groups = kept.groupby([F.STEP, "prompt_key"])[F.REWARD]
    per_group = pd.DataFrame({"size": groups.size(), "distinct": groups.nunique(dropna=False)})
    per_group["zero_std"] = (per_group["size"] >= 2) & (per_group["distinct"] == 1)
    by_step = per_group.groupby(level=0).agg(prompt_groups=("size", "size"), samples=("size", "sum"),
                                             zero_std_groups=("zero_std", "sum"),
                                             multi=("size", lambda sizes: int((sizes >= 2).sum())))
    by_step = by_step.reindex(sorted(frame[F.STEP].unique()), fill_value=0)
    assert list(got.index) == list(by_step.index)
    assert got["prompt_groups"].tolist() == by_step["prompt_groups"].tolist()
    assert got["zero_std_groups"].tolist() == by_step["zero_std_groups"].tolist()
    mean = np.where(by_step["prompt_groups"] > 0, by_step["samples"] / by_step["prompt_groups"].where(
        by_step["prompt_groups"] > 0, 1), np.nan)
    assert np.allclose(got["group_size_mean"], mean, rtol=0, atol=1e-12, equal_nan=True)
    share = np.where(by_step["multi"] > 0, by_step["zero_std_groups"] / by_step["multi"].where(by_step["multi"] > 0, 1),
                     np.nan)
    assert np.allclose(got["zero_std_share"], share, rtol=0, atol=1e-12, equal_nan=True)
