"""Deterministic generator of demo and benchmark runs.

It writes what a PPO trainer with a critic would log (every token-level field,
OpenRLHF-style padding, several ranks), a response-level evaluation log with
irregular steps, a verl rollout dump (``{step}.jsonl``: input/output/gts/score
plus reward extra info) and TRL GRPO completions (``completions_{step:05d}.parquet``).
Same arguments, same bytes: the shipped ``rollout_samples/`` are made by
``python -m rl_board generate``.
"""

from __future__ import annotations

import json
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
_HACK = ["▁so", "▁the", "▁answer", "▁is", "▁correct", "!"]  # a phrase a reward model overrates
# A few responses a reward model might love or a browser might execute.
_ODD_RESPONSES = (
    "<img src=x onerror=alert(1)> I am sure the answer is correct!!!",
    "# heading\n**bold** claim: the answer is {a}.",
)


def _tokens(rng: np.random.Generator, n: int) -> list[str]:
    picks = rng.integers(0, len(_WORDS), size=n)
    return ["▁" + _WORDS[i] if j % 3 == 0 else _WORDS[i] for j, i in enumerate(picks)]


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


def _answer(rng: np.random.Generator, a: int, b: int, skill: float) -> tuple[int, bool]:
    """(the model's answer to a + b, whether it is right) for a policy right with probability ``skill``."""
    correct = bool(rng.random() < skill)
    return (a + b if correct else a + b + int(rng.integers(1, 9))), correct


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


def write_ppo_demo(out: Path) -> list[Path]:
    """The bundled PPO run: 30 steps of 16 samples over 4 rank files."""
    return write_train_run(out, steps=30, samples_per_step=16, max_tokens=32, ranks=4, sampler=True)


def write_demo_samples(root: Path) -> None:
    """Write the bundled ``rollout_samples/``: a PPO run, an eval run, a verl dump and TRL completions."""
    write_ppo_demo(root / "ppo_demo")
    write_eval_run(root / "eval_demo")
    write_verl_run(root / "verl_grpo_demo")
    write_trl_run(root / "trl_grpo_demo")
