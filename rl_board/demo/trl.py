"""TRL GRPO completions (``completions_{step:05d}.parquet``) and its ``trainer_state.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .words import _answer


def _write_trainer_state(path: Path, steps: int, rng: np.random.Generator) -> Path:
    """TRL's ``trainer_state.json``: ``log_history`` with one entry per step, the metrics a GRPO run
    logs, a loss spike at step 37 and an entropy that decays over training."""
    history = []
    for step in range(1, steps + 1):
        entry = {
            "step": step, "epoch": round(step / steps, 4),
            "loss": round(float(0.05 + rng.normal(0, 0.005)) if step != 37 else 0.9, 6),
            "reward": round(0.5 + 1.2 * step / steps + float(rng.normal(0, 0.05)), 6),
            "kl": round(0.002 * step + float(abs(rng.normal(0, 0.002))), 6),
            "entropy": round(1.5 * math.exp(-step / 15) + float(abs(rng.normal(0, 0.01))), 6),
            "clip_ratio/region_mean": round(float(abs(rng.normal(0.02, 0.01))), 6),
            "completions/clipped_ratio": round(float(abs(rng.normal(0.1, 0.05))), 6),
            "learning_rate": 1e-6,
        }
        history.append(entry)
    path.write_text(json.dumps({"global_step": steps, "log_history": history}, indent=2) + "\n")
    return path


def write_trl_run(out: Path, steps: tuple[int, ...] = tuple(range(5, 65, 5)), prompts: int = 4, group: int = 4,
                  seed: int = 3) -> list[Path]:
    """Write what TRL's ``GRPOTrainer(log_completions=True)`` leaves in ``OUTPUT_DIR/completions/``:
    ``completions_{step:05d}.parquet`` per logged step, columns ``step``, ``prompt``, ``completion``,
    one float column per reward function (``accuracy_reward`` is NaN where it does not apply, as a
    TRL reward function's None becomes) and ``advantage`` (reward minus its group's mean)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for index, step in enumerate(steps):
        skill = 0.2 + 0.7 * index / max(len(steps) - 1, 1)
        rows = {"step": [], "prompt": [], "completion": [], "accuracy_reward": [], "format_reward": [],
                "advantage": []}
        for p in range(prompts):
            a, b = (int(x) for x in rng.integers(1, 100, size=2))
            graded = p % 4 != 3  # one prompt in four has no answer to check
            rewards = []
            for _ in range(group):
                answer, correct = _answer(rng, a, b, skill)
                tagged = bool(rng.random() < 0.4 + 0.6 * skill)
                completion = (f"<think>{a} plus {b}</think><answer>{answer}</answer>" if tagged
                              else f"The answer is {answer}.")
                accuracy = float(correct) if graded else float("nan")
                formatting = 1.0 if tagged else 0.0
                rows["step"].append(step)
                rows["prompt"].append(f"What is {a} + {b}?" if graded else f"Say something about {a} and {b}.")
                rows["completion"].append(completion)
                rows["accuracy_reward"].append(accuracy)
                rows["format_reward"].append(formatting)
                rewards.append(np.nansum([accuracy, formatting]))
            rows["advantage"] += (np.array(rewards) - np.mean(rewards)).round(6).tolist()
        table = pa.table({"step": pa.array(rows["step"], pa.int64()), "prompt": rows["prompt"],
                          "completion": rows["completion"],
                          "accuracy_reward": pa.array(rows["accuracy_reward"], pa.float64()),
                          "format_reward": pa.array(rows["format_reward"], pa.float64()),
                          "advantage": pa.array(rows["advantage"], pa.float64())})
        path = out / f"completions_{step:05d}.parquet"
        pq.write_table(table, path)
        paths.append(path)
    paths.append(_write_trainer_state(out / "trainer_state.json", max(steps), np.random.default_rng(seed + 100)))
    return paths
