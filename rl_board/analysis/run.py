"""A snapshot of a run: its samples, per-step statistics and what the load read.

``Run`` is immutable and what every view draws from. It holds one row of numbers
per sample; texts stay in the (memory-mapped) segments and are taken for the rows
shown, as are the words of each response (``words``), and a sample's full record
(token lists, other fields) is read again from its source file by the run's reader
when it is shown.

``Run`` is the snapshot (here) and three parts it holds (composition, not inheritance):
``segment_queries.SegmentQueries`` (answered from the parsed segments), ``records.SourceRecords``
(answered by reading the source files again, through the run's location) and ``public.PublicTable``
(the notebook's frame). Every query a ``Run`` answers is listed once, in its class body, with the part
that answers it (``_PartQuery``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path

import pandas as pd
import pyarrow as pa

from ..base import fields as F
from ..base.compression import open_stream
from ..base.location import RunLocation, open_location
from ..readers import ReadOptions
from ..store.loader import LoadReport, Snapshot
from .public import PublicTable
from .segment_queries import SegmentQueries, take_rows
from .source_records import SourceRecords


class _PartQuery:
    """A query of ``Run`` answered by one of its parts: the part's method of the same name, bound to the
    run's part (``help(Run.words)`` shows the part's docstring)."""

    def __init__(self, part: str, kind: type):
        self.part, self.kind = part, kind

    def __set_name__(self, owner, name: str) -> None:
        self.name = name
        self.__doc__ = getattr(self.kind, name).__doc__

    def __get__(self, run, owner=None):
        if run is None:
            return getattr(self.kind, self.name)
        return getattr(getattr(run, self.part), self.name)


@dataclass(frozen=True, eq=False, repr=False)
class Run:
    """A snapshot of a run.

    ``_samples`` (the package's own; private) has one row per sample, ordered by step, file, line, with
    numbers only (scalars, extras as ``extra:NAME`` columns, aggregates, where the sample lies), labelled
    by position; ``with_text`` adds the texts and ``record`` reads one sample's whole record from its
    source, so memory holds neither for the whole run. ``steps`` has one row per step
    (``steps.compute_step_stats``), computed when first read: a command that never reads it (``diff``)
    does not pay for it. A notebook reads ``to_pandas()`` (``public.PublicTable``): the
    sample's fields and metrics, by ``sample_id``; ``samples`` is ``_samples`` under its old public name,
    deprecated.

    Its fields are never reassigned (frozen); it compares and hashes by identity (each snapshot is
    its own: two reads of one folder are two runs), so it can key a dict or a cache.
    """

    path: Path
    files: tuple[str, ...]
    _samples: pd.DataFrame
    #: computes ``steps`` (one row per step) when it is first read
    _step_stats: Callable[[], pd.DataFrame] = field(repr=False)
    report: LoadReport
    options: ReadOptions
    _segments: dict[tuple[int, int], pa.Table] = field(repr=False)
    _reader: object = field(repr=False, default=None)  # the reader module (``readers``)
    #: the run's cache folder and its manifest's version when this snapshot was taken (None without
    #: a cache): what is derived from the whole snapshot (the findings) can be kept there
    cache: tuple[Path, tuple] | None = field(repr=False, default=None)
    split: str | None = None  # the split read, for a format that has them (``readers.layout``)
    splits: tuple[str, ...] = ()  # every split the run has
    #: the run's location (``base.location``): records are read again through it, inside the roots
    #: it was opened under (None: opened from ``path`` on first use)
    location: RunLocation | None = field(repr=False, default=None)
    max_per_step: int | None = None  # the samples read of each step at most (None: all), as read_settings says
    #: (file, seg) -> the segment's file name in the cache folder ("" for one not kept there): its words are
    #: kept beside it (``store.words``)
    segment_names: dict[tuple[int, int], str] = field(repr=False, default_factory=dict)

    # -- what a Run answers, in one place: each query and the part that answers it --------------------
    # from the parsed segments, no log file read (segment_queries.SegmentQueries)
    words = _PartQuery("_queries", SegmentQueries)
    word_chunks = _PartQuery("_queries", SegmentQueries)
    word_ids = _PartQuery("_queries", SegmentQueries)
    word_counts = _PartQuery("_queries", SegmentQueries)
    tool_call_lists = _PartQuery("_queries", SegmentQueries)
    tool_calls = _PartQuery("_queries", SegmentQueries)
    text_matches = _PartQuery("_queries", SegmentQueries)
    text_search = _PartQuery("_queries", SegmentQueries)
    # read again from the source files, through the run's location (records.SourceRecords)
    record = _PartQuery("_records", SourceRecords)
    record_parts = _PartQuery("_records", SourceRecords)
    records = _PartQuery("_records", SourceRecords)
    source_lines = _PartQuery("_records", SourceRecords)
    source_keys = _PartQuery("_records", SourceRecords)
    text_fields = _PartQuery("_records", SourceRecords)
    texts = _PartQuery("_records", SourceRecords)
    text_columns = _PartQuery("_records", SourceRecords)
    images = _PartQuery("_records", SourceRecords)
    images_of = _PartQuery("_records", SourceRecords)
    sample_tokens = _PartQuery("_records", SourceRecords)
    samples_tokens = _PartQuery("_records", SourceRecords)
    token_table = _PartQuery("_records", SourceRecords)
    # the notebook's frame, by sample_id (public.PublicTable)
    public_columns = _PartQuery("_public", PublicTable)
    sample_ids = _PartQuery("_public", PublicTable)
    label_of = _PartQuery("_public", PublicTable)
    to_pandas = _PartQuery("_public", PublicTable)
    to_arrow = _PartQuery("_public", PublicTable)
    sample_faults = _PartQuery("_public", PublicTable)
    # and, below, what the snapshot answers itself: extras, pad_token, step_samples, text_of, with_text

    def __post_init__(self) -> None:
        # the parts, made with the run (never replaced: the run is frozen and each part keeps its caches)
        object.__setattr__(self, "_queries", SegmentQueries(self))
        object.__setattr__(self, "_records", SourceRecords(self))
        object.__setattr__(self, "_public", PublicTable(self))

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Run:
        """The run as the store's ``snapshot`` holds it; its per-step statistics are computed when ``steps``
        is first read."""
        from .steps import compute_step_stats

        return cls(snapshot.path, snapshot.files, snapshot.samples,
                   partial(compute_step_stats, snapshot.samples, snapshot.step_stats),
                   snapshot.report, snapshot.options, snapshot.segments, snapshot.reader, snapshot.cache,
                   snapshot.split, snapshot.splits, snapshot.location, snapshot.max_per_step,
                   snapshot.segment_names)

    @cached_property
    def steps(self) -> pd.DataFrame:
        """One row per step, indexed by step (``steps.compute_step_stats``), computed on first read and kept:
        the same frame every time. (Two threads reading it first at once may both compute it; either
        result is the same.)"""
        return self._step_stats()

    @property
    def samples(self) -> pd.DataFrame:
        """Deprecated: the table the page works on (``_samples``), bookkeeping included and labelled by
        position; ``to_pandas()`` is the frame to read, by ``sample_id``."""
        warnings.warn("run.samples is private now (the page's table, labelled by position): use run.to_pandas(), "
                      "the samples' fields and metrics by sample_id", DeprecationWarning, stacklevel=2)
        return self._samples

    def __repr__(self) -> str:
        steps = self._samples[F.STEP] if len(self._samples) else ()
        span = f", steps {min(steps)}–{max(steps)}" if len(steps) else ""
        split = f", split {self.split!r}" if self.split else ""
        return (f"<Run {str(self.path)!r} ({self.report.reader}{split}): {len(self._samples)} samples"
                f"{span}, {len(self.files)} files>")

    def _open(self, path):
        """One of the run's files, opened through its location (checked again: it may be a symlink out
        by now); a compressed file as its uncompressed bytes (the offsets its samples were read at)."""
        location = self.location if self.location is not None else open_location(self.path)
        return open_stream(location.open(path), path)

    @property
    def pad_token(self) -> str | None:
        return self.options.pad_token

    @property
    def extras(self) -> list[str]:
        """The run's extra fields (columns ``extra:NAME`` of ``_samples``), by name."""
        return [F.extra_name(c) for c in F.extra_columns(self._samples.columns)]

    def step_samples(self, step: int) -> pd.DataFrame:
        """The samples of one step with their texts, in file and line order."""
        return self.with_text(self._samples[self._samples[F.STEP] == step])

    def text_of(self, frame: pd.DataFrame, name: str) -> list:
        """One text column (``name``, of ``F.TEXT_FIELDS``) of ``frame``'s rows (rows of ``_samples``), read
        from the parsed segments: ``with_text``'s for that one field, without the others."""
        out = [None] * len(frame)
        all_rows = frame["row"].to_numpy()
        for table, places in self._queries._by_table(frame):
            for place, value in zip(places, take_rows(table.column(name), all_rows[places])):
                out[place] = value
        return out

    def with_text(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (rows of ``_samples``) with the text columns, read from the parsed segments,
        and ``source`` ("file:line")."""
        texts = {name: [None] * len(frame) for name in F.TEXT_FIELDS}
        all_rows = frame["row"].to_numpy()
        for table, places in self._queries._by_table(frame):
            rows = all_rows[places]
            for name in F.TEXT_FIELDS:
                values = take_rows(table.column(name), rows)
                column = texts[name]
                for place, value in zip(places, values):
                    column[place] = value
        texts["source"] = F.addresses(self.files, frame)
        return frame.assign(**{name: pd.Series(values, index=frame.index, dtype=object)
                               for name, values in texts.items()})
