"""Every run under a root folder, at any depth: the runs list the page opens on.

``discover_runs(root)`` walks the folders under ``root`` (breadth first, hidden ones skipped,
never leaving the allowed folders) and names a folder a run when a reader claims it
(``readers.holds_run``); a run of a flat format (its files lie in its folder) may hold other runs
in its subfolders, a run of a tree format (prime-rl's ``rollouts/step_N/...``) is not looked
into. A folder reached again (through a symbolic link, a loop of them) is looked at once, by its
resolved location: the first path met, breadth first and a folder before a link at each level,
names it; a folder that can't be listed is skipped and named in a note. Each run is listed by its
path relative to the root ("." for the root itself, so a run folder given as the root opens
itself), with its format, splits and, from its files, their
count, size and last write; its steps and samples come from the board's cache when a cache of
it holds every one of its files as they are now, else steps from the file names when every name
carries one (``layout.step_in``), else unknown. Folders holding files that look like logs which
no reader claims are listed with the reason. The walk goes as deep as the runs lie and stops after
``max_folders`` folders (``max_depth`` levels too, where a caller gives one); a note says so and
``Discovery.cut`` is set, so a run it did not reach is named as such, never as "not under this root".
"""

from __future__ import annotations

import json
import os
from collections import Counter, deque
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

from ..base.access import RootError
from ..base.compression import base_name, codec_of
from ..base.location import RunLocation, open_location
from ..readers import describe_size, layout
from ..readers.registry import claimants
from .cache import MANIFEST, default_cache_root
from .tracking import EXPECTED_LAYOUT, ROOT_RUN, NoRunsError, list_run_files, list_splits, natural_key

MAX_DEPTH = None  # folder levels below the root looked into: no bound (AReaL writes runs 7 levels down); the
#                   walk is bounded by MAX_FOLDERS instead
MAX_FOLDERS = 2_000  # folders looked at before the walk stops (breadth first: the shallowest first)
MAX_CACHES = 500  # cache manifests read for steps and samples

#: Suffixes of files that hold logs: a folder of them that no reader claims is named, with the reason.
LOG_SUFFIXES = {".jsonl": "JSON lines", ".json": "JSON", ".parquet": "Parquet", ".csv": "CSV", ".tsv": "TSV",
                ".pt": "PyTorch pickles", ".pkl": "pickles", ".pickle": "pickles", ".npz": "NumPy arrays",
                ".npy": "NumPy arrays", ".arrow": "Arrow", ".db": "SQLite", ".zip": "zip archives",
                ".tar": "tar archives", ".log": "text logs"}
_PICKLES = {".pt", ".pkl", ".pickle"}
_METRICS_NAMES = ("trainer_state.json", "trainer_log_history.json", "log_history.json", "metrics.json")
#: The JSON files of a model or tokenizer folder (Hugging Face's): not logs, so such a folder is not named.
MODEL_FILES = frozenset({"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                          "added_tokens.json", "config.json", "generation_config.json", "preprocessor_config.json",
                          "chat_template.json", "model.safetensors.index.json", "pytorch_model.bin.index.json"})
#: A tool's own store beside a run, never a run: (the file that marks the folder, its sub-folders not looked
#: into). trackio's logbook keeps agent-session transcripts in ``traces/raw/*.jsonl`` beside ``trace_sources.json``.
INTERNAL_STORES = (("trace_sources.json", frozenset({"traces", "logbook", "trace_dataset"})),)
_NO_LOGS = MODEL_FILES | {marker for marker, _ in INTERNAL_STORES}


@dataclass(frozen=True)
class RunInfo:
    """One run under the root."""

    name: str  # its path relative to the root, with "/"; "." for the root itself
    path: Path
    format: str  # the reader's NAME
    # the rest only with ``details``
    splits: tuple[str, ...] = ()
    files: int = 0  # the run's files (of every split)
    compressed: int = 0  # of them, compressed (read whole)
    size: int = 0  # bytes on disk of its files
    last_write: float = 0.0  # seconds since the epoch: the newest file's modification time (0 when none)
    steps: int | None = None  # None when unknown (not in the cache, not in the file names)
    samples: int | None = None  # None when not in the cache
    counted_from: str = ""  # "cache", "file names" or "" (unknown)


@dataclass(frozen=True)
class Unclaimed:
    """A folder holding files that look like logs, which no reader reads."""

    name: str  # its path relative to the root
    reason: str
    metrics_only: bool = False  # its log files are a trainer's metrics or text logs, nothing else


@dataclass
class Discovery:
    """The runs under a root, the folders of logs no reader claims, and whether the walk was cut."""

    root: Path
    runs: list[RunInfo] = field(default_factory=list)
    unclaimed: list[Unclaimed] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cut: bool = False  # the walk stopped before it looked at every folder (MAX_FOLDERS, or a depth given)

    def names(self) -> list[str]:
        return [run.name for run in self.runs]


def discover_runs(root: Path | str | RunLocation, max_depth: int | None = MAX_DEPTH, max_folders: int = MAX_FOLDERS,
                  cache_root: Path | None = None, details: bool = True) -> Discovery:
    """Every run under ``root`` (see the module). ``details``: list each run's files and look up its
    steps and samples in the cache (``cache_root``, default the board's); without, only the names,
    formats and folders (what a run picker needs, for the price of the walk). Raises ``RootError``
    (or ``OutsideAllowedFolders``) for a root that is not an allowed folder, and when nothing under it
    is a run."""
    location = open_location(root)  # the door: before anything under it is looked at
    top = location.path
    if not top.exists():
        raise RootError(f"Folder not found: {top}. " + EXPECTED_LAYOUT)
    if not top.is_dir():
        raise RootError(f"{top} is a file, not a folder. " + EXPECTED_LAYOUT)
    found = Discovery(top)
    queue, seen = deque([(top, 0)]), 0
    runs: list[tuple[str, Path, object]] = []
    visited: set = set()  # folders by resolved location: one reached again through a link is not listed again
    unreadable: list[tuple[str, OSError]] = []
    while queue:
        folder, depth = queue.popleft()
        seen += 1
        if seen > max_folders:
            found.notes.append(f"Stopped after {max_folders:,} folders; open a folder further down to see the "
                               "runs in the rest.")
            found.cut = True
            break
        name = ROOT_RUN if folder == top else folder.relative_to(top).as_posix()
        try:
            resolved = location.fs.resolve(folder)
            if resolved in visited:
                continue
            visited.add(resolved)
            entries = location.entries(folder)
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop, as pathlib reports it
            unreadable.append((name, exc))
            continue
        reader = _claim(folder, entries)
        if reader is not None:
            runs.append((name, folder, reader))
            if not layout.is_flat(reader):
                continue  # its subfolders are its own files
        else:
            reason = _unclaimed_reason(entries)
            if reason:
                found.unclaimed.append(Unclaimed(name, *reason))
        names = {p.name for p in entries}
        internal = {sub for marker, subs in INTERNAL_STORES if marker in names for sub in subs}
        subfolders = sorted((p for p in entries if not p.name.startswith(".") and p.name not in internal
                             and _is_dir(p)),
                            key=lambda p: (_is_link(p), natural_key(p.name)))  # a folder before a link to it
        if subfolders and max_depth is not None and depth >= max_depth:
            if not any(note.startswith("Folders deeper") for note in found.notes):  # said once
                levels = f"{max_depth} level{'s' if max_depth != 1 else ''}"
                found.notes.append(f"Folders deeper than {levels} below the root are not looked into "
                                   f"(e.g. {(subfolders[0].relative_to(top)).as_posix()}).")
            found.cut = True
            continue
        queue.extend((p, depth + 1) for p in subfolders)
    if unreadable:
        found.notes.append(_unreadable_note(unreadable))
    runs.sort(key=lambda item: (item[0] != ROOT_RUN, natural_key(item[0])))
    found.unclaimed = [u for u in found.unclaimed if not (u.metrics_only and _holds_run_below(u.name, runs))]
    if details:
        cached = _cached_counts(cache_root, {folder.resolve() for _, folder, _ in runs})
        found.runs = [_describe(location, name, folder, reader, cached) for name, folder, reader in runs]
    else:
        found.runs = [RunInfo(name, folder, reader.NAME) for name, folder, reader in runs]
    found.unclaimed.sort(key=lambda u: natural_key(u.name))
    if not found.runs:
        message = f"No runs in {top}: no folder under it holds files a reader reads."
        if found.unclaimed:
            message += " " + "; ".join(f"{u.name}: {u.reason}" for u in found.unclaimed[:3]) + "."
        raise NoRunsError(" ".join([message, *found.notes, EXPECTED_LAYOUT]))
    return found


def _unreadable_note(unreadable: list[tuple[str, OSError]]) -> str:
    """The note naming the folders that could not be listed (the first few, with why) and so were skipped."""
    shown = "; ".join(f"{name} ({getattr(exc, 'strerror', None) or exc})" for name, exc in unreadable[:5])
    more = f"; and {len(unreadable) - 5:,} more" if len(unreadable) > 5 else ""
    return f"{len(unreadable):,} folder(s) could not be read and were skipped: {shown}{more}."


def _is_link(path: Path) -> bool:
    return isinstance(path, Path) and path.is_symlink()  # a URL's store has no links


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def _claim(folder: Path, entries: list[Path]):
    """The reader that claims ``folder`` (whose entries are ``entries``) as a run, or None. A reader is
    asked (``layout.holds``, which globs) only when one of its patterns could match: its first part
    names a file of the folder (a one-part pattern) or a subfolder; most folders of a big tree end
    there, without a glob."""
    files = [p.name for p in entries if not p.name.startswith(".") and _is_file(p)]
    folders = [p.name for p in entries if not p.name.startswith(".") and _is_dir(p)]
    for candidates, load in claimants():  # a built-in reader is imported only once its patterns could match
        if not any(any(fnmatchcase(name, first) for name in (files if rest == "" else folders))
                   for first, _, rest in (c.partition("/") for c in candidates)):
            continue
        reader = load()
        try:
            if layout.holds(reader, folder):
                return reader
        except OSError:
            continue
    return None


def _holds_run_below(name: str, runs: list[tuple[str, Path, object]]) -> bool:
    """Whether folder ``name`` is the parent or grandparent of a run: the Trainer metrics area of that run
    reads the metrics lying there (``scalars.discover``), so the folder is the run's, not unread logs."""
    prefix = "" if name == ROOT_RUN else name + "/"
    return any(run != ROOT_RUN and run.startswith(prefix) and run[len(prefix):].count("/") <= 1 for run, _, _ in runs)


def _unclaimed_reason(entries: list[Path]) -> tuple[str, bool] | None:
    """(why the log-like files among ``entries`` (a folder no reader claims) are not read, whether they
    are all a trainer's metrics or text logs), or None when it holds none."""
    from ..readers.formats import jsonl

    kinds: Counter = Counter()
    names, metrics_only = [], True
    for path in entries:
        if path.name.startswith(".") or path.name in _NO_LOGS or not _is_file(path):
            continue
        plain = base_name(path.name)
        suffix = Path(plain).suffix.lower()
        if suffix in LOG_SUFFIXES and plain not in MODEL_FILES:
            kinds[suffix] += 1
            names.append(path.name)
            metrics_only = metrics_only and (suffix == ".log" or plain in _METRICS_NAMES
                                             or jsonl.other_kind(path) is not None)
    if not kinds:
        return None
    parts = [f"{count} {suffix} file{'s' if count != 1 else ''}" for suffix, count in kinds.most_common()]
    held = ", ".join(parts)
    if set(kinds) <= _PICKLES:
        return f"{held}: pickles are never opened (they can run code); log samples as JSON lines", False
    if any(name in _METRICS_NAMES for name in names) and set(kinds) <= {".json", ".jsonl"}:
        return f"{held}: a trainer's metrics, not samples (open them under Trainer metrics)", metrics_only
    if set(kinds) <= {".json", ".jsonl"}:
        return (f"{held}: no reader reads them as samples (a trainer's metrics? open them under Trainer metrics)",
                metrics_only)
    return f"{held}: no reader reads this layout", metrics_only


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _describe(location: RunLocation, name: str, folder: Path, reader, cached: dict) -> RunInfo:
    """A run's row: its files listed once (every split), counted from the cache or the listing."""
    try:
        run = location.within(folder)
        paths, _ = list_run_files(run, reader)
        splits = tuple(list_splits(run, reader))
    except (OSError, RootError):
        paths, splits = [], ()
    stats = {}
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            continue
        stats[layout.relative_name(folder, path)] = (st.st_size, st.st_mtime_ns)
    size = sum(s for s, _ in stats.values())
    last = max((t for _, t in stats.values()), default=0) / 1e9
    steps, samples, source = None, None, ""
    # the counts are the split the page opens first: a cache holds one split, and a run's eval steps are
    # no more training steps
    split = layout.choose_split(reader, list(splits), None)
    opened = {name: stat for name, stat in stats.items() if split is None or layout.split_of(reader, name) == split}
    hit = cached.get(folder.resolve())
    if hit is not None:
        for files, counted in hit:
            if files == opened:
                (steps, samples), source = counted(), "cache"
                break
    if source == "" and opened:
        found = [layout.step_of(reader, name) for name in opened]
        if all(step is not None for step in found):
            steps, source = len(set(found)), "file names"
    return RunInfo(name, folder, reader.NAME, splits, len(stats), sum(1 for n in stats if codec_of(n)), size, last,
                   steps, samples, source)


def _cached_counts(cache_root: Path | None, wanted: set[Path]) -> dict:
    """Run folder -> [(file name -> (size, mtime_ns) as the manifest has them, a function counting
    (steps, samples) from its segments)], for the caches of the ``wanted`` folders."""
    root = Path(cache_root or default_cache_root())
    out: dict[Path, list] = {}
    try:
        folders = [entry for entry in os.scandir(root) if entry.is_dir()][:MAX_CACHES * 4]
    except OSError:
        return out
    read = 0
    wanted_names = {str(path) for path in wanted}
    for entry in folders:
        if read >= MAX_CACHES:
            break
        try:
            raw = json.loads((Path(entry.path) / MANIFEST).read_text())
        except (OSError, ValueError):
            continue
        read += 1
        if not isinstance(raw, dict) or raw.get("run_dir") not in wanted_names or not isinstance(raw.get("files"),
                                                                                                  dict):
            continue
        try:
            files = {str(n): (int(e["size"]), int(e["mtime_ns"])) for n, e in raw["files"].items()}
            segments = [s[0] for e in raw["files"].values() for s in e.get("segments", [])]
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            continue
        out.setdefault(Path(raw["run_dir"]), []).append((files, _counter(Path(entry.path), segments)))
    return out


def _counter(folder: Path, segments: list[str]):
    def count() -> tuple[int | None, int | None]:
        import pyarrow as pa

        from .segments import with_one_value_columns  # a segment of one step leaves its step out

        steps, samples = set(), 0
        try:
            for name in segments:
                with pa.memory_map(str(folder / name), "r") as source:
                    table = with_one_value_columns(pa.ipc.open_file(source).read_all())
                    samples += table.num_rows
                    steps.update(table["step"].unique().to_pylist())
        except (OSError, KeyError, pa.ArrowException):
            return None, None
        return len(steps), samples

    return count


def describe_runs(runs: list[RunInfo]) -> list[dict[str, str]]:
    """The runs list as a person reads it, one dict of column -> text per run (unknown counts as "–")."""
    from datetime import datetime

    def count(value: int | None) -> str:
        return "–" if value is None else f"{value:,}"

    rows = []
    for run in runs:
        files = f"{run.files:,}" + (f" ({run.compressed:,} compressed)" if run.compressed else "")
        rows.append({"Run": run.name, "Format": run.format, "Splits": ", ".join(run.splits) or "–",
                     "Steps": count(run.steps), "Samples": count(run.samples), "Files": files,
                     "Size": describe_size(run.size),
                     "Last write": datetime.fromtimestamp(run.last_write).strftime("%Y-%m-%d %H:%M")
                     if run.last_write else "–"})
    return rows
