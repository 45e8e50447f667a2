"""The numbers of a run's segments (every column but the texts), as the snapshot gathers them: each segment
mapped once more for them alone (``_OwnMappings``), and, while a cold read's workers still parse, made and
gathered as each segment comes back (``Numbers``), so the time after the last range does not."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..base import fields as F
from ..derive.samples import TURN_COLUMNS
from .columns import Gathering
from .segments import SharedSlice, with_one_value_columns


class _OwnMappings:
    """The segment files of a run's cache mapped once more, for their numbers alone: the pages a
    snapshot reads from them are let go with the mapping once gathered (``columns.gather``), where
    the store's mapping, kept for the texts, would keep every page read resident for the run's life."""

    def __init__(self, cache):
        self.cache, self.opened = cache, {}

    def of(self, name: str, table: pa.Table) -> pa.Table:
        """Segment ``name`` (``table``, the store's whole segment) mapped again; ``table`` itself when it
        is held in memory (no name) or the file can't be mapped as it was."""
        if self.cache is None or not name:
            return table
        if name not in self.opened:
            try:
                mapped = self.cache.open_segment(name)
            except (OSError, pa.ArrowException):
                mapped = table
            same = mapped.num_rows == table.num_rows and mapped.schema.equals(table.schema)
            self.opened[name] = mapped if same else table
        return self.opened[name]


#: a cold read's segments' numbers read into memory while the workers still parse (``Numbers``) when they can't
#: be gathered then, at most this many bytes: gathering them after the last range then copies from memory, not
#: page by page from the segment files
NUMBERS_AHEAD_BYTES = 1 << 30
_PAGE = 4096


class Numbers:
    """The numbers of a cold read's segments (``segment_numbers``, through their own mapping: ``_OwnMappings``),
    made as the workers give each range back while the others still parse (``loader.RunLoader._read``), and
    gathered into the run's columns then, in the ranges' order (``columns.Gathering``), so the time after
    the last range does neither. ``take_snapshot`` takes the gathered columns when its parts are those
    segments, in that order (``streams``); else it gathers the parts as before, from the numbers made here or
    made then. A read that is not the run's first (``gather`` false: the cached segments come first) or whose
    gathering stopped (``columns.Gathering``) keeps the numbers made here, their pages read in
    (``NUMBERS_AHEAD_BYTES`` in all).
    Kept until the snapshot is taken, then let go with their mappings."""

    def __init__(self, cache, gather: bool = True):
        self.cache, self.own, self.made, self.ahead = cache, _OwnMappings(cache), {}, 0
        self.waiting: dict[int, tuple[str, pa.Table] | None] = {}  # ranges given back before those ahead of them
        self.next = 0  # the place of the next range to gather
        self.gathering: Gathering | None = Gathering() if gather else None
        self.gathered: list[str] = []  # the segments gathered, in order

    def arrive(self, index: int, segment: tuple[str, pa.Table] | None) -> None:
        """Range ``index`` (its place among the ranges read) was given back: its segment (name, the store's
        table; None: no segment of its own) is gathered once every range before it is."""
        self.waiting[index] = segment
        while self.next in self.waiting:
            found = self.waiting.pop(self.next)
            self.next += 1
            if found is not None:
                self._add(*found)

    def _add(self, name: str, table: pa.Table) -> None:
        if not name or name in self.made:  # (held in memory, or met twice: not gathered here)
            self.gathering = None
            return
        mapped = self.own.of(name, table)
        numbers = segment_numbers(mapped)
        if self.gathering is not None:
            self.gathering.add(numbers)
            if not self.gathering.failed:  # the columns hold its numbers: its mapping let go, its names kept
                self.gathered.append(name)
                self.made[name] = numbers.schema.empty_table()
                self.own.opened.pop(name, None)
                return
            self.gathering = None
        self.made[name] = numbers
        if mapped is not table:
            self._read_in(numbers, set(mapped.schema.names))

    def _read_in(self, numbers: pa.Table, stored: set[str]) -> None:
        """Touch a byte of every page of the columns of ``numbers`` the segment file holds (``stored``), within
        ``NUMBERS_AHEAD_BYTES``: the page cache's pages mapped now (the gather's copy then meets no fault)."""
        for name, column in zip(numbers.schema.names, numbers.columns):
            if name not in stored:
                continue
            for chunk in column.chunks:
                for buffer in chunk.buffers():
                    if buffer is None or not buffer.size:
                        continue
                    if self.ahead + buffer.size > NUMBERS_AHEAD_BYTES:
                        return
                    self.ahead += buffer.size
                    np.frombuffer(buffer, np.uint8)[::_PAGE].max()

    def streams(self, files: dict, names: list[str]) -> bool:
        """Whether the run's parts are the segments gathered here, in that order (every file's segments, none
        shared by small files, all read now)."""
        if self.gathering is None or self.waiting:
            return False
        parts = [(seg_name, table) for name in names for seg_name, _, table in files[name].segments]
        return (len(parts) == len(self.gathered) and not any(isinstance(t, SharedSlice) for _, t in parts)
                and [seg_name for seg_name, _ in parts] == self.gathered)

    def columns(self) -> dict | None:
        """The gathered columns (``columns.Gathering.result``), or None."""
        return self.gathering.result() if self.gathering is not None else None

    def stop(self) -> None:
        """Gather no more here: ``take`` gives every segment's numbers themselves."""
        self.gathering = None

    def take(self, name: str, table: pa.Table) -> pa.Table:
        """The numbers of segment ``name`` (``table``): those made here (given once; a gathered segment's: its
        columns without rows while gathering goes on, else made again), else made now."""
        made = self.made.pop(name, None) if name else None
        if made is not None and (made.num_rows or not table.num_rows or self.gathering is not None):
            return made
        return segment_numbers(self.own.of(name, table))


def segment_numbers(table: pa.Table) -> pa.Table:
    """The numeric columns of a segment (texts and words stay behind); its line numbers count from the
    segment's start, and where its rows live is the part's ``_Places`` (``_with_places``)."""
    return with_one_value_columns(table).drop_columns([*F.TEXT_FIELDS, "token_words", *TURN_COLUMNS])
