"""The registry: every reader, in the order a run folder is tried, and the one place that picks one.

The built-in readers are named here by their signature (``signatures.BUILTIN``: name, module, the
patterns of their files) and imported only when one is asked for by name (``reader_for``), when
detection finds a folder that could be its run (``Signature.might_hold``), or when every reader is
(``all_readers``, ``READERS``): a command reading a folder of JSON lines imports the ``jsonl`` reader
alone. Each reader imports only ``base`` and the modules it shares code with, never this registry nor
the package's ``__init__``. A third party's format registers without a fork through the entry point
group ``rl_board.readers`` (``NAME = "module"`` in its package's ``[project.entry-points."rl_board.readers"]``),
as pytest's and datasette's plugins do. Those are asked first, in name order: a plugin should claim
only its own folders (``GLOBS``, ``matches``). One that lacks part of the interface (``base.Reader``),
fails to import or takes a built-in's name is left out with a warning that names it; the built-in
readers work on.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from pathlib import Path

from ..base.location import as_path
from . import layout
from .base import reader_problems
from .signatures import BUILTIN, Listing, list_folder

ENTRY_POINTS = "rl_board.readers"  # the entry point group a third party's reader registers in


def builtin(signature):
    """The reader module of a built-in ``signature``, imported now if it was not yet."""
    return importlib.import_module(signature.module)


def __getattr__(name: str):
    """``READERS``: every built-in reader module, in detection order (imports them all)."""
    if name == "READERS":
        return tuple(builtin(signature) for signature in BUILTIN)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def plugins() -> tuple:
    """The readers installed packages register under ``rl_board.readers``, in entry point name order,
    each checked against the interface (read once a process)."""
    from importlib.metadata import entry_points

    taken, found = {signature.name for signature in BUILTIN}, []
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
    """Every reader in detection order: the installed plugins', then the built-in ones (all imported)."""
    return plugins() + tuple(builtin(signature) for signature in BUILTIN)


def reader_for(name: str):
    """The reader module called ``name`` (a built-in one is imported alone)."""
    for reader in plugins():
        if reader.NAME == name:
            return reader
    for signature in BUILTIN:
        if signature.name == name:
            return builtin(signature)
    raise KeyError(name)


def claimants():
    """(the patterns of its files, compressed ones included; a function giving the reader) for every reader
    in detection order: a plugin's module at once, a built-in imported only when the function is called
    (``store.discovery`` asks a reader only when one of its patterns could match a folder's entries)."""
    for reader in plugins():
        yield (tuple(v for p in layout.globs(reader) for v in layout.patterns(reader, p)),
               lambda reader=reader: reader)
    for signature in BUILTIN:
        yield signature.patterns(), functools.partial(builtin, signature)


def _listing(run_dir) -> Listing | None:
    """The entries of a local run folder; None for a URL's folder or one that can't be listed (every reader
    is asked then: a folder that may not be listed may still let a reader open a file it names)."""
    if not isinstance(run_dir, Path):
        return None
    try:
        return list_folder(run_dir)
    except OSError:
        return None


def _candidates(run_dir, listing: Listing | None):
    """The readers that could hold ``run_dir``, in detection order: every plugin, then each built-in
    whose signature says it might (imported only then)."""
    yield from plugins()
    for signature in BUILTIN:
        if signature.might_hold(run_dir, listing):
            yield builtin(signature)


def detect(run_dir: Path):
    """The reader for a run folder: the first of ``all_readers()`` whose files it holds (jsonl when none).

    A reader with a tree layout or its own check (``layout.GLOBS``, ``matches``) is asked with
    ``layout.holds``; a flat one is picked when a file directly in the folder has its suffix. A built-in
    reader is asked (and imported) only when its signature says the folder might be its run."""
    run_dir = as_path(run_dir)
    listing = _listing(run_dir)
    if listing is not None:
        suffixes = listing.suffixes
    elif isinstance(run_dir, Path):  # a local folder that can't be listed
        suffixes = set()
    else:  # a URL's folder: one listing through its filesystem
        try:
            suffixes = {p.suffix for p in run_dir.iterdir() if not p.name.startswith(".") and p.is_file()}
        except OSError:
            suffixes = set()
    for reader in _candidates(run_dir, listing):
        if hasattr(reader, "GLOBS") or hasattr(reader, "matches") or hasattr(reader, "other_kind"):
            if layout.holds(reader, run_dir):
                return reader
        elif reader.SUFFIX in suffixes:
            return reader
    return reader_for("jsonl")


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run of any format."""
    folder = as_path(folder)
    return any(layout.holds(reader, folder) for reader in _candidates(folder, _listing(folder)))
