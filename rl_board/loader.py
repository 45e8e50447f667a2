"""Find runs, read their per-rank JSONL files, and merge them into step-indexed samples.

``RunSource`` owns the reading: it remembers how far each file was parsed, so a
refresh reads only the bytes appended since (never half a line), re-reads a file
that shrank or was replaced, and keeps a columnar cache (see ``cache.py``) so a
restarted app opens an unchanged run without parsing it. Each refresh returns a
``Run``: an immutable snapshot the views draw from.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa

from . import fields as F
from .cache import FileEntry, RunCache, cache_dir_for
from .metrics import SampleTokens, compute_sample_aggregates, compute_sample_tokens, compute_step_stats
from .parse import SCHEMA, parse_block

READ_CHUNK = 32 << 20  # bytes read and parsed at a time: bounds memory, paces progress
ROOT_RUN = "."  # the run name of JSONL files lying directly in the root
EXPECTED_LAYOUT = (
    "Expected layout: ROOT/RUN_NAME/*.jsonl, one folder per run, one JSON object per line "
    "(typically one file per data-parallel rank, e.g. rollout_data_rank0.jsonl)."
)
_TOKEN_COLUMNS = [F.TOKENS, *F.TOKEN_FIELDS]
_AGG_TYPES = {"n_tokens": pa.int32(), "response_len": pa.int32(), "lengths_differ": pa.bool_()}
SEGMENT_SCHEMA = pa.schema(
    list(SCHEMA) + [(name, _AGG_TYPES.get(name, pa.float64())) for name in
                    ("n_tokens", "response_len", "lengths_differ", "log_ratio_mean", "log_ratio_sum",
                     "kl_mean", "kl_sum", "k2_mean", "k2_sum")]
)

Progress = Callable[[int, int], None]


class RootError(ValueError):
    """The root or run folder can't be used; the message says why and what is expected."""


def _natural_key(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def list_runs(root: Path | str) -> list[str]:
    """Run names under ``root``: its subfolders holding ``.jsonl`` files ("." for files in root itself)."""
    root = Path(root).expanduser()
    if not root.exists():
        raise RootError(f"Folder not found: {root}. " + EXPECTED_LAYOUT)
    if not root.is_dir():
        raise RootError(f"{root} is a file, not a folder. " + EXPECTED_LAYOUT)
    runs = sorted((d.name for d in root.iterdir()
                   if d.is_dir() and not d.name.startswith(".") and any(d.glob("*.jsonl"))), key=_natural_key)
    if any(root.glob("*.jsonl")):
        runs.insert(0, ROOT_RUN)
    if not runs:
        raise RootError(f"No runs in {root}: no subfolder holds .jsonl files. " + EXPECTED_LAYOUT)
    return runs


def list_run_files(run_dir: Path) -> tuple[list[Path], list[str]]:
    """(the run's ``.jsonl`` files in natural name order, names of other files ignored)."""
    if not run_dir.is_dir():
        raise RootError(f"Run folder not found: {run_dir}. " + EXPECTED_LAYOUT)
    entries = [p for p in run_dir.iterdir() if p.is_file() and not p.name.startswith(".")]
    jsonl = sorted((p for p in entries if p.suffix == ".jsonl"), key=lambda p: _natural_key(p.name))
    return jsonl, sorted(p.name for p in entries if p.suffix != ".jsonl")


@dataclass(frozen=True)
class LoadReport:
    """What a load read: counts, the rejected lines, and notes for the user."""

    files: tuple[str, ...]
    lines_ok: int
    lines_bad: int
    errors: tuple[tuple[str, int, str], ...]  # (file, line, reason), by file then line
    skipped: int = 0  # lines left out by max samples per step
    ignored_files: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()  # files whose last line has no newline yet
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Run:
    """A snapshot of a run. ``samples`` has one row per sample, ordered by step, file, line;
    ``steps`` one row per step (``compute_step_stats``)."""

    path: Path
    samples: pd.DataFrame
    steps: pd.DataFrame
    report: LoadReport
    pad_token: str | None
    _segments: dict[tuple[int, int], pa.Table] = field(repr=False)

    @property
    def has_tokens(self) -> bool:
        return bool((self.samples["n_tokens"] > 0).any()) if len(self.samples) else False

    def step_samples(self, step: int) -> pd.DataFrame:
        """The samples of one step, in file and line order."""
        return self.samples[self.samples[F.STEP] == step]

    def sample_tokens(self, index) -> SampleTokens:
        """Token arrays of the sample with label ``index`` in ``samples``, read from disk if cached."""
        row = self.samples.loc[index]
        table = self._segments[(int(row[F.FILE]), int(row["seg"]))]
        lists = table.select(_TOKEN_COLUMNS).slice(int(row["row"]), 1).to_pylist()[0]
        return compute_sample_tokens(lists, self.pad_token)


class _FileState:
    """How far one file was read, and the segments parsed from it."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.next_line = 1
        self.errors: list[tuple[int, str]] = []
        self.skipped = 0
        self.segments: list[tuple[str | None, pa.Table, pd.DataFrame]] = []
        self.entry: FileEntry | None = None
        self.pending = False


class RunSource:
    """Reads one run folder incrementally; ``refresh()`` returns the newest ``Run``.

    Args:
        run_dir: the folder of ``.jsonl`` files.
        pad_token: positions at and after its first occurrence leave every aggregate.
        max_per_step: keep the first N samples of each step (file order, then line order).
        cache_root: where caches live (default ``cache.default_cache_root()``); False turns caching off.
    """

    def __init__(self, run_dir: Path | str, pad_token: str | None = None, max_per_step: int | None = None,
                 cache_root: Path | None | bool = None):
        self.run_dir = Path(run_dir)
        self.pad_token = pad_token or None
        self.max_per_step = max_per_step
        self._cache = None if cache_root is False else RunCache(
            cache_dir_for(self.run_dir, self.pad_token, None if cache_root in (None, True) else cache_root))
        self._files: dict[str, _FileState] = {}
        self._quota: dict[int, int] = {}
        self._lock = threading.Lock()
        self._notes: list[str] = []
        self._opened = False
        self.last_status: dict[str, str] = {}  # file -> "cached", "appended", "parsed" or "unchanged"
        self.latest: Run | None = None  # what the last refresh returned

    def refresh(self, progress: Progress | None = None) -> Run:
        """Read what is new in every file (all of it the first time) and return the run as it is now."""
        with self._lock:
            paths, ignored = list_run_files(self.run_dir)
            self.last_status = {}
            if not self._opened:
                self._open_cache(paths)
                self._opened = True
            names = {p.name for p in paths}
            for gone in set(self._files) - names:
                del self._files[gone]
            todo = []
            for path in paths:
                state = self._files.get(path.name)
                if state is None or state.entry is None or state.entry.status(path) == "stale":
                    state = self._files[path.name] = _FileState(path)
                    self.last_status[path.name] = "parsed"
                elif state.entry.status(path) == "same":
                    self.last_status.setdefault(path.name, "unchanged")
                    continue
                else:
                    self.last_status.setdefault(path.name, "appended")
                todo.append((state, path.stat().st_size))
            total = sum(size - state.offset for state, size in todo)
            done = 0
            for state, size in todo:
                done = self._read_new(state, size, done, total, progress)
            self._save_manifest()
            self.latest = self._snapshot(paths, ignored)
            return self.latest

    # -- reading -----------------------------------------------------------------------------

    def _open_cache(self, paths: list[Path]) -> None:
        if self._cache is None or self.max_per_step is not None:
            return
        entries = self._cache.read_manifest(self.pad_token)
        try:
            for path in paths:
                entry = entries.get(path.name)
                if entry is None or entry.status(path) == "stale":
                    continue
                state = _FileState(path)
                state.offset, state.next_line, state.entry = entry.offset, entry.next_line, entry
                state.errors = [(int(line), str(reason)) for line, reason in entry.errors]
                for name in entry.segments:
                    table = self._cache.open_segment(name)
                    if table.schema != SEGMENT_SCHEMA:
                        raise ValueError(f"segment {name} has an unexpected schema")
                    state.segments.append((name, table, _frame(table)))
                self._files[path.name] = state
                self.last_status[path.name] = "cached"
        except (OSError, ValueError, pa.ArrowException) as exc:
            self._notes.append(f"Cache was unreadable ({exc}); parsing the run again.")
            self._files.clear()
            self._cache.clear()

    def _read_new(self, state: _FileState, size: int, done: int, total: int, progress: Progress | None) -> int:
        """Parse bytes [state.offset, size) of one file, up to its last newline."""
        writer = self._new_writer()
        offset, leftover = state.offset, b""
        kept, rows = [], 0
        start = (state.next_line, len(state.errors), state.skipped)
        try:
            with open(state.path, "rb") as fh:
                fh.seek(offset)
                while offset + len(leftover) < size:
                    chunk = fh.read(min(READ_CHUNK, size - offset - len(leftover)))
                    if not chunk:
                        break
                    buffer = leftover + chunk
                    cut = buffer.rfind(b"\n") + 1
                    block, leftover = buffer[:cut], buffer[cut:]
                    if block:
                        table = self._parse(state, block)
                        offset += len(block)
                        rows += table.num_rows
                        if writer is not None:
                            writer.write(table)
                        else:
                            kept.append(table)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
            name = None
            if writer is not None and rows:
                name = writer.close()
                kept = [self._cache.open_segment(name)]
            elif writer is not None:
                writer.abort()
            writer = None
            if rows:
                table = pa.concat_tables(kept)
                state.segments.append((name, table, _frame(table)))
        except OSError as exc:
            if writer is not None:
                writer.abort()
            if self._cache is None or isinstance(exc, FileNotFoundError):
                raise
            self._notes.append(f"Could not write the cache in {self._cache.folder} ({exc}); not caching.")
            self._cache = None
            state.next_line, state.skipped = start[0], start[2]
            del state.errors[start[1]:]
            return self._read_new(state, size, done, total, progress)
        state.offset = offset
        state.pending = bool(leftover)
        state.entry = FileEntry.describe(state.path, offset, state.next_line,
                                         [n for n, _, _ in state.segments if n], state.errors)
        return done

    def _parse(self, state: _FileState, block: bytes) -> pa.Table:
        parsed = parse_block(block, state.next_line, self._quota, self.max_per_step)
        state.next_line += block.count(b"\n")
        state.errors.extend(parsed.errors)
        state.skipped += parsed.skipped
        aggregates = compute_sample_aggregates(parsed.table, self.pad_token)
        table = parsed.table
        for name, field_ in zip(SEGMENT_SCHEMA.names[len(SCHEMA):], list(SEGMENT_SCHEMA)[len(SCHEMA):]):
            table = table.append_column(field_, pa.array(aggregates[name], type=field_.type))
        return table

    def _new_writer(self):
        if self._cache is None or self.max_per_step is not None:
            return None
        try:
            return self._cache.segment_writer(SEGMENT_SCHEMA)
        except OSError as exc:
            self._notes.append(f"Could not write the cache in {self._cache.folder} ({exc}); not caching.")
            self._cache = None
            return None

    def _save_manifest(self) -> None:
        if self._cache is None or self.max_per_step is not None:
            return
        entries = {name: state.entry for name, state in self._files.items() if state.entry is not None}
        try:
            self._cache.write_manifest(entries, self.pad_token)
            self._cache.remove_segments({seg for e in entries.values() for seg in e.segments})
        except OSError as exc:
            self._notes.append(f"Could not write the cache in {self._cache.folder} ({exc}); not caching.")
            self._cache = None

    # -- the snapshot ---------------------------------------------------------------------------

    def _snapshot(self, paths: list[Path], ignored: list[str]) -> Run:
        names = [p.name for p in paths]
        frames, segments = [], {}
        for file_index, name in enumerate(names):
            state = self._files[name]
            for seg_index, (_, table, frame) in enumerate(state.segments):
                segments[(file_index, seg_index)] = table
                frames.append(frame.assign(**{F.FILE: file_index, "seg": seg_index}))
        samples = (pd.concat(frames, ignore_index=True) if frames
                   else _frame(SEGMENT_SCHEMA.empty_table()).assign(**{F.FILE: 0, "seg": 0}))
        samples = samples.sort_values([F.STEP, F.FILE, F.LINE], kind="stable", ignore_index=True)
        skipped = sum(s.skipped for s in self._files.values())
        if self.max_per_step is not None:
            before = len(samples)
            samples = samples.groupby(F.STEP, sort=False).head(self.max_per_step).reset_index(drop=True)
            skipped += before - len(samples)
        samples["reward_gap"] = samples[F.REWARD] - samples["ref_reward"]
        for name in ("response", "ref_response"):
            text = samples[name].str.replace(self.pad_token, "", regex=False) if self.pad_token else samples[name]
            samples[f"{name}_chars"] = text.str.len()
        samples["source"] = [f"{names[f]}:{line}" for f, line in zip(samples[F.FILE], samples[F.LINE])]
        errors = tuple((name, line, reason) for name in names for line, reason in self._files[name].errors)
        report = LoadReport(
            files=tuple(names), lines_ok=len(samples), lines_bad=len(errors), errors=errors, skipped=skipped,
            ignored_files=tuple(ignored), pending=tuple(n for n in names if self._files[n].pending),
            notes=tuple(self._notes),
        )
        return Run(self.run_dir, samples, compute_step_stats(samples), report, self.pad_token, segments)


def _frame(table: pa.Table) -> pd.DataFrame:
    """The per-sample columns of a segment (token lists stay in Arrow), with each row's index."""
    frame = table.drop_columns(_TOKEN_COLUMNS).to_pandas()
    frame["row"] = np.arange(len(frame), dtype=np.int64)
    return frame


def load_run(run_dir: Path | str, pad_token: str | None = None, max_per_step: int | None = None,
             cache_root: Path | None | bool = None, progress: Progress | None = None) -> Run:
    """Read a run folder once and return it (``RunSource(...).refresh()``)."""
    return RunSource(run_dir, pad_token, max_per_step, cache_root).refresh(progress)
