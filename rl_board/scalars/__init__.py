"""The trainer's own scalars (loss, KL, clip fraction, entropy…), one module per source format,
all producing the same ``Scalars``: series name -> ascending (step, value), one value per step.

``detect(path)`` is the one place that picks a source: a file by its name or content, a folder
by what it holds (TRL's ``trainer_state.json`` first, the top-level one, else the newest
``checkpoint-*``'s; then TensorBoard event files; then a JSONL of metrics: verl's file logger
or plain ``{"step": N, name: number}`` lines).

May import ``base`` only; nothing of ``readers`` (the same floor), ``derive``, ``store`` or above.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base.location import RunLocation, open_location


class ScalarsError(ValueError):
    """The path holds no metrics source the board can read; the message says what was expected."""


#: File names of TRL / transformers metrics, in the order a folder is searched.
TRL_FILES = ("trainer_state.json", "trainer_log_history.json")

EXPECTED = ("Expected a trainer_state.json or trainer_log_history.json (TRL / transformers), TensorBoard event "
            "files (events.out.tfevents.*), or a JSONL of metrics (verl's file logger, or {\"step\": N, ...} lines).")


@dataclass
class Scalars:
    """What one source holds. ``series``: name -> [(step, value)], steps ascending, one value each
    (NaN for a non-finite one, kept as a gap). ``path``: the file or folder read."""

    source: str  # "trl", "verl", "tensorboard" or "jsonl"
    path: Path
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    non_finite: int = 0  # values logged as NaN or infinite
    skipped: int = 0  # records without a step, or unreadable

    def to_json(self) -> dict:
        """The ``metrics --json`` contract."""
        return {"source": self.source, "series": {name: [[step, value if math.isfinite(value) else None]
                                                        for step, value in points]
                                                 for name, points in self.series.items()}}


class SeriesBuilder:
    """Collects (step, value) per name; a later value for a step replaces the earlier one."""

    def __init__(self):
        self._values: dict[str, dict[int, tuple[float, float]]] = {}
        self.non_finite = 0

    def add(self, name: str, step: int, value: float, order: float = 0.0) -> None:
        """Log ``value`` of ``name`` at ``step``; of several, the one with the highest ``order``
        (then the latest added) wins."""
        value = float(value)
        if not math.isfinite(value):
            self.non_finite += 1
        points = self._values.setdefault(name, {})
        if step not in points or order >= points[step][0]:
            points[step] = (order, value)

    def build(self) -> dict[str, list[tuple[int, float]]]:
        return {name: [(step, value) for step, (_, value) in sorted(points.items())]
                for name, points in sorted(self._values.items())}


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_step(value) -> int | None:
    """An integer step (3.0 counts as 3), or None."""
    if is_number(value) and math.isfinite(value) and float(value).is_integer():
        return int(value)
    return None


def _checkpoint_number(path: Path) -> int:
    match = re.search(r"checkpoint-(\d+)$", path.parent.name)
    return int(match[1]) if match else -1


def detect(path: Path | str | RunLocation, deep: bool = True):
    """(the reader module, the file or folder it reads) for ``path`` (a location is taken as it is;
    a path goes through the door). ``deep``: event files may lie anywhere below a folder (else only
    in it or in TRL's ``runs/*``). Raises ``ScalarsError``, or ``RootError`` outside the allowed folders."""
    from . import jsonl, tensorboard, trl

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
        with open(path, "rb") as fh:
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


def anywhere(path: Path) -> bool:
    """Every path lies inside (a reader's default ``inside``, for a file already checked)."""
    return True


def outside(path: Path) -> ScalarsError:
    return ScalarsError(f"{path} is outside the allowed folders.")


def signature(path: Path) -> tuple:
    """Sizes and mtimes of what a source reads: changes when the trainer logs more."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)


def nearest_step(target: int, steps) -> int:
    """The logged step nearest to ``target`` (the earlier one on a tie)."""
    return min(steps, key=lambda s: (abs(s - target), s))


def load_scalars(path: Path | str) -> Scalars:
    """Detect and read the metrics source at ``path`` (checked at the door once)."""
    location = open_location(path)
    reader, target = detect(location)
    return reader.read(target, location.contains)
