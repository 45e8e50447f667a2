"""tinker-cookbook's RL rollout summaries: ``{log_path}/iteration_{NNNNNN}/{base}_rollout_summaries.jsonl``.

tinker-cookbook's RL loop (``rl/train.py``) exports, per iteration, one record per
trajectory through ``rl/rollout_logging.serialize_rollout_summaries`` and
``TrainingRunStore.write_rollouts`` (``json.dumps(record)`` per line): ``schema_version``,
``split``, ``iteration``, ``group_idx``, ``traj_idx``, ``tags``, ``sampling_client_step``,
``total_reward``, ``final_reward``, ``trajectory_metrics``, ``final_ob_len`` and ``steps[]``
(one per LLM call: ``step_idx``, ``ob_len``, ``ac_len``, ``reward``, ``episode_done``,
``metrics``, ``logs``). No token text is saved. ``base`` is ``train`` (split ``train``) or
``eval_{label}`` (split ``eval_{label}``); the step is the iteration (the folder's number).

One sample per trajectory: reward ``total_reward``; one assistant turn per step, then its tool
turns. The tool-use env (``tool_use/agent_tool_message_env.py``) logs in a step's ``logs``
``assistant_content`` (the turn's text), ``tool_call_{i}`` (``name(arguments)``: the turn's
calls) and ``tool_result_{i}`` (a tool turn each); a step without ``assistant_content`` has its
other logs, one ``key: value`` line each, as its text, and the logs that are not turns stay in
the record. Extras: ``final_reward``, ``final_ob_len``, ``group_idx``, each number of
``trajectory_metrics`` under its own name (``trajectory_metrics.num_tool_calls``: the board's
own ``num_tool_calls``, counted from the turns, never replaces it), and ``ac_tokens`` (the
steps' ``ac_len`` summed) and ``ob_tokens`` (the last step's ``ob_len``). ``metrics.jsonl``
beside the iteration folders is the trainer's scalars (``rl_board.scalars``); the logtree files of an iteration (``{base}.html``,
``{base}_logtree.json``) are named in each sample's record (``logtree``), not parsed.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path
from ..base import ReadOptions, SourceChanged, line_too_long
from ..lines import count_lines, whole_lines
from ..record_rows import is_number, json_type, short
from ..turns import number, numbers, sample_rows, turn
from . import jsonl

NAME = "tinker"
SUFFIX = ".jsonl"
APPENDABLE = False  # each file is written whole
ALIASES: dict[str, str] = {}
GLOBS = ("iteration_*/*_rollout_summaries.jsonl",)
DEFAULT_SPLIT = "train"
KEYS = frozenset({"total_reward", "steps"})
EXPECTS = "iteration_NNNNNN/{train|eval_LABEL}_rollout_summaries.jsonl records with total_reward and steps"
_ITERATION = re.compile(r"^iteration_(\d+)$")
_SUFFIX = "_rollout_summaries.jsonl"


def split_of(name: str) -> str | None:
    base = PurePosixPath(name).name
    return base[:-len(_SUFFIX)] if base.endswith(_SUFFIX) else None


def step_of(name: str) -> int | None:
    parts = PurePosixPath(name).parts
    match = _ITERATION.match(parts[-2]) if len(parts) >= 2 else None
    return int(match.group(1)) if match else None


def _logs_text(logs) -> str:
    if not isinstance(logs, dict):
        return "" if logs is None else str(logs)
    return "\n".join(f"{k}: {v}" for k, v in logs.items())


def _numbered(logs: dict, prefix: str) -> list[str]:
    """The keys ``{prefix}0``, ``{prefix}1``, … of ``logs``, in order, up to the first missing."""
    keys = []
    while f"{prefix}{len(keys)}" in logs:
        keys.append(f"{prefix}{len(keys)}")
    return keys


def _call(logged) -> dict:
    """A logged ``name(arguments)`` (``AgentToolMessageEnv``) as a tool call; text of another shape is
    the call's arguments, its name unknown."""
    text = logged if isinstance(logged, str) else _logs_text(logged)
    name, paren, rest = text.partition("(")
    if paren and rest.endswith(")") and name and name.strip() == name:
        return {"id": None, "name": name, "arguments": rest[:-1]}
    return {"id": None, "name": None, "arguments": text}


def step_turns(logs) -> list[dict]:
    """One step's turns: the assistant turn (its text ``assistant_content`` when logged, else the
    other logs as ``key: value`` lines; its calls the ``tool_call_i`` entries), then a tool turn per
    ``tool_result_i``."""
    if not isinstance(logs, dict):
        return [turn({"role": "assistant", "content": _logs_text(logs)})]
    calls, results = _numbered(logs, "tool_call_"), _numbered(logs, "tool_result_")
    text = logs.get("assistant_content")
    if not isinstance(text, str):
        taken = {*calls, *results}
        text = _logs_text({k: v for k, v in logs.items() if k not in taken})
    assistant = turn({"role": "assistant", "content": text})
    assistant["tool_calls"] = [_call(logs[k]) for k in calls]
    return [assistant, *(turn({"role": "tool", "content": logs[k]}) for k in results)]


def _turn_keys(logs) -> set:
    if not isinstance(logs, dict):
        return set()
    keys = {*_numbered(logs, "tool_call_"), *_numbered(logs, "tool_result_")}
    return keys | ({"assistant_content"} if isinstance(logs.get("assistant_content"), str) else set())


def sample_of(obj, step: int) -> dict | str:
    """One record's sample dict, or why it is rejected."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    if "total_reward" not in obj:
        return "missing 'total_reward'"
    if not is_number(obj["total_reward"]):
        return f"'total_reward' must be a number, got {short(obj['total_reward'])}"
    steps = obj.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return f"'steps' must be a list of objects, got {json_type(steps)}"
    extras = numbers(obj.get("trajectory_metrics"), "trajectory_metrics.")
    for key in ("final_reward", "final_ob_len", "group_idx"):
        if number(obj.get(key)) is not None:
            extras[key] = number(obj[key])
    acs = [s.get("ac_len") for s in steps if is_number(s.get("ac_len"))]
    extras["ac_tokens"] = float(sum(acs))
    if steps and is_number(steps[-1].get("ob_len")):
        extras["ob_tokens"] = float(steps[-1]["ob_len"])
    turns = [t for s in steps for t in step_turns(s.get("logs"))]
    return {F.STEP: step, F.REWARD: float(obj["total_reward"]), F.MESSAGES: turns, "extras": extras}


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, one per trajectory; (line, reason) for each rejected line; lines read)."""
    path = as_path(path)
    step = step_of(f"{path.parent.name}/{path.name}") or 0
    data = read_bytes(path)
    samples, errors = [], []
    for line, offset, stop, raw in whole_lines(data):
        got = line_too_long(len(raw), options.max_line) if len(raw) > options.max_line else \
            sample_of(jsonl.parse_line(raw), step)
        if isinstance(got, str):
            errors.append((line, got))
        else:
            samples.append({**got, "line": line, "offset": offset, "length": stop - offset})
    return sample_rows(samples), errors, count_lines(data)


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One trajectory's record, its step, reward, turns and the iteration's logtree files."""
    obj = jsonl.record(fh, name, offset, length, line)
    got = sample_of(obj, step_of(name) or 0)
    if isinstance(got, str):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    base = split_of(name)
    folder = PurePosixPath(name).parent
    shown = {k: v for k, v in obj.items() if k != "steps"}
    shown["steps"] = [{**s, "logs": {k: v for k, v in s["logs"].items() if k not in _turn_keys(s["logs"])}}
                      if isinstance(s.get("logs"), dict) else {k: v for k, v in s.items() if k != "logs"}
                      for s in obj["steps"]]
    shown["logtree"] = [str(folder / f"{base}.html"), str(folder / f"{base}_logtree.json")]
    return {**shown, **got["extras"], F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES]}
