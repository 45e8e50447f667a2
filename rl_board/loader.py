"""Read a run folder with the run's reader and merge its files into step-indexed samples.

``RunSource`` coordinates two rooms: file tracking (``tracking.py``: which files a
run has, how far each was read, which changed) and the segment store
(``segments.py``: where parsed rows live, in the columnar cache of ``cache.py`` or
in memory). A refresh reads only the bytes appended since (never half a line) for
formats that append (JSONL), re-reads a table file (parquet) or any file that
shrank or was replaced, and a restarted app opens an unchanged run from the cache
without parsing it. Each refresh returns a ``Run`` (``run.py``): an immutable
snapshot the views draw from.
"""

from __future__ import annotations

import gc
import importlib
import threading
from itertools import chain
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import fields as F
from . import ingest
from .access import RootError, check_allowed
from .cache import RunCache, cache_dir_for
from .readers import ReadOptions, SourceChanged, describe_size, detect, layout, max_extra_fields, max_line_bytes
from .derive import SCHEMA, TURN_COLUMNS
from .readers.extras import FieldNotes, first_met, merged_notes
from .readers.notes import notes_of
from .segments import SegmentStore, SharedSlice
from .tokenizer import TokenizerError, find_tokenizer, load_tokenizer, resolve_tokenizer, stamp
from .tracking import (EXPECTED_LAYOUT, ROOT_RUN, FileState, FileTracker, list_run_files, list_runs, list_splits,
                       natural_key)

if TYPE_CHECKING:
    from .run import LoadReport, Run

# The snapshot's modules (pandas among them) are imported when first used, or in a thread while
# workers parse a cold read: a command then does not wait for them before its read starts.
_SNAPSHOT_MODULES = ("rl_board.run", "rl_board.tables")


def __getattr__(name: str):
    if name in ("Run", "LoadReport"):
        return getattr(importlib.import_module("rl_board.run"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _import_snapshot_modules() -> None:
    """Import the snapshot's modules in a thread (the caller goes on; a later import waits for it)."""
    def load():
        for module in _SNAPSHOT_MODULES:
            importlib.import_module(module)

    threading.Thread(target=load, name="rl-board-imports", daemon=True).start()


__all__ = ["EXPECTED_LAYOUT", "ROOT_RUN", "RootError", "Run", "LoadReport", "RunSource", "SourceChanged",
           "TokenizerError", "list_runs", "list_run_files", "load_run"]

#: What the page and the commands say when a run's token ids can't be decoded.
NO_TOKENIZER = ("Token ids are shown as #ID: no tokenizer was found next to the run. Put its tokenizer.json (or "
                "the model folder holding one) in the run folder or up to two folders above it, or give it: the "
                "sidebar's Tokenizer box, or --tokenizer PATH on the command line.")

Progress = Callable[[int, int], None]


class RunSource:
    """Reads one run folder incrementally; ``refresh()`` returns the newest ``Run``.

    A coordinator: the file tracker (``tracking.py``) says which files changed and from which
    byte to read them, the reader parses those bytes, the segment store (``segments.py``) keeps
    the rows, and a snapshot joins every file's segments into a ``Run``.

    Args:
        run_dir: the folder of the run's files (its format is detected, see ``readers.detect``).
        pad_token: positions at and after its first occurrence are not counted (see ``metrics``).
        max_per_step: keep the first N samples of each step (file order, then line order).
        cache_root: where caches live (default ``cache.default_cache_root()``); False turns caching off.
        fields: ``(canonical, source)`` pairs of the user's field mapping.
        eos_token: positions after its first occurrence are not counted; it is.
        split: the split to read, for a format that has them (``readers.layout``); None: the
            format's default split when the run has it, else the first.
        tokenizer: the tokenizer that decodes token ids (a ``tokenizer.json`` or a folder holding one);
            None: the one found next to the run (``tokenizer.find_tokenizer``), if any. A given one
            that can't be used raises ``TokenizerError`` (or ``RootError``) on refresh.
    """

    def __init__(self, run_dir: Path | str, pad_token: str | None = None, max_per_step: int | None = None,
                 cache_root: Path | None | bool = None, fields: tuple[tuple[str, str], ...] = (),
                 eos_token: str | None = None, split: str | None = None, tokenizer: Path | str | None = None):
        self.run_dir = Path(run_dir)
        self.wanted_split = split or None
        self.split: str | None = None  # the split read (chosen when the format is detected)
        self.splits: tuple[str, ...] = ()
        self.options = ReadOptions(pad_token or None, tuple(fields), eos_token or None, max_line_bytes(),
                                   max_extras=max_extra_fields())
        self._tokenizer_given = str(tokenizer) if tokenizer else None
        self._tokenizer_notes: list[str] = []
        self._tokenizer_chosen = False
        self.max_per_step = max_per_step
        self._cache_root = cache_root
        self.reader = None
        self._tracker = FileTracker()
        self._notes: list[str] = []
        self._store = SegmentStore(None, self._notes)
        self._lock = threading.Lock()
        self._opened = False  # the cache's manifest was read into the tracker
        self.last_status: dict[str, str] = {}  # file -> "cached", "appended", "parsed" or "unchanged"
        self.latest: Run | None = None  # what the last refresh returned

    @property
    def pad_token(self) -> str | None:
        return self.options.pad_token

    @property
    def _files(self) -> dict[str, FileState]:
        return self._tracker.files

    @property
    def _quota(self) -> dict[int, int]:
        return self._tracker.quota

    def _use_reader(self) -> None:
        """Detect the run's format (again while no file was read: the folder may have been empty)."""
        check_allowed(self.run_dir)
        if not self._tokenizer_chosen:
            self._choose_tokenizer()
        reader = detect(self.run_dir)
        if reader is self.reader:
            return
        self.reader, self._opened = reader, False
        self._tracker.forget()
        self.splits = tuple(list_splits(self.run_dir, reader))
        self.split = layout.choose_split(reader, list(self.splits), self.wanted_split)
        use_cache = self._cache_root is not False and self.max_per_step is None
        cache = RunCache(cache_dir_for(self.run_dir, self._cache_key(),
                                       None if self._cache_root in (None, True) else self._cache_root)
                         ) if use_cache else None
        self._store = SegmentStore(cache, self._notes)

    def _choose_tokenizer(self) -> None:
        """Put the given tokenizer, else the one found next to the run, in the read options."""
        if self._tokenizer_given is not None:
            path = resolve_tokenizer(self._tokenizer_given)
            load_tokenizer(str(path))  # a file that is no tokenizer: TokenizerError now, not per block
        else:
            path = find_tokenizer(self.run_dir)
            if path is not None:
                try:
                    load_tokenizer(str(path))
                except TokenizerError as exc:  # one note: this file, what is wrong, what to do
                    self._tokenizer_notes = [f"{exc}: token ids are shown as #ID. Replace it, or give another "
                                             "tokenizer: the sidebar's Tokenizer box, or --tokenizer PATH on the "
                                             "command line."]
                    path = None
        self.options = replace(self.options, tokenizer=str(path) if path is not None else None)
        self._tokenizer_chosen = True

    @property
    def tokenizer(self) -> str | None:
        """The tokenizer file the run's token ids are decoded with, once chosen (see ``__init__``)."""
        return self.options.tokenizer

    def _cache_key(self) -> str:
        split = f":split={self.split}" if self.split is not None else ""
        key = f"{self.reader.NAME}{split}:{self.options.to_json()}"
        return key + f":{stamp(self.options.tokenizer)}" if self.options.tokenizer else key

    def refresh(self, progress: Progress | None = None) -> Run:
        """Read what is new in every file (all of it the first time) and return the run as it is now."""
        with self._lock:
            if self.reader is None or not self._files:
                self._use_reader()
            with self._store.shared() as changed:
                if changed and self._opened:  # another process rewrote the cache: start from its manifest
                    self._tracker.forget()
                    self._opened = False
                return self._refresh(progress)

    def clear_cache(self) -> None:
        """Delete this run's cache (once no other process is using it); the next refresh parses again."""
        with self._lock:
            self._store.empty()
            self._tracker.forget()
            self._opened, self.latest = False, None

    def _refresh(self, progress: Progress | None) -> Run:
        """The refresh itself, under both locks."""
        enabled = gc.isenabled()
        gc.disable()  # a run of 100,000 files makes ~10 objects a file, none in a cycle: collecting only costs
        try:
            return self._refresh_now(progress)
        finally:
            if enabled:
                gc.enable()

    def _refresh_now(self, progress: Progress | None) -> Run:
        listing = self._tracker.list(self.run_dir, self.reader, self.split)
        names, ignored, unreadable = listing.names, listing.ignored, listing.unreadable
        self.last_status = {}
        if not self._opened:
            self._open_cache(listing)
            self._opened = True
        plan = self._tracker.plan(listing, self.reader.APPENDABLE, self.max_per_step, self.latest is not None)
        for name, status in plan.status.items():
            if status == "unchanged":
                self.last_status.setdefault(name, status)
            else:
                self.last_status[name] = status
        unchanged = (self.latest is not None and not plan.todo and not plan.gone and not unreadable
                     and self.latest.report.files == tuple(names)
                     and self.latest.report.ignored_files == tuple(ignored))
        if unchanged:  # an idle auto-refresh costs a stat per file, nothing more
            return self.latest
        self._read(plan.todo, progress)
        if plan.todo or plan.gone or plan.settled:
            entries = {name: s.entry for name, s in self._files.items() if s.entry is not None}
            self._store.save(entries, self._cache_key(), self.run_dir)
        notes = [f"{name} was truncated, rewritten or replaced since it was read: read it again from the start."
                 for name in plan.reread]
        self.latest = self._snapshot(names, ignored, unreadable, notes)
        return self.latest

    def _open_cache(self, listing) -> None:
        """Start every file the cache holds from where the cache says it was read."""
        by_name = dict(zip(listing.names, listing.paths))
        for name, (entry, segments) in self._store.load(self._cache_key(), list(by_name.items()),
                                                        self.reader.APPENDABLE).items():
            self._files[name] = FileState.from_entry(by_name[name], entry, segments)
            self.last_status[name] = "cached"

    def _read(self, todo: list[tuple[FileState, int]], progress: Progress | None) -> None:
        """Read bytes [offset, size) of each file (up to its last newline, for JSONL) and store
        the segments."""
        self._tracker.skip_late_newlines(todo)
        tasks = [(state.path, state.offset, size) for state, size in todo if size > state.offset]
        if not tasks:
            return
        out_dir, keep = self._store.out_dir()
        total, done = sum(b - a for _, a, b in tasks), [0]

        def advance(n: int) -> None:
            done[0] += n
            if progress is not None:
                progress(done[0], total)

        def parse(out_dir: str | None):  # out_dir None: keep the rows in memory
            # while workers parse, import what the snapshot needs
            return ingest.read(self.reader, tasks, out_dir, self.options, self._quota, self.max_per_step, advance,
                               meanwhile=_import_snapshot_modules)

        try:
            results = parse(out_dir)
        except OSError as exc:  # a full disk, a size limit: read again, keeping the rows in memory
            self._store.write_failed(out_dir, exc, self._cache_key())
            out_dir, keep, done[0] = None, False, 0
            results = parse(None)
        by_path = {str(state.path): state for state, _ in todo}
        opened: dict[str, tuple[str, pa.Table]] = {}  # a segment small files share is opened once
        for result in results:
            name, table = "", result.table
            if result.segment is not None:
                if result.segment not in opened:
                    opened[result.segment] = self._store.open(result.segment, out_dir, keep)
                name, table = opened[result.segment]
            if result.span is not None:
                table = SharedSlice(table, *result.span)
            by_path[result.path].take(result, table, name)
        for state, _ in todo:
            self._store.compact(state.segments, out_dir, keep)
            state.describe()

    # -- the snapshot ---------------------------------------------------------------------------

    def _snapshot(self, names: list[str], ignored: list[str], unreadable: dict[str, str],
                  notes: list[str] = ()) -> Run:
        from .run import LoadReport, Run
        from .tables import compute_step_stats

        parts, segments, group = [], {}, None  # group: consecutive parts of one shared segment
        grouped = False
        for file_index, name in enumerate(names):
            for seg_index, (_, first_line, table) in enumerate(self._files[name].segments):
                if isinstance(table, SharedSlice):  # its rows are read from the whole segment: "row" is there
                    segments[(file_index, seg_index)] = table.parent
                    if group is not None and group.follows(table):
                        group.add(table.num_rows, first_line, file_index, seg_index)
                        continue
                if group is not None:
                    parts.append(group.numbers())
                    group = None
                if isinstance(table, SharedSlice):
                    grouped = True
                    group = _Group(table.parent, table.start)
                    group.add(table.num_rows, first_line, file_index, seg_index)
                else:
                    segments[(file_index, seg_index)] = table
                    parts.append(_numbers(table, first_line, file_index, seg_index))
        if group is not None:
            parts.append(group.numbers())
        parts, field_notes = _cap_extras(parts, self.options.max_extras)
        file_notes = [f"{name}: {note}" for name in names for _, _, table in self._files[name].segments
                      if not isinstance(table, SharedSlice) for note in notes_of(table)]
        numbers = (pa.concat_tables(parts, promote_options="default") if parts
                   else _numbers(SCHEMA.empty_table(), 1, 0, 0))
        if grouped:
            numbers = _extras_in_file_order(numbers)
        samples = numbers.to_pandas().sort_values([F.STEP, F.FILE, F.LINE], kind="stable", ignore_index=True)
        skipped = sum(s.skipped for s in self._files.values())
        if self.max_per_step is not None:
            before = len(samples)
            samples = samples.groupby(F.STEP, sort=False).head(self.max_per_step).reset_index(drop=True)
            skipped += before - len(samples)
        samples["reward_gap"] = samples[F.REWARD] - samples["ref_reward"]
        errors = tuple((name, line, reason) for name in names for line, reason in self._files[name].errors)
        failed = {**unreadable, **{n: self._files[n].error for n in names if self._files[n].error}}
        failed = tuple((name, failed[name]) for name in sorted(failed, key=natural_key))
        if "from_ids" in samples and samples["from_ids"].any():
            if self.options.tokenizer:
                notes = [*notes, f"Token ids decoded with {self.options.tokenizer}."]
            else:  # the found tokenizer's problem, or that none was found: never both
                notes = [*notes, *(self._tokenizer_notes or [NO_TOKENIZER])]
        notes = [*notes, *file_notes, *field_notes.messages(self.options.max_extras),
                 *(f"Could not read {name} ({why}); the other files loaded." for name, why in failed),
                 *(f"{name} ends in {describe_size(self._files[name].long_tail)} without a newline, more than the "
                   f"line limit of {describe_size(self.options.max_line)}: it is not read (set RL_BOARD_MAX_LINE_MB)."
                   for name in names if self._files[name].long_tail)]
        report = LoadReport(
            files=tuple(names), lines_ok=len(samples), lines_bad=len(errors), errors=errors, skipped=skipped,
            ignored_files=tuple(ignored), pending=tuple(n for n in names if self._files[n].pending),
            notes=tuple(self._notes + notes), unreadable=failed, reader=self.reader.NAME,
            tokenizer_problem=self._tokenizer_notes[0] if self._tokenizer_notes else None,
        )
        cache = self._store.cache
        stamp = cache.manifest_stamp() if cache is not None else None
        return Run(self.run_dir, tuple(names), samples, compute_step_stats(samples), report, self.options,
                   segments, self.reader, (cache.folder, stamp) if stamp is not None else None,
                   self.split, self.splits)


def undecoded_note(report: LoadReport) -> str:
    """What the page says by token ids shown as #ID: the found tokenizer's problem, else how to give one."""
    return report.tokenizer_problem or NO_TOKENIZER


def _cap_extras(parts: list[pa.Table], limit: int) -> tuple[list[pa.Table], FieldNotes]:
    """(``parts``, the run's segments in file order, with the first ``limit`` extra fields met kept and
    the others dropped; what became of the run's field names: renamed, and dropped here or while read)."""
    notes = merged_notes(parts)
    columns = set(chain.from_iterable(F.extra_columns(part.column_names) for part in parts))
    if len(columns) > limit:
        met = list(dict.fromkeys(chain.from_iterable(first_met(part) for part in parts)))
        over = set(met[limit:])
        parts = [part.drop_columns([c for c in part.column_names if c in over]) for part in parts]
        known = set(notes.dropped)
        notes.drop(F.extra_name(c) for c in met[limit:] if F.extra_name(c) not in known)
        columns = set(met[:limit])
    kept = [name for name in notes.dropped if F.extra_column(name) in columns]  # dropped in one file only
    if kept:
        notes.dropped = [name for name in notes.dropped if F.extra_column(name) not in columns]
        notes.dropped_count -= len(kept)
    return parts, notes


def _extras_in_file_order(numbers: pa.Table) -> pa.Table:
    """``numbers`` with its extra-field columns where reading each file on its own puts them: a file's new
    ones after those of the files before it, by name (the first file's before ``file``, ``seg`` and
    ``row``). A shared segment holds the extras of all its files, by name: without this, a run read in
    batches would list its extras in another order than the same run read file by file."""
    extras = F.extra_columns(numbers.column_names)
    if not extras:
        return numbers
    files = numbers[F.FILE].to_numpy()
    first = {}
    for column in extras:
        row = pc.index(pc.is_valid(numbers[column]), True).as_py()
        first[column] = int(files[row]) if row >= 0 else len(files)
    start = int(files[0]) if len(files) else 0
    where = ["file", "seg", "row"]
    base = [c for c in numbers.column_names if c not in first and c not in where]
    own = sorted(c for c in extras if first[c] == start)
    later = sorted((c for c in extras if first[c] != start), key=lambda c: (first[c], c))
    return numbers.select(base + own + where + later)


class _Group:
    """Rows [start, end) of a segment several small files share, each file's part in turn: their
    numbers are made at once (``_numbers`` per part costs a table each, 100,000 of them for a
    run of 100,000 one-line files). Their ``row`` is the row in the whole segment."""

    def __init__(self, parent: pa.Table, start: int):
        self.parent, self.start, self.end = parent, start, start
        self.rows, self.first_lines, self.files, self.segs = [], [], [], []

    def follows(self, part: SharedSlice) -> bool:
        return part.parent is self.parent and part.start == self.end

    def add(self, rows: int, first_line: int, file_index: int, seg_index: int) -> None:
        self.end += rows
        self.rows.append(rows)
        self.first_lines.append(first_line)
        self.files.append(file_index)
        self.segs.append(seg_index)

    def numbers(self) -> pa.Table:
        rows = np.asarray(self.rows, np.int64)
        numbers = self.parent.slice(self.start, self.end - self.start).drop_columns(
            [*F.TEXT_FIELDS, "words", *TURN_COLUMNS])
        line = numbers.schema.get_field_index(F.LINE)
        numbers = numbers.set_column(line, F.LINE, pa.array(
            numbers[F.LINE].to_numpy() + np.repeat(np.asarray(self.first_lines, np.int64) - 1, rows)))
        return (numbers.append_column(F.FILE, pa.array(np.repeat(np.asarray(self.files, np.int64), rows)))
                .append_column("seg", pa.array(np.repeat(np.asarray(self.segs, np.int64), rows)))
                .append_column("row", pa.array(np.arange(self.start, self.end, dtype=np.int64))))


def _numbers(table: pa.Table, first_line: int, file_index: int, seg_index: int) -> pa.Table:
    """The numeric columns of a segment (texts and words stay behind), line numbers made absolute
    (segments count lines from their own start), and where each row lives: file, seg, row."""
    rows = table.num_rows
    numbers = table.drop_columns([*F.TEXT_FIELDS, "words", *TURN_COLUMNS])
    numbers = numbers.set_column(numbers.schema.get_field_index(F.LINE), F.LINE,
                                 pc.add(numbers[F.LINE], first_line - 1))
    return (numbers.append_column(F.FILE, pa.array(np.full(rows, file_index, dtype=np.int64)))
            .append_column("seg", pa.array(np.full(rows, seg_index, dtype=np.int64)))
            .append_column("row", pa.array(np.arange(rows, dtype=np.int64))))


def load_run(run_dir: Path | str, pad_token: str | None = None, max_per_step: int | None = None,
             cache_root: Path | None | bool = None, progress: Progress | None = None,
             fields: tuple[tuple[str, str], ...] = (), eos_token: str | None = None,
             split: str | None = None, tokenizer: Path | str | None = None) -> Run:
    """Read a run folder once and return it (``RunSource(...).refresh()``)."""
    return RunSource(run_dir, pad_token, max_per_step, cache_root, fields, eos_token, split,
                     tokenizer).refresh(progress)
