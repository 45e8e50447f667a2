"""TRL / transformers ``trainer_state.json``: ``log_history`` is a list of dicts, each with ``step``
and numeric metrics (``loss``, ``reward``, ``kl``, ``clip_ratio/...``). Every numeric key other
than ``step`` is a series; for a step logged twice, the later entry wins. A file holding the bare
``log_history`` list (``trainer_log_history.json``, as scripts save ``trainer.state.log_history``)
is read the same way. The file is one JSON value, bounded as a line of a run's file is (the line
limit, ``RL_BOARD_MAX_LINE_MB``; compressed, the expansion bounds too): past it, or nested more deeply
than Python's json reads, it is named in one line and not read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..base.compression import TooLarge, read_bytes
from .base import (
    Scalars,
    ScalarsError,
    SeriesBuilder,
    anywhere,
    as_step,
    is_number,
    outside,
)


def read(path: Path, inside: Callable[[Path], bool] = anywhere) -> Scalars:
    """The series of ``path``; ``inside``: whether it still lies inside the allowed folders."""
    if not inside(path):
        raise outside(path)
    try:
        # one JSON value, bounded as a line is; Python's json: NaN and Infinity too
        state = json.loads(read_bytes(path, line=True).decode("utf-8"))
    except TooLarge as exc:
        raise ScalarsError(f"{path}: {exc}.") from exc
    except RecursionError as exc:
        raise ScalarsError(f"{path} is nested more deeply than Python's json reads: not read.") from exc
    except (OSError, ValueError) as exc:
        raise ScalarsError(f"{path} is not readable JSON ({exc}).") from exc
    history = state.get("log_history") if isinstance(state, dict) else state
    if not isinstance(history, list):
        raise ScalarsError(f"{path} has no log_history list (an object with one, or the list itself).")
    builder, skipped = SeriesBuilder(), 0
    for entry in history:
        step = as_step(entry.get("step")) if isinstance(entry, dict) else None
        if step is None:
            skipped += 1
            continue
        for name, value in entry.items():
            if name != "step" and is_number(value):
                builder.add(name, step, value)
    return Scalars("trl", path, builder.build(), builder.non_finite, skipped)
