"""The segment store: where a run's parsed rows live, as Arrow IPC segment files.

With a cache (``cache.py``) segments are written to the run's cache folder and stay
there, memory-mapped, named by the manifest; without one (caching off, or the cache
folder unusable) they go to a scratch folder and are read into memory at once. The
store writes, opens and merges segments, saves the manifest, removes segments no
manifest names, and keeps all caches under their size limit. It notes what went
wrong (and falls back to not caching) instead of raising.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import fields as F
from ..readers.extras import merged_notes
from .cache import FileEntry, RunCache, Untrusted, enforce_limit, segment_name, write_named

if TYPE_CHECKING:
    import pyarrow as pa

SMALL_SEGMENT_BYTES = 4 << 20  # a segment covering fewer log bytes came from a live refresh, not a cold read
MAX_SMALL_SEGMENTS = 8  # past this many small segments at a file's end, they are merged

Segment = tuple[str, int, "pa.Table"]  # (file name in the cache or "", number of its first line, rows)


#: schema metadata of a segment file: the columns of one value it leaves out, and how to make them again
ONE_VALUE_KEY = b"rl_board.one_value"
_TYPES = ("double", "int64", "int32", "bool")  # the types of a column of one value left out of a segment


@functools.cache
def _always_kept() -> frozenset[str]:
    """The columns a segment always keeps whatever they hold: its texts and lists (read from the mapped
    file by ``analysis.segment_queries``) and where each row lies (read by ``compact``). A function:
    ``derive`` is imported when a segment is written, not before a command's first range."""
    from ..derive.samples import TURN_COLUMNS

    return frozenset((*F.TEXT_FIELDS, "token_words", *TURN_COLUMNS, F.LINE, "offset", "length"))


def _one_value(column: pa.ChunkedArray) -> list | None:
    """How a column holding one value is made again (``["null"]``: every row null; ``["bits", b]``: a
    float64 whose every row has the bits ``b``, so NaN and -0.0 come back as they were; ``["value", v]``),
    or None for a column of several values or a type not in ``_TYPES``."""
    import numpy as np
    import pyarrow as pa

    if str(column.type) not in _TYPES or not len(column):
        return None
    if column.null_count == len(column):
        return ["null"]
    if column.null_count:
        return None
    parts = [chunk.to_numpy(zero_copy_only=False) for chunk in column.chunks if len(chunk)]
    if column.type == pa.float64():
        parts = [part.view(np.int64) for part in parts]
    first = parts[0][0]
    if not all((part == first).all() for part in parts):
        return None
    return ["bits", int(first)] if column.type == pa.float64() else ["value", first.item()]


def _without_one_value_columns(table: pa.Table) -> pa.Table:
    """``table`` without its columns of one value (``_one_value``), named with how to make each again in
    its schema's metadata: a run without per-token lists has some twenty such columns (NaN aggregates,
    zero counts), a third of a verl dump's segment and most of a TRL one's, written for nothing."""
    if not table.num_rows:
        return table
    made, kept = {}, _always_kept()
    for field in table.schema:
        if field.name not in kept:
            how = _one_value(table.column(field.name))
            if how is not None:
                made[field.name] = [str(field.type), *how]
    if not made:
        return table
    metadata = dict(table.schema.metadata or {})
    metadata[ONE_VALUE_KEY] = json.dumps({"order": table.column_names, "made": made}).encode()
    return table.drop_columns(list(made)).replace_schema_metadata(metadata)


def with_one_value_columns(table: pa.Table) -> pa.Table:
    """A segment's rows with the columns of one value it left out made again, in their place (the table
    itself for a segment that left none out). Each made column is a slice of one array shared by every
    segment that left the same value out (``_one_value_array``): the run's snapshot, which holds every
    segment's numbers at once, holds one copy of each such value, not one a segment."""
    import pyarrow as pa

    raw = (table.schema.metadata or {}).get(ONE_VALUE_KEY)
    if raw is None:
        return table
    order, made = _spec(raw)
    rows = table.num_rows
    arrays = [_one_value_array(made[name], rows) if name in made else table.column(name) for name in order]
    metadata = {k: v for k, v in table.schema.metadata.items() if k != ONE_VALUE_KEY}
    return pa.Table.from_arrays(arrays, names=order).replace_schema_metadata(metadata or None)


@functools.lru_cache(maxsize=64)
def _spec(raw: bytes) -> tuple[list[str], dict[str, tuple]]:
    """(the column order, name -> how its one value is made) of a segment's ``ONE_VALUE_KEY`` metadata,
    parsed once for all the segments of a run that say the same."""
    spec = json.loads(raw)
    return spec["order"], {name: tuple(how) for name, how in spec["made"].items()}


_SHARED_VALUES: dict[tuple, pa.Array] = {}  # (type, how, value) -> an array of it, as long as any asked for
#: the bytes every array ``_one_value_array`` shares may hold together in one process (a page server opens
#: run after run for days: without it they only grow). Past it a segment's column of one value is made for
#: it alone (the same values; ``columns.gather`` then compares it row by row instead of by its address)
SHARED_VALUES_BYTES = 256 * 2**20
_shared_bytes = 0
#: the address of the last buffer of every array ``_one_value_array`` made -> the array, kept for the process's
#: life (the sizes double: at most twice the longest segment's rows a value), so no other array is ever there
_SHARED_ADDRESSES: dict[int, pa.Array] = {}


def one_value_source(column: pa.ChunkedArray) -> tuple[int, bool] | None:
    """(the address of the shared array of one value ``column`` is a slice of, whether it is nulls) when it is
    one (``with_one_value_columns`` made it), else None: two such columns from the same address hold the
    same value in every row, which ``columns.gather`` then needs not compare row by row."""
    if column.num_chunks != 1:
        return None
    chunk = column.chunk(0)
    last = chunk.buffers()[-1]
    if last is None or last.address not in _SHARED_ADDRESSES:
        return None
    return last.address, chunk.null_count > 0


def _one_value_array(how: tuple, rows: int) -> pa.Array:
    """``rows`` rows of the one value ``how`` names (``_one_value``'s answer after the type's name), a
    zero-copy slice of an array kept for every segment that asks for the same value."""
    global _shared_bytes
    shared = _SHARED_VALUES.get(how)
    if shared is None or len(shared) < rows:
        size = max(rows, 2 * len(shared) if shared is not None else 0)
        made = _made(how, size)
        if _shared_bytes + made.nbytes > SHARED_VALUES_BYTES:  # past the bound: this segment's own array
            return _made(how, rows) if size > rows else made
        shared = made
        _shared_bytes += made.nbytes
        _SHARED_VALUES[how] = shared
        _SHARED_ADDRESSES[shared.buffers()[-1].address] = shared
    return shared.slice(0, rows)


def _made(how: tuple, size: int) -> pa.Array:
    """An array of ``size`` rows of the one value ``how`` names."""
    import numpy as np
    import pyarrow as pa

    type_name, kind, *value = how
    type_ = pa.type_for_alias(type_name)
    if kind == "null":
        return pa.nulls(size, type_)
    if kind == "bits":
        return pa.array(np.full(size, value[0], np.int64).view(np.float64))
    return pa.array(np.full(size, value[0], type_.to_pandas_dtype()), type_)


def full_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of a segment's rows with the columns of one value it left out (``with_one_value_columns``)."""
    import pyarrow as pa

    raw = (schema.metadata or {}).get(ONE_VALUE_KEY)
    if raw is None:
        return schema
    order, made = _spec(raw)
    return pa.schema([pa.field(name, pa.type_for_alias(made[name][0])) if name in made else schema.field(name)
                      for name in order])


def write_segment(table: pa.Table, out_dir: str) -> str:
    """Write ``table`` as a new segment file in ``out_dir`` (its columns of one value left out, see
    ``with_one_value_columns``); returns its name, which carries the xxh3-128 digest of its bytes
    (``cache.segment_name``): what the cache checks it against when it is opened again."""

    table = _without_one_value_columns(table.unify_dictionaries())  # an IPC file holds one dictionary per
    # column for all its chunks
    return write_named(table, out_dir, segment_name)


def _source_bytes(table: pa.Table) -> int:
    """How many bytes of its log file a segment's rows span."""
    offsets, lengths = table["offset"], table["length"]
    return offsets[-1].as_py() + lengths[-1].as_py() - offsets[0].as_py() if table.num_rows else 0


def _arrow_error() -> type:
    """pyarrow's base error, imported only when an error is matched against it (a cold read's look at an
    empty cache comes before a command's first range, which needs no pyarrow)."""
    import pyarrow as pa

    return pa.ArrowException


class SharedSlice:
    """Rows [start, start + num_rows) of a segment several small files share (``batches.read_small_files``):
    one file's part of it, in a file's segment list where a table would be. A table slice per file
    costs a table of ~80 columns each (GBs for 100,000 files); this costs three numbers. ``table()``
    makes the slice where one is needed; a snapshot takes consecutive files' parts at once."""

    __slots__ = ("parent", "start", "num_rows")

    def __init__(self, parent: pa.Table, start: int, num_rows: int):
        self.parent, self.start, self.num_rows = parent, start, num_rows

    def table(self) -> pa.Table:
        return self.parent.slice(self.start, self.num_rows)


def as_table(table) -> pa.Table:
    """A segment's rows as a table (a ``SharedSlice`` sliced)."""
    return table.table() if isinstance(table, SharedSlice) else table


class SegmentStore:
    """Where one run's segments live: its cache folder, or a scratch folder when there is none.

    Args:
        cache: the run's cache, or None to keep rows in memory only.
        notes: a list the store appends what the user should know to (a cache it could not use).
    """

    def __init__(self, cache: RunCache | None, notes: list[str], shared=None):
        self.cache = cache
        self.notes = notes
        self.remote = shared  # the team's cache at a URL (``shared.SharedCache``), pulled on load, pushed on save
        self._scratch: str | None = None  # a folder for segments when there is no cache, removed with this object
        self._stamp: tuple | None = None  # the manifest as this process last read or wrote it

    def _give_up(self, what: str, exc: Exception) -> None:
        self.notes.append(f"Could not {what} the cache in {self.cache.folder} ({exc}); not caching.")
        self.cache = None

    @contextlib.contextmanager
    def shared(self):
        """Hold the cache's lock across a refresh, so processes sharing it never delete or
        half-read each other's segments. Yields whether another process changed the manifest
        since this one last read or wrote it (then start again from the manifest)."""
        with contextlib.ExitStack() as stack:
            if self.cache is not None:
                try:
                    stack.enter_context(self.cache.locked())
                except OSError as exc:
                    self._give_up("use", exc)
            changed = self.cache is not None and self.cache.manifest_stamp() != self._stamp
            yield changed
            if self.cache is not None:
                self._stamp = self.cache.manifest_stamp()

    def forget_stamp(self) -> None:
        self._stamp = None

    def load(self, key: str, files: list[tuple[str, Path]], appendable: bool, check_rows=None
             ) -> dict[str, tuple[FileEntry, list[Segment]]]:
        """File name -> (manifest entry, opened segments) for each (name, path) of ``files`` the cache holds
        unchanged or grown; {} without a cache, or when the cache is unreadable (then it is
        cleared and a note says so). Each segment is checked as it is opened (``RunCache.open_segment``):
        one edited, damaged or unreadable is deleted and the files it held are left out (they are read
        again), with a note naming it and why. A copy just pulled from the shared cache is used only when
        ``check_rows(found, paths)`` (``shared.rows_match_logs``) finds its rows in the viewer's own logs;
        else the local copy is emptied, a note says why, and {} is returned (the run is read from its logs)."""
        if self.cache is None:
            return {}
        found, opened = {}, {}  # a segment small files share is opened once
        damaged: dict[str, tuple[str, list[str]]] = {}  # segment -> (why, the files it held)
        pulled = self._share("read")
        try:
            entries = self.cache.read_manifest(key)
            for file_name, path in files:
                entry = entries.get(file_name)
                if entry is None or entry.status(path, appendable, ends=True) == "stale":
                    continue
                segments = self._open_segments(entry, opened, damaged)
                if segments is None:
                    damaged[next(n for n, *_ in entry.segments if n in damaged)][1].append(file_name)
                    continue
                found[file_name] = (entry, segments)
        except (OSError, ValueError, TypeError, _arrow_error()) as exc:
            self.notes.append(f"The cache was unreadable ({exc}); parsed the run again.")
            self.cache.clear()
            return {}
        for name, (why, held) in damaged.items():
            (self.cache.folder / name).unlink(missing_ok=True)
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            self.notes.append(f"The cache's segment {name} was rebuilt: {why}. Read again from the logs: {shown}.")
        if pulled and found and check_rows is not None:
            try:
                why = check_rows(found, dict(files))
            except Exception as exc:  # a log that can't be read again (gone, refused): the copy is not taken
                why = f"its rows could not be read again from your logs ({type(exc).__name__}: {exc})"
            if why is not None:
                self.notes.append(self.remote.note("read", Untrusted(why)))
                self.cache.empty()
                return {}
        return found

    def _open_segments(self, entry: FileEntry, opened: dict, damaged: dict) -> list[Segment] | None:
        """The segments of ``entry``, each opened and checked once (``opened``); None when one of them
        can't be used (it is put in ``damaged`` with why)."""
        import pyarrow as pa

        from ..derive.samples import is_segment_schema

        segments = []
        for name, first_line, *span in entry.segments:
            if name in damaged:
                return None
            if name not in opened:
                try:
                    table = self.cache.open_segment(name, check=True)
                    if not is_segment_schema(full_schema(table.schema)):
                        raise ValueError("its columns are not a segment's")
                except FileNotFoundError:
                    damaged[name] = ("it was missing", [])
                    return None
                except (OSError, ValueError, pa.ArrowException) as exc:
                    damaged[name] = (str(exc).splitlines()[0] if str(exc) else type(exc).__name__, [])
                    return None
                opened[name] = table
            table = opened[name]
            if span:
                if span[0] + span[1] > table.num_rows:
                    damaged[name] = ("it is shorter than the manifest says", [])
                    return None
                table = SharedSlice(table, *span)
            segments.append((name, first_line, table))
        return segments

    def publish_url(self) -> str | None:
        """Where a cluster's tasks put the segments they write: this run's folder of the shared cache at a
        URL (they can't reach this machine's folder), else None (they write to ``out_dir``)."""
        if self.remote is None or self.cache is None:
            return None
        return f"{self.remote.url}/{self.cache.folder.name}"

    def out_dir(self) -> tuple[str, bool]:
        """(where new segments go, whether they stay there as the cache)."""
        if self.cache is not None:
            try:
                self.cache.folder.mkdir(parents=True, exist_ok=True)
                probe = self.cache.folder / ".write-test"
                probe.write_bytes(b"")
                probe.unlink()
                return str(self.cache.folder), True
            except OSError as exc:
                self._give_up("write", exc)
        if self._scratch is None:
            # removed when this object goes, silently: a read that raised (a field mapping that finds
            # nothing) leaves it to the collector, where a TemporaryDirectory would warn
            self._scratch = tempfile.mkdtemp(prefix="rl_board-")
            weakref.finalize(self, shutil.rmtree, self._scratch, ignore_errors=True)
        return self._scratch, False

    def write_failed(self, out_dir: str, exc: OSError, key: str) -> None:
        """Writing segments to ``out_dir`` failed (a full disk, a size limit): remove the segments
        the manifest of ``key`` doesn't name and stop caching; the caller reads again keeping rows
        in memory."""
        self.notes.append(f"Could not write parsed rows to {out_dir} ({exc}); loaded the run without a cache.")
        if self.cache is not None:  # segments other workers finished before the failure: orphans now
            try:
                named = self.cache.read_manifest(key)
                self.cache.remove_segments({s[0] for e in named.values() for s in e.segments})
            except OSError:
                pass
        self.cache = None

    def open(self, name: str, out_dir: str, keep: bool) -> tuple[str, pa.Table]:
        """(its name in the cache or "", its rows) of the segment ``name`` just written to
        ``out_dir``: mapped from the cache, or read into memory (and its scratch file removed)."""
        import pyarrow as pa

        if keep:
            return name, self.cache.open_segment(name)
        segment = os.path.join(out_dir, name)
        with pa.OSFile(segment, "rb") as fh:
            table = pa.ipc.open_file(fh).read_all()
        os.unlink(segment)
        return "", table

    def compact(self, segments: list[Segment], out_dir: str | None, keep: bool) -> None:
        """Merge the small segments at the end of a file's list (each live refresh adds one) into one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if len(segments) <= MAX_SMALL_SEGMENTS:  # too few to merge (and no slice made for each of 100,000 files)
            return
        tail = 0
        while tail < len(segments) and _source_bytes(as_table(segments[-1 - tail][2])) < SMALL_SEGMENT_BYTES:
            tail += 1
        if tail <= MAX_SMALL_SEGMENTS:
            return
        merged = segments[-tail:]
        from ..derive.samples import SCHEMA
        from ..derive.step_stats import STATS_KEY

        first_line = merged[0][1]
        line = SCHEMA.get_field_index(F.LINE)
        table = pa.concat_tables(  # make every segment's line numbers count from the first one's start
            (t.set_column(line, F.LINE, pc.add(t[F.LINE], first - first_line))
             for _, first, t in ((n, f, with_one_value_columns(as_table(t))) for n, f, t in merged)),
            promote_options="default")
        table = merged_notes(as_table(t) for _, _, t in merged).attach(table)
        metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != STATS_KEY}
        table = table.replace_schema_metadata(metadata)  # (the first segment's step statistics: not the merged rows')
        name = ""
        if keep:
            name = write_segment(table, out_dir)
            table = self.cache.open_segment(name)
        segments[-tail:] = [(name, first_line, table)]

    def _share(self, verb: str) -> bool:
        """Pull the shared cache at a URL into the local one ("read") or push the local one to it ("write");
        a store's failure costs the sharing only: a note, and no more sharing for this run. Whether a pull
        took the URL's manifest."""
        if self.remote is None:
            return False
        try:
            return bool((self.remote.pull if verb == "read" else self.remote.push)(self.cache))
        except Exception as exc:  # a store's errors are many kinds
            self.notes.append(self.remote.note(verb, exc))
            self.remote = None
            return False

    def save(self, entries: dict[str, FileEntry], key: str, run_dir: Path) -> None:
        """Write the manifest, remove the segments it doesn't name, and keep all caches under the
        size limit."""
        if self.cache is None:
            return
        try:
            self.cache.write_manifest(entries, key, run_dir.resolve())
            self.cache.remove_segments({s[0] for e in entries.values() for s in e.segments})
            self._share("write")
            for folder in enforce_limit(self.cache.folder):
                self.notes.append(f"The cache was over its size limit: removed {folder.name}, used least recently.")
        except OSError as exc:
            self._give_up("write", exc)

    def empty(self) -> None:
        """Delete the cache's contents (once no other process is using it)."""
        if self.cache is not None:
            with self.cache.locked():
                self.cache.empty()
        self._stamp = None
