"""The registry: every reader, in the order a run folder is tried, and the one place that picks one.

The built-in readers are imported here (each imports only ``base`` and the modules it shares code
with, never this registry nor the package's ``__init__``); a third party's format registers without a
fork through the entry point group ``rl_board.readers`` (``NAME = "module"`` in its package's
``[project.entry-points."rl_board.readers"]``), as pytest's and datasette's plugins do. Those are
asked first, in name order: a plugin should claim only its own folders (``GLOBS``, ``matches``). One
that lacks part of the interface (``base.Reader``), fails to import or takes a built-in's name is
left out with a warning that names it; the built-in readers work on.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

from ..base.location import as_path
from . import layout
from .base import reader_problems
from .formats import (
    areal,
    art,
    jsonl,
    nemo_rl,
    parquet,
    prime_rl,
    prime_rl_tokens,
    rllm,
    roll,
    skyrl,
    slime,
    tensorboard_text,
    tinker,
    trackio,
    verifiers_v0,
    verl,
    wandb_tables,
)

ENTRY_POINTS = "rl_board.readers"  # the entry point group a third party's reader registers in

#: Every built-in reader, in detection order: formats recognised by their layout or content first, then
#: the flat folders of lines or tables; TensorBoard text last (event files beside a run's own lines are
#: its scalars, not its samples). prime-rl's episodes come before its token exports: an output
#: folder holding both opens as episodes, and its token_exports/ folder as the token export.
READERS = (prime_rl, prime_rl_tokens, nemo_rl, art, rllm, skyrl, roll, areal, tinker, slime, wandb_tables,
           verifiers_v0, trackio, verl, jsonl, parquet, tensorboard_text)


@functools.cache
def plugins() -> tuple:
    """The readers installed packages register under ``rl_board.readers``, in entry point name order,
    each checked against the interface (read once a process)."""
    from importlib.metadata import entry_points

    taken, found = {reader.NAME for reader in READERS}, []
    for point in sorted(entry_points(group=ENTRY_POINTS), key=lambda p: p.name):
        try:
            reader = point.load()
        except Exception as exc:  # a broken plugin costs only itself
            warnings.warn(f"rl-board: the reader {point.name!r} ({point.value}) failed to import: {exc}",
                          stacklevel=2)
            continue
        problems = reader_problems(reader)
        if not problems and reader.NAME in taken:
            problems = [f"takes the name {reader.NAME!r} of a reader already there"]
        if problems:
            warnings.warn(f"rl-board: the reader {point.name!r} ({point.value}) is left out: it "
                          + "; ".join(problems), stacklevel=2)
            continue
        taken.add(reader.NAME)
        found.append(reader)
    return tuple(found)


def all_readers() -> tuple:
    """Every reader in detection order: the installed plugins', then the built-in ``READERS``."""
    return plugins() + READERS


def reader_for(name: str):
    """The reader module called ``name``."""
    for reader in all_readers():
        if reader.NAME == name:
            return reader
    raise KeyError(name)


def detect(run_dir: Path):
    """The reader for a run folder: the first of ``all_readers()`` whose files it holds (jsonl when none).

    A reader with a tree layout or its own check (``layout.GLOBS``, ``matches``) is asked with
    ``layout.holds``; a flat one is picked when a file directly in the folder has its suffix."""
    run_dir = as_path(run_dir)
    try:
        if isinstance(run_dir, Path):
            with os.scandir(run_dir) as entries:  # a file's type comes with its entry: no stat per file
                suffixes = {os.path.splitext(e.name)[1] for e in entries
                            if not e.name.startswith(".") and e.is_file()}
        else:  # a URL's folder: one listing through its filesystem
            suffixes = {p.suffix for p in run_dir.iterdir() if not p.name.startswith(".") and p.is_file()}
    except OSError:
        suffixes = set()
    for reader in all_readers():
        if hasattr(reader, "GLOBS") or hasattr(reader, "matches") or hasattr(reader, "other_kind"):
            if layout.holds(reader, run_dir):
                return reader
        elif reader.SUFFIX in suffixes:
            return reader
    return reader_for("jsonl")


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run of any format."""
    return any(layout.holds(reader, folder) for reader in all_readers())

