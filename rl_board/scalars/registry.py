"""The metrics registry: which reader reads the scalars at a path (``detect``), the metrics source near
a rollout run (``discover``) and ``load_scalars``. Imports the readers; they import only ``base``."""

from __future__ import annotations

import re
from pathlib import Path

from ..base.location import RunLocation, open_file, open_location
from . import jsonl, tensorboard, trl
from .base import EXPECTED, TRL_FILES, Scalars, ScalarsError


def _checkpoint_number(path: Path) -> int:
    match = re.search(r"checkpoint-(\d+)$", path.parent.name)
    return int(match[1]) if match else -1


def detect(path: Path | str | RunLocation, deep: bool = True):
    """(the reader module, the file or folder it reads) for ``path`` (a location is taken as it is;
    a path goes through the door). ``deep``: event files may lie anywhere below a folder (else only
    in it or in TRL's ``runs/*``). Raises ``ScalarsError``, or ``RootError`` outside the allowed folders."""
    location = open_location(path)  # a path outside gets one message, whether or not it exists
    path = location.path
    if not path.exists():
        raise ScalarsError(f"Not found: {path}. " + EXPECTED)
    if path.is_file():
        if path.name in TRL_FILES or path.suffix == ".json" and _holds_log_history(path):
            return trl, path
        if path.name.startswith("events.out.tfevents"):
            return tensorboard, path.parent
        if path.suffix == ".jsonl" and jsonl.looks_like_metrics(path):
            return jsonl, path
        raise ScalarsError(f"{path} is not a metrics file. " + EXPECTED)
    # every candidate is checked: a symlink inside an allowed folder may point outside
    for name in TRL_FILES:
        if (path / name).is_file() and location.contains(path / name):
            return trl, path / name
    checkpoints = sorted((p for p in path.glob("checkpoint-*/trainer_state.json") if location.contains(p)),
                         key=_checkpoint_number)
    if checkpoints:
        return trl, checkpoints[-1]
    events = tensorboard.event_folder(path, deep, location.contains)
    if events is not None:
        return tensorboard, events
    for candidate in sorted(path.glob("*.jsonl")):
        if location.contains(candidate) and jsonl.looks_like_metrics(candidate):
            return jsonl, candidate
    raise ScalarsError(f"No metrics source in {path}. " + EXPECTED)


def _holds_log_history(path: Path) -> bool:
    """Whether a JSON file given by name starts like a ``log_history``: an object with one, or a list
    whose first item is an object with a ``step`` (read from its first 64 KiB)."""
    try:
        with open_file(path) as fh:
            head = fh.read(1 << 16).lstrip()
    except OSError:
        return False
    return head.startswith(b"{") and b'"log_history"' in head or bool(
        re.match(rb'\[\s*\{[^{}]*"step"\s*:', head))


def discover(run_dir: Path | str | RunLocation) -> Path | None:
    """A metrics source near a rollout run: in the run folder, its parent or its grandparent (TRL's
    ``completions/`` lies inside the output dir that holds ``trainer_state.json``); None if none.
    Never looks outside the allowed folders (those the run's location was opened under)."""
    try:
        location = open_location(run_dir)
    except ValueError:  # RootError: a run folder the board may not read has no metrics to show
        return None
    folder = location.path.resolve()
    for candidate in (folder, folder.parent, folder.parent.parent):
        if not location.contains(candidate):
            break  # a parent outside: the grandparent is too
        try:  # not deep: a search through the parent's subfolders would find other runs' logs
            return detect(location.within(candidate), deep=False)[1]
        except (ValueError, OSError):  # ScalarsError, or RootError for a path the board may not read
            continue
    return None


def load_scalars(path: Path | str) -> Scalars:
    """Detect and read the metrics source at ``path`` (checked at the door once)."""
    location = open_location(path)
    reader, target = detect(location)
    return reader.read(target, location.contains)
