"""Where a format keeps its files inside a run folder, and what their paths say.

A flat format (the board's JSONL, TRL's parquet) keeps its files directly in the
run folder; a trainer that writes a tree (prime-rl's ``rollouts/step_3/train/all/
traces.jsonl``, ART's ``trajectories/train/0003.parquet``) declares it with
``GLOBS``, patterns relative to the run folder: the run's files are the matches of
the first pattern that matches any file. A file's *name* is its path relative to
the run folder in POSIX form, so the tracker, the cache manifest and the load
report tell two ``traces.jsonl`` apart.

Optional parts of a reader module, with their defaults here:

- ``GLOBS``: tuple of patterns (default ``("*" + SUFFIX,)``);
- ``matches(run_dir) -> bool``: a check beyond "some file matches" (a file name, a
  first line); default: some file matches ``GLOBS``;
- ``split_of(name) -> str | None``: the split (``train``, ``eval``...) a file of
  the run belongs to; default: no splits;
- ``DEFAULT_SPLIT``: the split read when none is chosen (default ``"train"``), or a tuple of
  them, the first the run has read (a format whose layout changed names its splits differently);
- ``other_kind(path) -> str | None``: what a file matching ``GLOBS`` is when it is not one of
  the run's files (a trainer's metrics file beside the rollouts), or None; default: None.
- ``NEEDS`` and ``INSTALL``: an optional module the files need, and the message of a file that
  failed for want of it (``base.MissingDependency``); such a file is read again once the module is
  installed (``dependency_installed``). Default: none.
- ``NAMED_GLOBS``: patterns of files in the run's tree that are listed with the run's files
  though they can't be read (a trainer's pickles): the reader names each with why, it is never
  opened as data (default: none).

A pattern of a format that reads text (``.jsonl``, ``.json``) also matches its files compressed
(``traces.jsonl.gz``, ``.xz``, ``.bz2``, ``.zst``: ``patterns``), read through ``base.compression``.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path, PurePosixPath

from ..base.compression import variants

#: Path components that carry a step, tried on each component from the last.
_STEP_PATTERNS = (
    re.compile(r"^(?:global_)?step_(\d+)$"),
    re.compile(r"^(?:train|val|valid|validation|test|eval)_step_(\d+)_epoch_\d+$"),
    re.compile(r"^train_data_step(\d+)$"),
    re.compile(r"^(\d+)$"),
)


def step_in(name: str | PurePosixPath) -> int | None:
    """The step a relative file name carries, or None: the last component (file stems without
    their suffixes) that is ``step_{N}``, ``global_step_{N}``, ``{split}_step_{N}_epoch_{E}``,
    ``train_data_step{N}`` or only digits (``0003.parquet``).

    >>> step_in("rollouts/step_12/train/all/traces.jsonl"), step_in("train/0003.parquet")
    (12, 3)
    """
    parts = PurePosixPath(name).parts
    for i, part in enumerate(reversed(parts)):
        if i == 0:  # the file itself: without its suffixes
            part = part.split(".", 1)[0]
        for pattern in _STEP_PATTERNS:
            match = pattern.match(part)
            if match:
                return int(match.group(1))
    return None


def globs(reader) -> tuple[str, ...]:
    return getattr(reader, "GLOBS", None) or ("*" + reader.SUFFIX,)


def named_globs(reader) -> tuple[str, ...]:
    return tuple(getattr(reader, "NAMED_GLOBS", ()))
TEXT_SUFFIXES = (".jsonl", ".json")  # the suffixes of files a reader reads as text: read compressed too


def patterns(reader, pattern: str) -> tuple[str, ...]:
    """The file patterns one of ``reader``'s ``GLOBS`` stands for: itself, and compressed when the
    reader reads text."""
    return variants(pattern) if reader_reads_text(reader) else (pattern,)


def reader_reads_text(reader) -> bool:
    """Whether the reader's files are text (JSON lines or JSON), which are also read compressed."""
    return getattr(reader, "SUFFIX", "") in TEXT_SUFFIXES


def is_flat(reader) -> bool:
    """Whether the reader's files lie directly in the run folder (no tree layout)."""
    return all("/" not in pattern for pattern in globs(reader))


def relative_name(run_dir: Path, path: Path) -> str:
    """A file's name in its run: its path relative to the run folder, in POSIX form."""
    return path.relative_to(run_dir).as_posix()


def matching_files(run_dir: Path, pattern: str):
    """The files of ``run_dir`` matching ``pattern``, none with a hidden component (a generator)."""
    for path in run_dir.glob(pattern):
        if not any(part.startswith(".") for part in path.relative_to(run_dir).parts) and path.is_file():
            yield path


def first_match(run_dir: Path, pattern: str, keep=None) -> Path | None:
    """One file of ``run_dir`` matching ``pattern`` (hidden names skipped; with ``keep``, one it
    keeps), or None; stops at the first."""
    try:
        return next((path for path in matching_files(run_dir, pattern) if keep is None or keep(path)), None)
    except OSError:
        return None


def holds(reader, run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run of ``reader``'s format: its ``matches``, else a file matching
    one of its ``GLOBS`` that is not another kind of file (``other_kind``)."""
    matches = getattr(reader, "matches", None)
    if matches is not None:
        try:
            return bool(matches(run_dir))
        except OSError:
            return False
    keep = (lambda path: other_kind(reader, path) is None) if hasattr(reader, "other_kind") else None
    return any(first_match(run_dir, variant, keep) is not None
               for pattern in globs(reader) for variant in patterns(reader, pattern))


def other_kind(reader, path: Path) -> str | None:
    """What ``path``, which matches the reader's ``GLOBS``, is when it is not one of the run's files."""
    check = getattr(reader, "other_kind", None)
    return check(path) if check is not None else None


def split_of(reader, name: str) -> str | None:
    split = getattr(reader, "split_of", None)
    return split(name) if split is not None else None


def default_splits(reader) -> tuple[str, ...]:
    """The reader's ``DEFAULT_SPLIT`` as a tuple, in order of preference."""
    preferred = getattr(reader, "DEFAULT_SPLIT", "train")
    return (preferred,) if isinstance(preferred, str) else tuple(preferred)


def choose_split(reader, splits: list[str], wanted: str | None) -> str | None:
    """The split to read: ``wanted`` when given, else the reader's default when the run has it,
    else the first in sorted order; None for a run without splits."""
    if wanted:
        return wanted
    if not splits:
        return None
    return next((split for split in default_splits(reader) if split in splits), None) or sorted(splits)[0]


def missing_dependency(reader, error: str | None) -> bool:
    """Whether ``error`` says a file failed for want of the reader's optional module (``NEEDS``)."""
    return bool(getattr(reader, "NEEDS", None)) and error is not None and error == getattr(reader, "INSTALL", None)


def step_of(reader, name: str) -> int | None:
    """The step file ``name`` holds by its path: the reader's own ``step_of`` when it has one (AReaL's
    version folder, not its task id), else ``step_in``."""
    own = getattr(reader, "step_of", None)
    return own(name) if own is not None else step_in(name)


def dependency_installed(reader) -> bool:
    """Whether the reader's optional module (``NEEDS``) can be imported now (looked for afresh: it may have
    been installed since this process started)."""
    importlib.invalidate_caches()
    try:
        return importlib.util.find_spec(reader.NEEDS) is not None
    except (ImportError, ValueError):
        return False
