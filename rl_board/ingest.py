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
import os
import selectors
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from . import fields as F

from .derive import derive
from .readers import FileError, ReadOptions, reader_for

READ_CHUNK = 32 << 20  # bytes parsed at a time inside a range: bounds a worker's memory
RANGE_BYTES = 24 << 20  # bytes per task handed to a worker: small enough to keep both cores busy
_SCAN_PIECE = 1 << 16  # bytes read at a time while looking for a line's end
PARALLEL_MIN_BYTES = 64 << 20  # below this, starting workers costs more than it saves
_LAST_LINE_MAX = 64 << 20  # a longer unterminated tail is taken to be still being written


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


def read(reader, tasks: list[tuple[Path, int, int]], out_dir: str | None, options: ReadOptions,
         quota: dict[int, int] | None = None, max_per_step: int | None = None,
         progress: Callable[[int], None] | None = None) -> list[RangeResult]:
    """Read the new bytes (path, start, stop) of a run's files with ``reader`` into segments in
    ``out_dir`` (tables in memory when None). With ``max_per_step``, keep a sample only while its
    step has fewer than that in ``quota`` (updated in place). ``progress`` gets bytes finished."""
    if reader.APPENDABLE:
        return run_ranges(reader, tasks_for(tasks), out_dir, options, quota, max_per_step, progress)
    results = []
    for path, _, stop in tasks:
        result = RangeResult(str(path), 0, stop)
        try:
            rows, errors, count = reader.read_table(Path(path), options)
        except FileError as exc:
            result.error = str(exc)
        else:
            result.lines, result.errors = count, errors
            _keep(result, derive(rows, options), out_dir)
        results.append(result)
        if progress is not None:
            progress(stop)
    return results


def ingest_range(reader, path: str, start: int, stop: int, out_dir: str | None, options: ReadOptions,
                 quota: dict[int, int] | None = None, max_per_step: int | None = None) -> RangeResult:
    """Read the complete lines in bytes [start, stop) of ``path`` into a segment in ``out_dir``
    (kept in memory, in ``RangeResult.table``, when ``out_dir`` is None)."""
    result = RangeResult(path, start, start)
    tables = []

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

    with open(path, "rb") as fh:
        fh.seek(start)
        position = start
        while position < stop:
            chunk = fh.read(min(READ_CHUNK, stop - position))
            if not chunk:
                break
            complete = chunk.rfind(b"\n") + 1
            if not complete:
                if len(chunk) == READ_CHUNK and position + len(chunk) < stop:  # one line longer than a chunk
                    chunk += _read_to_newline(fh, stop - position - len(chunk))
                    complete = chunk.rfind(b"\n") + 1
                if not complete:
                    break
            take(chunk, position)
            position += complete
            fh.seek(position)
    if 0 < stop - position <= _LAST_LINE_MAX:  # bytes after the last newline: a finished line?
        with open(path, "rb") as fh:
            fh.seek(position)
            tail = fh.read(stop - position)
        if reader.is_whole_record(tail):  # the writer stopped before its newline
            take(tail + b"\n", position)
            position, result.unterminated = stop, True
    result.end = position
    result.pending = position < stop
    if tables:
        _keep(result, pa.concat_tables(tables, promote_options="default"), out_dir)
    return result


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


def write_segment(table: pa.Table, out_dir: str) -> str:
    """Write ``table`` as a new segment file in ``out_dir``; returns its name."""
    table = table.unify_dictionaries()  # an IPC file holds one dictionary per column for all its chunks
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".tmp-", suffix=".arrow")
    os.close(fd)
    try:
        with pa.ipc.new_file(tmp, table.schema) as writer:
            writer.write_table(table)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    name = "seg-" + Path(tmp).name[len(".tmp-"):]
    os.replace(tmp, Path(out_dir) / name)
    return name


def _read_to_newline(fh, limit: int) -> bytes:
    """Bytes up to and including the next newline (or ``limit`` bytes, or EOF)."""
    parts, total = [], 0
    while total < limit:
        piece = fh.read(min(_SCAN_PIECE, limit - total))
        if not piece:
            break
        cut = piece.find(b"\n")
        if cut >= 0:
            parts.append(piece[:cut + 1])
            break
        parts.append(piece)
        total += len(piece)
    return b"".join(parts)


def split_ranges(path: Path, start: int, stop: int, size: int | None = None) -> list[tuple[int, int]]:
    """[start, stop) cut into ranges of about ``size`` bytes (default ``RANGE_BYTES``), each but the
    last ending after a newline."""
    size = size or RANGE_BYTES
    cuts = [start]
    with open(path, "rb") as fh:
        while stop - cuts[-1] > size * 1.5:
            fh.seek(cuts[-1] + size)
            boundary = cuts[-1] + size + len(_read_to_newline(fh, stop - cuts[-1] - size))
            if boundary >= stop:
                break
            cuts.append(boundary)
    return list(zip(cuts, cuts[1:] + [stop]))


def run_ranges(reader, tasks: list[tuple[str, int, int]], out_dir: str | None, options: ReadOptions,
               quota: dict[int, int] | None = None, max_per_step: int | None = None,
               progress: Callable[[int], None] | None = None) -> list[RangeResult]:
    """Read every (path, start, stop) range of lines; results in task order. ``progress`` gets bytes finished."""
    total = sum(stop - start for _, start, stop in tasks)
    workers = min(os.cpu_count() or 1, len(tasks))
    if max_per_step is None and out_dir is not None and total >= PARALLEL_MIN_BYTES and workers > 1:
        try:
            return _run_in_workers(reader, tasks, out_dir, options, workers, progress)
        except WorkerError:
            pass  # parse here instead: slower, same result
    results = []
    for path, start, stop in tasks:
        results.append(ingest_range(reader, path, start, stop, out_dir, options, quota, max_per_step))
        if progress is not None:
            progress(stop - start)
    return results


class WorkerError(RuntimeError):
    """A worker process failed; its ranges are parsed again in the calling process."""


def _run_in_workers(reader, tasks, out_dir, options, workers, progress) -> list[RangeResult]:
    """Hand the tasks, one at a time as each finishes, to ``workers`` fresh
    ``python -m rl_board.ingest`` processes.

    Plain subprocesses, not multiprocessing: nothing of the caller's main module
    is re-imported, so this works from Streamlit, notebooks and scripts alike.
    """
    package_parent = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))}
    queue = list(enumerate(tasks))[::-1]
    results: dict[int, RangeResult] = {}
    stderr = tempfile.TemporaryFile()  # a file, not a pipe: a chatty worker can't block on it
    procs = [subprocess.Popen([sys.executable, "-m", "rl_board.ingest", out_dir, reader.NAME, options.to_json()],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
             for _ in range(workers)]
    selector = selectors.DefaultSelector()

    def dispatch(proc) -> None:
        if queue:
            proc.stdin.write((json.dumps(queue.pop()) + "\n").encode())
            proc.stdin.flush()
        else:
            proc.stdin.close()

    try:
        for proc in procs:
            selector.register(proc.stdout, selectors.EVENT_READ, proc)
            dispatch(proc)
        busy = len(procs)
        while busy:
            for key, _ in selector.select():
                line = key.fileobj.readline()
                if not line:
                    selector.unregister(key.fileobj)
                    busy -= 1
                    continue
                index, fields_ = json.loads(line)
                result = RangeResult(**fields_)
                result.errors = [tuple(e) for e in result.errors]
                results[index] = result
                if progress is not None:
                    progress(tasks[index][2] - tasks[index][1])
                dispatch(key.data)
        failed = [p for p in procs if p.wait() != 0]
        if failed or len(results) != len(tasks):
            stderr.seek(0)
            raise WorkerError(stderr.read().decode(errors="replace")[-2000:] or "results missing")
    except (OSError, ValueError) as exc:
        raise WorkerError(str(exc)) from exc
    finally:
        selector.close()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                try:
                    pipe.close()
                except OSError:  # a dead worker's stdin can't take the rest of its buffer
                    pass
        stderr.close()
    return [results[i] for i in range(len(tasks))]


def _worker_main(out_dir: str, reader, options: ReadOptions) -> None:
    """Worker entry: one JSON task [index, [path, start, stop]] per stdin line; one JSON
    result line [index, result] on stdout as each finishes. Ends when stdin closes."""
    for line in sys.stdin:
        index, (path, start, stop) = json.loads(line)
        result = ingest_range(reader, path, start, stop, out_dir, options)
        fields_ = asdict(result)
        del fields_["table"]  # always None here: workers write segment files
        sys.stdout.write(json.dumps([index, fields_]) + "\n")
        sys.stdout.flush()


def tasks_for(files: Iterable[tuple[Path, int, int]]) -> list[tuple[str, int, int]]:
    """Every (path, start, stop) range of the new bytes of ``files`` (path, offset, size)."""
    return [(str(path), a, b) for path, start, stop in files if stop > start
            for a, b in split_ranges(path, start, stop)]


if __name__ == "__main__":
    _worker_main(sys.argv[1], reader_for(sys.argv[2]), ReadOptions.from_json(sys.argv[3]))
