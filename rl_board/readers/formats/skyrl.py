"""SkyRL's eval dumps: ``{export_path}/dumped_evals/global_step_{N}_evals/{data_source}.jsonl``.

With ``trainer.dump_eval_results`` SkyRL's ``evaluate`` writes, per eval, one file per data
source through ``trainer_utils.dump_per_dataset_eval_results``: each line
``json.dumps({"input_prompt", "output_response", "score", "stop_reason", "env_class",
"env_extras", "data_source"}, ensure_ascii=False)``, prompt and response decoded with the
chat template's markers kept; plus ``aggregated_results.jsonl`` (one dict of the eval's
metrics: not samples) and, for an eval without training, the folder ``eval_only``. The step
is only in the folder's name (``eval_only`` is step 0, split ``eval_only``; the others are
split ``eval``). ``score`` is a number, or a list of per-token rewards (placed at the
assistant turns' ends): the sample's reward is their sum. The multi-turn response is split
into turns at its markers (``chat_text``); the prompt's turns come first, and the line's
``stop_reason`` (vLLM's, "length" at the limit) goes in the last turn's ``meta``.

The run folder is ``export_path`` (or its ``dumped_evals``). ``dumped_data/*.pkl``
(``dump_data``: pickles of SkyRL's own ``TrainingInputBatch``) are listed and named as
unreadable: the board never unpickles a file.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path
from ..base import FileError, KeyResolver, ReadOptions, SourceChanged, line_too_long
from ..chat_text import split_prompt, split_turns
from ..lines import read_rows
from ..record_rows import canonical_row, is_number, json_type, short
from ..turns import with_outcome
from . import jsonl

NAME = "skyrl"
SUFFIX = ".jsonl"
APPENDABLE = False  # each file is written whole
ALIASES = {"prompt": "input_prompt", "response": "output_response"}
GLOBS = ("dumped_evals/*/*.jsonl", "*/*.jsonl")  # export_path, or its dumped_evals/
NAMED_GLOBS = ("dumped_data/*.pkl", "*/*.pkl")
DEFAULT_SPLIT = "eval"
KEYS = frozenset({"input_prompt", "output_response", "score"})
EXPECTS = ("dumped_evals/global_step_N_evals/{data_source}.jsonl (or eval_only/) with input_prompt, "
           "output_response and score")
EVAL_ONLY = "eval_only"
AGGREGATED = "aggregated_results.jsonl"
UNSPLIT = "turns_unsplit"
_STEP_DIR = re.compile(r"^global_step_(\d+)_evals$")
PICKLE = ("a pickle of SkyRL's own classes (dump_data's TrainingInputBatch): the board never unpickles "
          "files, so it is not read; its samples are the eval dumps")


def _eval_folder(name: str) -> bool:
    return name == EVAL_ONLY or _STEP_DIR.match(name) is not None


def step_of(name: str) -> int | None:
    """The step of a file of the run, from its folder: ``global_step_{N}_evals`` -> N, ``eval_only`` -> 0."""
    parts = PurePosixPath(name).parts
    if len(parts) < 2:
        return None
    match = _STEP_DIR.match(parts[-2])
    return int(match.group(1)) if match else 0 if parts[-2] == EVAL_ONLY else None


def split_of(name: str) -> str | None:
    parts = PurePosixPath(name).parts
    if len(parts) < 2 or parts[-1].endswith(".pkl"):
        return None
    return EVAL_ONLY if parts[-2] == EVAL_ONLY else "eval"


def other_kind(path: Path) -> str | None:
    """The aggregated metrics file and files outside an eval folder are not samples."""
    path = as_path(path)
    if path.suffix == ".pkl":
        return None
    if path.name == AGGREGATED:
        return "the eval's aggregated metrics, not samples"
    if not _eval_folder(path.parent.name):
        return "not in a global_step_N_evals or eval_only folder"
    return None


def matches(run_dir: Path) -> bool:
    """``dumped_evals`` holding an eval folder with a data source's file, or its parent."""
    run_dir = as_path(run_dir)
    for evals in (run_dir / "dumped_evals", run_dir):
        if not evals.is_dir():
            continue
        for sub in evals.iterdir():
            if sub.is_dir() and _eval_folder(sub.name) and any(
                    p.suffix == ".jsonl" and p.name != AGGREGATED for p in sub.iterdir()):
                return True
    return False


def reward_of(score) -> float | str:
    """The sample's reward: the score, or the sum of its per-token rewards; why not, as text."""
    if is_number(score):
        return float(score)
    if type(score) is list:
        if not all(is_number(v) for v in score):
            return "'score' is a list that holds something other than numbers"
        return float(sum(score))
    return f"'score' must be a number or a list of per-token numbers, got {json_type(score)} {short(score)}"


def _row(raw: bytes, resolver: KeyResolver, step: int, options: ReadOptions) -> dict | str:
    if len(raw) > options.max_line:
        return line_too_long(len(raw), options.max_line)
    obj = jsonl.parse_line(raw)
    if isinstance(obj, str):
        return obj
    for key in ("output_response", "score"):
        if key not in obj and key not in dict(options.fields).values():
            return f"missing '{key}'"
    if not isinstance(obj.get("output_response", ""), str):
        return f"'output_response' must be a string, got {json_type(obj['output_response'])}"
    reward = reward_of(obj.get("score"))
    if isinstance(reward, str):
        return reward
    try:
        got = canonical_row({**obj, "score": reward}, resolver, default_step=step)
    except RecursionError:
        return "a value is nested too deeply"
    if isinstance(got, str):
        return got
    got["extras"].pop("score", None)
    messages, unsplit = turns_of(obj)
    got[F.MESSAGES] = messages
    if unsplit:
        got["extras"][UNSPLIT] = 1.0
    return got


def turns_of(obj: dict) -> tuple[list, bool]:
    """(the prompt's turns then the response's, whether the response was left as one turn)."""
    got = split_turns(obj.get("output_response") or "")
    messages = split_prompt(obj.get("input_prompt")) + got.turns
    stop = obj.get("stop_reason")
    return with_outcome(messages, {"stop_reason": stop if isinstance(stop, str) else None}), got.note is not None


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read) of one data source's file."""
    path = as_path(path)
    if path.suffix == ".pkl":
        raise FileError(PICKLE)
    step = step_of(f"{path.parent.name}/{path.name}")
    if step is None:
        raise FileError("not in a global_step_N_evals or eval_only folder: its step is unknown")
    resolver = KeyResolver(options.fields, ALIASES)
    return read_rows(read_bytes(path), lambda raw: _row(raw, resolver, step, options))


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One sample's line: its fields, the step of its folder, the summed reward and its turns."""
    obj = jsonl.record(fh, name, offset, length, line)
    reward = reward_of(obj.get("score"))
    step = step_of(name)
    if isinstance(reward, str) or step is None:
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    out = {**obj, F.STEP: step, F.REWARD: reward}
    out[F.MESSAGES], unsplit = turns_of(obj)
    if unsplit:
        out[UNSPLIT] = 1.0
    return out
