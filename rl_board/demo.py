"""Deterministic generator of demo and benchmark runs.

It writes what a PPO trainer with a critic would log (every token-level field,
OpenRLHF-style padding, several ranks), a response-level evaluation log with
irregular steps, a verl rollout dump (``{step}.jsonl``: input/output/gts/score
plus reward extra info), TRL GRPO completions (``completions_{step:05d}.parquet``) and
agent runs with tool calls in prime-rl's (``rollouts/step_N/train/all/traces.jsonl``) and
OpenPipe ART's (``trajectories/train/{step:04d}.parquet``) shapes.
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


_TOOL_RESULTS = ("sunny, 21 degrees", "rain, 12 degrees", "the sum is {s}")


def write_tokenizer(path: Path, extra: tuple[str, ...] = ()) -> Path:
    """Train a small byte-level BPE tokenizer on the demo's words and prompts (and the texts ``extra``)
    with the ``tokenizers`` library (no download; the same bytes every time) and save it as ``path``
    (a tokenizer.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, show_progress=False,
                                  special_tokens=[PAD_TOKEN, "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [" ".join(_WORDS), *(p.format(a=17, b=25) for p in _PROMPTS), "".join(_HACK).replace("▁", " "),
              "user assistant tool weather: " + " ".join(r.format(s=42) for r in _TOOL_RESULTS), *extra]
    tokenizer.train_from_iterator(corpus, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path


def write_prime_rl_tokens_run(out: Path, steps: int = 10, ranks: int = 2, samples_per_rank: int = 6,
                              seed: int = 5) -> list[Path]:
    """A prime-rl token export (``trainer.enable_token_export``) with its tokenizer: ``out/tokenizer.json``
    and ``out/token_exports/step_{N}/rank_{R}.jsonl`` (+ ``STABLE``), one line per sequence as prime-rl's
    ``TokenExporter`` writes it (float32 values, non-finite ones as null, no reward, no text). A third of
    the samples call a tool: its result sits between two trained turns, untrained. Entropy falls, the
    sampler drifts from the trainer and a repeated phrase spreads as training goes on."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(write_tokenizer(out / "tokenizer.json")))
    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(seed)
    paths = [out / "tokenizer.json"]

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text).ids

    def f32(values) -> list:
        return [None if not math.isfinite(v) else v for v in np.asarray(values, np.float32).tolist()]

    for step in range(1, steps + 1):
        progress = (step - 1) / max(steps - 1, 1)
        folder = out / "token_exports" / f"step_{step}"
        folder.mkdir(parents=True, exist_ok=True)
        for rank in range(ranks):
            lines = []
            for index in range(samples_per_rank):
                a, b = (int(x) for x in rng.integers(1, 100, size=2))
                prompt = _PROMPTS[int(rng.integers(0, len(_PROMPTS)))].format(a=a, b=b)
                turns = [(f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n", False)]
                hack = rng.random() < 0.4 * progress
                words = " ".join(t.lstrip("▁") for t in (_HACK * 3 if hack else _tokens(rng, int(rng.integers(6, 18)))))
                if index % 3 == 2:  # a tool call, its result (context, not trained), then the answer
                    result = _TOOL_RESULTS[int(rng.integers(0, 3))].format(s=a + b)
                    turns += [("weather tool<|im_end|>\n", True),
                              (f"<|im_start|>tool\n{result}<|im_end|>\n<|im_start|>assistant\n", False)]
                turns.append((words + "<|im_end|>", True))
                ids, mask = [], []
                for text, trained in turns:
                    got = encode(text)
                    ids += got
                    mask += [trained] * len(got)
                n = len(ids)
                trained = np.array(mask)
                trainer = -np.abs(rng.normal(0.0, 0.7 * (1.0 - 0.5 * progress), n)) - 0.01
                trainer[0] = math.log(1.0 / vocab)  # the trainer shifts its log-probs right, padding the first
                inference = np.where(trained, trainer + rng.normal(0.0, 0.01 + 0.06 * progress, n), 0.0)
                if rng.random() < 0.2:
                    inference[int(rng.integers(0, n))] = np.nan  # written as null
                entropy = np.abs(rng.normal(1.4 * (1.0 - 0.6 * progress), 0.3, n))
                entropy[0] = math.log(vocab)
                advantage = float(np.round(rng.normal(0.0, 1.0), 4))
                advantages = np.where(trained, advantage, 0.0)
                t32, i32 = np.float32(trainer), np.float32(inference)
                with np.errstate(invalid="ignore"):
                    log_ratio = t32 - i32
                    ratio = np.exp(log_ratio)
                    mismatch = ratio - log_ratio - 1
                lines.append({
                    "schema_version": 1, "step": step, "rank": rank, "micro_step": index // 2,
                    "micro_sequence_idx": index % 2, "export_sequence_idx": index,
                    "env_name": "tools" if index % 3 == 2 else "math",
                    "token_ids": ids, "position_ids": list(range(n)), "loss_mask": [bool(m) for m in mask],
                    "advantages": f32(advantages), "inference_logprobs": f32(i32), "trainer_logprobs": f32(t32),
                    "entropy": f32(entropy), "mismatch_kl": f32(mismatch), "log_importance_ratio": f32(log_ratio),
                    "importance_ratio": f32(ratio), "prob_delta": f32(np.exp(t32) - np.exp(i32)),
                    "is_masked": [False] * n, "is_masked_high": [False] * n, "is_masked_low": [False] * n,
                    "rl_weights": [None] * n, "ce_weights": [None] * n, "ref_kl_weights": [None] * n,
                })
            path = folder / f"rank_{rank}.jsonl"
            path.write_text("".join(json.dumps(line, separators=(",", ":"), allow_nan=False) + "\n"
                                    for line in lines))
            paths.append(path)
        (folder / "STABLE").touch()
        paths.append(folder / "STABLE")
    return paths


def _agent_rollout(rng: np.random.Generator, skill: float) -> dict:
    """One tool-using rollout of a calculator agent: (turns as chat messages with ``sampled``,
    reward components {name: (score, weight)})."""
    a, b, c = (int(x) for x in rng.integers(2, 30, size=3))
    truth = a + b * c
    turns = [({"role": "system", "content": _AGENT_SYSTEM}, False),
             ({"role": "user", "content": f"What is {a} + {b} × {c}? Answer with the number only."}, False)]
    calls = int(rng.integers(0, 3)) + (rng.random() > skill)
    for i in range(calls):
        right = rng.random() < 0.5 + 0.5 * skill  # else the precedence slip
        expr, value = (f"{a}+{b}*{c}", truth) if right else (f"({a}+{b})*{c}", (a + b) * c)
        turns.append(({"role": "assistant", "content": "Let me compute that." if i == 0 else "Checking again.",
                       "tool_calls": [{"id": f"call_{i}", "name": "calc", "arguments": json.dumps({"expr": expr})}]},
                      True))
        broken = rng.random() < 0.1
        result = "Error: <SyntaxError> unexpected token '<'" if broken else str(value)
        turns.append(({"role": "tool", "tool_call_id": f"call_{i}", "content": result}, False))
    correct = bool(rng.random() < skill)
    answer = str(truth if correct else truth + int(rng.integers(1, 9)))
    if rng.random() < 0.05:
        answer = ""  # an empty final answer
    turns.append(({"role": "assistant", "content": answer}, True))
    formatted = answer.isdigit()
    return {"turns": turns, "rewards": {"correct": (float(answer == str(truth)), 1.0),
                                        "format": (float(formatted), 0.2)}}


_AGENT_SYSTEM = "You are a careful assistant. Use the calc tool for arithmetic."
_AGENT_TEXTS = (_AGENT_SYSTEM, "What is 12 + 7 × 3? Answer with the number only.", "Let me compute that.",
                "Checking again.", '<tool_call>{"name": "calc", "arguments": "{\\"expr\\": \\"12+7*3\\"}"}</tool_call>',
                "Error: <SyntaxError> unexpected token '<'", "system user assistant tool 0123456789")


def write_prime_rl_run(out: Path, steps: int = 8, prompts: int = 3, group: int = 4, seed: int = 5) -> list[Path]:
    """Write what prime-rl's file monitor leaves in ``OUT/rollouts/``: per step,
    ``train/all/traces.jsonl`` (every rollout: one verifiers v1 episode a line, as
    ``Episode.to_record()`` dumps it) and ``train/effective/traces.jsonl`` (the trained batch: the
    groups whose rewards differ, each node's sampled tokens stamped with the trace's advantage, its
    reward minus its group's mean), plus an ``eval/all`` file every 4 steps; and ``out/tokenizer.json``,
    the tokenizer of the nodes' token ids (trained with ``tokenizers``, the same bytes every time)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(write_tokenizer(out / "tokenizer.json", _AGENT_TEXTS)))
    rng = np.random.default_rng(seed)
    sampler = np.random.default_rng(seed + 1)  # the sampler's log-probs: drawn apart, so the rollouts stay put
    paths = [out / "tokenizer.json"]
    for step in range(1, steps + 1):
        skill = 0.3 + 0.6 * (step - 1) / max(steps - 1, 1)
        files: dict[tuple[str, str], list[bytes]] = {}
        kinds = [("train", prompts)] + ([("eval", 1)] if step % 4 == 0 else [])
        for kind, count in kinds:
            for p in range(count):
                rollouts = [_agent_rollout(rng, skill) for _ in range(group)]
                rewards = [sum(score * weight for score, weight in r["rewards"].values()) for r in rollouts]
                nodes = [_v1_nodes(r["turns"], tokenizer, sampler, skill) for r in rollouts]
                episodes = [_v1_episode(f"{kind}-{step}-{p}-{g}", f"{kind}-{step}-{p}", step, r, n)
                            for g, (r, n) in enumerate(zip(rollouts, nodes))]
                files.setdefault((kind, "all"), []).extend(orjson.dumps(e) + b"\n" for e in episodes)
                if kind == "train" and len(set(rewards)) > 1:  # prime-rl stamps the advantages it trains with
                    mean = sum(rewards) / len(rewards)
                    for episode, reward in zip(episodes, rewards):
                        _stamp_advantage(episode["traces"][0]["nodes"], round(reward - mean, 6))
                    files.setdefault((kind, "effective"), []).extend(orjson.dumps(e) + b"\n" for e in episodes)
        for (kind, subset), lines in files.items():
            path = out / "rollouts" / f"step_{step}" / kind / subset / "traces.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(lines))
            paths.append(path)
    return paths


def _v1_nodes(turns: list[tuple[dict, bool]], tokenizer, sampler: np.random.Generator, skill: float) -> list[dict]:
    """The ``MessageNode`` dumps of a linear conversation, token ids attributed as verifiers'
    ``_commit_turn`` does over a ChatML template: an input message's node holds its leading scaffold
    and ``<|im_start|>ROLE\\nCONTENT<|im_end|>\\n``, every mask entry false; an assistant node the
    generation prompt (mask false), then its completion (content, tool calls, ``<|im_end|>``; mask
    true) with one sampler log-prob per completion token (the compact layout)."""
    def encode(text: str) -> list[int]:
        return tokenizer.encode(text).ids

    nodes, after_assistant = [], False
    for i, (message, sampled) in enumerate(turns):
        node = {} if i == 0 else {"parent": i - 1}
        node.update({"message": message, "sampled": sampled, "timestamp": 1760000000.0})
        if sampled:
            calls = "".join("<tool_call>" + json.dumps({"name": c["name"], "arguments": c["arguments"]})
                            + "</tool_call>" for c in message.get("tool_calls", []))
            scaffold = encode("<|im_start|>assistant\n")
            completion = encode(message.get("content", "") + calls + "<|im_end|>")
            unsure = sampler.random(len(completion)) < 0.15 * (1.2 - skill)  # a few tokens the sampler doubted
            logprobs = -np.abs(sampler.normal(0.0, 0.05, len(completion))) - np.where(
                unsure, sampler.uniform(0.5, 4.0, len(completion)), 0.0)
            node.update({"token_ids": scaffold + completion,
                         "mask": [False] * len(scaffold) + [True] * len(completion), "is_content": [],
                         "logprobs": [round(float(v), 4) for v in logprobs]})
        else:
            text = (("\n" if after_assistant else "")
                    + f"<|im_start|>{message['role']}\n{message.get('content', '')}<|im_end|>\n")
            ids = encode(text)
            node.update({"token_ids": ids, "mask": [False] * len(ids), "is_content": [], "logprobs": []})
        nodes.append(node)
        after_assistant = sampled
    return nodes


def _stamp_advantage(nodes: list[dict], advantage: float) -> None:
    """prime-rl's ``assign_advantages`` with one value: each sampled token of each node gets it."""
    for node in nodes:
        if any(node["mask"]):
            node["advantages"] = [advantage] * sum(node["mask"])


def _v1_episode(episode_id: str, group_id: str, step: int, rollout: dict, nodes: list[dict]) -> dict:
    trace = {"version": 1, "id": f"trace-{episode_id}", "verifiers": {"version": "demo"},
             "task": {"type": "Task", "data": {"question": rollout["turns"][1][0]["content"]}},
             "agent": {"config": {"id": "demo"}, "name": "agent", "trainable": True}, "tools": [
                 {"name": "calc", "description": "Evaluate an arithmetic expression.",
                  "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}],
             "nodes": nodes, "calls": [], "request_rewrites": [], "response_rewrites": [],
             "rewards": {name: {"score": score, "weight": weight} for name, (score, weight) in rollout["rewards"].items()},
             "metrics": {"tool_errors": float(sum("Error" in m.get("content", "") for m, _ in rollout["turns"]
                                                  if m["role"] == "tool"))},
             "info": {}, "extra_usage": [], "is_completed": True, "ok": True, "stop_condition": "completed",
             "errors": [], "timing": {"start": 1760000000.0}}
    return {"id": episode_id, "env": {"id": "calc-demo"}, "task": trace["task"], "group": {"id": group_id},
            "run": {"type": "train", "id": "demo", "work": {"type": "train", "step": step}},
            "ok": True, "errors": [], "traces": [trace]}


def write_art_run(out: Path, steps: int = 8, prompts: int = 3, group: int = 4, seed: int = 6) -> list[Path]:
    """Write what OpenPipe ART's backend leaves in ``.art/{project}/models/{model}/``:
    ``trajectories/train/{step:04d}.parquet`` per step (``write_trajectory_groups_parquet``: one row
    per trajectory, the model's choices trainable, tool calls as JSON text, metrics as JSON)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.string()),
                         ("tool_call_id", pa.string()), ("trainable", pa.bool_())])
    schema = pa.schema([("format_version", pa.int16()), ("group_index", pa.int64()), ("trajectory_index", pa.int64()),
                        ("reward", pa.float64()), ("metrics", pa.string()), ("metadata", pa.string()),
                        ("messages", pa.list_(message))])
    rng = np.random.default_rng(seed)
    paths = []
    for step in range(1, steps + 1):
        skill = 0.3 + 0.6 * (step - 1) / max(steps - 1, 1)
        rows = []
        for g in range(prompts):
            for t in range(group):
                rollout = _agent_rollout(rng, skill)
                messages = []
                for turn, sampled in rollout["turns"]:
                    calls = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"], "arguments": c["arguments"]}}
                             for c in turn.get("tool_calls", [])]
                    messages.append({"role": turn["role"], "content": turn.get("content"),
                                     "tool_calls": json.dumps(calls) if calls else None,
                                     "tool_call_id": turn.get("tool_call_id"), "trainable": sampled})
                reward = sum(score * weight for score, weight in rollout["rewards"].values())
                metrics = {name: score for name, (score, _) in rollout["rewards"].items()}
                rows.append({"format_version": 2, "group_index": g, "trajectory_index": t, "reward": reward,
                             "metrics": json.dumps(metrics, separators=(",", ":")), "metadata": None,
                             "messages": messages})
        path = out / "trajectories" / "train" / f"{step:04d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")
        paths.append(path)
    return paths


def write_ppo_demo(out: Path) -> list[Path]:
    """The bundled PPO run: 30 steps of 16 samples over 4 rank files."""
    return write_train_run(out, steps=30, samples_per_step=16, max_tokens=32, ranks=4, sampler=True)


def write_demo_samples(root: Path) -> None:
    """Write the bundled ``rollout_samples/``: a PPO run, an eval run, a verl dump, TRL completions, a
    prime-rl agent run and a prime-rl token export with its tokenizer."""
    write_ppo_demo(root / "ppo_demo")
    write_eval_run(root / "eval_demo")
    write_verl_run(root / "verl_grpo_demo")
    write_trl_run(root / "trl_grpo_demo")
    write_prime_rl_run(root / "prime_rl_agent_demo")
    write_prime_rl_tokens_run(root / "prime_rl_tokens_demo")
