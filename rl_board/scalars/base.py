"""The base every metrics reader imports: what a source holds (``Scalars``), how its series are built
(``SeriesBuilder``), the error a path without a source gets, and the small helpers the readers share.

A metrics reader (``trl``, ``tensorboard``, ``jsonl``) is a module with ``read(path, inside) ->
Scalars`` (``inside``: whether a path lies in the allowed folders); ``registry.detect`` picks one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path


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
    notes: list[str] = field(default_factory=list)  # what was passed over and why (a record failing its CRC)

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
