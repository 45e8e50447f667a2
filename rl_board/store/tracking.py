"""File tracking: which files a run has, how far each was read, and whether each changed since.

A run is a folder of files of one format. ``FileTracker`` remembers, per file, the
byte offset read up to, the next line number, the rejected lines and the segments
parsed so far (``FileState``), and on each refresh sorts the files into those to
skip ("same"), to read on from their offset ("grown") and to read from the start
("stale": new, shrunk, rewritten or replaced). Where the parsed rows are kept is
the segment store's business (``segments.py``).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.access import RootError
from ..base.compression import base_name, codec_of, variants
from ..base.defaults import max_errors
from ..base.location import RunLocation, as_path, open_file, open_location, special_reason
from ..readers import holds_run, layout
from .cache import SETTLED_NS, FileEntry
from .segments import SharedSlice

if TYPE_CHECKING:
    import pyarrow as pa

ROOT_RUN = "."  # the run name of files lying directly in the root
EXPECTED_LAYOUT = (
    "Expected layout: ROOT/RUN_NAME/*.jsonl or ROOT/RUN_NAME/*.parquet, one folder per run (at any depth under "
    "ROOT, or ROOT itself): JSON lines, one object per line (e.g. rollout_data_rank0.jsonl per rank, or verl's "
    "{step}.jsonl; also compressed: .jsonl.gz, .xz, .bz2, .zst), or TRL's completions_*.parquet."
)


def natural_key(name: str):
    """Sort key putting "rank2" before "rank10"."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _holds_run(folder: Path) -> bool:
    try:
        return holds_run(folder)
    except OSError:
        return False


class NoRunsError(RootError):
    """A folder that holds no run (nor a sub-folder that does): ``diagnosis`` says what it holds."""


def list_runs(root: Path | str | RunLocation) -> list[str]:
    """Run names under ``root``: its subfolders holding run files ("." for files in root itself)."""
    location = open_location(root)  # the door: before anything under it is looked at
    location.invalidate()  # a URL's listing as it is now, not as the filesystem last kept it
    root = location.path
    if not root.exists():
        raise RootError(f"Folder not found: {root}. " + EXPECTED_LAYOUT)
    if not root.is_dir():
        raise RootError(f"{root} is a file, not a folder. " + EXPECTED_LAYOUT)
    runs = sorted((d.name for d in location.entries()
                   if d.is_dir() and not d.name.startswith(".") and _holds_run(d)), key=natural_key)
    if _holds_run(root):
        runs.insert(0, ROOT_RUN)
    if not runs:
        raise NoRunsError(f"No runs in {root}: no subfolder holds .jsonl or .parquet files. " + EXPECTED_LAYOUT)
    return runs


def list_run_files(run_dir: Path | RunLocation, reader=None, split: str | None = None, links: list | None = None,
                   specials: list | None = None) -> tuple[list[Path], list[str]]:
    """(the run's files of ``reader``'s layout, in natural order of their names; names of other files
    lying in the run folder, ignored). A file's name is its path relative to ``run_dir``
    (``layout.relative_name``). With ``split``, only the files of that split (``layout.split_of``).
    ``reader`` defaults to the JSONL reader; a suffix string (".jsonl") is also accepted. ``links`` (a list)
    gets the symbolic links of a flat run folder; ``specials`` (a list) the special files (a FIFO, a device,
    a socket: never opened) the layout would have taken, left out of the files."""
    location = open_location(run_dir)  # a location is taken as it is: checked once, at its door
    location.invalidate()  # a URL's new and grown objects show (s3fs keeps listings)
    run_dir = location.path
    if not run_dir.is_dir():
        raise RootError(f"Run folder not found: {run_dir}. " + EXPECTED_LAYOUT)
    if reader is None or isinstance(reader, str):
        suffix = reader or ".jsonl"
        patterns = ("*" + suffix,)
    else:
        patterns = layout.globs(reader)
    text = reader is None or isinstance(reader, str) or layout.reader_reads_text(reader)
    odd: list[Path] = []  # special files met, then those the layout takes
    entries = location.scan(None, links, odd if specials is not None else None)
    if all("/" not in pattern for pattern in patterns):  # flat: the folder's own files
        wanted = [variant for pattern in patterns for variant in (variants(pattern) if text else (pattern,))]
        kept = [p for p in entries if any(fnmatch.fnmatchcase(p.name, variant) for variant in wanted)]
        if reader is not None and not isinstance(reader, str):  # a trainer's metrics file is no run file
            kept = [p for p in kept if layout.other_kind(reader, p) is None]
        chosen = {p.name for p in kept} | {p.name for p in odd}  # a set: 100,000 files are listed in linear time
        ignored = sorted(p.name for p in entries if p.name not in chosen)
        name = _name  # a file of the folder itself: its name is its relative path
    else:
        kept, ignored = _tree_files(location, patterns, text, odd if specials is not None else None), []
        if reader is not None and not isinstance(reader, str):
            kept = [p for p in kept if layout.other_kind(reader, p) is None]
        name = functools.partial(layout.relative_name, run_dir)
    if split is not None and reader is not None and not isinstance(reader, str):
        kept = [p for p in kept if layout.split_of(reader, name(p)) == split]
    if reader is not None and not isinstance(reader, str):  # named, whatever the split: see layout.NAMED_GLOBS
        listed = set(kept)
        kept += [p for p in _tree_files(location, layout.named_globs(reader), False,
                                        odd if specials is not None else None) if p not in listed]
    if odd:
        special = set(odd)
        specials += sorted((p for p in kept if p in special), key=lambda p: natural_key(name(p)))
        kept = [p for p in kept if p not in special]
    kept, twins = _without_compressed_twins(kept)
    kept.sort(key=lambda p: natural_key(name(p)))
    return kept, sorted(ignored + [name(p) for p in twins], key=natural_key)


def _without_compressed_twins(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """(``paths`` less every compressed file whose plain twin is listed beside it, those twins):
    ``gzip -k run.jsonl`` leaves ``run.jsonl`` and ``run.jsonl.gz`` holding the same lines, read once
    (the plain one, read without decompressing)."""
    listed = {str(p) for p in paths}
    twins = [p for p in paths if codec_of(p.name) and str(p.with_name(base_name(p.name))) in listed]
    if not twins:
        return paths, []
    dropped = set(twins)
    return [p for p in paths if p not in dropped], twins


def compressed_twin_notes(names: list[str], ignored: list[str]) -> list[str]:
    """A note for each ignored compressed file whose plain twin was read (``_without_compressed_twins``)."""
    read = set(names)
    return [f"{twin} is {plain} compressed: {plain} was read, {twin} left aside (one run, not two copies)."
            for twin in ignored if codec_of(twin) and (plain := base_name(twin)) in read]


def _folder_stat(folder: Path) -> tuple[int, int] | None:
    """(modification time in ns, inode) of ``folder``, None when it can't be looked at, or is a URL's
    (an object store's folder has no time that a new object changes: it is listed each time)."""
    if not isinstance(folder, Path):
        return None
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_ino


def _name(path: Path) -> str:
    return path.name


def file_name(run_dir: Path | RunLocation, path: Path) -> str:
    """The name of one of a run's files (``list_run_files``): its path relative to the run folder."""
    return layout.relative_name(run_dir.path if isinstance(run_dir, RunLocation) else as_path(run_dir).expanduser(), path)


def _tree_files(location: RunLocation, patterns: tuple[str, ...], text: bool = False, specials: list | None = None
                ) -> list[Path]:
    """The files matching the first of ``patterns`` that matches any (with ``text``, compressed or
    not), inside the allowed folders, no hidden component. ``specials``: as in ``RunLocation.scan``."""
    for pattern in patterns:
        found = [path for variant in (variants(pattern) if text else (pattern,))
                 for path in location.files(variant, specials)]
        if found:
            return found
    return []


def list_splits(run_dir: Path | RunLocation, reader) -> list[str]:
    """The splits of a run (sorted), [] for a format or a run without them."""
    if not hasattr(reader, "split_of"):
        return []
    paths, _ = list_run_files(run_dir, reader)
    return sorted({s for p in paths if (s := layout.split_of(reader, file_name(run_dir, p)))})


def unreadable(path: Path, appendable: bool = True) -> str | None:
    """Why ``path`` can't be read, or None when it can. An empty file of a format that appends
    is a run that has not started; of a table format, it is no table."""
    try:
        with open_file(path) as fh:
            if not fh.read(1) and not appendable:
                return "an empty file (0 bytes), not a table"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _named(location: RunLocation, paths: list[Path]) -> list[tuple[Path, str]]:
    """(path, its name: relative to the run folder) for each of ``paths``."""
    base = str(location.path)
    return [(p, text[len(base) + 1:] if (text := str(p)).startswith(base + "/") else file_name(location, p))
            for p in paths]


def _byte_at(path: Path, offset: int) -> bytes:
    with open_file(path) as fh:
        fh.seek(offset)
        return fh.read(1)


def _span(table) -> tuple[int, ...]:
    """(first row, rows) of a part of a shared segment (``segments.SharedSlice``), () for a segment of its own."""
    return (table.start, table.num_rows) if isinstance(table, SharedSlice) else ()


class FileState:
    """How far one file was read, and the segments parsed from it: (file name in the cache or "",
    number of its first line, table)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.next_line = 1
        self.errors: list[tuple[int, str]] = []  # the first rejected lines (``defaults.max_errors``)
        self.unlisted = 0  # rejected lines counted past those
        self.skipped = 0
        self.segments: list[tuple[str, int, pa.Table]] = []
        self.entry: FileEntry | None = None
        self.pending = False
        self.error: str | None = None  # why the whole file could not be read
        self.unterminated = False  # the last line read had no newline: skip one if it comes
        self.long_tail = 0  # bytes after the last newline, over the line limit already: never read
        self.read: list[list] = []  # [start, end, xxh3-128] of the byte ranges parsed (``cache.prefix_spans``)
        self.planned_etag = ""  # a URL's object: its ETag when the read was planned (checked after it)
        self.hashes: list[str] | None = None  # head and tail hashes of bytes [0, offset) as read, when known

    @classmethod
    def from_entry(cls, path: Path, entry: FileEntry, segments: list[tuple[str, int, pa.Table]]) -> FileState:
        """The state a cache manifest entry describes, with its segments opened."""
        state = cls(path)
        state.offset, state.next_line, state.entry = entry.offset, entry.next_line, entry
        state.errors = [(int(line), str(reason)) for line, reason in entry.errors]
        state.unlisted = entry.unlisted
        state.error = entry.file_error
        state.unterminated = entry.unterminated
        state.segments = list(segments)
        state.read = [list(span) for span in entry.prefix_spans]
        return state

    def take(self, result, table: pa.Table | None, segment_name: str = "") -> None:
        """Account for one ``ranges.RangeResult`` read from this file at its offset, whose rows
        are ``table`` (stored as ``segment_name`` in the cache, "" when not cached)."""
        first_line = self.next_line
        room = max(0, max_errors() - len(self.errors))
        self.errors.extend((first_line + line - 1, reason) for line, reason in result.errors[:room])
        self.unlisted += max(0, len(result.errors) - room) + getattr(result, "unlisted", 0)
        self.skipped += result.skipped
        self.error = result.error
        if table is not None:
            self.segments.append((segment_name, first_line, table))
        self.next_line += result.lines
        whole = getattr(result, "hashes", None) is not None and result.start == 0 and self.offset == 0
        self.hashes = result.hashes if whole else None
        if result.digest is not None and result.end > result.start:
            self.read.append([result.start, result.end, result.digest])
        self.offset = result.end
        self.pending = result.pending
        self.unterminated = result.unterminated
        self.long_tail = result.long_tail

    def describe(self) -> None:
        """Record what was read as the manifest entry of this file."""
        self.entry = FileEntry.describe(self.path, self.offset, self.next_line,
                                        [[n, first, *_span(t)] for n, first, t in self.segments if n],
                                        self.errors,
                                        self.error, self.unterminated, self.read, self.hashes, self.unlisted)
        self.hashes = None
        self.read = [list(span) for span in self.entry.prefix_spans]


@dataclass
class Listing:
    """A run folder's files as listed now."""

    paths: list[Path]  # readable files of the run's format, in natural order
    names: list[str]  # their names: paths relative to the run folder
    ignored: list[str]  # names of other files
    unreadable: dict[str, str]  # name -> why it can't be read


@dataclass
class Plan:
    """What a refresh must read: (state, size to read up to) per file, and what changed."""

    todo: list[tuple[FileState, int]]
    reread: list[str]  # files read before and now read again from the start
    gone: set[str]  # files that disappeared
    status: dict[str, str]  # name -> "unchanged", "appended" or "parsed"
    settled: bool = False  # a file read moments after it was written was found unchanged: save the manifest


class FileTracker:
    """The files of one run and how far each was read."""

    def __init__(self):
        self.files: dict[str, FileState] = {}  # file name (relative to the run folder) -> state
        self.quota: dict[int, int] = {}  # step -> samples kept so far (max samples per step)
        # (what was listed, the folder's stat then, when, paths, names, ignored, special files)
        self._listed: tuple | None = None

    def forget(self) -> None:
        """Forget every file: the next plan reads them all from the start."""
        self.files.clear()
        self.quota.clear()

    def list(self, run_dir: Path | RunLocation, reader, split: str | None = None) -> Listing:
        """The run's files of ``reader``'s layout (of ``split`` only, when given). A file read before is
        not opened to see whether it can be (a refresh of 100,000 files would open each)."""
        location = open_location(run_dir)
        key = (str(location.path), reader.NAME, split, location.roots)
        folder = _folder_stat(location.path) if layout.is_flat(reader) else None
        if self._listed is not None and folder is not None and self._listed[:2] == (key, folder) \
                and folder[0] < self._listed[2] - SETTLED_NS:
            # a flat folder whose entries are as listed (its time changes when a file comes, goes or is
            # renamed; one changed within SETTLED_NS of the listing is listed again): its files are too
            paths, named, ignored, odd = self._listed[3:]
        else:
            now = time.time_ns()
            links: list[Path] = []
            odd = []
            paths, ignored = list_run_files(location, reader, split, links, odd)
            if links and location.roots is not None:
                folder = None  # where a link leads can change without the folder changing: list it each time
            named, odd = _named(location, paths), _named(location, odd)
            self._listed = (key, folder, now, paths, named, ignored, odd) if folder is not None else None
        failed = {name: special_reason(p) for p, name in odd}  # a FIFO, a device, a socket: named, never opened
        failed.update({name: why for p, name in named
                       if not self._was_read(name) and (why := unreadable(p, reader.APPENDABLE))})
        kept = [(p, name) for p, name in named if name not in failed]
        return Listing([p for p, _ in kept], [name for _, name in kept], ignored, failed)

    def retry_missing(self, reader) -> None:
        """Forget each file that failed for want of the reader's optional module, when the module is
        installed now: it is read again (``pip install 'rl-board[torch]'`` after a first try opens them)."""
        failed = [name for name, s in self.files.items() if layout.missing_dependency(reader, s.error)]
        if failed and layout.dependency_installed(reader):
            for name in failed:
                del self.files[name]

    def _was_read(self, name: str) -> bool:
        """Whether file ``name`` was read before (then ``plan`` sees whether it changed; one that can't be
        read any more fails when it is read again, and says so)."""
        state = self.files.get(name)
        return state is not None and state.entry is not None

    def plan(self, listing: Listing, appendable: bool, max_per_step: int | None, read_before: bool) -> Plan:
        """Sort the listed files into unchanged, grown and stale ones; forget files that went.
        ``read_before``: a snapshot was taken, so a stale known file is worth a note."""
        gone = set(self.files) - set(listing.names)
        for name in gone:
            del self.files[name]
        statuses, failed = {}, {}
        for name, s in self.files.items():
            if s.entry is None:
                continue
            try:
                statuses[name] = s.entry.status(s.path, appendable)
            except OSError as exc:
                statuses[name] = "stale"
                failed[name] = exc.strerror or str(exc)
            if statuses[name] not in ("same", "settled") and name not in failed:
                # a file read before is not opened when listed (``list``): one that changed is, now
                why = unreadable(s.path, appendable)
                if why:
                    failed[name] = why
        if failed:  # as if the listing had found them unreadable
            for name in failed:
                del self.files[name]
                del statuses[name]
            kept = [(p, n) for p, n in zip(listing.paths, listing.names) if n not in failed]
            listing.paths[:] = [p for p, _ in kept]
            listing.names[:] = [n for _, n in kept]
            listing.unreadable.update(failed)
        for name, status in statuses.items():
            state = self.files[name]
            if status == "grown" and state.unterminated and _byte_at(state.path, state.offset) != b"\n":
                # the line read without its newline went on (a dead writer's object, then a new
                # line): it is one line now, and a fresh load reads it so; so do we, from the start
                statuses[name] = "stale"
        if max_per_step is not None and "stale" in statuses.values():
            self.forget()  # lines skipped for a full step may now be needed: count again from the start
        plan = Plan([], [], gone, {})
        for path, name in zip(listing.paths, listing.names):
            state = self.files.get(name)
            status = statuses.get(name, "stale") if state is not None else "stale"
            if status == "settled":
                plan.settled, status = True, "same"
            if status == "same":
                plan.status.setdefault(name, "unchanged")
                continue
            if status == "stale":
                if state is not None and read_before:
                    plan.reread.append(name)
                state = self.files[name] = FileState(path)
                plan.status[name] = "parsed"
            else:
                plan.status[name] = "appended"
            st = path.stat()
            state.planned_etag = getattr(st, "etag", "")
            plan.todo.append((state, st.st_size))
        return plan

    @staticmethod
    def skip_late_newlines(todo: list[tuple[FileState, int]]) -> None:
        """A line read without its newline may get it later: that newline is not a line of its own."""
        for state, size in todo:
            if state.unterminated and size > state.offset and _byte_at(state.path, state.offset) == b"\n":
                state.offset += 1
                state.unterminated = False
