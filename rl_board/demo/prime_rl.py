"""prime-rl: an agent run with tool calls (``rollouts/step_N/train/all/traces.jsonl``) and a token
export with its tokenizer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import orjson

from .words import _HACK, _PROMPTS, _TOOL_RESULTS, _tokens, write_tokenizer


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


_AGENT_SYSTEM = "You are a careful assistant. Use the calc tool for arithmetic."


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


_AGENT_TEXTS = (_AGENT_SYSTEM, "What is 12 + 7 × 3? Answer with the number only.", "Let me compute that.",
                "Checking again.", '<tool_call>{"name": "calc", "arguments": "{\\"expr\\": \\"12+7*3\\"}"}</tool_call>',
                "Error: <SyntaxError> unexpected token '<'", "system user assistant tool 0123456789")


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
