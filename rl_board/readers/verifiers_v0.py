"""verifiers v0 evaluation results: ``vf-eval -s`` (``prime eval run -s``) writes ``results.jsonl``.

The run folder is ``outputs/evals/{env_id}--{model}/{run_id}/``, holding ``results.jsonl``
(one rollout a line, written by ``save_outputs`` with ``json.dumps``) and ``metadata.json``.
A line has ``example_id``, ``prompt`` and ``completion`` (each a list of chat messages, or
a string for completion-style environments; tool calls as JSON text), ``reward``, ``answer``
(-> ``ground_truth``), ``info``, ``timing``, ``is_completed``, ``is_truncated``, ``metrics``
and each metric again as a top-level float. One sample per line: its turns are the prompt's
then the completion's messages (``trainable`` null: the format doesn't say), its extras every
top-level number or boolean but ``example_id``. There is no step: every sample is step 0
(a ``step`` key, if any, is used).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ..base import fields as F
from ..base.compression import open_path, read_bytes, variants
from ..base.location import as_path
from .base import FileError, ReadOptions, SourceChanged
from .jsonl import parse_line
from .turns import number, sample_rows, turn, turns

NAME = "verifiers-v0"
SUFFIX = ".jsonl"
APPENDABLE = False
ALIASES = {"ground_truth": "answer"}
GLOBS = ("results.jsonl",)
NOT_EXTRAS = frozenset({"example_id", "reward", "step"})


def matches(run_dir: Path) -> bool:
    """A ``results.jsonl`` (compressed or not) whose first line has ``prompt`` or ``completion`` and
    ``reward``."""
    found = [as_path(run_dir) / name for name in variants("results.jsonl") if (as_path(run_dir) / name).is_file()]
    try:
        with open_path(found[0]) as fh:
            first = fh.readline(1 << 20)
    except (OSError, IndexError, EOFError, ValueError):
        return False
    obj = parse_line(first.rstrip(b"\r\n"))
    return isinstance(obj, dict) and "reward" in obj and ("completion" in obj or "prompt" in obj)


def sample(obj: dict, line: int, offset: int) -> dict | str:
    """One line's sample dict (``turns.sample_rows``), or why it is rejected."""
    reward = obj.get("reward")
    if number(reward) is None or isinstance(reward, bool):
        return "missing 'reward'" if reward is None else "'reward' must be a number"
    step = obj.get("step", 0)
    if not isinstance(step, int) or isinstance(step, bool):
        return "'step' must be an integer"
    completion = obj.get("completion")
    messages = turns(obj.get("prompt")) + (
        [turn({"role": "assistant", "content": completion})] if isinstance(completion, str) else turns(completion))
    answer = obj.get("answer")
    return {F.STEP: step, F.REWARD: float(reward), F.MESSAGES: messages,
            "ground_truth": answer if isinstance(answer, str) else None,
            "extras": {k: number(v) for k, v in obj.items() if k not in NOT_EXTRAS and number(v) is not None},
            "line": line, "offset": offset}


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read)."""
    try:
        data = read_bytes(path)  # compressed or not
    except OSError as exc:
        raise FileError(f"can't be read: {exc.strerror or exc}") from exc
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
        got = obj if isinstance(obj, str) else sample(obj, number_, start)
        if isinstance(got, str):
            errors.append((number_, got))
        else:
            samples.append(got)
    return sample_rows(samples), errors, count


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """The sample on the line at byte ``offset``: step, reward, ``messages`` (canonical turns) and
    the line's other fields."""
    fh.seek(offset)
    obj = parse_line(fh.readline().rstrip(b"\r\n"))
    got = obj if isinstance(obj, str) else sample(obj, line, offset)
    if isinstance(got, str):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    others = {k: v for k, v in obj.items() if k not in ("prompt", "completion", "reward", "step")}
    return {**others, F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES]}
