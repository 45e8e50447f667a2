"""Samples logged as W&B tables: ``wandb/{run,offline-run}-*/files/media/table/**/{key}_{step}_{hash}.table.json``.

Many trainers log samples as a ``wandb.Table`` instead of files of their own (OpenRLHF's
``train/generated_samples``, verl's and SkyRL's generation tables, TRL with
``report_to="wandb"``). wandb writes each logged table into the run folder
(``Table.bind_to_run``: ``json.dump({"columns", "data"})``, named by ``Media.bind_to_run``
``{key}_{step}_{sha256[:20]}.table.json`` under ``files/media/table``, a key's ``/`` making
sub-folders; ``step`` is wandb's own history step). A table re-logged every step holds every
earlier row again: a file's rows that its key's previous file already held are not taken
again, so each row is one sample, once (a wide row, ``input_1``, ``output_1``, ``score_1``,
``input_2``… as verl logs its validation generations, is one sample per number).

Each table key is a split (``train/generated_samples`` first when there). A row becomes a
record ``{column: value}`` read like a JSON line: the step is a ``step`` column, else
``global_step`` / ``train/global_step``, else wandb's step of the file; the prompt
``prompt`` (or ``input``, ``question``, ``query``), the response ``response`` (or ``output``,
``completion``, ``text``, ``generation``), the reward ``reward`` (or ``score``, ``rewards``),
other numeric columns extras; a field map names other columns. A step written as the text of an
integer (TRL: ``"step": [str(self.state.global_step)] * n``) is that integer. A response that is a whole
conversation and no prompt (OpenRLHF's ``text``: the sequence decoded with
``skip_special_tokens=True``) is split into turns where ChatML start markers or Llama 3 headers
are left (``chat_text.transcript``): the prompt is the turns before the first assistant turn. A
row of another length than the columns is named and skipped.

Images (``wandb.Image`` cells, as TRL logs a VLM's ``images``): the run folder's table holds each as the
string ``"Image"``; the pixels travel in the run's ``run_table`` artifact. A row with such cells becomes a
user turn (its images, then its prompt) and an assistant turn (its response), each image a reference to
its file in the artifact as ``wandb artifact get`` lays it out in the run folder
(``artifacts/run-<id>-<key>:v<N>/<key>.table.json`` with ``{"_type": "image-file", "path": ...}`` cells
and ``media/images/*.png``; version N is the key's N-th table file by step). Without that folder an image
is counted and says where its pixels are. The run folder is the wandb run folder (``run-…`` or
``offline-run-…``); the ``wandb`` folder above lists them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path
from ..base import FileError, KeyResolver, ReadOptions, SourceChanged
from ..chat_text import transcript, with_turns
from ..lines import table
from ..record_rows import canonical_row, json_type
from ..turns import turns
from .parquet import NOT_REWARD_FUNCTIONS

NAME = "wandb-tables"
SUFFIX = ".json"
APPENDABLE = False
GLOBS = ("files/media/table/**/*.table.json",)
POSITION = "length"  # a wide row's sample: its group (0-based), kept in ``length`` (``fields.address``'s ``#K``)
ALIASES = {F.STEP: ("global_step", "train/global_step"), "prompt": ("question", "query"),
           "response": ("completion", "text", "generation"), F.REWARD: ("rewards",)}
DEFAULT_SPLIT = "train/generated_samples"
EXPECTS = "files/media/table/{key}_{step}_{hash}.table.json files (wandb's logged tables) in a wandb run folder"
#: Said with every such run: a trainer that logs samples this way logs only some of them.
NOTE = ("These samples are the rows the trainer logged as W&B tables, which is all of its samples it saved "
        "(OpenRLHF logs one sample per step).")
_FILE = re.compile(r"^(?P<key>.+)_(?P<step>\d+)_(?P<id>[0-9a-f]{20})\.table\.json$")
_MEDIA = ("files", "media", "table")
_NUMBERED = re.compile(r"^(.+)_(\d+)$")


def parse_name(name: str) -> tuple[str, int] | None:
    """(table key, wandb step) of a file's name relative to the run folder, or None."""
    parts = PurePosixPath(name).parts
    for k in range(len(parts) - 2):
        if parts[k:k + 3] == _MEDIA:
            match = _FILE.match("/".join(parts[k + 3:]))
            return (match.group("key"), int(match.group("step"))) if match else None
    match = _FILE.match(PurePosixPath(name).name)
    return (match.group("key"), int(match.group("step"))) if match else None


def split_of(name: str) -> str | None:
    got = parse_name(name)
    return got[0] if got else None


def step_of(name: str) -> int | None:
    got = parse_name(name)
    return got[1] if got else None


def other_kind(path: Path) -> str | None:
    return None if _FILE.match(as_path(path).name) else "not a logged table ({key}_{step}_{hash}.table.json)"


def _load(path: Path) -> tuple[list, list]:
    try:
        table = json.loads(read_bytes(path))
    except OSError as exc:
        raise FileError(f"can't be read: {exc.strerror or exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise FileError(f"not JSON ({exc})") from exc
    if not isinstance(table, dict) or not isinstance(table.get("columns"), list) \
            or not isinstance(table.get("data"), list):
        raise FileError("not a wandb table: an object with 'columns' and 'data' lists was expected")
    return [str(c) for c in table["columns"]], table["data"]


def _previous(path: Path) -> Path | None:
    """The file of the same key logged last before ``path`` (the same folder, a smaller step)."""
    mine = _FILE.match(path.name)
    best, best_step = None, -1
    for other in path.parent.glob(f"{glob_escape(mine.group('key').rsplit('/', 1)[-1])}_*.table.json"):
        got = _FILE.match(other.name)
        if got and got.group("key") == mine.group("key") and best_step < int(got.group("step")) < int(mine.group("step")):
            best, best_step = other, int(got.group("step"))
    return best


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _key(row) -> str:
    return json.dumps(row, sort_keys=True, ensure_ascii=False, default=str)


def new_rows(path: Path) -> tuple[list[str], list[tuple[int, object]]]:
    """(columns, (row index, row) of each row the key's previous file did not hold)."""
    columns, data = _load(path)
    before = _previous(path)
    seen = Counter()
    if before is not None:
        try:
            seen = Counter(_key(row) for row in _load(before)[1])
        except FileError:
            seen = Counter()
    out = []
    for i, row in enumerate(data):
        key = _key(row)
        if seen[key] > 0:
            seen[key] -= 1
            continue
        out.append((i, row))
    return columns, out


_INTEGER = re.compile(r"-?[0-9]+", re.ASCII)


def integer_steps(record: dict) -> dict:
    """``record`` with a step column holding the text of an integer (TRL logs ``str(global_step)``) made
    that integer (any other value is left for the checks to name), and TRL's reward: a row of TRL's
    ``completions`` table (``completion`` and ``advantage``, no reward column) gets as ``reward`` the sum of
    its reward-function columns ignoring NaN, as TRL's ``nansum`` and the parquet reader make it."""
    for key in (F.STEP, *ALIASES[F.STEP]):
        value = record.get(key)
        if isinstance(value, str) and len(value) <= 20 and _INTEGER.fullmatch(value.strip()):
            record[key] = int(value)
    rewards = (F.REWARD, *ALIASES[F.REWARD], *F.ALIASES.get(F.REWARD, ()))
    if "completion" in record and "advantage" in record and not any(k in record for k in rewards):
        functions = [v for k, v in record.items() if k not in NOT_REWARD_FUNCTIONS and type(v) in (int, float)]
        if functions:
            record[F.REWARD] = float(sum(v for v in functions if v == v))
    return record


def _is_image_cell(value) -> bool:
    return value == "Image" or (isinstance(value, list) and bool(value) and all(v == "Image" for v in value))


def artifact_table(path: Path) -> tuple[str, list] | None:
    """(the artifact folder relative to the run folder, its table's rows) of the ``run_table`` artifact version
    that holds the images of the table file ``path`` (``files/media/table/...``), laid out in the run folder
    as ``wandb artifact get`` does; None without one (or one of another row count)."""
    mine = _FILE.match(path.name)
    parts = path.parts
    if mine is None or "files" not in parts:
        return None
    at = len(parts) - 1 - parts[::-1].index("files")
    run_folder = Path(*parts[:at])
    key = mine.group("key")
    same = sorted((int(g.group("step")), other.name) for other in path.parent.glob(f"{glob_escape(key.rsplit('/', 1)[-1])}_*.table.json")
                  if (g := _FILE.match(other.name)) and g.group("key") == key)
    version = [name for _, name in same].index(path.name) if path.name in [n for _, n in same] else -1
    found = None
    for folder in (run_folder / "artifacts").glob(f"run-*:v{version}"):
        if (folder / f"{key}.table.json").is_file():
            found = folder
            break
    if found is None:
        return None
    try:
        columns, data = _load(found / f"{key}.table.json")
    except FileError:
        return None
    if len(data) != len(_load(path)[1]):
        return None
    return found.relative_to(run_folder).as_posix(), [dict(zip(columns, row)) for row in data if isinstance(row, list)]


def image_turns(record: dict, row: int, artifact: tuple[str, list] | None) -> list[dict] | None:
    """A row with image cells as chat messages: the user's (each image, then the prompt) and the assistant's
    (the response); None for a row without any. Each image a part naming its file in the artifact folder
    (relative to the run folder), or, without that folder, that its pixels are in the artifact."""
    cells = [key for key, value in record.items() if _is_image_cell(value)]
    if not cells:
        return None
    parts = []
    kept = artifact[1][row] if artifact is not None and row < len(artifact[1]) else {}
    for key in cells:
        files = kept.get(key)
        files = files if isinstance(files, list) else [files]
        for k in range(len(record[key]) if isinstance(record[key], list) else 1):
            got = files[k] if k < len(files) else None
            if isinstance(got, dict) and got.get("_type") == "image-file" and isinstance(got.get("path"), str):
                parts.append({"type": "image", "path": f"{artifact[0]}/{got['path']}"})
            else:
                parts.append({"type": "image", "kept_in": "the run's run_table artifact"})
    prompt = next((record[k] for k in ("prompt", *ALIASES["prompt"], "input") if isinstance(record.get(k), str)), "")
    response = next((record[k] for k in ("response", *ALIASES["response"], "output")
                     if isinstance(record.get(k), str)), "")
    return [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]},
            {"role": "assistant", "content": response}]


def records_of(columns: list[str], row: list) -> list[dict]:
    """A row's records: ``{column: value}``, or for a wide table (verl's ``val/generations``: ``step``,
    ``input_1``, ``output_1``, ``score_1``, ``input_2``…) one record per numbered group, each with the
    row's unnumbered columns."""
    groups: dict[int, dict] = {}
    shared = {}
    for column, value in zip(columns, row):
        match = _NUMBERED.match(column)
        if match:
            groups.setdefault(int(match.group(2)), {})[match.group(1)] = value
        else:
            shared[column] = value
    names = {frozenset(g) for g in groups.values()}
    if len(groups) < 1 or len(names) != 1 or len(next(iter(names))) < 2:
        return [integer_steps(dict(zip(columns, row)))]
    return [integer_steps({**shared, **groups[i]}) for i in sorted(groups)]


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows of the file's new rows; (row, reason) for each rejected row; rows in the file)."""
    path = as_path(path)
    got = _FILE.match(path.name)
    if got is None:
        raise FileError("not named {key}_{step}_{hash}.table.json")
    columns, rows = new_rows(path)
    resolver = KeyResolver(options.fields, ALIASES)
    artifact = artifact_table(path) if any(_is_image_cell(v) for _, row in rows if isinstance(row, list)
                                           for v in row) else None
    out, lines, offsets, groups, errors = [], [], [], [], []
    for i, row in rows:
        if not isinstance(row, list) or len(row) != len(columns):
            errors.append((i + 1, f"row of {len(row) if isinstance(row, list) else json_type(row)} values for "
                                  f"{len(columns)} columns"))
            continue
        records = records_of(columns, row)
        for k, record in enumerate(records):
            try:
                canonical = canonical_row(record, resolver, default_step=int(got.group("step")))
            except RecursionError:
                canonical = "a value is nested too deeply"
            if isinstance(canonical, str):
                errors.append((i + 1, canonical if len(records) == 1 else f"sample {k + 1}: {canonical}"))
                continue
            messages = image_turns(record, i, artifact) if len(records) == 1 else None
            out.append(with_turns(canonical) if messages is None else {**canonical, F.MESSAGES: turns(messages)})
            lines.append(i + 1)
            offsets.append(i)
            groups.append(k)
    # the extra-field cap before the columns are built: 10^5 columns make 256, not 10^5 then dropped
    return table(out, lines, offsets, groups, options.max_extras), errors, len(_load(path)[1])


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """Row ``offset`` of the table as ``{column: value}`` (its ``length``-th record, for a wide row), with
    the file's wandb step as ``wandb_step``."""
    try:
        table = json.loads(fh.read())
        row = table["data"][offset]
        out = records_of([str(c) for c in table["columns"]], row)[length]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.") from exc
    path = getattr(fh, "name", None)
    messages = image_turns(out, offset, artifact_table(Path(path)) if isinstance(path, str) else None)
    if messages is not None:
        out[F.MESSAGES] = messages
    elif not any(k in out for k in ("prompt", *ALIASES["prompt"], *F.ALIASES["prompt"])):
        text = next((out[k] for k in ("response", *ALIASES["response"], *F.ALIASES["response"]) if k in out), None)
        turns = transcript(text)
        if turns:
            out[F.MESSAGES] = turns
    out["wandb_step"] = step_of(name)
    if not any(k in out for k in (F.STEP, "global_step", "train/global_step")):
        out[F.STEP] = step_of(name)
    return out
