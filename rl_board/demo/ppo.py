"""A PPO trainer with a critic: every token-level field, OpenRLHF-style padding, several ranks (the
bundled ``ppo_demo`` and the benchmark's runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from .words import _HACK, _ODD_RESPONSES, _PROMPTS, PAD_TOKEN, _tokens


def _train_line(rng: np.random.Generator, step: int, progress: float, max_tokens: int, digits: int | None,
                sampler: bool = False) -> dict:
    """One PPO sample: policy drifts from the reference as training goes on.

    Numbers are rounded to ``digits`` decimals, or written in full (as trainers do) when None.
    With ``sampler`` (what the diagnostics read), also the sampler's log-probs (drifting from the
    trainer's), the entropy (falling as training goes on), a policy sometimes less sure than the
    reference, and a repetition hack that grows over training and earns a little extra reward.
    """
    def num(x):
        return (np.round(x, digits) if digits is not None else np.asarray(x)).tolist()

    a, b = (int(x) for x in rng.integers(1, 100, size=2))
    n_valid = int(rng.integers(max(2, max_tokens // 4), max_tokens + 1))
    hack = sampler and rng.random() < 0.3 * progress
    words = _HACK * (n_valid // len(_HACK) + 1) if hack else _tokens(rng, n_valid - 1)
    tokens = words[:n_valid - 1] + [PAD_TOKEN]  # eos
    n_pad = max_tokens - n_valid
    tokens += [PAD_TOKEN] * n_pad
    n = len(tokens)

    logp = -np.abs(rng.normal(0.0, 0.6, size=n)) - 0.01
    drift = rng.normal(0.0, 0.05 + 0.6 * progress, size=n)
    drift[rng.random(n) < 0.02] += 3.0  # rare tokens where KL runs away
    ref = logp - (np.abs(drift) if not sampler else drift + 0.1 * progress)
    ref = -np.abs(ref)  # a log-probability is never above 0 (a drift past 0 is reflected back below it)
    # after eos the policy is sure of the pad, as is the reference: tiny log-probs, tiny KL
    logp[n_valid:] = -np.abs(rng.normal(0.0, 1e-3, size=n_pad))
    ref[n_valid:] = logp[n_valid:] - np.abs(rng.normal(0.0, 1e-3, size=n_pad))
    reward = float(np.tanh(rng.normal(-0.5 + 1.5 * progress + (0.8 if hack else 0.0), 0.5)))
    ref_reward = float(np.tanh(rng.normal(-0.5, 0.5)))
    values = np.clip(reward * np.linspace(0.2, 1.0, n) + rng.normal(0, 0.3, size=n), -2, 2)
    kl = np.exp(ref - logp) - 1 - (ref - logp)
    token_rewards = -0.05 * kl
    token_rewards[n_valid - 1] += reward
    token_rewards[n_valid:] = 0.0

    extra = {}
    if sampler:
        rollout = logp + rng.normal(0.0, 0.02 + 0.08 * progress, size=n)
        rollout[rng.random(n) < 0.01] -= 2.0  # rare tokens the sampler found far less likely
        rollout[n_valid:] = logp[n_valid:]
        entropy = np.abs(rng.normal(1.5 * (1.0 - 0.7 * progress), 0.4, size=n))
        entropy[n_valid:] = 0.001
        extra = {"rollout_logprobs": num(np.minimum(rollout, 0.0)), "entropy": num(entropy)}
    odd = rng.random() < 0.03
    response = (
        _ODD_RESPONSES[int(rng.integers(0, 2))].format(a=a)
        if odd
        else " ".join(t.lstrip("▁") for t in tokens[: n_valid - 1])
    )
    return {
        "step": step,
        "prompt": _PROMPTS[int(rng.integers(0, len(_PROMPTS)))].format(a=a, b=b),
        "response": response + PAD_TOKEN * (n_pad + 1),
        "response_tokens": tokens,
        "logprobs": num(logp),
        "ref_logprobs": num(ref),
        "values": num(values),
        "token_rewards": num(token_rewards),
        **extra,
        "reward": num(reward),
        "ref_response": " ".join(t.lstrip("▁") for t in _tokens(rng, int(rng.integers(3, 12)))),
        "ref_reward": num(ref_reward),
        "ground_truth": str(a + b),
    }


def write_train_run(
    out: Path, steps: int = 20, samples_per_step: int = 16, max_tokens: int = 24,
    ranks: int = 2, seed: int = 0, first_step: int = 1, digits: int | None = 6, sampler: bool = False,
) -> list[Path]:
    """Write a PPO run as ``rollout_data_rank{r}.jsonl``; samples are dealt to ranks in turn.

    Steps start at 1 as OpenRLHF's writer does. ``sampler`` adds ``rollout_logprobs`` and
    ``entropy``. Returns the files written.
    """
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = [out / f"rollout_data_rank{r}.jsonl" for r in range(ranks)]
    handles = [p.open("wb") for p in paths]
    try:
        for step in range(first_step, first_step + steps):
            for i in range(samples_per_step):
                line = _train_line(rng, step, (step - first_step) / max(steps - 1, 1), max_tokens, digits, sampler)
                handles[i % ranks].write(orjson.dumps(line) + b"\n")
    finally:
        for h in handles:
            h.close()
    return paths


def write_ppo_demo(out: Path) -> list[Path]:
    """The bundled PPO run: 30 steps of 16 samples over 4 rank files."""
    return write_train_run(out, steps=30, samples_per_step=16, max_tokens=32, ranks=4, sampler=True)
