"""The trainer's own scalars (loss, KL, clip fraction, entropy…), one module per source format,
all producing the same ``Scalars``: series name -> ascending (step, value), one value per step.

``registry.detect(path)`` is the one place that picks a source: a file by its name or content, a folder
by what it holds (TRL's ``trainer_state.json`` first, the top-level one, else the newest
``checkpoint-*``'s; then TensorBoard event files; then a JSONL of metrics: verl's file logger
or plain ``{"step": N, name: number}`` lines).

May import ``base`` only; nothing of ``readers`` (the same floor), ``derive``, ``store`` or above.
"""

from __future__ import annotations

from .base import (
    EXPECTED,
    TRL_FILES,
    Scalars,
    ScalarsError,
    SeriesBuilder,
    anywhere,
    as_step,
    is_number,
    nearest_step,
    outside,
    signature,
)
from .registry import detect, discover, load_scalars

__all__ = ["EXPECTED", "TRL_FILES", "Scalars", "ScalarsError", "SeriesBuilder", "anywhere", "as_step", "detect",
           "discover", "is_number", "load_scalars", "nearest_step", "outside", "signature"]
