"""A verl rollout dump: ``{step}.jsonl`` with input/output/gts/score and reward extra info."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from .words import _answer


def write_verl_run(out: Path, steps: int = 12, prompts: int = 4, group: int = 4, seed: int = 2) -> list[Path]:
    """Write what verl's ``trainer.rollout_data_dir`` holds: ``{step}.jsonl`` per step, one line per
    sample with ``input``, ``output``, ``gts``, ``score``, ``step`` and the reward function's extra
    info (``acc`` bool, ``pred`` str, ``format_score`` float). ``group`` samples share each prompt."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for step in range(1, steps + 1):
        skill = 0.2 + 0.7 * (step - 1) / max(steps - 1, 1)
        lines = []
        for _ in range(prompts):
            a, b = (int(x) for x in rng.integers(1, 100, size=2))
            prompt = f"user\nWhat is {a} + {b}? Put the answer in \\boxed{{}}.\nassistant\n"
            for _ in range(group):
                answer, correct = _answer(rng, a, b, skill)
                formatted = bool(rng.random() < 0.5 + 0.5 * skill)
                output = (f"{a} + {b} = {answer}. The answer is \\boxed{{{answer}}}." if formatted
                          else f"I think it is {answer}")
                format_score = 0.1 if formatted else 0.0
                lines.append({
                    "input": prompt, "output": output,
                    "gts": str(a + b) if step % 4 else {"answer": a + b},  # verl passes whatever the data holds
                    "score": float(correct) + format_score, "step": step,
                    "acc": correct, "pred": str(answer) if formatted else "", "format_score": format_score,
                })
        path = out / f"{step}.jsonl"
        path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        paths.append(path)
    return paths
