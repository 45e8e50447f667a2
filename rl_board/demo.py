"""Deterministic generator of demo and benchmark runs.

It writes what a PPO trainer with a critic would log (every token-level field,
OpenRLHF-style padding, several ranks) or a response-level evaluation log with
irregular steps. Same arguments, same bytes: the shipped ``rollout_samples/``
are made by ``python -m rl_board generate``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson

PAD_TOKEN = "<|endoftext|>"
EVAL_STEPS = (0, 100, 200, 300, 500, 800, 1200, 1600, 2000, 2300)

_WORDS = (
    "the answer is step first then we compute sum of each term so total equals "
    "therefore check again result value number because given problem solve "
    "let x be and 2 3 5 7 11 + - = ( ) . , 答案 是 所以 计算 首先 ✓ café naïve"
).split()
_PROMPTS = (
    "Solve: what is {a} + {b}?",
    "计算 {a} 乘以 {b} 的结果。",
    "Explain why {a} is less than {b}.",
    "Write a haiku about the number {a}.",
)
# A few responses a reward model might love or a browser might execute.
_ODD_RESPONSES = (
    "<img src=x onerror=alert(1)> I am sure the answer is correct!!!",
    "# heading\n**bold** claim: the answer is {a}.",
)


def _tokens(rng: np.random.Generator, n: int) -> list[str]:
    picks = rng.integers(0, len(_WORDS), size=n)
    return ["▁" + _WORDS[i] if j % 3 == 0 else _WORDS[i] for j, i in enumerate(picks)]


def _train_line(rng: np.random.Generator, step: int, progress: float, max_tokens: int, digits: int | None) -> dict:
    """One PPO sample: policy drifts from the reference as training goes on.

    Numbers are rounded to ``digits`` decimals, or written in full (as trainers do) when None.
    """
    def num(x):
        return (np.round(x, digits) if digits is not None else np.asarray(x)).tolist()

    a, b = (int(x) for x in rng.integers(1, 100, size=2))
    n_valid = int(rng.integers(max(2, max_tokens // 4), max_tokens + 1))
    tokens = _tokens(rng, n_valid - 1) + [PAD_TOKEN]  # eos
    n_pad = max_tokens - n_valid
    tokens += [PAD_TOKEN] * n_pad
    n = len(tokens)

    logp = -np.abs(rng.normal(0.0, 0.6, size=n)) - 0.01
    drift = rng.normal(0.0, 0.05 + 0.6 * progress, size=n)
    drift[rng.random(n) < 0.02] += 3.0  # rare tokens where KL runs away
    ref = logp - np.abs(drift)
    # after eos the policy is sure of the pad, as is the reference: tiny log-probs, tiny KL
    logp[n_valid:] = -np.abs(rng.normal(0.0, 1e-3, size=n_pad))
    ref[n_valid:] = logp[n_valid:] - np.abs(rng.normal(0.0, 1e-3, size=n_pad))
    reward = float(np.tanh(rng.normal(-0.5 + 1.5 * progress, 0.5)))
    ref_reward = float(np.tanh(rng.normal(-0.5, 0.5)))
    values = np.clip(reward * np.linspace(0.2, 1.0, n) + rng.normal(0, 0.3, size=n), -2, 2)
    kl = np.exp(ref - logp) - 1 - (ref - logp)
    token_rewards = -0.05 * kl
    token_rewards[n_valid - 1] += reward
    token_rewards[n_valid:] = 0.0

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
        "reward": num(reward),
        "ref_response": " ".join(t.lstrip("▁") for t in _tokens(rng, int(rng.integers(3, 12)))),
        "ref_reward": num(ref_reward),
        "ground_truth": str(a + b),
    }


def write_train_run(
    out: Path, steps: int = 20, samples_per_step: int = 16, max_tokens: int = 24,
    ranks: int = 2, seed: int = 0, first_step: int = 1, digits: int | None = 6,
) -> list[Path]:
    """Write a PPO run as ``rollout_data_rank{r}.jsonl``; samples are dealt to ranks in turn.

    Steps start at 1 as OpenRLHF's writer does. Returns the files written.
    """
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = [out / f"rollout_data_rank{r}.jsonl" for r in range(ranks)]
    handles = [p.open("wb") for p in paths]
    try:
        for step in range(first_step, first_step + steps):
            for i in range(samples_per_step):
                line = _train_line(rng, step, (step - first_step) / max(steps - 1, 1), max_tokens, digits)
                handles[i % ranks].write(orjson.dumps(line) + b"\n")
    finally:
        for h in handles:
            h.close()
    return paths


def write_eval_run(out: Path, seed: int = 1) -> list[Path]:
    """Write a response-level eval log at irregular steps from 0 to 2300 (no token fields)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    path = out / "eval_data_rank0.jsonl"
    with path.open("wb") as fh:
        for step in EVAL_STEPS:
            for _ in range(8):
                a, b = (int(x) for x in rng.integers(1, 100, size=2))
                correct = rng.random() < 0.3 + 0.6 * step / 2300
                answer = a + b if correct else a + b + int(rng.integers(1, 9))
                line = {
                    "step": step,
                    "prompt": f"What is {a} + {b}?",
                    "response": f"The answer is {answer}.",
                    "reward": round(float(math.tanh(rng.normal(0.8 if correct else -0.8, 0.4))), 6),
                    "valid_reward": 1.0 if correct else 0.0,
                    "ref_response": f"I think it is {a + b + int(rng.integers(0, 3))}.",
                    "ref_reward": round(float(math.tanh(rng.normal(0.0, 0.5))), 6),
                    "ref_valid_reward": float(rng.random() < 0.4),
                    "ground_truth": str(a + b),
                }
                fh.write(orjson.dumps(line) + b"\n")
    return [path]


def write_demo_samples(root: Path) -> None:
    """Write the bundled ``rollout_samples/``: a PPO run and an eval run."""
    write_train_run(root / "ppo_demo", steps=30, samples_per_step=16, max_tokens=32, ranks=4)
    write_eval_run(root / "eval_demo")
