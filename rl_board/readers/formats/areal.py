"""AReaL's trajectory dumps: ``{fileroot}/logs/{user}/{experiment}/{trial}/{rollout|eval-rollout}/{version}/{task_id}.jsonl``.

AReaL's ``WorkflowExecutor._dump_trajectory`` appends, for each finished task, one line per
row of its batch: ``json.dumps({"task_id", "sample_idx", "seqlen", "prompt_len",
"head_version", "tail_version", "reward", "prompt", "completion"})``, prompt and completion
decoded with the chat template's markers kept; the folder is the batch's newest policy
version (the step). With the default ``individual`` export style a row is one **LLM call**,
its ``prompt`` the whole conversation before the call and no trajectory id: consecutive
lines whose prompt starts with the previous line's prompt + completion are one
**trajectory** (one sample), and the reward, copied to every call, is the trajectory's (its
last call's). A trajectory's turns are its last call's prompt + completion split at the
markers (``chat_text``); the extras ``llm_calls`` (its calls) and ``head_version`` (the
oldest policy version that sampled it). ``rollout`` is the split ``train``,
``eval-rollout`` the split ``eval``.

The run folder is the trial folder (or ``rollout`` / ``eval-rollout`` itself, without
splits). A line with a missing or wrong-typed field is named and ends the trajectory before
it. A sample's ``line`` is its first call's line; ``offset``/``length`` span its calls' lines.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path, open_file
from ..base import ReadOptions, SourceChanged, line_too_long
from ..chat_text import split_turns
from ..layout import first_match
from ..lines import count_lines, whole_lines
from ..record_rows import is_number, json_type, short
from ..turns import sample_rows
from . import jsonl

NAME = "areal"
SUFFIX = ".jsonl"
APPENDABLE = False  # read whole (a task's lines are appended in one go)
ALIASES: dict[str, str] = {}
GLOBS = ("*rollout/[0-9]*/*.jsonl", "[0-9]*/*.jsonl")  # the trial folder, or rollout/ itself
DEFAULT_SPLIT = "train"
EXPECTS = ("rollout/{version}/{task_id}.jsonl (or eval-rollout/) whose lines have task_id, sample_idx, prompt, "
           "completion, reward and tail_version")
SPLITS = {"rollout": "train", "eval-rollout": "eval"}
KEYS = frozenset({"task_id", "sample_idx", "prompt", "completion", "reward", "tail_version"})
_VERSION = re.compile(r"^\d+$")


def split_of(name: str) -> str | None:
    parts = PurePosixPath(name).parts
    return SPLITS.get(parts[-3]) if len(parts) >= 3 else None


def step_of(name: str) -> int | None:
    """The batch's policy version: the folder holding the file (its name is a task id, not a step)."""
    parts = PurePosixPath(name).parts
    return int(parts[-2]) if len(parts) >= 2 and _VERSION.match(parts[-2]) else None


def _holds_dump(folder: Path) -> bool:
    found = first_match(folder, "[0-9]*/*.jsonl", keep=lambda p: bool(_VERSION.match(p.parent.name)))
    if found is None:
        return False
    with open_file(found) as fh:
        obj = jsonl.parse_line(jsonl.first_line(fh))
    return isinstance(obj, dict) and KEYS <= obj.keys()


def matches(run_dir: Path) -> bool:
    """A trial folder holding ``rollout``/``eval-rollout`` dumps, or one of those folders."""
    run_dir = as_path(run_dir)
    if run_dir.name in SPLITS and _holds_dump(run_dir):
        return True
    return any((run_dir / name).is_dir() and _holds_dump(run_dir / name) for name in SPLITS)


def _call(obj) -> dict | str:
    """One line's call, checked, or why it is rejected."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    for key in ("prompt", "completion"):
        if key not in obj:
            return f"missing '{key}'"
        if not isinstance(obj[key], str):
            return f"'{key}' must be a string, got {json_type(obj[key])}"
    if "reward" not in obj:
        return "missing 'reward'"
    if not is_number(obj["reward"]):
        return f"'reward' must be a number, got {short(obj['reward'])}"
    return obj


def trajectory(calls: list[dict], step: int) -> dict:
    """The sample dict of one trajectory's calls (see the module's docstring)."""
    last = calls[-1]
    got = split_turns(last["prompt"] + last["completion"], first_role="user")
    heads = [c["head_version"] for c in calls if is_number(c.get("head_version"))]
    extras = {"llm_calls": float(len(calls))}
    if heads:
        extras["head_version"] = float(min(heads))
    if got.note is not None:
        extras["turns_unsplit"] = 1.0
    return {F.STEP: step, F.REWARD: float(last["reward"]), F.MESSAGES: got.turns, "extras": extras}


def _continues(previous: dict, call: dict) -> bool:
    return call["prompt"].startswith(previous["prompt"] + previous["completion"])


def _trajectories(data: bytes, max_line: int):
    """(list of (first line, offset, length, calls), [(line, why)]) of a file's bytes."""
    groups, errors, current = [], [], None
    for number, offset, stop, raw in whole_lines(data):
        call = line_too_long(len(raw), max_line) if len(raw) > max_line else _call(jsonl.parse_line(raw))
        if isinstance(call, str):
            errors.append((number, call))
            current = None
            continue
        if current is not None and _continues(current[3][-1], call):
            current[3].append(call)
            current[2] = stop - current[1]
        else:
            current = [number, offset, stop - offset, [call]]
            groups.append(current)
    return groups, errors


def _step(name: str) -> int:
    parts = PurePosixPath(name).parts
    return int(parts[-2]) if len(parts) >= 2 and _VERSION.match(parts[-2]) else 0


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, one per trajectory; (line, reason) for each rejected line; lines read)."""
    path = as_path(path)
    data = read_bytes(path)
    groups, errors = _trajectories(data, options.max_line)
    step = _step(path.as_posix())
    samples = [{**trajectory(calls, step), "line": line, "offset": offset, "length": length}
               for line, offset, length, calls in groups]
    return sample_rows(samples), errors, count_lines(data)


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One trajectory: its calls' lines, step, reward, turns and extras."""
    fh.seek(offset)
    groups, _ = _trajectories(fh.read(length), 1 << 62)
    if len(groups) != 1:
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    calls = groups[0][3]
    got = trajectory(calls, _step(name))
    return {**{k: v for k, v in calls[0].items() if k not in ("prompt", "completion", "reward")},
            **got["extras"], "calls": [{k: c[k] for k in ("sample_idx", "seqlen", "prompt_len") if k in c}
                                       for c in calls],
            F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES]}
