"""OpenPipe ART trajectories: ``.art/{project}/models/{model}/trajectories/{split}/{step:04d}.parquet``.

ART's backend writes one parquet file per logged step and split
(``write_trajectory_groups_parquet``): one row per trajectory with ``group_index``,
``trajectory_index``, ``reward``, ``metrics``, ``metadata`` and ``tools`` (JSON text), and
``messages`` (a list of {role, content, tool_calls (JSON text), tool_call_id, trainable}:
the model's own choices are the trainable turns); format 2 adds ``trajectory_json``, the
whole trajectory, which is read when ``messages`` is null (a trajectory whose content is
not plain text). A group without trajectories is a row without ``trajectory_index`` and is
skipped. One sample per trajectory: the step is the file name, the split its folder
(``train`` by default, ``val``...), the reward ``reward`` (none when null), the extras the
numbers of ``metrics``. Point the board at ``.art/{project}/models/{model}``.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.location import as_path
from ..base import ReadOptions, SourceChanged
from ..layout import first_match, step_in
from ..notes import with_notes
from ..turns import number, numbers, sample_rows, turn, turns
from . import parquet as _parquet

NAME = "art"
SUFFIX = ".parquet"
APPENDABLE = False
ALIASES: dict[str, str] = {}
GLOBS = ("trajectories/*/*.parquet", "*/*.parquet")  # the model folder, or its trajectories/
DEFAULT_SPLIT = "train"


def matches(run_dir: Path) -> bool:
    for pattern in GLOBS:
        found = first_match(as_path(run_dir), pattern)
        if found is not None:
            return found.name.split(".", 1)[0].isdigit()
    return False


def split_of(name: str) -> str | None:
    parts = PurePosixPath(name).parts
    return parts[-2] if len(parts) >= 2 else None


def _object(text) -> dict:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _choice_messages(trajectory: dict) -> list[dict]:
    """The turns of a format-2 ``trajectory_json``: a Choice (the model's) is trainable."""
    out = []
    for item in trajectory.get("messages_and_choices") or []:
        if isinstance(item, dict) and "finish_reason" in item:
            out.append(turn(item.get("message") or {}, True))
        else:
            out.append(turn(item, False))
    return out


def row_sample(row: dict, step: int) -> dict | None:
    """One row's sample dict (``turns.sample_rows``) without where it lies; None for a group sentinel."""
    if row.get("trajectory_index") is None and row.get("messages") is None and row.get("reward") is None:
        return None
    messages = row.get("messages")
    if messages is not None:
        messages = turns(messages)
    elif row.get("trajectory_json"):
        messages = _choice_messages(_object(row["trajectory_json"]))
    return {F.STEP: step, F.REWARD: number(row.get("reward")), F.MESSAGES: messages,
            "extras": numbers(_object(row.get("metrics")))}


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (row, reason) for each rejected row, rows in the file)."""
    table, notes = _parquet.read_bounded(path)  # a row group at a time, under the expansion bound
    step = step_in(as_path(path).as_posix())
    samples = []
    for index, row in enumerate(table.to_pylist()):
        got = row_sample(row, 0 if step is None else step)
        if got is not None:
            samples.append({**got, "line": index + 1, "offset": index})
    return with_notes(sample_rows(samples), notes), [], table.num_rows


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """Row ``offset`` of the file: step, reward, ``messages``, extras, and its other columns."""
    row = _parquet.record(fh, name, offset, length, line)
    step = step_in(name)
    got = row_sample(row, 0 if step is None else step)
    if got is None:
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    shown = {k: v for k, v in row.items() if k not in ("messages", "reward", "trajectory_json", "group_json")}
    return {**shown, **got["extras"], F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES]}
