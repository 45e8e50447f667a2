"""verifiers v0 evaluation results: ``vf-eval -s`` (``prime eval run -s``) writes ``results.jsonl``.

The run folder is ``outputs/evals/{env_id}--{model}/{run_id}/``, holding ``results.jsonl``
(one rollout a line, written by ``save_outputs`` with ``json.dumps``) and ``metadata.json``.
A line has ``example_id``, ``prompt`` and ``completion`` (each a list of chat messages, or
a string for completion-style environments; tool calls as JSON text), ``reward``, ``answer``
(-> ``ground_truth``), ``info``, ``timing``, ``is_completed``, ``is_truncated``, ``metrics``
and each metric again as a top-level float. One sample per line: its turns are the prompt's
then the completion's messages (``trainable`` null: the format doesn't say), the line's
``OUTCOME`` fields and its ``tool_defs``' names (``tools``) in the last turn's ``meta``, its extras every top-level number or boolean
(``example_id`` among them: ``rl-board diff --by id`` matches on it).

Checkpoints evaluated one ``vf-eval`` each, the model named by its checkpoint (served as ``…-step100``, or a
path ``…/checkpoint-500`` or ``…/global_step_100``, whose ``/`` vf-eval writes as ``--``), leave
``evals/{env_id}--{model}-stepN/{run_id}/results.jsonl``: that ``evals`` folder is one run whose steps are
the names' steps, its splits the folder names with the step taken off (an eval of the base model beside
them, ``{env_id}--{model}`` with no step, is step 0 of its split).

prime-rl saved evals of a training run's checkpoints in this format twice over its history, each
a step folder per checkpoint; such a folder tree is one run whose steps are the ``step_{N}`` folders:

- ``OUT/evals/step_{N}/{env}/{results.jsonl,metadata.json}`` (Dec 2025 to Feb 2026: the
  orchestrator's online evals with ``save.disk``, ``prime_rl/eval/utils.py``, through verifiers'
  ``save_to_disk``; nothing in a line or in ``metadata.json`` names the step): the run is the
  ``evals`` folder, its splits the environments;
- ``OUT/rollouts/step_{N}/train_rollouts.jsonl`` and ``eval_rollouts.jsonl`` (April to June 2026;
  ``eval_rollouts_{env}.jsonl`` from June; ``save_rollouts`` in ``prime_rl/orchestrator/utils.py``,
  orjson, ``trajectory`` left out): the train batch shipped at step ``N`` and the evals of the
  checkpoint of step ``N``, each row a ``RolloutOutput`` with prime-rl's own fields beside it
  (``env_name``, ``group_id``, ``policy_version``, ``advantage``, ``eval_step``…). The run is
  ``OUT`` (or its ``rollouts``), its splits ``train`` (read first), ``eval`` or ``eval/{env}``.
  (From June 23 to July 9 these files held verifiers v1 traces, one a line: ``prime_rl`` reads those,
  telling the versions apart by a file's first row; ``matches`` claims only a first file of v0 rows.)

A plain ``vf-eval`` (and prime-rl's offline ``eval`` of checkpoints, which saves to verifiers'
default ``{env}--{model}/{uuid}`` and records no step) has no step: its samples are step 0 (a
``step`` key, if any, is used). A sample's ``length`` is the step its path gave plus one (0: none),
which ``record`` needs to give the same step when the run is one step's eval folder opened alone.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ..base import fields as F
from ..base.compression import base_name, open_path, read_bytes, variants
from ..base.location import as_path
from . import layout
from .base import FileError, ReadOptions, SourceChanged
from .jsonl import first_line, parse_line
from .layout import first_match
from .turns import number, sample_rows, tool_names, turn, turns, with_outcome

NAME = "verifiers-v0"
SUFFIX = ".jsonl"
APPENDABLE = False
ALIASES = {"ground_truth": "answer"}
#: One eval's folder; prime-rl's ``evals/`` of checkpoints; prime-rl's output folder, or its ``rollouts/``.
GLOBS = ("results.jsonl", "step_*/*/results.jsonl", "rollouts/step_*/*_rollouts*.jsonl", "step_*/*_rollouts*.jsonl",
         "*/*/results.jsonl")
DEFAULT_SPLIT = "train"
NOT_EXTRAS = frozenset({"reward", "step"})
#: A rollout's fields on how it ended, kept in its last turn's ``meta`` (``turns.with_outcome``).
OUTCOME = ("is_truncated", "is_completed", "stop_condition", "is_timeout", "timing", "error")

_STEP_FOLDER = re.compile(r"^step_(\d+)$")
#: ``vf-eval``'s folder ``{env_id}--{model}`` of a checkpoint whose model name ends in its step
#: (``…-step100``, ``…_step_100``, ``…--checkpoint-500``, ``…--global_step_100``, ``…-ckpt100``)
_CHECKPOINT_NAME = re.compile(r"^(.+?--.+?)[-_.]+(?:global_step|step|checkpoint|ckpt)[-_]?(\d+)$")
_ROLLOUTS = re.compile(r"^(train|eval)_rollouts(?:_(.+))?\.jsonl$")  # prime-rl's rollouts/step_N/ files


def split_of(name: str) -> str | None:
    """The environment of ``step_N/{env}/results.jsonl``; ``{env_id}--{model}`` (its step taken off) of
    ``{env_id}--{model}-stepN/{run_id}/results.jsonl``; ``train``, ``eval`` or ``eval/{env}`` of
    ``rollouts/step_N/{train|eval}_rollouts[_{env}].jsonl``; None for one eval's folder."""
    parts = PurePosixPath(base_name(name)).parts
    if len(parts) == 3 and parts[2] == "results.jsonl" and _STEP_FOLDER.match(parts[0]):
        return parts[1]
    if len(parts) == 3 and parts[2] == "results.jsonl" and "--" in parts[0]:
        checkpoint = _CHECKPOINT_NAME.match(parts[0])
        return parts[0] if checkpoint is None else checkpoint.group(1)
    match = _ROLLOUTS.match(parts[-1]) if len(parts) >= 2 and _STEP_FOLDER.match(parts[-2]) else None
    return None if match is None else match.group(1) + (f"/{match.group(2)}" if match.group(2) else "")


def step_of(name: str) -> int | None:
    """The step of ``[…/]step_N/{env}/results.jsonl`` or ``[…/]step_N/…_rollouts….jsonl`` (its ``step_N``
    folder), or of ``[…/]{env_id}--{model}-stepN/{run_id}/results.jsonl`` (the checkpoint's name)."""
    parts = PurePosixPath(base_name(name)).parts
    above = 3 if parts and parts[-1] == "results.jsonl" else 2 if parts and _ROLLOUTS.match(parts[-1]) else 0
    match = _STEP_FOLDER.match(parts[-above]) if above and len(parts) >= above else None
    if match is None and above == 3 and len(parts) >= 3:
        checkpoint = _CHECKPOINT_NAME.match(parts[-3])
        return int(checkpoint.group(2)) if checkpoint else None
    return int(match.group(1)) if match else None


def matches(run_dir: Path) -> bool:
    """A file of ``GLOBS`` (compressed or not) whose first line has ``prompt`` or ``completion`` and
    ``reward``: ``results.jsonl`` in the folder (one eval), else the first file of the first tree layout
    that has one (its step folder a ``step_N``)."""
    run_dir = as_path(run_dir)
    found = [run_dir / name for name in variants("results.jsonl") if (run_dir / name).is_file()]
    for pattern in GLOBS[1:]:
        found = found or [path for name in variants(pattern) for path in first_of(run_dir, name)]
    try:
        with open_path(found[0]) as fh:
            first = first_line(fh)
    except (OSError, IndexError, EOFError, ValueError):
        return False
    obj = parse_line(first)
    return isinstance(obj, dict) and "reward" in obj and ("completion" in obj or "prompt" in obj)


def first_of(run_dir: Path, pattern: str) -> list[Path]:
    """The first file of ``run_dir`` matching ``pattern`` whose step folder is ``step_N``, as a list of none or one."""
    found = first_match(run_dir, pattern, keep=lambda path: step_of(layout.relative_name(run_dir, path)) is not None)
    return [] if found is None else [found]


def sample(obj: dict, line: int, offset: int, path_step: int | None = None) -> dict | str:
    """One line's sample dict (``turns.sample_rows``), or why it is rejected. ``path_step``: the step the
    file's ``step_N`` folder gives, which wins over a ``step`` key."""
    reward = obj.get("reward")
    if number(reward) is None or isinstance(reward, bool):
        return "missing 'reward'" if reward is None else "'reward' must be a number"
    step = obj.get("step", 0) if path_step is None else path_step
    if not isinstance(step, int) or isinstance(step, bool):
        return "'step' must be an integer"
    completion = obj.get("completion")
    messages = turns(obj.get("prompt")) + (
        [turn({"role": "assistant", "content": completion})] if isinstance(completion, str) else turns(completion))
    messages = with_outcome(messages, {**{key: obj.get(key) for key in OUTCOME}, "tools": tool_names(obj.get("tool_defs"))})
    answer = obj.get("answer")
    return {F.STEP: step, F.REWARD: float(reward), F.MESSAGES: messages,
            "ground_truth": answer if isinstance(answer, str) else None,
            "extras": {k: number(v) for k, v in obj.items() if k not in NOT_EXTRAS and number(v) is not None},
            "line": line, "offset": offset, "length": 0 if path_step is None else path_step + 1}


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read)."""
    try:
        data = read_bytes(path)  # compressed or not
    except OSError as exc:
        raise FileError(f"can't be read: {exc.strerror or exc}") from exc
    path_step = step_of(PurePosixPath(*as_path(path).parts[-3:]).as_posix())
    samples, errors, offset, count = [], [], 0, 0
    for number_, raw in enumerate(data.split(b"\n"), start=1):
        start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        count = number_
        if len(raw) > options.max_line:
            errors.append((number_, "line longer than the limit; not read"))
            continue
        obj = parse_line(raw)
        got = obj if isinstance(obj, str) else sample(obj, number_, start, path_step)
        if isinstance(got, str):
            errors.append((number_, got))
        else:
            samples.append(got)
    return sample_rows(samples), errors, count


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """The sample on the line at byte ``offset``: step, reward, ``messages`` (canonical turns) and
    the line's other fields. ``length``: the step its path gave, plus one (0: none)."""
    fh.seek(offset)
    obj = parse_line(fh.readline().rstrip(b"\r\n"))
    got = obj if isinstance(obj, str) else sample(obj, line, offset, length - 1 if length > 0 else None)
    if isinstance(got, str):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    others = {k: v for k, v in obj.items() if k not in ("prompt", "completion", "reward", "step")}
    return {**others, F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES]}
