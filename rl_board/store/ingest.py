"""Schedule the reading of a run's new bytes: readers make canonical rows, ``derive`` the segment rows.

``read(reader, tasks, ...)`` is the one entry. For a format whose files grow by
lines (``reader.APPENDABLE``), a cold open splits the new bytes of every file into
ranges that end on line boundaries and deals them to worker processes (one per
core) as they free up: each reads its range block by block (``reader.parse_block``),
derives the per-sample columns (``derive.derive``) and writes an Arrow IPC
segment, so the parent only maps finished files and never holds parsed objects.
Line numbers in a segment count from the start of its range; the parent knows
where each range starts and adds it. Small reads, and reads with a per-step quota
(which must see lines in order), run in the calling process through the same
function. A format read whole (``reader.read_table``) gets one segment per file.
"""

from __future__ import annotations

import json
import select
import selectors
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
import xxhash

from ..base import fields as F
from ..base.compression import codec_of, open_path
from ..base.location import LocationError, RunLocation, as_path, fault_line, open_file, restore
from . import cluster, workers
from ..derive.samples import derive
from ..readers import FileError, ReadOptions, line_too_long, reader_for
from ..readers.extras import cap, merged_notes
from .cache import head_tail_hashes
from .segments import write_segment

READ_CHUNK = 8 << 20  # bytes read as one block inside a range: on long lines 8 MB read 5-10 % faster than 2, 4 or
# 16 MB here (fewer fixed costs per block; a block's columns still fit the CPU caches), and it bounds a worker's memory
RANGE_BYTES = 24 << 20  # the most bytes per task handed to a worker
MIN_RANGE_BYTES = 4 << 20  # the fewest: below this a range's fixed costs (a segment file, its mapping) show
RANGES_PER_WORKER = 4  # a read is cut into about this many ranges per worker, dealt largest first as workers
# free up, so the last ones end within a small range of each other (24 MB ranges on 16 workers left most
# of them idle through a second round)
_SCAN_PIECE = 1 << 20  # bytes read at a time while looking for a line's end
SMALL_FILE_BYTES = 64 << 10  # a file with fewer new bytes than this may be read in a batch with others
BATCH_MIN_FILES = 64  # small files to read before they are batched (fewer cost little one by one)
BATCH_BYTES = READ_CHUNK  # bytes of small files parsed as one block and kept as one segment
PARALLEL_MIN_BYTES = workers.MIN_BYTES  # below this, handing bytes to workers costs more than it saves


@dataclass
class RangeResult:
    """What parsing bytes [start, end) of one file produced.

    end: the end of the last complete line (where the next read starts).
    lines: newlines consumed. segment: the segment file's name in the output
    folder, None when no line was kept. errors: (line within the range, reason).
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
    pending: bool = False
    error: str | None = None
    table: object = field(default=None, repr=False)
    unterminated: bool = False
    long_tail: int = 0  # bytes after the last newline, already over the line limit: never read
    digest: str | None = None  # xxh3-128 of bytes [start, end) as read (None: not all of them were held)
    # [first row, rows] of this range's rows in ``segment`` (or ``table``), when several small files share
    # one (``read_small_files``); None: the segment holds this range's rows only
    span: list[int] | None = None
    # sha1 of the head and of the tail (``cache.hash_span``) of bytes [0, end), when this range is the whole
    # of them (a small file read in a batch): its cache entry needs not read the file again
    hashes: list[str] | None = None


def read(reader, tasks: list[tuple[Path, int, int]], out_dir: str | None, options: ReadOptions,
         quota: dict[int, int] | None = None, max_per_step: int | None = None,
         progress: Callable[[int], None] | None = None,
         meanwhile: Callable[[], None] | None = None, location: RunLocation | None = None,
         publish: str | None = None) -> list[RangeResult]:
    """Read the new bytes (path, start, stop) of a run's files with ``reader`` into segments in
    ``out_dir`` (tables in memory when None), through ``location`` (every task reads its range
    through the location's filesystem; None: local files, opened directly). ``publish``: the shared
    cache's URL folder where tasks on a Ray cluster put their segments (``cluster``). With ``max_per_step``, keep a sample only while its
    step has fewer than that in ``quota`` (updated in place). ``progress`` gets bytes finished;
    ``meanwhile`` is called once worker processes have their first tasks (the caller's own work
    while they parse; not called when no workers parse)."""
    if reader.APPENDABLE:
        plain = [task for task in tasks if codec_of(task[0]) is None]
        small = [t for t in plain if 0 < t[2] - t[1] <= SMALL_FILE_BYTES] if max_per_step is None else []
        if len(small) < BATCH_MIN_FILES:
            small = []
        chosen = {str(path) for path, _, _ in small}
        others = [t for t in plain if str(t[0]) not in chosen]
        size = range_bytes(sum(stop - start for _, start, stop in others), workers.count())
        results = run_ranges(reader, tasks_for(others, size), out_dir, options, quota, max_per_step, progress,
                             meanwhile, location, publish) if others else []
        if small:
            results += read_small_files(reader, small, out_dir, options, progress, location)
        for path, _, stop in tasks:
            if codec_of(path) is not None:  # read whole, in this process: its bytes can't be cut into ranges
                results.append(ingest_compressed(reader, str(path), stop, out_dir, options, quota, max_per_step))
                if progress is not None:
                    progress(stop)
        return results
    results = []
    for path, _, stop in tasks:
        result = RangeResult(str(path), 0, stop)
        try:
            rows, errors, count = reader.read_table(as_path(path), options)
            table = derive(rows, options)
        except FileError as exc:
            result.error = str(exc)
        except OSError as exc:  # a file gone or a compressed one that can't be decompressed
            result.error = f"can't be read ({exc.strerror or exc})"
        except (pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
            result.error = f"could not be read ({type(exc).__name__}: {exc})"  # costs this file only
        else:
            result.lines, result.errors = count, errors
            _keep(result, table, out_dir)
        results.append(result)
        if progress is not None:
            progress(stop)
    return results


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
        parsed = reader.parse_block(data, result.lines + 1, offset, options)
        result.lines += parsed.lines
        table = derive(parsed.table, options)
        errors = parsed.errors
        if max_per_step is not None:
            table, skipped, errors = keep_per_step(table, quota if quota is not None else {}, max_per_step,
                                                   errors, parsed.steps)
            result.skipped += skipped
        result.errors.extend(errors)
        if table.num_rows:
            tables.append(table)

    limit = options.max_line
    with _open(location, path) as fh:
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
                rest = _find_newline(fh, stop - position - len(chunk))  # one line longer than a chunk
                if rest is None:
                    break
                size = len(chunk) + rest  # with its newline
                if size - 1 > limit:  # named and passed over, never held in memory
                    result.errors.append((result.lines + 1, line_too_long(size - 1, limit)))
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
            position += complete
            fh.seek(position)
    if 0 < stop - position <= limit:  # bytes after the last newline: a finished line?
        with _open(location, path) as fh:
            fh.seek(position)
            tail = fh.read(stop - position)
        if reader.is_whole_record(tail):  # the writer stopped before its newline
            take(tail + b"\n", position)
            hasher.update(tail)
            position, result.unterminated = stop, True
    elif stop - position > limit:
        result.long_tail = stop - position
    result.end = position
    result.digest = hasher.hexdigest() if whole else None
    result.pending = position < stop
    if tables:
        notes = merged_notes(tables)  # a concatenation keeps only the first table's
        table, _ = cap(notes.attach(pa.concat_tables(tables, promote_options="default")), options.max_extras)
        _keep(result, table, out_dir)
    return result


def _open(location: RunLocation | None, path):
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
        parsed = reader.parse_block(data, result.lines + 1, offset, options)
        result.lines += parsed.lines
        table = derive(parsed.table, options)
        errors = parsed.errors
        if max_per_step is not None:
            table, skipped, errors = keep_per_step(table, quota if quota is not None else {}, max_per_step,
                                                   errors, parsed.steps)
            result.skipped += skipped
        result.errors.extend(errors)
        if table.num_rows:
            tables.append(table)

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
                data = carry + chunk
                complete = data.rfind(b"\n") + 1
                if complete:
                    take(data[:complete], position)
                    position += complete
                carry = data[complete:]
                if len(carry) > limit:  # named and passed over, never held whole in memory
                    result.errors.append((result.lines + 1, line_too_long(len(carry), limit)))
                    result.lines += 1
                    position += len(carry)
                    carry, skipping = b"", True
            if carry and not skipping and reader.is_whole_record(carry):  # the last line, without its newline
                take(carry + b"\n", position)
    except MemoryError:
        raise
    except Exception as exc:  # a broken archive (EOFError, lzma's and zstd's errors) costs this file only
        result.error = f"can't be decompressed ({type(exc).__name__}: {exc})"
    if tables:
        notes = merged_notes(tables)  # a concatenation keeps only the first table's
        table, _ = cap(notes.attach(pa.concat_tables(tables, promote_options="default")), options.max_extras)
        _keep(result, table, out_dir)
    return result


def read_small_files(reader, tasks: list[tuple[Path, int, int]], out_dir: str | None, options: ReadOptions,
                     progress: Callable[[int], None] | None = None,
                     location: RunLocation | None = None) -> list[RangeResult]:
    """Read the new bytes (path, start, stop) of many small files a batch at a time: each batch's
    complete lines are parsed as one block, derived once and kept as one segment, every file's rows a
    slice of it (``RangeResult.span``), so a run of 100,000 one-line files costs a few blocks, not
    100,000. Rows, line numbers, offsets and errors are each file's own, as ``ingest_range`` gives
    them; a file whose new bytes don't end with a newline is read by ``ingest_range``. Each file is read
    through ``location`` (a URL's object: a store that fails raises ``LocationError``)."""
    results, batch, size = [], [], 0
    for path, start, stop in tasks:
        try:
            with _open(location, path) as fh:
                fh.seek(start)
                data = fh.read(stop - start)
        except OSError as exc:  # gone or locked since it was listed: this file only
            if location is not None and location.is_url:
                raise LocationError(fault_line(path, exc)) from None
            results.append(RangeResult(str(path), start, start, error=f"could not be read ({exc.strerror or exc})"))
            continue
        if not data.endswith(b"\n"):  # a line still being written, or a last line without its newline
            results.append(ingest_range(reader, str(path), start, stop, out_dir, options, location=location))
            if progress is not None:
                progress(stop - start)
            continue
        batch.append((str(path), start, data))
        size += len(data)
        if size >= BATCH_BYTES:
            results += _read_batch(reader, batch, out_dir, options, progress)
            batch, size = [], 0
    if batch:
        results += _read_batch(reader, batch, out_dir, options, progress)
    return results


def _read_batch(reader, batch: list[tuple[str, int, bytes]], out_dir, options, progress) -> list[RangeResult]:
    """One block of small files' complete lines (path, start, bytes): their results, sharing one segment."""
    data = b"".join(chunk for _, _, chunk in batch)
    sizes = np.fromiter((len(chunk) for _, _, chunk in batch), np.int64, len(batch))
    lines = np.fromiter((chunk.count(b"\n") for _, _, chunk in batch), np.int64, len(batch))
    byte_base = np.r_[0, np.cumsum(sizes)[:-1]]
    line_base = np.r_[0, np.cumsum(lines)[:-1]]  # lines of the files before each one
    parsed = reader.parse_block(data, 1, 0, options)
    table = derive(parsed.table, options).combine_chunks()
    offsets = table["offset"].to_numpy()
    owner = np.searchsorted(byte_base, offsets, side="right") - 1  # the file each row comes from
    starts = np.fromiter((start for _, start, _ in batch), np.int64, len(batch))
    table = table.set_column(table.schema.get_field_index(F.LINE), F.LINE,
                             pa.array(table[F.LINE].to_numpy() - line_base[owner]))
    table = table.set_column(table.schema.get_field_index("offset"), "offset",
                             pa.array(offsets - byte_base[owner] + starts[owner]))
    counts = np.bincount(owner, minlength=len(batch))
    first_rows = np.r_[0, np.cumsum(counts)[:-1]]
    errors: list[list] = [[] for _ in batch]
    for line, reason in parsed.errors:
        at = int(np.searchsorted(line_base, line - 1, side="right") - 1)
        errors[at].append((line - int(line_base[at]), reason))
    segment = write_segment(table, out_dir) if out_dir is not None and table.num_rows else None
    results = []
    for i, (path, start, chunk) in enumerate(batch):
        result = RangeResult(path, start, start + len(chunk), lines=int(lines[i]), rows=int(counts[i]),
                             errors=errors[i], digest=xxhash.xxh3_128(chunk).hexdigest())
        if start == 0:
            result.hashes = head_tail_hashes(chunk)
        if counts[i]:
            result.span = [int(first_rows[i]), int(counts[i])]
            if segment is None:
                result.table = table  # the whole batch: its reader slices it
            else:
                result.segment = segment
        results.append(result)
        if progress is not None:
            progress(len(chunk))
    return results


def _keep(result: RangeResult, table: pa.Table, out_dir: str | None) -> None:
    """Put a range's segment rows where they go: a segment file in ``out_dir``, else memory."""
    result.rows = table.num_rows
    if not table.num_rows:
        return
    if out_dir is None:
        result.table = table
    else:
        result.segment = write_segment(table, out_dir)


def keep_per_step(table: pa.Table, quota: dict[int, int], max_per_step: int, errors=(), error_steps=()
                  ) -> tuple[pa.Table, int, list]:
    """(the rows of ``table`` whose step had fewer than ``max_per_step`` samples, counting ``quota``
    and the rows before them; how many lines were left out; the ``errors`` left). A rejected line
    whose step (``error_steps``, None when unknown) was already full is left out unread, not
    reported. ``quota`` is updated in place."""
    steps, lines = table[F.STEP].to_numpy(), table[F.LINE].to_numpy()
    left = [error for error, step in zip(errors, error_steps) if step is None
            or quota.get(step, 0) + int(np.count_nonzero((steps == step) & (lines < error[0]))) < max_per_step]
    skipped = len(errors) - len(left)
    if not len(steps):
        return table, skipped, left
    distinct, which = np.unique(steps, return_inverse=True)
    counts = np.bincount(which)
    order = np.argsort(which, kind="stable")
    rank = np.empty(len(steps), np.int64)
    rank[order] = np.arange(len(steps)) - np.repeat(np.cumsum(counts) - counts, counts)
    before = np.array([quota.get(int(step), 0) for step in distinct], np.int64)
    keep = before[which] + rank < max_per_step
    for step, had, count in zip(distinct.tolist(), before.tolist(), counts.tolist()):
        quota[step] = min(max_per_step, had + count)
    if not keep.all():  # an extra field only the left-out lines had is not the run's
        table = table.filter(pa.array(keep))
        table = table.drop_columns([name for name in F.extra_columns(table.column_names)
                                    if table[name].null_count == table.num_rows])
    return table, skipped + int((~keep).sum()), left


def _find_newline(fh, limit: int) -> int | None:
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
            rest = _find_newline(fh, stop - cuts[-1] - size)
            if rest is None:
                break
            boundary = cuts[-1] + size + rest
            if boundary >= stop:
                break
            cuts.append(boundary)
    return list(zip(cuts, cuts[1:] + [stop]))


def run_ranges(reader, tasks: list[tuple[str, int, int]], out_dir: str | None, options: ReadOptions,
               quota: dict[int, int] | None = None, max_per_step: int | None = None,
               progress: Callable[[int], None] | None = None,
               meanwhile: Callable[[], None] | None = None,
               location: RunLocation | None = None, publish: str | None = None) -> list[RangeResult]:
    """Read every (path, start, stop) range of lines; results in task order. ``progress`` gets bytes
    finished; ``meanwhile`` as in ``read``. With ``RL_BOARD_RAY`` set, the ranges go to Ray tasks
    (``cluster``); a location worker processes can't reach (``memory://``) is read here."""
    total = sum(stop - start for _, start, stop in tasks)
    count = min(workers.count(), len(tasks))
    where = cluster.address()  # RL_BOARD_RAY: the ranges go to Ray tasks on that cluster
    if where and max_per_step is None and out_dir is not None and (location is None or location.shared):
        return cluster.run_ranges(reader, tasks, out_dir, options, location, where, progress, publish)
    if (max_per_step is None and out_dir is not None and total >= PARALLEL_MIN_BYTES and count > 1
            and (location is None or location.shared)):
        try:
            return _run_in_workers(reader, tasks, out_dir, options, count, progress, meanwhile, location)
        except WorkerError:
            pass  # parse here instead: slower, same result
    results = []
    for path, start, stop in tasks:
        results.append(ingest_range(reader, path, start, stop, out_dir, options, quota, max_per_step, location))
        if progress is not None:
            progress(stop - start)
    return results


def range_bytes(total: int, count: int) -> int:
    """The bytes of one task for a read of ``total`` new bytes over ``count`` workers: about
    ``RANGES_PER_WORKER`` ranges each, between ``MIN_RANGE_BYTES`` and ``RANGE_BYTES``."""
    return min(RANGE_BYTES, max(MIN_RANGE_BYTES, -(-total // max(1, count * RANGES_PER_WORKER))))


#: the last read through workers: how many, how many ranges, and when (``time.time()``) the first range
#: was handed out and the last result came back. ``RL_BOARD_PHASES=1`` makes a command print it on
#: stderr; the benchmark's phase table reads it.
LAST_READ: dict = {}


class WorkerError(RuntimeError):
    """A worker process failed; its ranges are parsed again in the calling process."""


def _run_in_workers(reader, tasks, out_dir, options, count, progress, meanwhile=None,
                    location: RunLocation | None = None) -> list[RangeResult]:
    """Hand the tasks, one at a time as each finishes, to ``count`` worker processes (the warm
    pool of ``workers``, see there; a command forks them here, so ``meanwhile`` runs only once
    they are forked: a fork copies one thread); results in task order."""
    # largest first (each file's last range is its remainder): the small ones fill the end
    queue = sorted(enumerate(tasks), key=lambda task: (task[1][2] - task[1][1], -task[0]))
    results: dict[int, RangeResult] = {}
    LAST_READ.clear()
    LAST_READ.update(workers=count, ranges=len(tasks))
    selector = selectors.DefaultSelector()
    busy = set()
    faults: list[str] = []  # a URL's range that could not be read: the read stops, caching nothing

    def dispatch(proc) -> None:
        if queue:
            index, (path, start, stop) = queue.pop()
            task = [index, path, start, stop, out_dir, reader.NAME, options.to_json(),
                    location.to_json() if location is not None else None]
            proc.stdin.write((json.dumps(task) + "\n").encode())
            proc.stdin.flush()
            busy.add(proc)
        else:
            busy.discard(proc)

    def start(proc) -> None:  # a worker is there: its first range at once, before the next is forked
        LAST_READ.setdefault("first_task", time.time())
        try:
            selector.register(proc.stdout, selectors.EVENT_READ, proc)
            dispatch(proc)
        except (OSError, ValueError) as exc:  # a worker that died at once
            raise WorkerError(str(exc)) from exc

    try:
        with workers.borrow(count, start):
            if meanwhile is not None:
                meanwhile()
            try:
                while busy and not faults:
                    for key, _ in selector.select():
                        line = key.fileobj.readline()
                        if not line:  # the worker died
                            raise WorkerError(workers.stop(key.data) or "a worker ended")
                        index, fields_ = json.loads(line)
                        if "fault" in fields_:
                            faults.append(fields_["fault"])
                            break
                        result = RangeResult(**fields_)
                        result.errors = [tuple(e) for e in result.errors]
                        results[index] = result
                        if progress is not None:
                            progress(tasks[index][2] - tasks[index][1])
                        dispatch(key.data)
            except (OSError, ValueError, TypeError) as exc:
                raise WorkerError(str(exc)) from exc
            if faults:
                raise LocationError(faults[0])  # leaving ``borrow`` by an error ends its workers
    finally:
        selector.close()
    LAST_READ["last_result"] = time.time()
    return [results[i] for i in range(len(tasks))]


def _warm() -> None:
    """Read a two-line block and write its segment to memory, so what a first read imports and
    sets up lazily (pyarrow's pandas check, IPC, compute kernels) is done before a task arrives."""
    line = (b'{"step": 0, "reward": 0.0, "prompt": "p", "response": "a b", "response_tokens": ["a", "b"], '
            b'"logprobs": [-1.0, -1.0], "ref_logprobs": [-1.0, -2.0], "x": 1}\n')
    table = derive(reader_for("jsonl").parse_block(line * 2).table)
    with pa.ipc.new_file(pa.BufferOutputStream(), table.schema) as writer:
        writer.write_table(table)


def serve(idle_seconds: float) -> None:
    """Worker entry: one JSON task [index, path, start, stop, out_dir, reader, options, location] per stdin
    line; one JSON result line [index, result] on stdout as each finishes. Ends when stdin
    closes, or after ``idle_seconds`` without a task."""
    _warm()
    stdin = sys.stdin.buffer
    while True:
        ready, _, _ = select.select([stdin], [], [], idle_seconds)
        if not ready:
            return
        line = stdin.readline()
        if not line:
            return
        index, path, start, stop, out_dir, name, options, where = json.loads(line)
        location = restore(where) if where is not None else None
        try:
            result = ingest_range(reader_for(name), path, start, stop, out_dir, ReadOptions.from_json(options),
                                  location=location)
        except LocationError as exc:  # a URL's read failed (gone, denied, unreachable): the parent says so
            sys.stdout.write(json.dumps([index, {"fault": str(exc)}]) + "\n")
            sys.stdout.flush()
            continue
        fields_ = asdict(result)
        del fields_["table"]  # always None here: workers write segment files
        sys.stdout.write(json.dumps([index, fields_]) + "\n")
        sys.stdout.flush()


def tasks_for(files: Iterable[tuple[Path, int, int]], size: int | None = None) -> list[tuple[str, int, int]]:
    """Every (path, start, stop) range of the new bytes of ``files`` (path, offset, size), ranges of
    about ``size`` bytes (default ``RANGE_BYTES``)."""
    return [(str(path), a, b) for path, start, stop in files if stop > start
            for a, b in split_ranges(path, start, stop, size)]


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    serve(float(sys.argv[2]))
