"""Read a run folder with the run's reader and merge its files into step-indexed samples.

``RunLoader`` coordinates two rooms: file tracking (``tracking.py``: which files a
run has, how far each was read, which changed) and the segment store
(``segments.py``: where parsed rows live, in the columnar cache of ``cache.py`` or
in memory). A refresh reads only the bytes appended since (never half a line) for
formats that append (JSONL), re-reads a table file (parquet) or any file that
shrank or was replaced, and a restarted app opens an unchanged run from the cache
without parsing it. Each refresh returns a ``Snapshot``; ``analysis.source.RunSource`` makes it
the ``Run`` the views draw from.
"""

from __future__ import annotations

import gc
import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..base.access import RootError, is_url
from ..base.defaults import AUTO, EOS_TOKEN, PAD_TOKEN, bounds_key, max_extra_fields
from ..base.location import RunLocation, as_path, open_location
from ..base.remote import LocationError, fault_line
from ..derive.tokenizer import (
    TokenizerError,
    find_tokenizer,
    load_tokenizer,
    resolve_tokenizer,
    special_tokens,
    stamp,
)
from ..readers import (
    ReadOptions,
    SourceChanged,
    detect,
    layout,
    max_line_bytes,
)
from . import ingest
from .cache import RunCache, cache_dir_for
from .segments import SegmentStore, SharedSlice
from .tracking import (
    EXPECTED_LAYOUT,
    ROOT_RUN,
    FileState,
    FileTracker,
    compressed_twin_notes,
    list_run_files,
    list_runs,
    list_splits,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from .snapshot import Snapshot

__all__ = ["EXPECTED_LAYOUT", "ROOT_RUN", "RootError", "RunLoader", "SourceChanged", "TokenizerError", "list_runs", "list_run_files"]


Progress = Callable[[int, int], None]


def __getattr__(name: str):
    """The snapshot's names this module hands on (``snapshot`` is imported once asked for: a command hands
    out its first range before it)."""
    if name in ("NO_TOKENIZER", "LoadReport", "Snapshot"):
        from . import snapshot

        return getattr(snapshot, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RunLoader:
    """Reads one run folder incrementally; ``refresh()`` returns the newest snapshot.

    A coordinator: the file tracker (``tracking.py``) says which files changed and from which
    byte to read them, the reader parses those bytes, the segment store (``segments.py``) keeps
    the rows, and a snapshot joins every file's segments (``Snapshot``; ``analysis.source.RunSource``
    turns it into a ``Run`` through ``_build``). Longer than the other classes because it is only
    this: its methods are the steps of one refresh (choose the reader and tokenizer, open the cache,
    list, plan, read, save, snapshot) under the locks a refresh holds; the work of each step lives in
    the module that owns it (``tracking``, ``ingest``, ``segments``, ``snapshot``, ``shared``).

    Args:
        run_dir: the folder of the run's files (its format is detected, see ``readers.detect``).
        pad_token: positions at and after its first occurrence are not counted (see ``metrics``);
            ``auto`` (``defaults.AUTO``): the run's tokenizer's (``_choose_tokens``).
        max_per_step: keep the first N samples of each step (file order, then line order).
        cache_root: where caches live (default ``cache.default_cache_root()``); False turns caching off.
        fields: ``(canonical, source)`` pairs of the user's field mapping.
        eos_token: positions after its first occurrence are not counted; it is. ``auto`` as for the pad.
        split: the split to read, for a format that has them (``readers.layout``); None: the
            format's default split when the run has it, else the first.
        tokenizer: the tokenizer that decodes token ids (a ``tokenizer.json`` or a folder holding one);
            None: the one found next to the run (``tokenizer.find_tokenizer``), if any. A given one
            that can't be used raises ``TokenizerError`` (or ``RootError``) on refresh.
        keep_words: the workers also keep each response's words beside its segment (the page, whose findings
            read them at once); else they are found on first use (``store.words``). The cache is the same.
    """

    def __init__(self, run_dir: Path | str | RunLocation, pad_token: str | None = None, max_per_step: int | None = None,
                 cache_root: Path | None | bool = None, fields: tuple[tuple[str, str], ...] = (),
                 eos_token: str | None = None, split: str | None = None, tokenizer: Path | str | None = None,
                 keep_words: bool = False):
        # the run's location, opened at the first refresh (the one check against the allowed folders)
        self.location: RunLocation | None = run_dir if isinstance(run_dir, RunLocation) else None
        self.run_dir = run_dir.path if isinstance(run_dir, RunLocation) else (
            run_dir if is_url(run_dir) else as_path(run_dir))  # a URL: its path once opened at the door
        self.wanted_split = split or None
        self.split: str | None = None  # the split read (chosen when the format is detected)
        self.splits: tuple[str, ...] = ()
        self.options = ReadOptions(pad_token or None, tuple(fields), eos_token or None, max_line_bytes(),
                                   max_extras=max_extra_fields(), keep_words=keep_words)
        self._tokenizer_given = str(tokenizer) if tokenizer else None
        self._tokenizer_notes: list[str] = []
        self._tokenizer_chosen = False
        self.max_per_step = max_per_step
        self._cache_root = cache_root
        self.reader = None
        self._tracker = FileTracker()
        self._notes: list[str] = []
        self._whole_run_notes: list[str] | None = None  # the reader's ``run_notes``, asked once
        self._store = SegmentStore(None, self._notes)
        self._lock = threading.Lock()
        self._opened = False  # the cache's manifest was read into the tracker
        self.last_status: dict[str, str] = {}  # file -> "cached", "appended", "parsed" or "unchanged"
        self.latest = None  # what the last refresh returned
        self._numbers = None  # the numbers of the segments a read made (``numbers.Numbers``), until its snapshot

    @property
    def pad_token(self) -> str | None:
        return self.options.pad_token

    @property
    def _files(self) -> dict[str, FileState]:
        return self._tracker.files

    # what a snapshot is taken from (``snapshot.take_snapshot``), read-only
    @property
    def file_states(self) -> Mapping[str, FileState]:
        """Each file of the run (its name in the run) -> how far it was read, its segments and errors."""
        return MappingProxyType(self._tracker.files)

    @property
    def notes(self) -> tuple[str, ...]:
        """The loader's own notes on the read so far (the cache's, the shared cache's)."""
        return tuple(self._notes)

    @property
    def tokenizer_notes(self) -> tuple[str, ...]:
        """Why the tokenizer found beside the run was not used (empty when it was, or none was found)."""
        return tuple(self._tokenizer_notes)

    @property
    def cache(self) -> RunCache | None:
        """The run's cache folder, None when the run is read without one."""
        return self._store.cache

    @property
    def _quota(self) -> dict[int, int]:
        return self._tracker.quota

    def _use_reader(self) -> None:
        """Detect the run's format (again while no file was read: the folder may have been empty)."""
        if self.location is None:
            self.location = open_location(self.run_dir)
            if self.location.is_url:
                self.run_dir = self.location.path
        if not self.location.path.is_dir():  # before a cache folder is named or made for it
            raise RootError(f"Run folder not found: {self.location.path}. " + EXPECTED_LAYOUT)
        if not self._tokenizer_chosen:
            self._choose_tokenizer()
        reader = detect(self.run_dir)
        if reader is self.reader:
            return
        self.reader, self._opened, self._whole_run_notes = reader, False, None
        self._tracker.forget()
        self.splits = tuple(list_splits(self.location, reader))
        self.split = layout.choose_split(reader, list(self.splits), self.wanted_split)
        use_cache = self._cache_root is not False and self.max_per_step is None
        cache = RunCache(cache_dir_for(self.run_dir, self._cache_key(),
                                       None if self._cache_root in (None, True) else self._cache_root)
                         ) if use_cache else None
        self._store = SegmentStore(cache, self._notes, self._shared_cache() if cache is not None else None)

    def _shared_cache(self):
        """The team's cache at a URL (``RL_BOARD_CACHE_DIR=s3://…``) when this run uses the default cache
        root, else None; one that can't be used is a note, and the local cache works alone."""
        if self._cache_root not in (None, True):
            return None
        from .shared import SharedCache

        try:
            return SharedCache.from_env()
        except RootError as exc:
            self._notes.append(f"Could not use the shared cache: {exc} The local cache was used.")
            return None

    def _choose_tokenizer(self) -> None:
        """Put the given tokenizer, else the one found next to the run, in the read options."""
        if self._tokenizer_given is not None:
            path = resolve_tokenizer(self._tokenizer_given)
            load_tokenizer(str(path))  # a file that is no tokenizer: TokenizerError now, not per block
        else:
            path = find_tokenizer(self.location)
            if path is not None:
                try:
                    load_tokenizer(str(path))
                except TokenizerError as exc:  # one note: this file, what is wrong, what to do
                    self._tokenizer_notes = [f"{exc}: token ids are shown as #ID. Replace it, or give another "
                                             "tokenizer: the sidebar's Tokenizer box, or --tokenizer PATH on the "
                                             "command line."]
                    path = None
        self.options = replace(self.options, tokenizer=str(path) if path is not None else None)
        self._choose_tokens()
        self._tokenizer_chosen = True

    def _choose_tokens(self) -> None:
        """Put the pad and EOS tokens asked for as ``auto`` in the read options: the run's tokenizer's
        (``special_tokens``: its tokenizer_config.json), else the defaults (``<|endoftext|>``)."""
        pad, eos = self.options.pad_token, self.options.eos_token
        if AUTO not in (pad, eos):
            return
        found = special_tokens(self.options.tokenizer) or (PAD_TOKEN, EOS_TOKEN)
        self.options = replace(self.options, pad_token=found[0] if pad == AUTO else pad,
                               eos_token=found[1] if eos == AUTO else eos)

    @property
    def tokenizer(self) -> str | None:
        """The tokenizer file the run's token ids are decoded with, once chosen (see ``__init__``)."""
        return self.options.tokenizer

    def _cache_key(self) -> str:
        split = f":split={self.split}" if self.split is not None else ""
        key = f"{self.reader.NAME}{split}:{self.options.cache_key()}{bounds_key()}"
        return key + f":{stamp(self.options.tokenizer)}" if self.options.tokenizer else key

    #: modules the snapshot needs (pandas among them), imported in a thread while workers parse a
    #: cold read, so a command does not wait for them before its read starts
    SNAPSHOT_MODULES: tuple[str, ...] = ()

    def _build(self, snapshot: Snapshot):
        """What ``refresh`` returns for ``snapshot`` (the snapshot itself here)."""
        return snapshot

    def _import_snapshot_modules(self) -> None:
        """Import ``SNAPSHOT_MODULES`` in a thread (the caller goes on; a later import waits for it)."""
        def load():
            for module in self.SNAPSHOT_MODULES:
                importlib.import_module(module)

        threading.Thread(target=load, name="rl-board-imports", daemon=True).start()

    def refresh(self, progress: Progress | None = None):
        """Read what is new in every file (all of it the first time) and return the run as it is now.
        A run at a URL whose store fails (unreachable, refused, gone) raises ``LocationError``: one
        line naming the URL; nothing half-read is cached."""
        with self._lock:
            try:
                if self.reader is None or not self._files:
                    self._use_reader()
                with self._store.shared() as changed:
                    if changed and self._opened:  # another process rewrote the cache: start from its manifest
                        self._tracker.forget()
                        self._opened = False
                    return self._refresh(progress)
            except RootError:
                raise
            except Exception as exc:  # a store's own errors (botocore's, aiohttp's) are many kinds
                if self.location is None or not self.location.is_url:
                    raise
                self._tracker.forget()
                self._opened = False
                raise LocationError(fault_line(self.location.path, exc)) from exc

    def clear_cache(self) -> None:
        """Delete this run's cache (once no other process is using it); the next refresh parses again."""
        with self._lock:
            self._store.empty()
            self._tracker.forget()
            self._opened, self.latest = False, None

    def _refresh(self, progress: Progress | None):
        """The refresh itself, under both locks."""
        enabled = gc.isenabled()
        gc.disable()  # a run of 100,000 files makes ~10 objects a file, none in a cycle: collecting only costs
        try:
            return self._refresh_now(progress)
        finally:
            self._numbers = None  # (a read that failed before its snapshot: its numbers and columns let go)
            if enabled:
                gc.enable()

    def _refresh_now(self, progress: Progress | None):
        listing = self._tracker.list(self.location, self.reader, self.split)
        names, ignored, unreadable = listing.names, listing.ignored, listing.unreadable
        self.last_status = {}
        reopened = not self._opened  # the files' states come from the cache's manifest (another process may have
        if reopened:  # rewritten it): the last snapshot is not theirs
            self._open_cache(listing)
            self._opened = True
        self._tracker.retry_missing(self.reader)
        plan = self._tracker.plan(listing, self.reader.APPENDABLE, self.max_per_step, self.latest is not None)
        for name, status in plan.status.items():
            if status == "unchanged":
                self.last_status.setdefault(name, status)
            else:
                self.last_status[name] = status
        unchanged = (self.latest is not None and not reopened and not plan.todo and not plan.gone and not unreadable
                     and self.latest.report.files == tuple(names)
                     and self.latest.report.ignored_files == tuple(ignored))
        if unchanged:  # an idle auto-refresh costs a stat per file, nothing more
            return self.latest
        self._read(plan.todo, progress)
        if plan.todo or plan.gone or plan.settled:
            entries = {name: s.entry for name, s in self._files.items() if s.entry is not None}
            self._store.save(entries, self._cache_key(), self.run_dir)
        notes = [f"{name} was truncated, rewritten or replaced since it was read: read it again from the start."
                 for name in plan.reread] + compressed_twin_notes(names, ignored) + self._run_notes_of(names)
        self.latest = self._snapshot(names, ignored, unreadable, notes)
        return self.latest

    def _open_cache(self, listing) -> None:
        """Start every file the cache holds from where the cache says it was read."""
        by_name = dict(zip(listing.names, listing.paths))
        for name, (entry, segments) in self._store.load(self._cache_key(), list(by_name.items()),
                                                        self.reader.APPENDABLE, self._rows_match_logs).items():
            self._files[name] = FileState.from_entry(by_name[name], entry, segments)
            self.last_status[name] = "cached"

    def _rows_match_logs(self, found: dict, paths: dict) -> str | None:
        """Why a copy pulled from the shared cache can't be taken (its rows are not this run's logs), or None."""
        from .ingest import ingest_whole
        from .ranges import ingest_range
        from .shared import rows_match_logs

        return rows_match_logs(found, paths, self.reader, self.options, self.location, ingest_range, ingest_whole)

    def _read(self, todo: list[tuple[FileState, int]], progress: Progress | None) -> None:
        """Read bytes [offset, size) of each file (up to its last newline, for JSONL) and store
        the segments."""
        self._tracker.skip_late_newlines(todo)
        tasks = [(state.path, state.offset, size) for state, size in todo if size > state.offset]
        if not tasks:
            return
        out_dir, keep = self._store.out_dir()
        total, done = sum(b - a for _, a, b in tasks), [0]
        cold = not any(state.segments for state in self._files.values())  # every row of the run read now
        opened: dict[str, tuple[str, pa.Table]] = {}  # a segment small files share is opened once

        def advance(n: int) -> None:
            done[0] += n
            if progress is not None:
                progress(done[0], total)

        def arrived(index: int, result) -> None:  # a range given back while the others are read: its segment
            # (in the cache) opened and its numbers made and gathered now rather than after the last range (a
            # segment's name is its bytes' digest)
            written = result.segment is not None and not result.error
            if written and result.segment not in opened:
                opened[result.segment] = self._store.open(result.segment, out_dir, keep)
            own = written and result.span is None  # (not a part of a segment small files share)
            self._numbers_made(cold).arrive(index, opened[result.segment] if own else None)

        def parse(out_dir: str | None):  # out_dir None: keep the rows in memory
            # while workers parse, import what the snapshot needs
            return ingest.read(self.reader, tasks, out_dir, self.options, self._quota, self.max_per_step, advance,
                               meanwhile=self._import_snapshot_modules, location=self.location,
                               publish=self._store.publish_url() if out_dir is not None and keep else None,
                               arrived=arrived if out_dir is not None and keep else None)

        try:
            results = parse(out_dir)
        except OSError as exc:  # a full disk, a size limit: read again, keeping the rows in memory (a URL's
            # read failing is a LocationError, never taken for a full disk)
            self._store.write_failed(out_dir, exc, self._cache_key())
            out_dir, keep, done[0] = None, False, 0
            opened.clear()
            self._numbers = None
            results = parse(None)
        self._check_unchanged(todo)
        by_path = {str(state.path): state for state, _ in todo}
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

    def _numbers_made(self, cold: bool):
        """The numbers of the segments read since the last snapshot (``numbers.Numbers``), gathered as they
        come when the read is ``cold`` (the run's every row read now)."""
        if self._numbers is None or self._numbers.cache is not self.cache:
            from .numbers import Numbers

            self._numbers = Numbers(self.cache, gather=cold)
        return self._numbers

    def take_numbers(self):
        """The numbers made while the segments were read (``numbers.Numbers``, or None), given once."""
        made, self._numbers = self._numbers, None
        return made

    def _check_unchanged(self, todo: list[tuple[FileState, int]]) -> None:
        """A URL's object replaced while its ranges were read (another ETag than when it was listed):
        ``LocationError`` before anything of the read is kept."""
        if any(state.planned_etag for state, _ in todo):
            self.location.invalidate()  # the object as it is now, not as it was listed
        for state, _ in todo:
            before = state.planned_etag
            if before:
                after = getattr(state.path.stat(), "etag", "")
                if after != before:
                    raise LocationError(f"{state.path}: the object was replaced while it was read (ETag "
                                        f"{before} then {after}); nothing of it was kept: open the run again.")


    def _run_notes_of(self, names: list[str]) -> list[str]:
        """The reader's notes on the whole run (its optional ``run_notes(run_dir, names)``: what its folder says,
        a verl VLM run's missing images), asked once the run has files."""
        hook = getattr(self.reader, "run_notes", None)
        if hook is None or not names:
            return []
        if self._whole_run_notes is None:
            self._whole_run_notes = list(hook(self.run_dir, names))
        return self._whole_run_notes

    def _snapshot(self, names: list[str], ignored: list[str], unreadable: dict[str, str], notes: list[str] = ()):
        from .snapshot import take_snapshot

        return self._build(take_snapshot(self, names, ignored, unreadable, notes))
