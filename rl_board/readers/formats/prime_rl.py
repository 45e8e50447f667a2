"""prime-rl / verifiers v1 episodes: ``OUT/rollouts/step_{N}/{train|eval}/{all|effective}/traces.jsonl``.

prime-rl's file monitor (on by default) appends one episode a line (``Episode.to_record()``,
pydantic's JSON dump without None fields): ``id``, ``run.work.step``, ``group.id``, ``ok``,
``errors`` and ``traces[]``, each trace with ``nodes[]`` (``message`` {role, content,
reasoning_content, tool_calls [{id, name, arguments}], tool_call_id}, ``sampled``,
``parent``, ``token_ids``, ``mask``, ``logprobs``…), ``rewards`` {name: {score, weight} or
null} and ``metrics`` {name: float or null}. ``all`` holds every finished rollout of the
step, ``effective`` the batch that was trained.

One sample per trace. Its turns are the nodes of the trace's final branch (the path from
the root to its last leaf, as ``Trace.messages``), ``trainable`` = ``sampled``, each node's
``NODE_META`` fields (``finish_reason``, ``usage``...) in its turn's ``meta`` and the trace's
``OUTCOME`` fields (``stop_condition``, ``timing``...) and its ``tools``' names in the last turn's; its per-token
lists are that branch's nodes' lists concatenated in order (as ``Branch.token_ids``,
``Branch.sampled_mask``, ``Branch.logprobs``… build a training sample; see ``branch_tokens``),
each turn's ``num_tokens`` the length of its node's ``token_ids``; its reward
Σ score × weight over the scored rewards (``Trace.reward``); its extras the trace's numeric
metrics, each reward component as ``reward/NAME`` = score × weight and its logged weight as
``reward_weight/NAME``; and, for a sample of
``all``, ``trained`` = 1 when an episode of the same id is in the step's ``effective`` file,
else 0. The step is the ``step_{N}`` folder (a field mapping ``step=run.work.step`` takes the
step the episode was dispatched at instead). The run's splits are ``train/all`` (the
default), ``train/effective``, ``eval/all`` and ``eval/effective``. An episode without traces
(it failed before any) is named with its last error.

A sample's ``line`` is its episode's line, ``offset`` the line's byte offset and ``length``
the trace's index in the episode (what ``record`` needs to find it again).

From June 23 to July 9, 2026 (prime-rl 7089ba1 to 1caebf8) the orchestrator kept the file names of
the verifiers v0 months, ``OUT/rollouts/step_{N}/train_rollouts.jsonl`` (the batch shipped at step
``N``) and ``eval_rollouts_{env}.jsonl`` (the eval of step ``N``'s checkpoint), but each line was one
v1 ``Trace`` (``save_rollouts`` of ``Rollout.model_dump(mode="json")`` without the node tensors, then
``Trace.to_record()``): ``id``, ``task``, ``nodes``, ``rewards`` {name: score × weight, the product
``record_reward`` stores}, ``metrics``, ``info``, ``extra_usage``, ``is_completed``,
``stop_condition``, ``errors`` and ``timing``; prime-rl's own fields on the rollout are all excluded
from the dump. Such a folder is one run of this reader, its splits ``train``, ``eval`` and
``eval/{env}`` (as ``verifiers_v0`` names them), each line one sample made by ``trace_sample`` as
above; a trace with no nodes and an error (cancelled before any message) is rejected with its last
error. Which version wrote a file is decided per file by its first row: ``nodes`` is a key only v1
writes (a v0 ``RolloutOutput`` has ``prompt``, ``completion`` and ``reward`` and never ``nodes``; a v1
trace never ``reward``, a property pydantic does not dump). The folder is this reader's when the
first file (by name) of its highest step folder holds v1 traces, else ``verifiers_v0``'s; a v0 file in
a run of this reader is read by ``verifiers_v0`` here, so a run that crossed June 23 keeps both halves.

verifiers' own evaluations (``uv run eval``, ``verifiers/v1/cli/output.py``) write a run folder
``outputs/{env}--{model}--{harness}--{id}/`` holding ``configs/eval.json``, ``logs/`` and ``traces.jsonl``:
one episode a line, as above but with neither ``run`` nor ``group`` (``append_trace``: ``id``, ``env``,
``task``, ``ok``, ``errors``, ``traces``), appended as episodes finish. Nothing names a step: the folder is
one evaluation, its samples step 0 (a field mapping ``step=...`` takes one from the episode), no splits. The
folder is this reader's when its ``traces.jsonl`` starts with such an episode (``id``, an ``env`` object, a
``traces`` list).
"""

from __future__ import annotations

import re
from operator import methodcaller
from pathlib import Path, PurePosixPath
from typing import Any

import msgspec
import pyarrow as pa

from ...base import fields as F
from ...base.compression import open_path, read_bytes, variants
from ...base.location import as_path
from ..base import FileError, ReadOptions, SourceChanged, value_at
from ..layout import first_match, step_in
from ..notes import with_notes
from ..placeholders import image_check, vision_ids
from ..turns import number, numbers, sample_rows, tool_names, turn, with_outcome
from . import verifiers_v0
from .jsonl import first_line, parse_line

NAME = "prime-rl"
SUFFIX = ".jsonl"
APPENDABLE = False
ALIASES: dict[str, str] = {}
TRACES = ("rollouts/step_*/*/*/traces.jsonl", "step_*/*/*/traces.jsonl")  # the output folder, or its rollouts/
WINDOW = ("rollouts/step_*/*_rollouts*.jsonl", "step_*/*_rollouts*.jsonl")  # June 23 to July 9, 2026
EVAL = ("traces.jsonl",)  # verifiers' eval run folder: one evaluation, no step folders
GLOBS = TRACES + WINDOW + EVAL
DEFAULT_SPLIT = ("train/all", "train")
TRAINED = "trained"
_STEP_FOLDER = re.compile(r"^step_(\d+)$")
_EPISODE_START = re.compile(rb'\s*\{"id":"[^"\\]*","env":\{')  # Episode's first fields, as dump_json writes them
BROKEN_SHOWN = 5  # traces with a broken node graph named in the load report, per file


def split_of(name: str) -> str | None:
    """``{train|eval}/{all|effective}`` from ``rollouts/step_N/KIND/SUBSET/traces.jsonl``; ``train``,
    ``eval`` or ``eval/{env}`` from ``rollouts/step_N/{train|eval}_rollouts[_{env}].jsonl``."""
    if in_window(name):
        return verifiers_v0.split_of(name)
    parts = PurePosixPath(name).parts
    if len(parts) == 1:  # an eval run folder's traces.jsonl: one evaluation, no splits
        return None
    return f"{parts[-3]}/{parts[-2]}" if len(parts) >= 3 else None


def in_window(name: str) -> bool:
    """Whether a file name is one of the June 23 – July 9, 2026 layout (``step_N/*_rollouts*.jsonl``)."""
    return verifiers_v0.step_of(name) is not None  # None for traces.jsonl: not a name of verifiers_v0's layouts


def holds_traces(row) -> bool:
    """Whether a line's object is a v1 trace: ``nodes``, a key only v1 writes, holds a list."""
    return isinstance(row, dict) and isinstance(row.get("nodes"), list)


def matches(run_dir: Path) -> bool:
    """A file of the ``traces.jsonl`` layout (compressed or not); else a June 23 – July 9 layout whose
    latest file's first line is a v1 trace (``holds_traces``; a folder of v0 rows is ``verifiers_v0``'s,
    and one that crossed June 23 is this reader's, which reads its v0 files as ``verifiers_v0`` does)."""
    run_dir = as_path(run_dir)
    if any(first_match(run_dir, name) is not None for pattern in TRACES for name in variants(pattern)):
        return True
    if any(_holds_episodes(path) for pattern in EVAL for name in variants(pattern)
           if (path := first_match(run_dir, name)) is not None):
        return True
    if not any(verifiers_v0.first_of(run_dir, name) for pattern in WINDOW for name in variants(pattern)):
        return False  # the common case, a folder of another format, costs the globs it did before
    latest = latest_window_file(run_dir)
    if latest is None:
        return False
    try:
        with open_path(latest) as fh:
            first = first_line(fh)
    except (OSError, EOFError, ValueError):
        return False
    return holds_traces(parse_line(first))


def _holds_episodes(path: Path) -> bool:
    """Whether a file's first line is an episode as verifiers' eval writes it: an object with an ``id``, an
    ``env`` object and a ``traces`` list (a file of another format named so, the board's own lines with a
    ``traces`` key, is not this reader's). Of a first line longer than 1 MiB, its first MiB must start as
    pydantic dumps an episode: ``{"id":"…","env":{``."""
    try:
        with open_path(path) as fh:
            first = fh.readline(1 << 20)
    except (OSError, EOFError, ValueError):
        return False
    if len(first) >= 1 << 20 and not first.endswith(b"\n"):  # longer than what was read (screenshots)
        return bool(_EPISODE_START.match(first))
    row = parse_line(first.rstrip(b"\r\n"))
    return (isinstance(row, dict) and isinstance(row.get("traces"), list) and isinstance(row.get("env"), dict)
            and "id" in row)


def latest_window_file(run_dir: Path) -> Path | None:
    """The first by name of the ``*_rollouts*.jsonl`` files in the highest ``step_N`` folder that has
    one (``OUT/rollouts/`` or the folder itself): the same file on every machine, whatever order the
    file system lists them in, and one the run's latest writer wrote. None when there is none."""
    for base in (run_dir / "rollouts", run_dir):
        try:
            steps = sorted(((int(match.group(1)), path) for path in base.iterdir()
                            if (match := _STEP_FOLDER.match(path.name))), key=lambda pair: pair[0], reverse=True)
        except OSError:
            continue
        for _, folder in steps:
            files = sorted((path for name in variants("*_rollouts*.jsonl") for path in folder.glob(name)
                            if in_window(f"{folder.name}/{path.name}") and path.is_file()), key=lambda p: p.name)
            if files:
                return files[0]
    return None


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


#: A trace's fields on how it ended, kept in its last turn's ``meta`` (``turns.with_outcome``).
OUTCOME = ("stop_condition", "is_completed", "is_truncated", "is_timeout", "timing", "errors")
#: A node's fields on its turn, kept in the turn's ``meta`` beside the message's own.
NODE_META = ("finish_reason", "usage", "is_truncated", "is_timeout", "timing")


def _node_message(node: dict):
    """A node's message with the node's ``NODE_META`` fields added (the message's own win)."""
    message = node.get("message")
    extra = {key: node[key] for key in NODE_META if node.get(key) is not None}
    return {**extra, **message} if extra and isinstance(message, dict) else message


def trace_sample(trace: dict, step: int, vision: tuple[int, int, int, int] | None = None) -> dict:
    """One trace's sample dict (``turns.sample_rows``) without where it lies. With ``vision`` (the run's
    tokenizer's vision token ids, ``placeholders.vision_ids``), a trace whose messages hold images gets the
    extras ``image_placeholders`` and ``images_dropped`` (``image_check``)."""
    nodes = [n for n in branch(trace.get("nodes") or []) if isinstance(n, dict)]
    messages = with_outcome([turn(_node_message(n), bool(n.get("sampled", False))) for n in nodes],
                            {**{key: trace.get(key) for key in OUTCOME}, "tools": tool_names(trace.get("tools"))})
    tokens = branch_tokens(nodes)
    lists = {}
    checked = {}
    if tokens is not None:
        lists, counts = tokens
        for message, count in zip(messages, counts):
            message["num_tokens"] = count
        if vision is not None:
            checked = image_check(nodes, vision)
    rewards = trace.get("rewards") or {}
    components, weights = {}, {}
    for name, got in rewards.items() if isinstance(rewards, dict) else ():
        if isinstance(got, dict) and number(got.get("score")) is not None:
            weight = number(got.get("weight"))
            components[f"reward/{name}"] = number(got["score"]) * (1.0 if weight is None else weight)
            if weight is not None:
                weights[f"reward_weight/{name}"] = weight
        elif not isinstance(got, (dict, bool)) and number(got) is not None:  # June 23 – July 9: score × weight
            components[f"reward/{name}"] = number(got)
    return {F.STEP: step, F.REWARD: float(sum(components.values())), F.MESSAGES: messages, **lists,
            "extras": {**numbers(trace.get("metrics")), **components, **weights, **checked}}


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


def _traces_of(episode: dict, window: bool) -> list | str:
    """The traces a line holds (an episode's ``traces``; a June 23 – July 9 line is one trace), or why
    the line has none."""
    if window:
        if episode.get("nodes") or not episode.get("errors"):
            return [episode]
        return "trace has no messages (it failed before any)" + _last_error(episode)
    traces = episode.get("traces")
    if not isinstance(traces, list) or not traces:
        return "episode has no traces (it failed before any)" + _last_error(episode)
    return traces


def _last_error(record: dict) -> str:
    """``: TYPE: MESSAGE`` of a record's last error, or ""."""
    errors = record.get("errors")
    last = errors[-1] if isinstance(errors, list) and errors else {}
    return f": {last.get('type')}: {last.get('message')}" if isinstance(last, dict) and last else ""


def _first_row(data: bytes):
    """The object on the first non-blank line (None when there is none)."""
    for _, _, raw in _episodes(data):
        return parse_line(raw)
    return None


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read). A file of the June 23 – July 9
    layout whose first row is not a v1 trace is verifiers v0's (``verifiers_v0.read_table``)."""
    path = as_path(path)
    try:
        data = read_bytes(path)  # compressed or not
    except OSError as exc:
        raise FileError(f"can't be read: {exc.strerror or exc}") from exc
    window = in_window(PurePosixPath(*path.parts[-3:]).as_posix())
    if window and not holds_traces(_first_row(data)):
        return verifiers_v0.read_table(path, options)
    path_step = step_in(path.as_posix())
    trained = _trained_ids(path) if path.parent.name == "all" else None
    vision = vision_ids(options.tokenizer)
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
        traces = _traces_of(episode, window)
        if isinstance(traces, str):
            errors.append((line, traces))
            continue
        for index, trace in enumerate(traces):
            if not isinstance(trace, dict):
                errors.append((line, f"trace {index} is not an object"))
                continue
            nodes = trace.get("nodes")
            problems = graph_problems(nodes) if isinstance(nodes, list) else []
            if problems:
                broken.append(f"line {line} trace {index} ({' and '.join(problems)})")
            got = trace_sample(trace, step, vision)
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
    if in_window(name):
        if not holds_traces(episode):  # a verifiers v0 row
            return verifiers_v0.record(fh, name, offset, length, line)
        episode = {"traces": [episode]}  # the line is the trace: its fields are shown under "trace"
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
