"""A JSONL of metrics, one record per line: verl's file logger (``{"step": N, "data": {name:
number}}``; every numeric key of ``data``) or plain lines (``{"step": N, name: number}``; every
numeric key other than ``step``). For a step logged twice, the later line wins."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..base.defaults import max_line_bytes
from ..base.location import open_file
from .base import (
    Scalars,
    ScalarsError,
    SeriesBuilder,
    anywhere,
    as_step,
    is_number,
    outside,
)

ROLLOUT_KEYS = {"prompt", "response", "input", "output", "completion", "logprobs", "response_tokens"}


def _records(path: Path):
    """Each line's record (None for a line that is no JSON object, or one longer than the line limit,
    which is passed over unread); a FIFO or device raises ``NotRegular``."""
    limit = max_line_bytes()
    with open_file(path) as fh:
        while raw := fh.readline(limit + 1):
            if len(raw) > limit and not raw.endswith(b"\n"):  # past the limit: scanned to its end, not held
                while (piece := fh.readline(1 << 20)) and not piece.endswith(b"\n"):
                    pass
                yield None
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):  # nested too deeply: a record not read, counted
                yield None
                continue
            yield record if isinstance(record, dict) else None


def looks_like_metrics(path: Path) -> bool:
    """Whether ``path``'s first record is a metrics record (a step, no rollout text)."""
    try:
        for record in _records(path):
            if record is None:
                continue
            return "step" in record and not (ROLLOUT_KEYS & set(record))
    except OSError:
        return False
    return False


def read(path: Path, inside: Callable[[Path], bool] = anywhere) -> Scalars:
    """The series of ``path``; ``inside``: whether it still lies inside the allowed folders."""
    if not inside(path):
        raise outside(path)
    builder, skipped, verl = SeriesBuilder(), 0, None
    try:
        for record in _records(path):
            step = as_step(record.get("step")) if record is not None else None
            if step is None:
                skipped += 1
                continue
            if verl is None:
                verl = isinstance(record.get("data"), dict)
            values = record.get("data") if verl else record
            if not isinstance(values, dict):
                skipped += 1
                continue
            for name, value in values.items():
                if (verl or name != "step") and is_number(value):
                    builder.add(name, step, value)
    except OSError as exc:
        raise ScalarsError(f"Could not read {path} ({exc}).") from exc
    return Scalars("verl" if verl else "jsonl", path, builder.build(), builder.non_finite, skipped)
