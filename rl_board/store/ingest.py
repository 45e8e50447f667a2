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
function. A format read whole (``reader.read_table``) gets one segment per file; a cold
read of several local files deals the files to the workers the same way (``WHOLE_MIN_BYTES``).
"""

from __future__ import annotations

import gc
import json
import os
import select
import selectors
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from ..base.compression import codec_of
from ..base.location import RunLocation, as_path, restore
from ..base.remote import LocationError
from ..readers import FileError, ReadOptions, reader_for
from . import batches, cluster, workers
from .ranges import (
    RangeResult,
    ingest_compressed,
    ingest_range,
    keep_rows,
    note_rejected,
    range_bytes,
    tasks_for,
)

PARALLEL_MIN_BYTES = workers.MIN_BYTES  # below this, handing bytes to workers costs more than it saves
#: a format read whole whose new files hold fewer bytes is read in the calling process. Lower than
#: ``PARALLEL_MIN_BYTES``: such files are often compressed columns (TRL's 250 Parquet files of 1,024,000
#: rows are 5 MiB, 2.2 s of one core to read and derive), and a file is the smallest task, so a read of
#: one file stays here whatever its size.
WHOLE_MIN_BYTES = 1 << 20


def read(reader, tasks: list[tuple[Path, int, int]], out_dir: str | None, options: ReadOptions,
         quota: dict[int, int] | None = None, max_per_step: int | None = None,
         progress: Callable[[int], None] | None = None,
         meanwhile: Callable[[], None] | None = None, location: RunLocation | None = None,
         publish: str | None = None, arrived: Callable[[int, RangeResult], None] | None = None) -> list[RangeResult]:
    """Read the new bytes (path, start, stop) of a run's files with ``reader`` into segments in
    ``out_dir`` (tables in memory when None), through ``location`` (every task reads its range
    through the location's filesystem; None: local files, opened directly). ``publish``: the shared
    cache's URL folder where tasks on a Ray cluster put their segments (``cluster``). With ``max_per_step``, keep a sample only while its
    step has fewer than that in ``quota`` (updated in place). ``progress`` gets bytes finished;
    ``meanwhile`` is called once worker processes have their first tasks (the caller's own work
    while they parse; not called when no workers parse); ``arrived`` with (its place in the byte ranges
    read, in order, then each file's, as the list returned ends with them; a result) for each result a worker
    process gives back, as it comes, while the others still parse (the caller's work on it moves out of the
    time after the last range; the list returned holds the same results)."""
    if reader.APPENDABLE:
        plain = [task for task in tasks if codec_of(task[0]) is None]
        small = [t for t in plain if 0 < t[2] - t[1] <= batches.SMALL_FILE_BYTES] if max_per_step is None else []
        if len(small) < batches.BATCH_MIN_FILES:
            small = []
        chosen = {str(path) for path, _, _ in small}
        others = [t for t in plain if str(t[0]) not in chosen]
        size = range_bytes(sum(stop - start for _, start, stop in others), workers.count())
        results = run_ranges(reader, tasks_for(others, size), out_dir, options, quota, max_per_step, progress,
                             meanwhile, location, publish, arrived) if others else []
        if small:
            results += batches.read_small_files(reader, small, out_dir, options, progress, location)
        for path, _, stop in tasks:
            if codec_of(path) is not None:  # read whole, in this process: its bytes can't be cut into ranges
                results.append(ingest_compressed(reader, str(path), stop, out_dir, options, quota, max_per_step))
                if progress is not None:
                    progress(stop)
        return results
    count = min(workers.count(), len(tasks))
    if (out_dir is not None and (location is None or not location.is_url) and count > 1
            and not cluster.address() and sum(stop for _, _, stop in tasks) >= WHOLE_MIN_BYTES):
        try:  # one local file a task, handed out as the ranges of a line format are (``_handing_order``)
            return _run_in_workers(reader, [(str(path), 0, stop) for path, _, stop in tasks], out_dir, options,
                                   count, progress, meanwhile, None, arrived)
        except WorkerError:
            pass  # read here instead: slower, same result
    results = []
    for path, _, stop in tasks:
        results.append(ingest_whole(reader, path, stop, out_dir, options))
        if progress is not None:
            progress(stop)
    return results


def ingest_whole(reader, path, stop: int, out_dir: str | None, options: ReadOptions) -> RangeResult:
    """Read the file ``path`` (``stop`` bytes) whole with ``reader.read_table`` into one segment in
    ``out_dir`` (kept in memory when None); a file that can't be read is named in the result's error
    and costs only itself."""
    import pyarrow as pa

    result = RangeResult(str(path), 0, stop)
    collecting = gc.isenabled()
    gc.disable()  # a file's parsed objects are many and short-lived: no cycle to find, 10-15 % of a read in passes
    try:
        from ..derive.samples import derive  # imported once a file is read, not before the first range

        rows, errors, count = reader.read_table(as_path(path), options)
        table = derive(rows, options)
    except FileError as exc:
        result.error = str(exc)
    except OSError as exc:  # a file gone or a compressed one that can't be decompressed
        result.error = f"can't be read ({exc.strerror or exc})"
    except (pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
        result.error = f"could not be read ({type(exc).__name__}: {exc})"  # costs this file only
    else:
        result.lines = count
        note_rejected(result, errors)
        keep_rows(result, table, out_dir)
    finally:
        if collecting:
            gc.enable()
    return result


def run_ranges(reader, tasks: list[tuple[str, int, int]], out_dir: str | None, options: ReadOptions,
               quota: dict[int, int] | None = None, max_per_step: int | None = None,
               progress: Callable[[int], None] | None = None,
               meanwhile: Callable[[], None] | None = None,
               location: RunLocation | None = None, publish: str | None = None,
               arrived: Callable[[int, RangeResult], None] | None = None) -> list[RangeResult]:
    """Read every (path, start, stop) range of lines; results in task order. ``progress`` gets bytes
    finished; ``meanwhile`` and ``arrived`` as in ``read``. With ``RL_BOARD_RAY`` set, the ranges go to Ray tasks
    (``cluster``); a location worker processes can't reach (``memory://``) is read here."""
    total = sum(stop - start for _, start, stop in tasks)
    count = min(workers.count(), len(tasks))
    where = cluster.address()  # RL_BOARD_RAY: the ranges go to Ray tasks on that cluster
    if where and max_per_step is None and out_dir is not None and (location is None or location.shared):
        return cluster.run_ranges(reader, tasks, out_dir, options, location, where, progress, publish)
    if (max_per_step is None and out_dir is not None and total >= PARALLEL_MIN_BYTES and count > 1
            and (location is None or location.shared)):
        try:
            return _run_in_workers(reader, tasks, out_dir, options, count, progress, meanwhile, location, arrived)
        except WorkerError:
            pass  # parse here instead: slower, same result
    results = []
    for path, start, stop in tasks:
        results.append(ingest_range(reader, path, start, stop, out_dir, options, quota, max_per_step, location))
        if progress is not None:
            progress(stop - start)
    return results


#: the last read through workers: how many, how many ranges, and when (``time.time()``) the first range
#: was handed out and the last result came back. ``RL_BOARD_PHASES=1`` makes a command print it on
#: stderr; the benchmark's phase table reads it.
LAST_READ: dict = {}


#: ranges a worker holds at once while more are left than workers: the one it parses and the next, waiting in
#: its pipe
AHEAD_RANGES = 2


class WorkerError(RuntimeError):
    """A worker process failed; its ranges are parsed again in the calling process."""


def _run_in_workers(reader, tasks, out_dir, options, count, progress, meanwhile=None,
                    location: RunLocation | None = None,
                    arrived: Callable[[int, RangeResult], None] | None = None) -> list[RangeResult]:
    """Hand the tasks, one at a time as each finishes, to ``count`` worker processes (the warm
    pool of ``workers``, see there; a command forks them here, so ``meanwhile`` runs only once
    they are forked: a fork copies one thread); results in task order."""
    queue = _handing_order(tasks, count)
    results: dict[int, RangeResult] = {}
    LAST_READ.clear()
    LAST_READ.update(workers=count, ranges=len(tasks))
    selector = selectors.DefaultSelector()
    held: dict = {}  # worker -> the ranges handed to it and not yet given back
    partial: dict = {}  # worker -> what it wrote after its last whole line
    faults: list[str] = []  # a URL's range that could not be read: the read stops, caching nothing

    def dispatch(proc) -> None:
        if queue:
            index, (path, start, stop) = queue.pop()
            task = [index, path, start, stop, out_dir, reader.NAME, options.to_json(),
                    location.to_json() if location is not None else None]
            proc.stdin.write((json.dumps(task) + "\n").encode())
            proc.stdin.flush()
            held[proc] = held.get(proc, 0) + 1

    def top_up(proc) -> None:  # a range to parse, and one more waiting while more are left than workers (at
        # the end, a range waiting in one worker's pipe would keep another idle)
        while queue and (not held.get(proc) or held[proc] < AHEAD_RANGES and len(queue) > count):
            dispatch(proc)

    def start(proc) -> None:  # a worker is there: its first ranges at once, before the next is forked
        LAST_READ.setdefault("first_task", time.time())
        try:
            selector.register(proc.stdout, selectors.EVENT_READ, proc)
            top_up(proc)  # one to parse and one waiting in its pipe: a worker never waits for this process, busy
            # with the last result (``arrived``), to be given its next
        except (OSError, ValueError) as exc:  # a worker that died at once
            raise WorkerError(str(exc)) from exc

    try:
        with workers.borrow(count, start, sum(stop - begin for _, begin, stop in tasks)):
            if meanwhile is not None:
                meanwhile()
            try:
                while any(held.values()) and not faults:
                    for key, _ in selector.select():
                        proc = key.data
                        # what the worker wrote, read here (two results may come in one read: a buffered
                        # reader would keep the second where the selector does not see it)
                        chunk = os.read(key.fileobj.fileno(), 1 << 20)
                        if not chunk:  # the worker died
                            raise WorkerError(workers.stop(proc) or "a worker ended")
                        *lines, partial[proc] = (partial.get(proc, b"") + chunk).split(b"\n")
                        for line in lines:
                            index, fields_ = json.loads(line)
                            if "fault" in fields_:
                                faults.append(fields_["fault"])
                                break
                            result = RangeResult(**fields_)
                            result.errors = [tuple(e) for e in result.errors]
                            results[index] = result
                            held[proc] -= 1
                            if progress is not None:
                                progress(tasks[index][2] - tasks[index][1])
                            top_up(proc)  # the worker's next range first, then the caller's work on this one
                            if arrived is not None:
                                arrived(index, result)
                        if faults:
                            break
            except (OSError, ValueError, TypeError) as exc:
                raise WorkerError(str(exc)) from exc
            if faults:
                raise LocationError(faults[0])  # leaving ``borrow`` by an error ends its workers
    finally:
        selector.close()
    LAST_READ["last_result"] = time.time()
    return [results[i] for i in range(len(tasks))]


def _handing_order(tasks: list, count: int) -> list:
    """The (place, task) pairs in the order they are handed out, the first last (``list.pop``): in their
    places' order, so that the ranges come back nearly in order and the caller's ``arrived`` gathers each
    segment while the others are parsed (one handed out of order holds back the gathering of every range
    after it until it comes back: a verl dump's 1,250 files handed largest first left every segment but a
    few to be gathered after the last came back, 3 s with the workers idle on 2 cores), except the last
    ``AHEAD_RANGES`` × ``count`` (the ranges the workers hold at the end), largest first, so that the small
    ones (a file's remainder) fill the end rather than leave a worker idle while another parses."""
    placed = list(enumerate(tasks))
    cut = max(0, len(placed) - AHEAD_RANGES * count)
    end = sorted(placed[cut:], key=lambda task: (-(task[1][2] - task[1][1]), task[0]))
    return (placed[:cut] + end)[::-1]


def _warm() -> None:
    """Read a two-line block and write its segment to memory, so what a first read imports and
    sets up lazily (pyarrow's pandas check, IPC, compute kernels) is done before a task arrives."""
    import pyarrow as pa

    line = (b'{"step": 0, "reward": 0.0, "prompt": "p", "response": "a b", "response_tokens": ["a", "b"], '
            b'"logprobs": [-1.0, -1.0], "ref_logprobs": [-1.0, -2.0], "x": 1}\n')
    from ..derive.samples import derive

    table = derive(reader_for("jsonl").parse_block(line * 2).table)
    with pa.ipc.new_file(pa.BufferOutputStream(), table.schema) as writer:
        writer.write_table(table)


def serve(idle_seconds: float) -> None:
    """Worker entry: one JSON task [index, path, start, stop, out_dir, reader, options, location] per stdin
    line; one JSON result line [index, result] on stdout as each finishes. Ends when stdin
    closes, or after ``idle_seconds`` without a task."""
    _warm()
    stdin, waiting = sys.stdin.buffer.fileno(), b""  # (read here: the parent may have written the next task
    while True:  # too, which a buffered reader would hold where ``select`` does not see it)
        if b"\n" not in waiting:
            ready, _, _ = select.select([stdin], [], [], idle_seconds)
            if not ready:
                return
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                return
            waiting += chunk
            continue
        line, waiting = waiting.split(b"\n", 1)
        index, path, start, stop, out_dir, name, options, where = json.loads(line)
        location = restore(where) if where is not None else None
        reader = reader_for(name)
        try:
            if reader.APPENDABLE:
                result = ingest_range(reader, path, start, stop, out_dir, ReadOptions.from_json(options),
                                      location=location)
            else:  # a format read whole: the task is a whole local file
                result = ingest_whole(reader, path, stop, out_dir, ReadOptions.from_json(options))
        except LocationError as exc:  # a URL's read failed (gone, denied, unreachable): the parent says so
            sys.stdout.write(json.dumps([index, {"fault": str(exc)}]) + "\n")
            sys.stdout.flush()
            continue
        fields_ = asdict(result)
        del fields_["table"]  # always None here: workers write segment files
        sys.stdout.write(json.dumps([index, fields_]) + "\n")
        sys.stdout.flush()


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    serve(float(sys.argv[2]))
