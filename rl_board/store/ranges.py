"""Reading one byte range of a run's file into a segment: the work a parsing worker (or the calling
process, or a Ray task) does for each task. A file's new bytes are cut into ranges that end on line
boundaries (``tasks_for``, about ``RANGES_PER_WORKER`` ranges per worker, 4-24 MB each); a range is read
block by block (``reader.parse_block``), its per-sample columns derived (``derive``), its bytes hashed
as read (the cache's check of the file), and its rows kept as one Arrow segment (``RangeResult``). A
compressed file is read whole, decompressing as it goes (``ingest_compressed``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from ..base import fields as F
from ..base.compression import TooLarge, open_path
from ..base.defaults import max_errors
from ..base.location import RunLocation, as_path, open_file
from ..base.remote import LocationError, fault_line
from ..readers import ReadOptions, line_too_long
from ..readers.extras import cap, merged_notes
from .fingerprints import _HASH_SPAN, head_tail_hashes
from .segments import write_segment

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

READ_CHUNK = 8 << 20  # bytes read as one block inside a range: on long lines 8 MB read 5-10 % faster than 2, 4 or


# 16 MB here (fewer fixed costs per block; a block's columns still fit the CPU caches), and it bounds a worker's memory
RANGE_BYTES = 24 << 20  # the most bytes per task handed to a worker
MIN_RANGE_BYTES = 4 << 20  # the fewest: below this a range's fixed costs (a segment file, its mapping) show
RANGES_PER_WORKER = 4  # a read is cut into about this many ranges per worker, dealt as workers free up (in
# order, the last ones largest first: ``ingest._handing_order``), so the last ones end within a small range of
# each other (24 MB ranges on 16 workers left most of them idle through a second round)
_SCAN_PIECE = 1 << 20  # bytes read at a time while looking for a line's end


@dataclass
class RangeResult:
    """What parsing bytes [start, end) of one file produced.

    end: the end of the last complete line (where the next read starts).
    lines: newlines consumed. segment: the segment file's name in the output
    folder, None when no line was kept. errors: (line within the range, reason) of the first
    rejected lines (``defaults.max_errors``); unlisted: how many more were rejected (``note_rejected``).
    pending: bytes after ``end`` up to the range's stop: a line still being written.
    error: why the whole file could not be read (table files), else None.
    table: the rows themselves, when parsed in memory (no output folder).
    unterminated: the range's last line had no newline but was a whole JSON object, and was read.
    """

    path: str
    start: int
    end: int
    lines: int = 0
    rows: int = 0
    segment: str | None = None
    errors: list[tuple[int, str]] = field(default_factory=list)
    skipped: int = 0
    unlisted: int = 0
    pending: bool = False
    error: str | None = None
    table: object = field(default=None, repr=False)
    unterminated: bool = False
    long_tail: int = 0  # bytes after the last newline, already over the line limit: never read
    digest: str | None = None  # xxh3-128 of bytes [start, end) as read (None: not all of them were held)
    # [first row, rows] of this range's rows in ``segment`` (or ``table``), when several small files share
    # one (``read_small_files``); None: the segment holds this range's rows only
    span: list[int] | None = None
    # sha1 of the head and of the tail (``cache.hash_span``) of bytes [0, end), when this range read them from
    # the file's start (a small file read in a batch, a file's first range): a file read in one range needs not
    # be read again by the parent for its cache entry
    hashes: list[str] | None = None


def ingest_range(reader, path: str, start: int, stop: int, out_dir: str | None, options: ReadOptions,
                 quota: dict[int, int] | None = None, max_per_step: int | None = None,
                 location: RunLocation | None = None) -> RangeResult:
    """Read the complete lines in bytes [start, stop) of ``path`` into a segment in ``out_dir``
    (kept in memory, in ``RangeResult.table``, when ``out_dir`` is None), through ``location``'s
    filesystem (None: a local file opened directly). A URL's store failing raises ``LocationError``
    (one line naming the object), whatever the library raised."""
    if location is None or not location.is_url:
        return _ingest_range(reader, path, start, stop, out_dir, options, quota, max_per_step, location)
    try:
        return _ingest_range(reader, path, start, stop, out_dir, options, quota, max_per_step, location)
    except LocationError:
        raise
    except Exception as exc:  # botocore's, aiohttp's, fsspec's: many kinds, one line
        raise LocationError(fault_line(path, exc)) from None


def _ingest_range(reader, path: str, start: int, stop: int, out_dir: str | None, options: ReadOptions,
                  quota: dict[int, int] | None, max_per_step: int | None, location: RunLocation | None) -> RangeResult:
    result = RangeResult(path, start, start)
    tables = []
    hasher, whole = xxhash.xxh3_128(), True  # what was read, hashed as it is (the cache's check of the file)

    def take(data: bytes, offset: int) -> None:
        _take_block(reader, data, offset, options, result, tables, quota, max_per_step)

    limit = options.max_line
    ends = _Ends() if start == 0 else None
    with open_in(location, path) as fh:
        fh.seek(start)
        position = start
        while position < stop:
            chunk = fh.read(min(READ_CHUNK, stop - position))
            if not chunk:
                break
            complete = chunk.rfind(b"\n") + 1
            if not complete:
                if len(chunk) < READ_CHUNK or position + len(chunk) >= stop:
                    break  # the tail: no newline before the range's end
                rest = find_newline(fh, stop - position - len(chunk))  # one line longer than a chunk
                if rest is None:
                    break
                size = len(chunk) + rest  # with its newline
                if size - 1 > limit:  # named and passed over, never held in memory
                    note_rejected(result, [(result.lines + 1, line_too_long(size - 1, limit))])
                    result.lines += 1
                    whole = False
                    position += size
                    fh.seek(position)
                    continue
                fh.seek(position)
                chunk = fh.read(size)
                complete = size
            take(chunk, position)
            hasher.update(memoryview(chunk)[:complete])
            if ends is not None:
                ends.add(memoryview(chunk)[:complete])
            position += complete
            fh.seek(position)
    if 0 < stop - position <= limit:  # bytes after the last newline: a finished line?
        with open_in(location, path) as fh:
            fh.seek(position)
            tail = fh.read(stop - position)
        if reader.is_whole_record(tail):  # the writer stopped before its newline
            take(tail + b"\n", position)
            hasher.update(tail)
            if ends is not None:
                ends.add(tail)
            position, result.unterminated = stop, True
    elif stop - position > limit:
        result.long_tail = stop - position
    result.end = position
    result.digest = hasher.hexdigest() if whole else None
    if ends is not None and whole and position > 0:  # (a line passed over is a gap in what was kept)
        result.hashes = ends.hashes()
    result.pending = position < stop
    _keep_blocks(result, tables, out_dir, options)
    return result


class _Ends:
    """The first and the last ``_HASH_SPAN`` bytes of what a range read from its file's start, block by block
    in order: their hashes are the file's head and tail hashes (``head_tail_hashes``) for its cache entry,
    taken here, in the worker, rather than read again from the file by the parent after the last range."""

    def __init__(self):
        self.head, self.tail = b"", b""

    def add(self, data: memoryview | bytes) -> None:
        if len(self.head) < _HASH_SPAN:
            self.head += bytes(data[:_HASH_SPAN - len(self.head)])
        self.tail = (self.tail + bytes(data[-_HASH_SPAN:]))[-_HASH_SPAN:]

    def hashes(self) -> list[str]:
        return [head_tail_hashes(self.head)[0], head_tail_hashes(self.tail)[1]]


def _take_block(reader, data: bytes, offset: int, options: ReadOptions, result: RangeResult, tables: list,
                quota: dict[int, int] | None, max_per_step: int | None) -> None:
    """Parse one block of complete lines (``data``, at byte ``offset`` of its file) into ``tables``, derived,
    counting its lines, rejected lines and (with ``max_per_step``) skipped ones into ``result``."""
    from ..derive.samples import derive  # not at the module's import: the parent plans ranges without it

    parsed = reader.parse_block(data, result.lines + 1, offset, options)
    result.lines += parsed.lines
    table = derive(parsed.table, options)
    errors, unlisted = parsed.errors, len(parsed.unlisted)
    if max_per_step is not None:
        table, skipped, errors, unlisted = keep_per_step(table, quota if quota is not None else {}, max_per_step,
                                                         errors, parsed.steps, parsed.unlisted, parsed.unlisted_steps)
        result.skipped += skipped
    note_rejected(result, errors, unlisted)
    if table.num_rows:
        tables.append(table)


def _keep_blocks(result: RangeResult, tables: list, out_dir: str | None, options: ReadOptions) -> None:
    """The blocks' rows as one segment of ``result`` (their field notes merged, the extras capped)."""
    import pyarrow as pa

    if tables:
        notes = merged_notes(tables)  # a concatenation keeps only the first table's
        table, _ = cap(notes.attach(pa.concat_tables(tables, promote_options="default")), options.max_extras)
        keep_rows(result, with_step_stats(table), out_dir)


def open_in(location: RunLocation | None, path):
    """One of the run's files for reading: through its location (a URL's object, or a local file
    checked against the roots again), or opened directly without one."""
    return open(path, "rb") if location is None else location.open(location.file(path))


def ingest_compressed(reader, path: str, size: int, out_dir: str | None, options: ReadOptions,
                      quota: dict[int, int] | None = None, max_per_step: int | None = None) -> RangeResult:
    """Read every line of the compressed file ``path`` (``base.compression``; ``size`` bytes on disk)
    into a segment, block by block as it decompresses. Offsets and lines count in the uncompressed
    bytes (where ``Run.record`` finds a sample again); the result covers the whole file on disk, so
    the file is read again whole when it changes."""
    result = RangeResult(path, 0, size)
    tables = []
    limit = options.max_line

    def take(data: bytes, offset: int) -> None:
        _take_block(reader, data, offset, options, result, tables, quota, max_per_step)

    long_line = None  # (index in result.errors, where it starts) of a line over the limit being passed over
    try:
        with open_path(path) as fh:
            position, carry, skipping = 0, b"", False  # skipping: inside a line over the limit
            while True:
                chunk = fh.read(READ_CHUNK)
                if not chunk:
                    break
                if skipping:
                    cut = chunk.find(b"\n")
                    if cut < 0:
                        position += len(chunk)
                        continue
                    position, chunk, skipping = position + cut + 1, chunk[cut + 1:], False
                    index, begun = long_line
                    if index is not None:
                        result.errors[index] = (result.errors[index][0], line_too_long(position - 1 - begun, limit))
                    long_line = None
                data = carry + chunk
                complete = data.rfind(b"\n") + 1
                if complete:
                    take(data[:complete], position)
                    position += complete
                carry = data[complete:]
                if len(carry) > limit:  # named and passed over, never held whole in memory
                    listed = note_rejected(result, [(result.lines + 1, line_too_long(len(carry), limit, at_least=True))])
                    long_line = (len(result.errors) - 1 if listed else None, position)
                    result.lines += 1
                    position += len(carry)
                    carry, skipping = b"", True
            if carry and not skipping and reader.is_whole_record(carry):  # the last line, without its newline
                take(carry + b"\n", position)
    except MemoryError:
        raise
    except TooLarge as exc:  # a bomb, or a file past the bounds: what came before it is kept
        result.error = str(exc)
    except Exception as exc:  # a broken archive (EOFError, lzma's and zstd's errors) costs this file only
        result.error = f"can't be decompressed ({type(exc).__name__}: {exc})"
    _keep_blocks(result, tables, out_dir, options)
    return result


def note_rejected(result: RangeResult, errors: list, more: int = 0) -> bool:
    """Add rejected lines (``errors``, (line, reason), and ``more`` counted only) to ``result``: the
    first ``defaults.max_errors`` are listed, the rest counted in ``unlisted``. Whether all of
    ``errors`` were listed."""
    room = max(0, max_errors() - len(result.errors))
    result.errors.extend(errors[:room])
    result.unlisted += max(0, len(errors) - room) + more
    return len(errors) <= room


def with_step_stats(table: pa.Table) -> pa.Table:
    """``table`` (one file's rows) with its steps' statistics in its metadata (``derive.step_stats``): the
    parent takes them for each step no other segment holds a row of, rather than computing them again."""
    from ..derive.step_stats import STATS_KEY, segment_step_stats  # (numpy: not at the parent's start)

    stats = segment_step_stats(table) if table.num_rows else None
    if stats is None:
        return table
    return table.replace_schema_metadata({**(table.schema.metadata or {}), STATS_KEY: stats})


def keep_rows(result: RangeResult, table: pa.Table, out_dir: str | None) -> None:
    """Put a range's segment rows where they go: a segment file in ``out_dir``, else memory."""
    from .words import keep_beside, without_words  # (pyarrow: not at a command's start)

    table, words = without_words(table)
    result.rows = table.num_rows
    if not table.num_rows:
        return
    if out_dir is None:
        result.table = table
    else:
        result.segment = write_segment(table, out_dir)
        if words is not None:
            keep_beside(out_dir, result.segment, table, words)


def keep_per_step(table: pa.Table, quota: dict[int, int], max_per_step: int, errors=(), error_steps=(),
                  unlisted=(), unlisted_steps=()) -> tuple[pa.Table, int, list, int]:
    """(the rows of ``table`` whose step had fewer than ``max_per_step`` samples, counting ``quota``
    and the rows before them; how many lines were left out; the ``errors`` left; how many of
    ``unlisted`` are left). A rejected line whose step (``error_steps``, None when unknown; for the
    line numbers ``unlisted``, ``unlisted_steps`` with ``NO_STEP``) was already full is left out
    unread, not reported. ``quota`` is updated in place."""
    import numpy as np
    import pyarrow as pa

    from ..readers.jsonlines import NO_STEP

    steps, lines = table[F.STEP].to_numpy(), table[F.LINE].to_numpy()
    listed = [step is not None and -NO_STEP > step > NO_STEP for step in error_steps]  # past int64: no row's
    full = _full_at(steps, lines, quota, max_per_step,
                    np.r_[np.fromiter((error[0] for error in errors), np.int64, len(errors)), unlisted],
                    np.r_[np.array([s if ok else NO_STEP for s, ok in zip(error_steps, listed)], np.int64),
                          unlisted_steps].astype(np.int64))
    left = [error for error, out in zip(errors, full[:len(errors)].tolist()) if not out]
    skipped = int(full.sum())
    kept_unlisted = len(unlisted) - int(full[len(errors):].sum())
    if not len(steps):
        return table, skipped, left, kept_unlisted
    distinct, counts, which, rank = _step_ranks(steps)
    before = np.array([quota.get(int(step), 0) for step in distinct], np.int64)
    keep = before[which] + rank < max_per_step
    for step, had, count in zip(distinct.tolist(), before.tolist(), counts.tolist()):
        quota[step] = min(max_per_step, had + count)
    if not keep.all():  # an extra field only the left-out lines had is not the run's
        table = table.filter(pa.array(keep))
        table = table.drop_columns([name for name in F.extra_columns(table.column_names)
                                    if table[name].null_count == table.num_rows])
    return table, skipped + int((~keep).sum()), left, kept_unlisted


def _step_ranks(steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct steps, ascending; their rows; each row's step among them; each row's place among its
    step's rows, in row order), from one stable sort of ``steps``."""
    import numpy as np

    # speed: 1.6 x pandas' groupby().cumcount() on a block's steps in file order (benchmarks/bench_kernels.py),
    # and no pandas in a worker; reference test: tests/test_ranges.py::test_step_ranks_are_cumcount
    order = np.argsort(steps, kind="stable")
    ordered = steps[order]
    new = np.empty(len(steps), bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    counts = np.diff(np.r_[starts, len(steps)])
    which = np.empty(len(steps), np.int64)
    which[order] = np.cumsum(new) - 1
    rank = np.empty(len(steps), np.int64)
    rank[order] = np.arange(len(steps)) - np.repeat(starts, counts)
    return ordered[starts], counts, which, rank


def _full_at(steps: np.ndarray, lines: np.ndarray, quota: dict[int, int], max_per_step: int,
             at: np.ndarray, at_steps: np.ndarray) -> np.ndarray:
    """For each rejected line (numbers ``at``, steps ``at_steps`` with ``NO_STEP`` for unknown), whether
    its step was full there: ``quota`` plus the rows (``steps``, ``lines``) of that step before it reach
    ``max_per_step`` (bool, vectorised: one sort, no Python per line)."""
    import numpy as np

    from ..readers.jsonlines import NO_STEP

    known = at_steps != NO_STEP
    full = np.zeros(len(at), bool)
    if not known.any():
        return full
    distinct, ids = np.unique(np.r_[at_steps[known], steps], return_inverse=True)
    mine, theirs = ids[:known.sum()], ids[known.sum():]
    span = int(max(lines.max(initial=0), at.max(initial=0))) + 1
    keys = np.sort(theirs.astype(np.int64) * span + lines)
    earlier = np.searchsorted(keys, mine * span + at[known]) - np.searchsorted(keys, mine * span)
    had = np.array([quota.get(int(step), 0) for step in distinct], np.int64)
    full[known] = had[mine] + earlier >= max_per_step
    return full


def find_newline(fh, limit: int) -> int | None:
    """How many bytes from ``fh``'s position up to and including the next newline (within
    ``limit`` bytes), reading a piece at a time and keeping none; None when there is none."""
    total = 0
    while total < limit:
        piece = fh.read(min(_SCAN_PIECE, limit - total))
        if not piece:
            return None
        cut = piece.find(b"\n")
        if cut >= 0:
            return total + cut + 1
        total += len(piece)
    return None


def split_ranges(path: Path, start: int, stop: int, size: int | None = None) -> list[tuple[int, int]]:
    """[start, stop) cut into ranges of about ``size`` bytes (default ``RANGE_BYTES``), each but the
    last ending after a newline."""
    size = size or RANGE_BYTES
    cuts = [start]
    if stop - start <= size * 1.5:
        return [(start, stop)]  # one range: nothing to look for (no request, for a URL's object)
    with open_file(as_path(path)) as fh:
        while stop - cuts[-1] > size * 1.5:
            fh.seek(cuts[-1] + size)
            rest = find_newline(fh, stop - cuts[-1] - size)
            if rest is None:
                break
            boundary = cuts[-1] + size + rest
            if boundary >= stop:
                break
            cuts.append(boundary)
    return list(zip(cuts, cuts[1:] + [stop]))


def range_bytes(total: int, count: int) -> int:
    """The bytes of one task for a read of ``total`` new bytes over ``count`` workers: about
    ``RANGES_PER_WORKER`` ranges each, between ``MIN_RANGE_BYTES`` and ``RANGE_BYTES``."""
    return min(RANGE_BYTES, max(MIN_RANGE_BYTES, -(-total // max(1, count * RANGES_PER_WORKER))))


def tasks_for(files: Iterable[tuple[Path, int, int]], size: int | None = None) -> list[tuple[str, int, int]]:
    """Every (path, start, stop) range of the new bytes of ``files`` (path, offset, size), ranges of
    about ``size`` bytes (default ``RANGE_BYTES``)."""
    return [(str(path), a, b) for path, start, stop in files if stop > start
            for a, b in split_ranges(path, start, stop, size)]
