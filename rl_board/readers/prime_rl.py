"""prime-rl / verifiers v1 episodes: ``OUT/rollouts/step_{N}/{train|eval}/{all|effective}/traces.jsonl``.

prime-rl's file monitor (on by default) appends one episode a line (``Episode.to_record()``,
pydantic's JSON dump without None fields): ``id``, ``run.work.step``, ``group.id``, ``ok``,
``errors`` and ``traces[]``, each trace with ``nodes[]`` (``message`` {role, content,
reasoning_content, tool_calls [{id, name, arguments}], tool_call_id}, ``sampled``,
``parent``, ``token_ids``, ``mask``, ``logprobs``…), ``rewards`` {name: {score, weight} or
null} and ``metrics`` {name: float or null}. ``all`` holds every finished rollout of the
step, ``effective`` the batch that was trained.

One sample per trace. Its turns are the nodes of the trace's final branch (the path from
the root to its last leaf, as ``Trace.messages``), ``trainable`` = ``sampled``; its per-token
lists are that branch's nodes' lists concatenated in order (as ``Branch.token_ids``,
``Branch.sampled_mask``, ``Branch.logprobs``… build a training sample; see ``branch_tokens``),
each turn's ``num_tokens`` the length of its node's ``token_ids``; its reward
Σ score × weight over the scored rewards (``Trace.reward``); its extras the trace's numeric
metrics and each reward component as ``reward/NAME`` = score × weight; and, for a sample of
``all``, ``trained`` = 1 when an episode of the same id is in the step's ``effective`` file,
else 0. The step is the ``step_{N}`` folder (a field mapping ``step=run.work.step`` takes the
step the episode was dispatched at instead). The run's splits are ``train/all`` (the
default), ``train/effective``, ``eval/all`` and ``eval/effective``. An episode without traces
(it failed before any) is named with its last error.

A sample's ``line`` is its episode's line, ``offset`` the line's byte offset and ``length``
the trace's index in the episode (what ``record`` needs to find it again).
"""

from __future__ import annotations

from operator import methodcaller
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec
import pyarrow as pa

from ..base import fields as F
from ..base.compression import read_bytes
from ..base.location import as_path
from .base import FileError, ReadOptions, SourceChanged, value_at
from .jsonl import parse_line
from .layout import step_in
from .notes import with_notes
from .turns import number, numbers, sample_rows, turn

NAME = "prime-rl"
SUFFIX = ".jsonl"
APPENDABLE = False
ALIASES: dict[str, str] = {}
GLOBS = ("rollouts/step_*/*/*/traces.jsonl", "step_*/*/*/traces.jsonl")  # the output folder, or its rollouts/
DEFAULT_SPLIT = "train/all"
TRAINED = "trained"
BROKEN_SHOWN = 5  # traces with a broken node graph named in the load report, per file


def split_of(name: str) -> str | None:
    """``{train|eval}/{all|effective}`` from ``rollouts/step_N/KIND/SUBSET/traces.jsonl``."""
    parts = PurePosixPath(name).parts
    return f"{parts[-3]}/{parts[-2]}" if len(parts) >= 3 else None


def _is_chain(nodes: list) -> bool:
    """Whether the nodes are one chain in list order (what a conversation without branches is): the
    first without a parent, each other one's parent the node before it. Its final branch is all of
    them, and its graph has no problem."""
    at = -1
    for node in nodes:
        if type(node) is not dict:
            return False
        parent = node.get("parent")
        if (parent is not None or at >= 0) and (type(parent) is not int or parent != at):
            return False
        at += 1
    return True


def branch(nodes: list) -> list:
    """The nodes of the final branch: the path from the root to the last leaf (``Trace.messages``).
    In a broken graph (``graph_problems``), the nodes that can be ordered: a parent past the list ends
    the path there (that node is its root); a cycle of parents is left out, the nodes from the leaf up
    to it kept."""
    if not nodes:
        return []
    if _is_chain(nodes):
        return list(nodes)
    parents = {n.get("parent") for n in nodes if isinstance(n, dict) and n.get("parent") is not None}
    leaves = [i for i in range(len(nodes)) if i not in parents]
    path, at, seen = [], leaves[-1] if leaves else len(nodes) - 1, {}
    while _index(at, len(nodes)) and at not in seen:
        seen[at] = len(path)
        path.append(nodes[at])
        at = nodes[at].get("parent") if isinstance(nodes[at], dict) else None
    if _index(at, len(nodes)):  # back at a node of the path: from there on it is a cycle
        path = path[:seen[at]]
    return path[::-1]


def _index(value, count: int) -> bool:
    return type(value) is int and 0 <= value < count


def graph_problems(nodes: list) -> list[str]:
    """What is wrong with a trace's node graph: "a cycle of parent pointers", "a parent past the node
    list" (not a node's index: out of range, or not an integer); [] for a forest."""
    if _is_chain(nodes):
        return []
    count = len(nodes)
    parent = [n.get("parent") if isinstance(n, dict) else None for n in nodes]
    problems = []
    if any(p is not None and not _index(p, count) for p in parent):
        problems.append("a parent past the node list")
    state = [0] * count  # 0 not seen, 1 on the walk now, 2 done
    for start in range(count):
        walk, at = [], start
        while _index(at, count) and state[at] == 0:
            state[at] = 1
            walk.append(at)
            at = parent[at]
        if _index(at, count) and state[at] == 1:
            problems.insert(0, "a cycle of parent pointers")
            break
        for i in walk:
            state[i] = 2
    return problems


#: A ``MessageNode``'s per-token fields (verifiers/v1/graph.py) -> the canonical list each fills. ``logprobs``
#: are the sampler's (the inference server's, at sampling time), ``reference_logprobs`` the reference
#: model's, ``advantages`` the credit the trainer's algorithm assigned (prime-rl stamps it on the batch it
#: trains, so ``effective`` files carry it); ``trainer_logprobs`` and ``entropies`` are read when a writer
#: stamps them. verifiers keeps these lists compact, one value per sampled token (a true ``mask`` entry);
#: a list as long as the node's ``token_ids`` is read as aligned to them.
NODE_LISTS = (("logprobs", "rollout_logprobs"), ("trainer_logprobs", "logprobs"),
              ("reference_logprobs", "ref_logprobs"), ("entropies", "entropy"), ("advantages", "advantages"))


_NUMBER_TYPES = {int, float, type(None)}  # what a per-token list may hold (a bool's type is bool: not one)


def _node_values(values, mask: list) -> list | None:
    """One node's values widened to its positions: a compact list (one per true ``mask`` entry) lands on
    the sampled positions, None elsewhere; an aligned list (one per position) is taken as it is. None
    when the list is neither, or holds anything but numbers and nulls."""
    if not isinstance(values, list) or not set(map(type, values)) <= _NUMBER_TYPES:
        return None
    if len(values) == len(mask):
        return values
    sampled = mask.count(True)  # its entries are flags or 0/1 (``branch_tokens`` checked): 1 == True
    if len(values) != sampled:
        return None
    if not sampled or all(mask[len(mask) - sampled:]):  # the usual layout: scaffold, then the completion
        return [None] * (len(mask) - sampled) + values
    it = iter(values)
    return [next(it) if m else None for m in mask]


def branch_tokens(nodes: list) -> tuple[dict, list[int]] | None:
    """A branch's per-token lists, its nodes' concatenated in order: ``token_ids``, ``loss_mask`` (the
    nodes' ``mask``: true on the tokens the model sampled, the only ones trained) and each list of
    ``NODE_LISTS`` that any node holds (None on the positions a node has no value for); and each node's
    number of positions. None when the branch holds no token ids, or a node's ``token_ids`` are not
    integers or its ``mask`` not one flag per id (then the sample has turns and no token lists)."""
    ids, mask, counts = [], [], []
    # the lists some node holds (a list no node holds would be all None, and is left out)
    lists_held = [(field, name) for field, name in NODE_LISTS if any(map(methodcaller("get", field), nodes))]
    values = {name: [] for _, name in lists_held}
    held = set()
    for node in nodes:
        node_ids, node_mask = node.get("token_ids") or [], node.get("mask") or []
        if (not isinstance(node_ids, list) or not isinstance(node_mask, list) or len(node_ids) != len(node_mask)
                or not set(map(type, node_ids)) <= {int}):  # each value's type taken in C, not a loop of Python
            return None
        if set(map(type, node_mask)) <= {bool}:  # as verifiers writes it
            mask += node_mask
        elif all(type(m) is bool or m in (0, 1) for m in node_mask):
            mask += [bool(m) for m in node_mask]
        else:
            return None
        ids += node_ids
        counts.append(len(node_ids))
        for field, name in lists_held:
            got = _node_values(node.get(field), node_mask)
            if got is not None and node.get(field):
                held.add(name)
            values[name] += got if got is not None else [None] * len(node_ids)
    if not ids:
        return None
    lists = {F.TOKEN_IDS: ids, F.LOSS_MASK: mask}
    lists.update((name, values[name]) for _, name in lists_held if name in held)
    return lists, counts


def trace_sample(trace: dict, step: int) -> dict:
    """One trace's sample dict (``turns.sample_rows``) without where it lies."""
    nodes = [n for n in branch(trace.get("nodes") or []) if isinstance(n, dict)]
    messages = [turn(n.get("message"), bool(n.get("sampled", False))) for n in nodes]
    tokens = branch_tokens(nodes)
    lists = {}
    if tokens is not None:
        lists, counts = tokens
        for message, count in zip(messages, counts):
            message["num_tokens"] = count
    rewards = trace.get("rewards") or {}
    components = {}
    for name, got in rewards.items() if isinstance(rewards, dict) else ():
        if isinstance(got, dict) and number(got.get("score")) is not None:
            weight = number(got.get("weight"))
            components[f"reward/{name}"] = number(got["score"]) * (1.0 if weight is None else weight)
    return {F.STEP: step, F.REWARD: float(sum(components.values())), F.MESSAGES: messages, **lists,
            "extras": {**numbers(trace.get("metrics")), **components}}


def _step(episode: dict, path_step: int | None, options: ReadOptions) -> int | None:
    mapped = dict(options.fields).get(F.STEP)
    if mapped:
        value = value_at(episode, mapped)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return path_step if path_step is not None else 0


def _episodes(data: bytes):
    """(line number, byte offset, raw line) of each non-blank line."""
    offset = 0
    for number_, raw in enumerate(data.split(b"\n"), start=1):
        start, offset = offset, offset + len(raw) + 1
        if raw.strip():
            yield number_, start, raw


class _EpisodeId(msgspec.Struct):
    """An episode's ``id``, its other fields skipped unread."""

    id: Any = None


_ID_DECODER = msgspec.json.Decoder(_EpisodeId)


def _episode_id(raw: bytes):
    """The ``id`` of the episode on line ``raw`` as ``parse_line`` reads it (None for a line that is not
    an object). A line msgspec refuses (NaN, a lone surrogate escape, broken JSON, not an object; it
    refuses what orjson refuses and, as orjson, keeps a repeated key's last value) goes to ``parse_line``."""
    try:
        return _ID_DECODER.decode(raw).id
    except (msgspec.DecodeError, msgspec.ValidationError):
        obj = parse_line(raw)
        return obj.get("id") if isinstance(obj, dict) else None


def _trained_ids(path: Path) -> set[str]:
    """The episode ids of the ``effective`` file beside an ``all`` file (none while there is none). Only
    the ids are decoded: a third of the time of parsing each episode whole, a tenth of a step's read."""
    effective = path.parent.parent / "effective" / path.name
    try:
        data = read_bytes(effective)
    except OSError:
        return set()
    ids = set()
    for _, _, raw in _episodes(data):
        got = _episode_id(raw)
        if isinstance(got, str):
            ids.add(got)
    return ids


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read)."""
    path = as_path(path)
    try:
        data = read_bytes(path)  # compressed or not
    except OSError as exc:
        raise FileError(f"can't be read: {exc.strerror or exc}") from exc
    path_step = step_in(path.as_posix())
    trained = _trained_ids(path) if path.parent.name == "all" else None
    samples, errors, count, broken = [], [], 0, []
    for line, offset, raw in _episodes(data):
        count = line
        if len(raw) > options.max_line:
            errors.append((line, "line longer than the limit; not read"))
            continue
        episode = parse_line(raw)
        if isinstance(episode, str):
            errors.append((line, episode))
            continue
        step = _step(episode, path_step, options)
        if step is None:
            errors.append((line, f"no integer step at '{dict(options.fields)[F.STEP]}'"))
            continue
        traces = episode.get("traces")
        if not isinstance(traces, list) or not traces:
            last = (episode.get("errors") or [{}])[-1]
            why = f": {last.get('type')}: {last.get('message')}" if isinstance(last, dict) and last else ""
            errors.append((line, "episode has no traces (it failed before any)" + why))
            continue
        for index, trace in enumerate(traces):
            if not isinstance(trace, dict):
                errors.append((line, f"trace {index} is not an object"))
                continue
            nodes = trace.get("nodes")
            problems = graph_problems(nodes) if isinstance(nodes, list) else []
            if problems:
                broken.append(f"line {line} trace {index} ({' and '.join(problems)})")
            got = trace_sample(trace, step)
            if trained is not None:
                got["extras"][TRAINED] = float(episode.get("id") in trained)
            samples.append({**got, "line": line, "offset": offset, "length": index})
    rows = sample_rows(samples)
    if broken:
        shown = "; ".join(broken[:BROKEN_SHOWN]) + (f"; and {len(broken) - BROKEN_SHOWN:,} more"
                                                    if len(broken) > BROKEN_SHOWN else "")
        rows = with_notes(rows, [f"{len(broken):,} trace(s) with a broken node graph: {shown}. Their samples "
                                 "keep the turns that can be ordered."])
    return rows, errors, count


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """Trace ``length`` of the episode on the line at byte ``offset``: step, reward, ``messages``, the
    per-token lists (canonical names) and extras, then the trace's and episode's other fields."""
    fh.seek(offset)
    episode = parse_line(fh.readline().rstrip(b"\r\n"))
    traces = episode.get("traces") if isinstance(episode, dict) else None
    if not isinstance(traces, list) or not 0 <= length < len(traces) or not isinstance(traces[length], dict):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    trace = traces[length]
    step = step_in(name)
    got = trace_sample(trace, 0 if step is None else step)
    shown = {k: v for k, v in trace.items() if k not in ("nodes", "rewards", "metrics")}
    context = {k: episode[k] for k in ("id", "group", "run", "ok", "errors", "env") if k in episode}
    lists = {name: got[name] for name in (*F.TOKEN_FIELDS, F.TOKEN_IDS, F.LOSS_MASK) if name in got}
    return {**context, "trace": shown, **got["extras"],
            F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES], **lists}
