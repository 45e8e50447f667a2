"""ROLL's rollout dumps: ``{rollout_dump_dir}/rollout_dump_data.step_{N}.jsonl``.

ROLL's ``write_to_json_process`` (``roll/pipeline/rlvr/utils.py``) writes a whole batch as
**one JSON line that is a dict of columns**, each a list with one value per sample:

- agentic pipelines (``pipeline/agentic/utils.dump_rollout_trajectories``): columns
  ``trajectory_data``, ``messages``, ``tools`` (each value a JSON **string**), ``exp_name``
  and ``global_step``; stepwise samples without them were dropped (``remove_nan_items``), so
  one row is one trajectory. ``trajectory_data`` holds ``reward_info`` (``episode_reward``:
  the reward; ``step_rewards``, ``first_round_reward``, ``final_reward``), ``length_info``,
  ``failure_info`` and ``env_info``; ``messages`` is ``json.dumps([conversation])``
  (OpenAI-shaped messages, ``tool_calls`` when the env keeps them; an assistant content that
  holds Hermes ``<tool_call>`` blocks has them read as calls, ``chat_text``). The manager
  (``AgentNativeStepEnvManager.formulate_rollouts``) writes as ``messages`` the last LLM call's
  input with its decoded answer appended, and as ``trajectory_data.last_observation`` the env's
  observation after the final action: for a message env the whole conversation, the final tool
  result or feedback included; for ROCK's a string (``"SESSION_END"``). The turns are read from
  ``last_observation`` when it is a conversation at least as long as ``messages``, else from
  ``messages``; a user message holding ``<tool_response>`` blocks is tool turns.
- RLVR (``dump_rollout_to_specific_path``): ``prompt``, ``responses`` (decoded text),
  ``scores`` (the reward), ``ground_truth`` and the other ``COLUMMNS_CONFIG`` columns as they
  are.

The step is the row's ``global_step``, else the file name's. Train and eval batches of a step
share the file name (the later one overwrites it): the file holds what was written last. A
row that can't be read (a column value that is not JSON, a missing or wrong-typed reward) is
named with its file, line and row; the other rows load. A sample's ``line`` is its file's
line, its ``offset`` its row in that line; a line of several samples gives each the address
``FILE:LINE#ROW`` (``fields.address``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path
from ..base import FileError, ReadOptions, SourceChanged, line_too_long
from ..chat_text import content_turns, split_turns
from ..lines import count_lines, whole_lines
from ..record_rows import is_number, json_type, short
from ..turns import numbers, sample_rows, turns
from . import jsonl

NAME = "roll"
SUFFIX = ".jsonl"
APPENDABLE = False  # each step's file is written whole
ALIASES: dict[str, str] = {}
GLOBS = ("rollout_dump_data.step_*.jsonl",)
_STEP = re.compile(r"^rollout_dump_data\.step_(-?\d+)\.jsonl$")
EXPECTS = "rollout_dump_data.step_N.jsonl files, each one JSON line of columns"
KEYS = frozenset({"trajectory_data"})
_JSON_COLUMNS = ("trajectory_data", "messages", "tools")
POSITION = "offset"  # a sample's place in its line (``fields.address``'s ``#K``): its row, kept in ``offset``


def step_of(name: str) -> int | None:
    match = _STEP.match(Path(name).name)
    return int(match.group(1)) if match else None


def _loads(columns: dict, name: str, i: int):
    """Column ``name``'s value in row ``i``, decoded from its JSON text; a str saying why not."""
    value = columns[name][i]
    if not isinstance(value, str):
        return f"'{name}' must be a JSON string, got {json_type(value)}"
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:
        return f"'{name}' is not JSON ({exc})"


def _messages(value) -> list:
    """The conversation of a ``messages`` value (``[conversation]`` or a conversation); [] for
    anything that is not a list of messages (ROCK's ``last_observation`` is a string)."""
    if isinstance(value, list) and value and all(isinstance(m, list) for m in value):
        value = value[-1]
    if not isinstance(value, list) or not all(isinstance(m, dict) and "role" in m for m in value):
        return []
    return value


def conversation(messages) -> list[dict]:
    """The canonical turns of a ``messages`` value (``[conversation]`` or a conversation), Hermes
    calls in an assistant's content read as calls, ``<tool_response>`` blocks in a user message
    (how a text env such as OpenReward's returns tool output) as tool turns."""
    out = []
    for t in turns(_messages(messages)):
        if t["role"] == "assistant" and not t["tool_calls"] and "<tool_call>" in t["content"]:
            got = split_turns(t["content"]).turns
            if len(got) == 1:
                t = {**t, "content": got[0]["content"], "tool_calls": got[0]["tool_calls"],
                     "reasoning": t["reasoning"] or got[0]["reasoning"]}
        elif t["role"] in ("user", "tool") and "<tool_response>" in t["content"]:
            out.extend({**got, "trainable": t["trainable"]} for got in content_turns(t["role"], t["content"]))
            continue
        out.append(t)
    return out


def _whole(messages, last_observation) -> list:
    """The fuller of the two conversations ROLL writes: ``last_observation`` (the env's observation
    after the final action: the conversation with the final tool result or feedback) when it is a
    conversation at least as long as ``messages`` (the last call's input and its answer), else
    ``messages``."""
    last, given = _messages(last_observation), _messages(messages)
    return last if last and len(last) >= len(given) else given


def _agentic(columns: dict, i: int, step: int) -> dict | str:
    data = _loads(columns, "trajectory_data", i)
    if isinstance(data, str):
        return data
    if not isinstance(data, dict):
        return f"'trajectory_data' must be a JSON object, got {json_type(data)}"
    info = data.get("reward_info")
    reward = info.get("episode_reward") if isinstance(info, dict) else None
    if reward is None:
        return "missing 'trajectory_data.reward_info.episode_reward'"
    if not is_number(reward):
        return f"'trajectory_data.reward_info.episode_reward' must be a number, got {short(reward)}"
    messages = _loads(columns, "messages", i) if "messages" in columns else []
    if isinstance(messages, str):
        return messages
    extras = {**numbers({k: v for k, v in info.items() if k != "episode_reward"}),
              **numbers(data.get("length_info")), **numbers(data.get("failure_info"))}
    whole = _whole(messages, data.get("last_observation"))
    return {F.STEP: step, F.REWARD: float(reward), F.MESSAGES: conversation(whole), "extras": extras}


def _rlvr(columns: dict, i: int, step: int) -> dict | str:
    score = columns["scores"][i]
    if not is_number(score):
        return f"'scores' must be a number, got {short(score)}"
    response = columns["responses"][i]
    if not isinstance(response, str):
        return f"'responses' must be a string, got {json_type(response)}"
    texts = {name: columns[key][i] if isinstance(columns.get(key, [None] * (i + 1))[i], str) else None
             for name, key in (("prompt", "prompt"), ("ground_truth", "ground_truth"))}
    return {F.STEP: step, F.REWARD: float(score), "response": response, **texts, "extras": {}}


def row_samples(obj, step: int | None) -> tuple[list[tuple[int, dict]], list[str]]:
    """((row, sample dict) of each row of one line's columns, [why each other row is rejected]);
    raises ValueError with why the whole line can't be read."""
    if not isinstance(obj, dict) or not obj:
        raise ValueError("not a dict of columns")
    lengths = {k: len(v) for k, v in obj.items() if isinstance(v, list)}
    if len(lengths) != len(obj):
        bad = next(k for k, v in obj.items() if not isinstance(v, list))
        raise ValueError(f"column '{bad}' is not a list (ROLL writes one list per column)")
    if len(set(lengths.values())) > 1:
        raise ValueError("columns of different lengths: " + ", ".join(f"{k} {n}" for k, n in lengths.items()))
    if "trajectory_data" in obj:
        make = _agentic
    elif "responses" in obj and "scores" in obj:
        make = _rlvr
    else:
        raise ValueError("neither 'trajectory_data' (agentic) nor 'responses' and 'scores' (RLVR) columns; "
                         "columns: " + ", ".join(obj))
    samples, errors = [], []
    steps = obj.get("global_step") or [step] * next(iter(lengths.values()))
    for i in range(next(iter(lengths.values()))):
        row_step = steps[i] if type(steps[i]) is int else step
        got = make(obj, i, 0 if row_step is None else row_step)
        if isinstance(got, str):
            errors.append(f"row {i}: {got}")
        else:
            samples.append((i, got))
    return samples, errors


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected row, lines read)."""
    path = as_path(path)
    data = read_bytes(path)
    samples, errors = [], []
    for number, _offset, _stop, raw in whole_lines(data):
        if len(raw) > options.max_line:
            errors.append((number, line_too_long(len(raw), options.max_line)))
            continue
        obj = jsonl.parse_line(raw)
        if isinstance(obj, str):
            errors.append((number, obj))
            continue
        try:
            got, bad = row_samples(obj, step_of(path.name))
        except ValueError as exc:
            errors.append((number, str(exc)))
            continue
        errors.extend((number, why) for why in bad)
        samples.extend({**s, "line": number, "offset": i} for i, s in got)
    if not samples and not errors and not data.strip():
        raise FileError("an empty file: no columns")
    return sample_rows(samples), errors, count_lines(data)


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """Row ``offset`` of line ``line``: its columns (JSON strings decoded), step, reward and turns."""
    for number, _, _, raw in whole_lines(fh.read()):
        if number == line:
            obj = jsonl.parse_line(raw)
            break
    else:
        obj = None
    try:
        got = dict(row_samples(obj, step_of(name))[0]) if isinstance(obj, dict) else {}
    except ValueError:
        got = {}
    if offset not in got:
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    shown = {}
    for key, values in obj.items():
        value = values[offset]
        if key in _JSON_COLUMNS and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        shown[key] = value
    shown.pop("messages", None)
    sample = got[offset]
    return {**shown, **sample["extras"], F.STEP: sample[F.STEP], F.REWARD: sample[F.REWARD],
            **({F.MESSAGES: sample[F.MESSAGES]} if sample.get(F.MESSAGES) else {}),
            **{k: sample[k] for k in ("response", "prompt", "ground_truth") if sample.get(k) is not None}}
