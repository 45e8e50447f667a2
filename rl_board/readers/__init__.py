"""Readers: one module per source format, each turning bytes into the same canonical rows.

``detect(run_dir)`` is the one place that picks a format: a run folder of
``*.jsonl`` files is read by ``jsonl`` (the board's own lines, OpenRLHF-style
ranks and verl's ``{step}.jsonl`` dumps), a folder of ``*.parquet`` files by
``parquet`` (TRL's ``completions_*.parquet``). It lives in ``registry`` with ``READERS`` (the
built-in readers, imported only when asked for) and the readers third parties register (entry
point group ``rl_board.readers``).

A reader module fulfils the ``Reader`` interface written in ``base`` (``NAME``, ``SUFFIX``,
``ALIASES``, ``APPENDABLE``, ``record`` and either ``parse_block`` for files that grow by
lines or ``read_table`` for files read whole), returning canonical rows (``canonical.ROWS``)
and nothing derived: ``rl_board.store.ingest`` schedules them and ``rl_board.derive.samples``
computes what the segments keep. Adding a format is one module and one line in
``signatures.BUILTIN``. Readers import ``base`` (and the modules they share code with), the
registry imports the readers, and this ``__init__`` only hands their names on.

Key resolution is shared: a canonical field (``fields.CANONICAL``) comes from the
source key the user mapped to it (``--field reward=my_score``), else from the
key of its own name, else from its alias (``fields.ALIASES`` plus a reader's
own). Every other top-level numeric or boolean field is an *extra*.

A reader may import ``base`` only (and the other readers): nothing of ``derive``, ``store``,
``analysis``, ``views`` or ``cli``.
"""

from __future__ import annotations

from .base import (
    DEFAULT_MAX_LINE,
    MAX_LINE_ENV,
    MISSING,
    FieldMappingError,
    FileError,
    KeyResolver,
    LineReader,
    MissingDependency,
    Reader,
    ReadOptions,
    SourceChanged,
    TableReader,
    candidate_keys,
    canonical_record,
    describe_size,
    format_field_mapping,
    is_extra_value,
    is_path,
    line_too_long,
    max_line_bytes,
    merged_aliases,
    parse_field_mapping,
    reader_problems,
    value_at,
)
from .registry import ENTRY_POINTS, all_readers, detect, holds_run, reader_for


def __getattr__(name: str):
    """``READERS``: every built-in reader module, in detection order (imported on first use: ``registry``)."""
    if name == "READERS":
        from . import registry

        return registry.READERS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_MAX_LINE", "ENTRY_POINTS", "MAX_LINE_ENV", "MISSING", "READERS", "FieldMappingError", "FileError", "MissingDependency",
    "KeyResolver", "LineReader", "ReadOptions", "Reader", "SourceChanged", "TableReader", "all_readers",
    "candidate_keys", "canonical_record", "describe_size", "detect", "format_field_mapping", "holds_run",
    "is_extra_value", "is_path", "line_too_long", "max_line_bytes", "merged_aliases", "parse_field_mapping",
    "reader_for", "reader_problems", "value_at",
]
