"""A response-level evaluation log with irregular steps (``eval_demo``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson

EVAL_STEPS = (0, 100, 200, 300, 500, 800, 1200, 1600, 2000, 2300)


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
