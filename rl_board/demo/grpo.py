"""A GRPO run of many groups with short per-token lists (the benchmark's ``grpo`` shape)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from .words import _PROMPTS, PAD_TOKEN, _tokens


def write_grpo_run(out: Path, steps: int = 160, samples_per_step: int = 128, group: int = 8, positions: int = 48,
                   ranks: int = 4, seed: int = 4) -> list[Path]:
    """Write a GRPO run as a trainer with a vLLM sampler logs it: ``rollout_data_rank{r}.jsonl``, one
    short line per sample. Each group of ``group`` samples shares a prompt; every per-token list
    (``response_tokens``, ``logprobs``, ``ref_logprobs``, ``rollout_logprobs``, ``entropy``) has
    ``positions`` entries, the response's tokens then its EOS repeated as padding (about three
    quarters of them counted); numbers in full precision; three extra fields: ``advantage`` (a
    float, reward minus the group's mean), ``num_turns`` (an int) and ``acc`` (a bool)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = [out / f"rollout_data_rank{r}.jsonl" for r in range(ranks)]
    handles = [p.open("wb") for p in paths]
    try:
        for step in range(1, steps + 1):
            progress = (step - 1) / max(steps - 1, 1)
            index = 0
            for _ in range(samples_per_step // group):
                a, b = (int(x) for x in rng.integers(1, 100, size=2))
                prompt = _PROMPTS[int(rng.integers(0, len(_PROMPTS)))].format(a=a, b=b)
                skill = 0.2 + 0.6 * progress
                correct = rng.random(group) < skill
                rewards = correct.astype(float) + rng.normal(0.0, 0.05, size=group) * (rng.random() < 0.5)
                advantages = rewards - rewards.mean()
                for j in range(group):
                    n_valid = int(rng.integers(positions // 2, positions + 1))
                    tokens = _tokens(rng, n_valid - 1) + [PAD_TOKEN] * (positions - n_valid + 1)
                    logp = -np.abs(rng.normal(0.0, 0.6, size=positions)) - 0.01
                    ref = -np.abs(logp - rng.normal(0.0, 0.05 + 0.3 * progress, size=positions))
                    rollout = np.minimum(logp + rng.normal(0.0, 0.02, size=positions), 0.0)
                    entropy = np.abs(rng.normal(1.5 * (1.0 - 0.6 * progress), 0.4, size=positions))
                    line = {
                        "step": step, "prompt": prompt,
                        "response": " ".join(t.lstrip("▁") for t in tokens[: n_valid - 1]) + PAD_TOKEN,
                        "response_tokens": tokens, "logprobs": logp.tolist(), "ref_logprobs": ref.tolist(),
                        "rollout_logprobs": rollout.tolist(), "entropy": entropy.tolist(),
                        "reward": float(rewards[j]), "advantage": float(advantages[j]),
                        "num_turns": int(rng.integers(1, 4)), "acc": bool(correct[j]),
                    }
                    handles[index % ranks].write(orjson.dumps(line) + b"\n")
                    index += 1
    finally:
        for h in handles:
            h.close()
    return paths
