"""Find runs, read their files with the run's reader, and merge them into step-indexed samples.

``RunSource`` owns the reading: it remembers how far each file was read, so a
refresh reads only the bytes appended since (never half a line) for formats that
append (JSONL), re-reads a table file (parquet) or any file that shrank or was
replaced, and keeps a columnar cache (see ``cache.py``) so a restarted app opens
an unchanged run without parsing it. Each refresh returns a ``Run``
(``run.py``): an immutable snapshot the views draw from.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import fields as F
from .access import RootError, allowed_roots, check_allowed, is_allowed
from .cache import FileEntry, RunCache, cache_dir_for, enforce_limit
from . import ingest
from .derive import SCHEMA, is_segment_schema
from .ingest import write_segment
from .readers import ReadOptions, SourceChanged, detect, known_suffixes
from .run import LoadReport, Run
from .tables import compute_step_stats

__all__ = ["ROOT_RUN", "RootError", "Run", "LoadReport", "RunSource", "SourceChanged", "list_runs",
           "list_run_files", "load_run"]

ROOT_RUN = "."  # the run name of files lying directly in the root
EXPECTED_LAYOUT = (
    "Expected layout: ROOT/RUN_NAME/*.jsonl or ROOT/RUN_NAME/*.parquet, one folder per run: JSON lines, one "
    "object per line (e.g. rollout_data_rank0.jsonl per rank, or verl's {step}.jsonl), or TRL's "
    "completions_*.parquet."
)
Progress = Callable[[int, int], None]
SMALL_SEGMENT_BYTES = 4 << 20  # a segment covering fewer log bytes came from a live refresh, not a cold read
MAX_SMALL_SEGMENTS = 8  # past this many small segments at a file's end, they are merged


def _natural_key(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _holds_run(folder: Path) -> bool:
    suffixes = known_suffixes()
    try:
        return any(p.suffix in suffixes and p.is_file() for p in folder.iterdir())
    except OSError:
        return False


def _allowed_entries(folder: Path) -> list[Path]:
    """The entries of ``folder`` that resolve inside the allowed folders (all when unrestricted)."""
    roots = allowed_roots()
    return [p for p in folder.iterdir() if roots is None or is_allowed(p, roots)]


def list_runs(root: Path | str) -> list[str]:
    """Run names under ``root``: its subfolders holding run files ("." for files in root itself)."""
    root = Path(root).expanduser()
    check_allowed(root)  # before anything under it is looked at
    if not root.exists():
        raise RootError(f"Folder not found: {root}. " + EXPECTED_LAYOUT)
    if not root.is_dir():
        raise RootError(f"{root} is a file, not a folder. " + EXPECTED_LAYOUT)
    runs = sorted((d.name for d in _allowed_entries(root)
                   if d.is_dir() and not d.name.startswith(".") and _holds_run(d)), key=_natural_key)
    if _holds_run(root):
        runs.insert(0, ROOT_RUN)
    if not runs:
        raise RootError(f"No runs in {root}: no subfolder holds .jsonl or .parquet files. " + EXPECTED_LAYOUT)
    return runs


def list_run_files(run_dir: Path, suffix: str = ".jsonl") -> tuple[list[Path], list[str]]:
    """(the run's files ending in ``suffix``, in natural name order; names of other files ignored)."""
    check_allowed(run_dir)
    if not run_dir.is_dir():
        raise RootError(f"Run folder not found: {run_dir}. " + EXPECTED_LAYOUT)
    entries = [p for p in _allowed_entries(run_dir) if p.is_file() and not p.name.startswith(".")]
    kept = sorted((p for p in entries if p.suffix == suffix), key=lambda p: _natural_key(p.name))
    return kept, sorted(p.name for p in entries if p.suffix != suffix)


class _FileState:
    """How far one file was read, and the segments parsed from it: (file name in the cache or "",
    number of its first line, table)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.next_line = 1
        self.errors: list[tuple[int, str]] = []
        self.skipped = 0
        self.segments: list[tuple[str, int, pa.Table]] = []
        self.entry: FileEntry | None = None
        self.pending = False
        self.error: str | None = None  # why the whole file could not be read
        self.unterminated = False  # the last line read had no newline: skip one if it comes


class RunSource:
    """Reads one run folder incrementally; ``refresh()`` returns the newest ``Run``.

    Args:
        run_dir: the folder of the run's files (its format is detected, see ``readers.detect``).
        pad_token: positions at and after its first occurrence are not counted (see ``metrics``).
        max_per_step: keep the first N samples of each step (file order, then line order).
        cache_root: where caches live (default ``cache.default_cache_root()``); False turns caching off.
        fields: ``(canonical, source)`` pairs of the user's field mapping.
        eos_token: positions after its first occurrence are not counted; it is.
    """

    def __init__(self, run_dir: Path | str, pad_token: str | None = None, max_per_step: int | None = None,
                 cache_root: Path | None | bool = None, fields: tuple[tuple[str, str], ...] = (),
                 eos_token: str | None = None):
        self.run_dir = Path(run_dir)
        self.options = ReadOptions(pad_token or None, tuple(fields), eos_token or None)
        self.max_per_step = max_per_step
        self._cache_root = cache_root
        self.reader = None
        self._cache: RunCache | None = None
        self._scratch: tempfile.TemporaryDirectory | None = None  # segments when there is no cache
        self._files: dict[str, _FileState] = {}
        self._quota: dict[int, int] = {}
        self._lock = threading.Lock()
        self._notes: list[str] = []
        self._opened = False
        self._stamp: tuple | None = None  # the cache manifest as this process last read or wrote it
        self.last_status: dict[str, str] = {}  # file -> "cached", "appended", "parsed" or "unchanged"
        self.latest: Run | None = None  # what the last refresh returned

    @property
    def pad_token(self) -> str | None:
        return self.options.pad_token

    def _use_reader(self) -> None:
        """Detect the run's format (again while no file was read: the folder may have been empty)."""
        check_allowed(self.run_dir)
        reader = detect(self.run_dir)
        if reader is self.reader:
            return
        self.reader, self._opened = reader, False
        self._files.clear()
        self._quota.clear()
        use_cache = self._cache_root is not False and self.max_per_step is None
        self._cache = RunCache(cache_dir_for(self.run_dir, self._cache_key(),
                                             None if self._cache_root in (None, True) else self._cache_root)
                               ) if use_cache else None

    def _cache_key(self) -> str:
        return f"{self.reader.NAME}:{self.options.to_json()}"

    def refresh(self, progress: Progress | None = None) -> Run:
        """Read what is new in every file (all of it the first time) and return the run as it is now."""
        with self._lock:
            if self.reader is None or not self._files:
                self._use_reader()
            with self._shared_cache():
                return self._refresh(progress)

    def clear_cache(self) -> None:
        """Delete this run's cache (once no other process is using it); the next refresh parses again."""
        with self._lock:
            if self._cache is not None:
                with self._cache.locked():
                    self._cache.empty()
            self._files.clear()
            self._quota.clear()
            self._opened, self._stamp, self.latest = False, None, None

    @contextlib.contextmanager
    def _shared_cache(self):
        """Hold the run cache's lock across a refresh, so processes sharing it never delete or
        half-read each other's segments; when another process changed the cache since this one
        last looked, start again from its manifest."""
        with contextlib.ExitStack() as stack:
            if self._cache is not None:
                try:
                    stack.enter_context(self._cache.locked())
                except OSError as exc:
                    self._notes.append(f"Could not use the cache in {self._cache.folder} ({exc}); not caching.")
                    self._cache = None
            if self._cache is not None and self._opened and self._cache.manifest_stamp() != self._stamp:
                self._files.clear()
                self._quota.clear()
                self._opened = False
            yield
            if self._cache is not None:
                self._stamp = self._cache.manifest_stamp()

    def _refresh(self, progress: Progress | None) -> Run:
        """The refresh itself, under both locks."""
        paths, ignored = list_run_files(self.run_dir, self.reader.SUFFIX)
        unreadable = {p.name: why for p in paths if (why := _unreadable(p))}
        paths = [p for p in paths if p.name not in unreadable]
        self.last_status = {}
        if not self._opened:
            self._open_cache(paths)
            self._opened = True
        names = {p.name for p in paths}
        gone = set(self._files) - names
        for name in gone:
            del self._files[name]
        appendable = self.reader.APPENDABLE
        statuses = {name: s.entry.status(s.path, appendable)
                    for name, s in self._files.items() if s.entry is not None}
        if self.max_per_step is not None and "stale" in statuses.values():
            self._files.clear()  # lines skipped for a full step may now be needed: count again from the start
            self._quota.clear()
        todo, reread = [], []
        for path in paths:
            state = self._files.get(path.name)
            status = statuses.get(path.name, "stale") if state is not None else "stale"
            if status == "same":
                self.last_status.setdefault(path.name, "unchanged")
                continue
            if status == "stale":
                if state is not None and self.latest is not None:
                    reread.append(path.name)
                state = self._files[path.name] = _FileState(path)
                self.last_status[path.name] = "parsed"
            else:
                self.last_status[path.name] = "appended"
            todo.append((state, path.stat().st_size))
        unchanged = (self.latest is not None and not todo and not gone and not unreadable
                     and self.latest.report.files == tuple(p.name for p in paths)
                     and self.latest.report.ignored_files == tuple(ignored))
        if unchanged:  # an idle auto-refresh costs a stat per file, nothing more
            return self.latest
        self._read(todo, progress)
        if todo or gone:
            self._save_manifest()
        notes = [f"{name} was truncated, rewritten or replaced since it was read: read it again from the start."
                 for name in reread]
        self.latest = self._snapshot(paths, ignored, unreadable, notes)
        return self.latest

    # -- reading -----------------------------------------------------------------------------

    def _open_cache(self, paths: list[Path]) -> None:
        if self._cache is None:
            return
        try:
            entries = self._cache.read_manifest(self._cache_key())
            for path in paths:
                entry = entries.get(path.name)
                if entry is None or entry.status(path, self.reader.APPENDABLE) == "stale":
                    continue
                state = _FileState(path)
                state.offset, state.next_line, state.entry = entry.offset, entry.next_line, entry
                state.errors = [(int(line), str(reason)) for line, reason in entry.errors]
                state.error = entry.file_error
                state.unterminated = entry.unterminated
                for name, first_line in entry.segments:
                    table = self._cache.open_segment(name)
                    if not is_segment_schema(table.schema):
                        raise ValueError(f"segment {name} has an unexpected schema")
                    state.segments.append((name, first_line, table))
                self._files[path.name] = state
                self.last_status[path.name] = "cached"
        except (OSError, ValueError, TypeError, pa.ArrowException) as exc:
            self._notes.append(f"The cache was unreadable ({exc}); parsed the run again.")
            self._files.clear()
            self.last_status.clear()
            self._cache.clear()

    def _segment_dir(self) -> tuple[str, bool]:
        """(where new segments go, whether they stay there as the cache)."""
        if self._cache is not None:
            try:
                self._cache.folder.mkdir(parents=True, exist_ok=True)
                probe = self._cache.folder / ".write-test"
                probe.write_bytes(b"")
                probe.unlink()
                return str(self._cache.folder), True
            except OSError as exc:
                self._notes.append(f"Could not write the cache in {self._cache.folder} ({exc}); not caching.")
                self._cache = None
        if self._scratch is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="rl_board-")
        return self._scratch.name, False

    def _read(self, todo: list[tuple[_FileState, int]], progress: Progress | None) -> None:
        """Read bytes [offset, size) of each file (up to its last newline, for JSONL) and attach
        the segments."""
        for state, size in todo:
            if state.unterminated and size > state.offset and _byte_at(state.path, state.offset) == b"\n":
                state.offset += 1  # the newline of a line already read: not a line of its own
                state.unterminated = False
        tasks = [(state.path, state.offset, size) for state, size in todo if size > state.offset]
        if not tasks:
            return
        out_dir, keep = self._segment_dir()
        total, done = sum(b - a for _, a, b in tasks), [0]

        def advance(n: int) -> None:
            done[0] += n
            if progress is not None:
                progress(done[0], total)

        try:
            results = ingest.read(self.reader, tasks, out_dir, self.options, self._quota, self.max_per_step, advance)
        except OSError as exc:  # a full disk, a size limit: read again, keeping the rows in memory
            self._notes.append(f"Could not write parsed rows to {out_dir} ({exc}); loaded the run without a cache.")
            self._cache, out_dir, keep, done[0] = None, None, False, 0
            results = ingest.read(self.reader, tasks, None, self.options, self._quota, self.max_per_step, advance)
        by_path = {str(state.path): state for state, _ in todo}
        for result in results:
            state = by_path[result.path]
            first_line = state.next_line
            state.errors.extend((first_line + line - 1, reason) for line, reason in result.errors)
            state.skipped += result.skipped
            state.error = result.error
            if result.table is not None:
                state.segments.append(("", first_line, result.table))
            elif result.segment is not None:
                segment = os.path.join(out_dir, result.segment)
                if keep:
                    table = self._cache.open_segment(result.segment)
                else:  # read it into memory: the scratch file goes now
                    with pa.OSFile(segment, "rb") as fh:
                        table = pa.ipc.open_file(fh).read_all()
                    os.unlink(segment)
                state.segments.append((result.segment if keep else "", first_line, table))
            state.next_line += result.lines
            state.offset = result.end
            state.pending = result.pending
            state.unterminated = result.unterminated
        for state, _ in todo:
            self._compact(state, out_dir, keep)
            state.entry = FileEntry.describe(state.path, state.offset, state.next_line,
                                             [[n, first] for n, first, _ in state.segments if n], state.errors,
                                             state.error, state.unterminated)

    def _compact(self, state: _FileState, out_dir: str, keep: bool) -> None:
        """Merge the small segments at the end of a file's list (each live refresh adds one) into one."""
        tail = 0
        while tail < len(state.segments) and _source_bytes(state.segments[-1 - tail][2]) < SMALL_SEGMENT_BYTES:
            tail += 1
        if tail <= MAX_SMALL_SEGMENTS:
            return
        merged = state.segments[-tail:]
        first_line = merged[0][1]
        line = SCHEMA.get_field_index(F.LINE)
        table = pa.concat_tables(  # make every segment's line numbers count from the first one's start
            (t.set_column(line, F.LINE, pc.add(t[F.LINE], first - first_line)) for _, first, t in merged),
            promote_options="default")
        name = ""
        if keep:
            name = write_segment(table, out_dir)
            table = self._cache.open_segment(name)
        state.segments[-tail:] = [(name, first_line, table)]

    def _save_manifest(self) -> None:
        if self._cache is None:
            return
        entries = {name: state.entry for name, state in self._files.items() if state.entry is not None}
        try:
            self._cache.write_manifest(entries, self._cache_key(), self.run_dir.resolve())
            self._cache.remove_segments({seg for e in entries.values() for seg, _ in e.segments})
            for folder in enforce_limit(self._cache.folder):
                self._notes.append(f"The cache was over its size limit: removed {folder.name}, used least recently.")
        except OSError as exc:
            self._notes.append(f"Could not write the cache in {self._cache.folder} ({exc}); not caching.")
            self._cache = None

    # -- the snapshot ---------------------------------------------------------------------------

    def _snapshot(self, paths: list[Path], ignored: list[str], unreadable: dict[str, str],
                  notes: list[str] = ()) -> Run:
        names = [p.name for p in paths]
        parts, segments = [], {}
        for file_index, name in enumerate(names):
            for seg_index, (_, first_line, table) in enumerate(self._files[name].segments):
                segments[(file_index, seg_index)] = table
                parts.append(_numbers(table, first_line, file_index, seg_index))
        numbers = (pa.concat_tables(parts, promote_options="default") if parts
                   else _numbers(SCHEMA.empty_table(), 1, 0, 0))
        samples = numbers.to_pandas().sort_values([F.STEP, F.FILE, F.LINE], kind="stable", ignore_index=True)
        skipped = sum(s.skipped for s in self._files.values())
        if self.max_per_step is not None:
            before = len(samples)
            samples = samples.groupby(F.STEP, sort=False).head(self.max_per_step).reset_index(drop=True)
            skipped += before - len(samples)
        samples["reward_gap"] = samples[F.REWARD] - samples["ref_reward"]
        errors = tuple((name, line, reason) for name in names for line, reason in self._files[name].errors)
        failed = {**unreadable, **{n: self._files[n].error for n in names if self._files[n].error}}
        failed = tuple((name, failed[name]) for name in sorted(failed, key=_natural_key))
        notes = [*notes, *(f"Could not read {name} ({why}); the other files loaded." for name, why in failed)]
        report = LoadReport(
            files=tuple(names), lines_ok=len(samples), lines_bad=len(errors), errors=errors, skipped=skipped,
            ignored_files=tuple(ignored), pending=tuple(n for n in names if self._files[n].pending),
            notes=tuple(self._notes + notes), unreadable=failed, reader=self.reader.NAME,
        )
        return Run(self.run_dir, tuple(names), samples, compute_step_stats(samples), report, self.options,
                   segments, self.reader)


def _byte_at(path: Path, offset: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(offset)
        return fh.read(1)


def _unreadable(path: Path) -> str | None:
    """Why ``path`` can't be read, or None when it can."""
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _source_bytes(table: pa.Table) -> int:
    """How many bytes of its log file a segment's rows span."""
    offsets, lengths = table["offset"], table["length"]
    return offsets[-1].as_py() + lengths[-1].as_py() - offsets[0].as_py() if table.num_rows else 0


def _numbers(table: pa.Table, first_line: int, file_index: int, seg_index: int) -> pa.Table:
    """The numeric columns of a segment (texts and words stay behind), line numbers made absolute
    (segments count lines from their own start), and where each row lives: file, seg, row."""
    rows = table.num_rows
    numbers = table.drop_columns([*F.TEXT_FIELDS, "words"])
    numbers = numbers.set_column(numbers.schema.get_field_index(F.LINE), F.LINE,
                                 pc.add(numbers[F.LINE], first_line - 1))
    return (numbers.append_column(F.FILE, pa.array(np.full(rows, file_index, dtype=np.int64)))
            .append_column("seg", pa.array(np.full(rows, seg_index, dtype=np.int64)))
            .append_column("row", pa.array(np.arange(rows, dtype=np.int64))))


def load_run(run_dir: Path | str, pad_token: str | None = None, max_per_step: int | None = None,
             cache_root: Path | None | bool = None, progress: Progress | None = None,
             fields: tuple[tuple[str, str], ...] = (), eos_token: str | None = None) -> Run:
    """Read a run folder once and return it (``RunSource(...).refresh()``)."""
    return RunSource(run_dir, pad_token, max_per_step, cache_root, fields, eos_token).refresh(progress)
