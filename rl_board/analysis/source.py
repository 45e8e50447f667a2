"""Open a run for reading: ``RunSource`` is the store's incremental ``RunLoader`` whose every
refresh returns a ``Run`` (the snapshot with its per-step statistics and queries); ``load_run``
reads a run once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..store.loader import Progress, RunLoader

if TYPE_CHECKING:
    from ..store.snapshot import Snapshot


class RunSource(RunLoader):
    """Reads one run folder incrementally; ``refresh()`` returns the newest ``Run`` (arguments as
    ``store.loader.RunLoader``)."""

    SNAPSHOT_MODULES = ("rl_board.analysis.run", "rl_board.analysis.steps")
    run_class = None  # the ``Run`` subclass each refresh returns (None: ``Run``)

    def _build(self, snapshot: Snapshot):
        from .run import Run

        return (self.run_class or Run).from_snapshot(snapshot)


def load_run(run_dir: Path | str, pad_token: str | None = None, max_per_step: int | None = None,
             cache_root: Path | None | bool = None, progress: Progress | None = None,
             fields: tuple[tuple[str, str], ...] = (), eos_token: str | None = None,
             split: str | None = None, tokenizer: Path | str | None = None, run_class=None,
             keep_words: bool = False):
    """Read a run folder once and return it as a ``Run`` (``RunSource(...).refresh()``), or as
    ``run_class``, a subclass of it. ``keep_words``: the read's workers find each response's words too (for
    a command whose findings read them at once: ``store.words``)."""
    source = RunSource(run_dir, pad_token, max_per_step, cache_root, fields, eos_token, split, tokenizer,
                       keep_words=keep_words)
    source.run_class = run_class
    return source.refresh(progress)


def read_settings(run, max_per_step: int | None = None) -> dict:
    """The settings ``run`` (a ``Run``) was read with, as the JSON of ``summary``, ``search`` and
    ``findings`` carries them: ``pad_token`` and ``eos_token`` (null when off), ``fields`` (the field
    mapping, canonical -> source), ``split`` (null for a format without splits) and
    ``max_samples_per_step`` (null: all)."""
    options = run.options
    return {"pad_token": options.pad_token, "eos_token": options.eos_token,
            "fields": {canonical: source for canonical, source in options.fields},
            "split": getattr(run, "split", None), "max_samples_per_step": max_per_step}
