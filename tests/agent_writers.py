"""Agent runs written the way each trainer's own writer code writes them (for the reader tests).

Each function follows its writer line for line where it shapes the bytes (the source is named
in its docstring); only the objects being written are built by hand, in the shape the writer's
models dump (pydantic's ``model_dump(mode="json", exclude_none=True)`` drops None fields but
keeps None values inside dicts).
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import uuid
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

# -- prime-rl / verifiers v1 -------------------------------------------------------------------


def v1_node(message: dict, sampled: bool = False, parent: int | None = None, tokens: int = 2) -> dict:
    """A ``MessageNode`` as dumped (verifiers/v1/graph.py): parent omitted for a root; the excluded
    tensor fields (multi_modal_data, routed_experts, kept_tokens) absent."""
    node = {} if parent is None else {"parent": parent}
    node.update({"message": message, "sampled": sampled, "timestamp": 1760000000.0,
                 "token_ids": list(range(tokens)), "mask": [sampled] * tokens, "is_content": [],
                 "logprobs": [-0.5] * tokens if sampled else []})
    return node


def v1_input_node(message: dict, parent: int | None, token_ids: list[int]) -> dict:
    """An input message's node as ``_commit_turn`` makes it (verifiers/v1/graph.py): its span of the
    prompt's ids (leading scaffold included), every ``mask`` entry false, no logprobs."""
    node = {} if parent is None else {"parent": parent}
    node.update({"message": message, "sampled": False, "timestamp": 1760000000.0, "token_ids": token_ids,
                 "mask": [False] * len(token_ids), "is_content": [], "logprobs": []})
    return node


def v1_sampled_node(message: dict, parent: int | None, generation_prompt: list[int], completion: list[int],
                    logprobs: list[float], **stamped) -> dict:
    """The assistant node ``_commit_turn`` makes: the generation-prompt scaffold (mask false), then the
    sampled completion (mask true); ``logprobs`` one per completion token (the compact layout).
    ``stamped``: what a consumer assigns later in the same compact layout (prime-rl's ``advantages``,
    ``reference_logprobs``), dumped only when set (``exclude_none``)."""
    node = {} if parent is None else {"parent": parent}
    node.update({"message": message, "sampled": True, "timestamp": 1760000000.0,
                 "token_ids": [*generation_prompt, *completion],
                 "mask": [False] * len(generation_prompt) + [True] * len(completion), "is_content": [],
                 "logprobs": logprobs, **{k: v for k, v in stamped.items() if v is not None}})
    return node


def v1_rendered_chain(encode, turns: list[tuple[dict, bool]], logprob: float = -0.5,
                      **stamped) -> list[dict]:
    """Nodes of a linear conversation with token ids as a ChatML renderer attributes them
    (``_commit_turn``): an input message's node holds its leading scaffold (the newline after the
    assistant turn before it) and ``<|im_start|>ROLE\nCONTENT<|im_end|>\n``; an assistant node the
    generation prompt ``<|im_start|>assistant\n`` (not trained), then its completion
    ``CONTENT<tool_call>…</tool_call><|im_end|>`` (trained) with the sampler's log-prob ``logprob``
    for each completion token. ``encode``: text -> token ids; ``stamped``: a value per completion
    token of each assistant node (``advantages=0.5`` -> ``advantages`` of that value)."""
    nodes, after_assistant = [], False
    for i, (message, sampled) in enumerate(turns):
        parent = None if i == 0 else i - 1
        if sampled:
            calls = "".join(f"<tool_call>{json.dumps({'name': c['name'], 'arguments': c['arguments']})}</tool_call>"
                            for c in message.get("tool_calls") or [])
            completion = encode((message.get("content") or "") + calls + "<|im_end|>")
            nodes.append(v1_sampled_node(message, parent, encode("<|im_start|>assistant\n"), completion,
                                         [logprob] * len(completion),
                                         **{k: [v] * len(completion) for k, v in stamped.items()}))
        else:
            text = (("\n" if after_assistant else "")
                    + f"<|im_start|>{message['role']}\n{message.get('content') or ''}<|im_end|>\n")
            nodes.append(v1_input_node(message, parent, encode(text)))
        after_assistant = sampled
    return nodes


def v1_chain(messages: list[tuple[dict, bool]]) -> list[dict]:
    """Nodes of a linear conversation, each the child of the one before."""
    return [v1_node(m, sampled, None if i == 0 else i - 1) for i, (m, sampled) in enumerate(messages)]


def v1_trace(nodes: list[dict], rewards: dict, metrics: dict) -> dict:
    """``Trace.to_record()`` field order (verifiers/v1/trace.py), None fields dropped."""
    return {"version": 1, "id": uuid.uuid4().hex, "verifiers": {"version": "1.0.0"},
            "task": {"type": "Task", "data": {"question": "q"}}, "agent": {
                "config": {"id": "agent"}, "name": "agent", "trainable": True},
            "tools": [], "nodes": nodes, "calls": [], "request_rewrites": [], "response_rewrites": [],
            "rewards": rewards, "metrics": metrics, "info": {}, "extra_usage": [], "is_completed": True,
            "ok": True, "stop_condition": "completed", "errors": [],
            "timing": {"start": 1760000000.0, "boot": {"start": 0.0, "end": 0.0}}}


def v1_episode(episode_id: str, step: int, traces: list[dict], errors: list | None = None) -> dict:
    """``Episode.to_record()`` (verifiers/v1/episode.py) as prime-rl stamps it: ``run`` is a
    TrainRunInfo whose ``work`` is a TrainWorkInfo (prime_rl/orchestrator/dispatcher.py)."""
    return {"id": episode_id, "env": {"id": "tool-math"}, "task": {"type": "Task", "data": {"question": "q"}},
            "group": {"id": "g0"}, "run": {"type": "train", "id": "run1", "name": "demo",
                                          "work": {"type": "train", "step": step, "policy": {"start": step, "end": step}}},
            "ok": not errors, "errors": errors or [], "traces": traces}


def v1_eval_episode(episode_id: str, env: str, trace: dict) -> dict:
    """The episode verifiers' eval writes for one trace (verifiers/v1/cli/output.py ``append_trace``:
    ``Episode(env=EnvInfo(id=env), task=trace.task, traces=[trace], ok=trace.ok)``), dumped without None
    fields: no ``group``, no ``run``."""
    return {"id": episode_id, "env": {"id": env}, "task": trace["task"], "ok": trace["ok"], "errors": [],
            "traces": [trace]}


def write_verifiers_eval(run_dir: Path, episodes: list[dict]) -> Path:
    """verifiers/v1/cli/output.py: ``save_config`` (``configs/eval.json``, a fresh empty ``traces.jsonl``), then
    ``write_episode`` for each (pydantic's compact ``dump_json``, ``exclude_none``, a newline), appended."""
    (run_dir / "configs").mkdir(parents=True, exist_ok=True)
    (run_dir / "configs" / "eval.json").write_text(json.dumps({"model": "demo", "env": {"id": "screens"}}, indent=2))
    path = run_dir / "traces.jsonl"
    path.write_text("")
    with path.open("ab") as f:
        for episode in episodes:
            f.write(json.dumps(episode, separators=(",", ":"), ensure_ascii=False).encode() + b"\n")
    return path


def write_prime_rl(out: Path, step: int, kind: str, subset: str, episodes: list[dict]) -> Path:
    """prime_rl/monitors/file.py ``FileMonitor.log_episodes``: appended with orjson, one per line."""
    return _orjson_lines(out / "rollouts" / f"step_{step}" / kind / subset / "traces.jsonl", episodes, "ab")


def _orjson_lines(path: Path, rows, mode: str) -> Path:
    """Each row as prime-rl dumps it (orjson, ``default=str``, numpy arrays serialised), one a line, into
    ``path`` (its folder made first): ``mode`` "ab" appends (the file monitor), "wb" writes the file anew
    (``save_rollouts``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opts = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY
    with open(path, mode) as f:
        for row in rows:
            f.write(orjson.dumps(row, default=str, option=opts))
    return path


def write_prime_rl_metrics(out: Path, rows: list[tuple[int, float, dict]]) -> Path:
    """prime_rl/monitors/file.py ``FileMonitor.log_metrics``: ``{"step": step, "time": time.time(), **metrics}``
    (non-finite values dropped by ``sanitize``) appended to ``OUT/metrics.jsonl`` with ``json.dumps`` and a
    newline; under the ``rl`` entrypoint the trainer and the orchestrator both append to it (each
    ``output_dir`` is the run folder). ``rows``: (step, wall time, metrics) in the order they were logged."""
    path = out / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", buffering=1) as f:
        for step, wall, metrics in rows:
            kept = {k: v for k, v in metrics.items() if not (isinstance(v, float) and not math.isfinite(v))}
            f.write(json.dumps({"step": step, "time": wall, **kept}) + "\n")
    return path


def write_prime_rl_logs(out: Path) -> Path:
    """The ``rl`` entrypoint's text logs (prime_rl/utils/pathing.py ``create_attempt_log_dir``):
    ``OUT/logs/attempt_1/{trainer,orchestrator,inference}.log``, the env servers' under ``envs/{split}/``,
    and ``logs/latest`` a relative symlink to ``attempt_1``."""
    attempt = out / "logs" / "attempt_1"
    (attempt / "envs" / "train").mkdir(parents=True, exist_ok=True)
    for name in ("trainer", "orchestrator", "inference"):
        (attempt / f"{name}.log").write_text(f"{name} started\n")
    (attempt / "envs" / "train" / "tool-math.log").write_text("env server started\n")
    (out / "logs" / "latest").symlink_to("attempt_1")
    return attempt



# -- prime-rl, June 23 to July 9, 2026: one verifiers v1 Trace a line in rollouts/step_N/*_rollouts*.jsonl --


def v1_window_message(role: str, content=None, tool_calls: list[dict] | None = None, tool_call_id: str = "",
                      reasoning_content: str | None = None, name: str | None = None) -> dict:
    """A v1 ``Message`` as ``model_dump(mode="json")`` writes it (verifiers/v1/types.py of the window): every
    field in declaration order, None kept (no ``exclude_none`` in the window's dump)."""
    if role == "assistant":
        calls = None if tool_calls is None else [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                                                 for c in tool_calls]
        return {"role": role, "content": content, "reasoning_content": reasoning_content, "tool_calls": calls,
                "provider_state": None}
    if role == "tool":
        return {"role": role, "tool_call_id": tool_call_id, "content": content, "name": name}
    return {"role": role, "content": content}


def v1_window_node(message: dict, parent: int | None, token_ids: list[int], mask: list[bool],
                   logprobs: list[float], *, sampled: bool = False, finish_reason: str | None = None,
                   usage: dict | None = None, with_is_content: bool = True) -> dict:
    """A ``MessageNode`` dumped by ``Rollout.model_dump(mode="json", exclude=ROLLOUT_DUMP_EXCLUDE)``
    (prime_rl/orchestrator/orchestrator.py 7089ba1e4; ``Trace.to_record()`` from 9f425fffc): parent (null
    for a root), message, sampled, token_ids, mask, ``is_content`` (verifiers b055799 on, June 24; empty:
    the renderer attributes none), logprobs (one per true ``mask`` entry), finish_reason, usage;
    ``multi_modal_data`` and ``routed_experts`` excluded."""
    node = {"parent": parent, "message": message, "sampled": sampled, "token_ids": token_ids, "mask": mask}
    if with_is_content:
        node["is_content"] = []
    node.update({"logprobs": logprobs, "finish_reason": finish_reason, "usage": usage})
    return node


def v1_window_usage(prompt_tokens: int, completion_tokens: int) -> dict:
    """``Usage.model_dump(mode="json")`` (verifiers/v1/types.py): None fields kept."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "cached_input_tokens": None,
            "reasoning_tokens": None, "cost": None}


def v1_window_task(idx: int, prompt, **extra) -> dict:
    """A ``Task`` subclass dumped (verifiers/v1/task.py): the base fields in order (``timeout`` and
    ``resources`` as their all-None models), then the taskset's own fields (``answer``...)."""
    return {"idx": idx, "name": None, "description": None, "prompt": prompt, "system_prompt": None, "image": None,
            "workdir": None, "timeout": {"setup": None, "harness": None, "finalize": None, "scoring": None},
            "resources": {"cpu": None, "memory": None, "gpu": None, "disk": None}, **extra}


def v1_window_trace(trace_id: str, task: dict, nodes: list[dict], rewards: dict[str, float],
                    metrics: dict[str, float], *, start: float, errors: list[dict] | None = None,
                    stop_condition: str | None = "done", extra_usage: bool = True) -> dict:
    """``Trace`` dumped whole (verifiers/v1/trace.py of the window): id, task, nodes, ``rewards`` (each
    ``@reward``'s score x weight: ``record_reward`` stores the product), ``metrics``, info, ``extra_usage``
    (verifiers aa95826 on, June 25), is_completed, stop_condition, errors ({type, message, traceback}) and
    timing (start, then setup / generation / finalize / scoring spans of start and end). prime-rl's own
    fields on ``Rollout`` (kind, env_name, group_id, policy_version, advantages...) are all ``exclude=True``:
    a line is the trace alone."""
    trace = {"id": trace_id, "task": task, "nodes": nodes, "rewards": rewards, "metrics": metrics, "info": {}}
    if extra_usage:
        trace["extra_usage"] = []
    span = {"start": start, "end": start + 1.0}
    trace.update({"is_completed": True, "stop_condition": "error" if errors else stop_condition,
                  "errors": errors or [],
                  "timing": {"start": start, "setup": span, "generation": {"start": start + 1.0, "end": start + 3.0},
                             "finalize": {"start": 0.0, "end": 0.0},
                             "scoring": {"start": start + 3.0, "end": start + 3.5}}})
    return trace


def write_prime_rl_window(out: Path, step: int, name: str, rollout_dicts: list[dict]) -> Path:
    """``save_rollouts(rollout_dicts, step_path / name)`` (prime_rl/orchestrator/utils.py, June 23 to July 9,
    2026): ``step_path`` is ``OUT/rollouts/step_{step}``, ``name`` ``train_rollouts.jsonl`` (the batch shipped
    at that step) or ``eval_rollouts_{env}.jsonl`` (the eval of that step's checkpoint); orjson, one trace a
    line, the file written anew."""
    return _orjson_lines(out / "rollouts" / f"step_{step}" / name, rollout_dicts, "wb")


# -- OpenPipe ART ------------------------------------------------------------------------------


def _art_flatten_message(message: dict) -> dict:
    """art/utils/trajectory_parquet.py ``_flatten_message``."""
    if "finish_reason" in message:
        inner = message.get("message", {})
        tool_calls = inner.get("tool_calls")
        return {"role": inner.get("role"), "content": inner.get("content"),
                "tool_calls": json.dumps(tool_calls) if tool_calls else None, "tool_call_id": None,
                "trainable": True}
    tool_calls = message.get("tool_calls")
    return {"role": message.get("role"), "content": message.get("content"),
            "tool_calls": json.dumps(tool_calls) if tool_calls else None,
            "tool_call_id": message.get("tool_call_id"), "trainable": False}


def _compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def write_art(out: Path, split: str, step: int, groups: list[list[dict]]) -> Path:
    """``write_trajectory_groups_parquet`` (format 2) at ``trajectories/{split}/{step:04d}.parquet``.
    A trajectory is {"messages_and_choices", "reward", "metrics", "metadata"}; a Choice is a dict
    with ``finish_reason``, ``index`` and ``message``. An empty group writes its sentinel row."""
    message_type = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.string()),
                              ("tool_call_id", pa.string()), ("trainable", pa.bool_())])
    schema = pa.schema([
        ("format_version", pa.int16()), ("group_index", pa.int64()), ("trajectory_index", pa.int64()),
        ("group_json", pa.large_string()), ("trajectory_json", pa.large_string()),
        ("group_metadata", pa.string()), ("group_metrics", pa.string()), ("group_logs", pa.list_(pa.string())),
        ("reward", pa.float64()), ("metrics", pa.string()), ("metadata", pa.string()), ("tools", pa.string()),
        ("logs", pa.list_(pa.string())), ("messages", pa.list_(message_type))],
        metadata={b"art.trajectory_parquet.version": b"2"})
    rows = []
    for group_index, group in enumerate(groups):
        common = {"format_version": 2, "group_index": group_index,
                  "group_json": _compact({"metadata": {}, "metrics": {}, "logs": []}),
                  "group_metadata": None, "group_metrics": None, "group_logs": None}
        if not group:
            rows.append({**common, "trajectory_index": None, "trajectory_json": None, "reward": None,
                         "metrics": None, "metadata": None, "tools": None, "logs": None, "messages": None})
            continue
        for trajectory_index, trajectory in enumerate(group):
            rows.append({**common, "trajectory_index": trajectory_index,
                         "trajectory_json": _compact(trajectory), "reward": trajectory["reward"],
                         "metrics": _compact(trajectory["metrics"]) if trajectory.get("metrics") else None,
                         "metadata": _compact(trajectory["metadata"]) if trajectory.get("metadata") else None,
                         "tools": None, "logs": None,
                         "messages": [_art_flatten_message(m) for m in trajectory["messages_and_choices"]]})
    path = out / "trajectories" / split / f"{step:04d}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")
    return path


# -- rLLM --------------------------------------------------------------------------------------


def write_rllm(log_dir: Path, step: int, mode: str, episode_id: str, trajectories: list[dict],
               is_correct: bool, metrics: dict, epoch: int = 0, termination_reason: str = "ENV_DONE") -> Path:
    """rllm/utils/episode_logger.py ``EpisodeLogger.log_episode`` (``log_dir`` is its ``episodes``
    folder). A trajectory is {"reward", "steps": [{"observation", "model_response", "chat_completions",
    "reward"}]}; ``termination_reason`` the episode's ``TerminationReason`` value."""
    task = {"question": episode_id}
    task_hash = hashlib.sha256(json.dumps(task, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:8]
    episode_data = {"training_step": step, "epoch": epoch, "episode_id": episode_id, "session_id": None,
                    "task": task, "task_hash": task_hash, "is_correct": is_correct,
                    "termination_reason": termination_reason, "metrics": metrics, "metadata": {}, "timing": {},
                    "trajectories": []}
    for number, traj in enumerate(trajectories):
        episode_data["trajectories"].append({
            "name": "solver", "uid": f"{episode_id}-{number}", "reward": traj["reward"],
            "num_steps": len(traj["steps"]), "timing": {},
            "steps": [{"observation": s.get("observation"), "thought": "", "action": None,
                       "reward": s.get("reward", 0.0), "done": False, "model_response": s.get("model_response", ""),
                       "chat_completions": s.get("chat_completions", []), "timing": {}} for s in traj["steps"]]})
    step_dir = log_dir / f"{mode}_step_{step}_epoch_{epoch}"
    step_dir.mkdir(parents=True, exist_ok=True)
    path = step_dir / f"episode_hash{task_hash}_id{episode_id.replace(':', '_').replace('/', '_')}.json"
    with open(path, "w") as f:
        f.write(json.dumps(episode_data, indent=2, default=str) + "\n")
    return path


# -- trackio -----------------------------------------------------------------------------------


def _serialize_values(value):
    """trackio/utils.py ``serialize_values``."""
    if isinstance(value, dict):
        return {str(k): _serialize_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_serialize_values(v) for v in value]
    if isinstance(value, float):
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if math.isnan(value):
            return "NaN"
    return value


_TRACES_TABLE = """
CREATE TABLE IF NOT EXISTS traces (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    run_name TEXT NOT NULL,
    step INTEGER NOT NULL,
    key TEXT NOT NULL,
    trace_index INTEGER,
    messages TEXT NOT NULL,
    metadata TEXT NOT NULL,
    search_text TEXT NOT NULL,
    log_id TEXT,
    space_id TEXT
)"""


def write_trackio(db: Path, run: str, step: int, key: str, traces: list[tuple[list, dict]]) -> Path:
    """``trackio.log({key: [trackio.Trace(messages, metadata), ...]}, step=step)`` as sqlite_storage.py
    stores it (``_split_trace_metrics`` then ``_insert_trace_rows``), in WAL mode as trackio opens it."""
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(_TRACES_TABLE)
    log_id = uuid.uuid4().hex
    rows = []
    for index, (messages, metadata) in enumerate(traces):
        trace_id = ":".join([run, log_id, key, str(index)])
        flat = " ".join(str(v) for v in _leaves([messages, metadata]))
        rows.append((trace_id, run, "2026-01-01T00:00:00", run, step, key, index,
                     orjson.dumps(_serialize_values(messages)), orjson.dumps(_serialize_values(metadata)),
                     f"{trace_id} {key} {flat}".lower(), log_id, None))
    conn.executemany("INSERT OR IGNORE INTO traces (id, run_id, timestamp, run_name, step, key, trace_index, "
                     "messages, metadata, search_text, log_id, space_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     rows)
    conn.commit()
    conn.close()
    return db


def _leaves(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif value is not None:
        yield value


# -- verifiers v0 ------------------------------------------------------------------------------


def _sanitize_tool_calls(messages):
    """verifiers/legacy/utils/message_utils.py ``sanitize_tool_calls`` for dict messages."""
    if not isinstance(messages, list):
        return messages
    out = []
    for m in messages:
        tool_calls = m.get("tool_calls")
        if tool_calls:
            new_m = {"role": m["role"], "content": m.get("content", ""),
                     "tool_calls": [json.dumps(tc if isinstance(tc, dict) else json.loads(tc)) for tc in tool_calls]}
            if isinstance(m.get("reasoning_content"), str):
                new_m["reasoning_content"] = m["reasoning_content"]
            out.append(new_m)
        else:
            out.append(m)
    return out


def v0_output(example_id: int, prompt, completion, reward: float, metrics: dict, answer: str = "") -> dict:
    """``state_to_output`` (verifiers/legacy/utils/save_utils.py): optional empty fields dropped,
    metrics flattened to top-level keys."""
    output = {"example_id": example_id, "prompt": _sanitize_tool_calls(prompt),
              "completion": _sanitize_tool_calls(completion), "answer": answer, "info": {}, "reward": reward,
              "error": None, "timing": {"generation_ms": 1.0}, "is_completed": True, "is_truncated": False,
              "stop_condition": None, "metrics": metrics, "tool_defs": None}
    if not output["answer"]:
        output.pop("answer")
    output.pop("info")
    for k, v in metrics.items():
        output[k] = v
    return output


def write_v0(run_dir: Path, outputs: list[dict]) -> Path:
    """``save_outputs``: ``json.dumps(output) + "\\n"`` per rollout, appended to results.jsonl."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "results.jsonl"
    with open(path, "a") as f:
        f.write("".join(json.dumps(o) + "\n" for o in outputs))
    (run_dir / "metadata.json").write_text(json.dumps({"env_id": "tool-math", "model": "m"}))
    return path


def write_prime_rl_eval(out: Path, step: int, env: str, rollouts: list[tuple[int, list, list, float, dict]],
                        answer: str = "4", model: str = "Qwen/Qwen3-0.6B") -> Path:
    """prime-rl's online eval save (prime_rl/eval/utils.py ``run_eval``, Dec 2025 to Feb 2026, verifiers of
    those months): ``make_dataset(env._prepare_rollout_results(...))`` (verifiers/utils/eval_utils.py) is
    ``Dataset.from_dict`` of the columns ``example_id``, ``prompt``, ``completion`` (printable, tool calls as
    JSON text), ``task``, ``reward``, ``error`` (repr or None), ``generation_ms``, ``scoring_ms``,
    ``total_ms``, ``answer`` (when any is not empty) and one column per metric; ``save_to_disk`` writes
    ``OUT/evals/step_{ckpt_step}/{env}/results.jsonl`` with ``Dataset.to_json`` (the Arrow table through
    pandas' ``to_json(orient="records", lines=True)``: compact, ``/`` escaped, non-ASCII as ``\\u``
    escapes; a message gets every key any message of its column has, null where it has none) and
    ``metadata.json`` with ``json.dump`` (the ``GenerateMetadata`` less ``path_to_save`` and ``date``).
    ``rollouts``: (example_id, prompt, completion, reward, metrics) each."""
    path = out / "evals" / f"step_{step}" / env
    path.mkdir(parents=True, exist_ok=True)
    rewards = [r[3] for r in rollouts]
    names = list(dict.fromkeys(k for r in rollouts for k in r[4]))
    columns = {"example_id": [r[0] for r in rollouts], "prompt": [_sanitize_tool_calls(r[1]) for r in rollouts],
               "completion": [_sanitize_tool_calls(r[2]) for r in rollouts], "task": ["default"] * len(rollouts),
               "reward": rewards, "error": [None] * len(rollouts),
               "generation_ms": [800.0 + i for i in range(len(rollouts))], "scoring_ms": [3.25] * len(rollouts),
               "total_ms": [803.25 + i for i in range(len(rollouts))]}
    if answer:
        columns["answer"] = [answer] * len(rollouts)
    columns.update((name, [r[4][name] for r in rollouts]) for name in names)
    text = pa.Table.from_pydict(columns).to_pandas(integer_object_nulls=True).to_json(orient="records", lines=True)
    (path / "results.jsonl").write_bytes((text if text.endswith("\n") else text + "\n").encode("utf-8"))
    examples = len({r[0] for r in rollouts})
    metadata = {"env_id": env, "env_args": {}, "model": model, "base_url": "http://localhost:8000/v1",
                "num_examples": examples, "rollouts_per_example": len(rollouts) // examples,
                "sampling_args": {"temperature": 1.0, "max_tokens": 512}, "time_ms": 2048.0,
                "avg_reward": sum(rewards) / len(rewards),
                "avg_metrics": {n: sum(r[4][n] for r in rollouts) / len(rollouts) for n in names},
                "state_columns": []}
    with open(path / "metadata.json", "w") as f:
        json.dump(metadata, f)
    return path / "results.jsonl"


def _span(start: float, end: float) -> dict:
    """verifiers' ``TimeSpan.model_dump()``: start, end and the computed duration."""
    return {"start": start, "end": end, "duration": end - start}


def v0_rollout_output(example_id: int, prompt, completion, reward: float, metrics: dict, answer: str = "") -> dict:
    """``state_to_output`` of verifiers 43016ea (prime-rl's pin in June 2026): ``timing`` as
    ``RolloutTiming.model_dump()`` (spans with their computed durations, ``total`` and ``overhead``),
    ``tool_defs``, ``token_usage``; empty ``answer``/``info`` dropped; metrics flattened to top-level keys."""
    t = 1760000000.0
    model = {"spans": [_span(t + 1, t + 3)], "duration": 2.0}
    env = {"spans": [_span(t + 3, t + 3.5)], "duration": 0.5}
    timing = {"start_time": t, "setup": _span(t, t + 1), "generation": _span(t + 1, t + 4),
              "scoring": _span(t + 4, t + 4.25), "model": model, "env": env, "total": 3.25, "overhead": -0.25}
    output = {"example_id": example_id, "prompt": _sanitize_tool_calls(prompt),
              "completion": _sanitize_tool_calls(completion), "answer": answer, "info": {}, "reward": reward,
              "error": None, "timing": timing, "is_completed": True, "is_truncated": False,
              "stop_condition": "no_tools", "metrics": metrics, "tool_defs": None,
              "token_usage": {"input_tokens": 40.0, "output_tokens": 12.0}}
    if not output["answer"]:
        output.pop("answer")
    output.pop("info")
    output.update(metrics)
    return output


def prime_rl_rollout(raw: dict, env: str, policy_version: int, eval_step: int | None = None,
                     advantage: float | None = None) -> dict:
    """``FinishedRollout.to_dict()`` (prime_rl/orchestrator/types.py, June 2026): the raw output, then each
    dataclass field but ``raw`` and ``samples`` (uuids as text): a ``TrainRollout``'s ``advantage``,
    ``is_filtered`` and ``filters`` (its ``filter_results``), an ``EvalRollout``'s ``eval_step``."""
    out = dict(raw)
    out.update({"env_name": env, "example_id": raw["example_id"], "group_id": str(uuid.uuid4()),
                "policy_version": policy_version, "off_policy_steps": 0, "rollout_id": str(uuid.uuid4())})
    if eval_step is None:
        out.update({"advantage": advantage, "is_filtered": False, "filters": {}})
    else:
        out["eval_step"] = eval_step
    return out


def write_prime_rl_rollouts(out: Path, step: int, name: str, rollouts: list[dict]) -> Path:
    """``save_rollouts(rollout_dicts, OUT/rollouts/step_{step}/{name}, exclude_keys={"trajectory"})``
    (prime_rl/orchestrator/utils.py, April to June 2026): orjson, one row a line, the file written anew."""
    return _orjson_lines(out / "rollouts" / f"step_{step}" / name,
                         ({k: v for k, v in rollout.items() if k != "trajectory"} for rollout in rollouts), "wb")
