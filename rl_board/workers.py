"""Parsing worker processes kept warm, so a cold open does not wait for interpreters to start.

A worker is a plain ``python`` subprocess running ``rl_board.ingest --serve`` (not
multiprocessing: nothing of the caller's main module is re-imported, so this works
from Streamlit, notebooks and scripts alike). ``warm_up()`` starts the pool without
waiting: the page calls it as it first draws, a command as its first line, so the
workers' imports run while the caller imports its own. ``borrow()`` lends the pool
to one read at a time; a second read at the same moment gets fresh workers. A
worker left idle for ``IDLE_SECONDS`` exits (freeing what its last parse used), and
is started again the next time it is needed.

This module imports nothing heavy: calling it costs a few milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

IDLE_SECONDS = 300  # a worker with nothing to do for this long exits
MIN_BYTES = 16 << 20  # a read of fewer new bytes is done in the calling process (``ingest``)
NICENESS = 5  # workers yield the cores to the page's server (and a command's own start) when both want them

# A worker's memory: Arrow's arrays from the C allocator (its jemalloc pool set itself up on a worker's
# first read, 20-40 % of that read on a small run here), and the C allocator keeping a block's memory for
# the next block rather than returning and faulting it in again. A setting the user made wins.
WORKER_ENVIRONMENT = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                      "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}

_lock = threading.Lock()
_pool: list[subprocess.Popen] = []


def count() -> int:
    """How many workers a read uses: one per core."""
    return os.cpu_count() or 1


def spawn() -> subprocess.Popen:
    """Start one worker (it reads tasks from its stdin, one JSON line each; see ``ingest``)."""
    package_parent = str(Path(__file__).resolve().parent.parent)
    # this very package, first on the path: ``-m`` would put the working folder (which may hold
    # another copy of rl_board) ahead of it
    start = (f"import sys; sys.path.insert(0, {package_parent!r}); from rl_board import workers; "
             "workers.keep_out_pandas(); import runpy; runpy.run_module('rl_board.ingest', run_name='__main__')")
    stderr = tempfile.TemporaryFile()  # a file, not a pipe: a chatty worker can't block on it
    proc = subprocess.Popen([sys.executable, "-c", start, "--serve", str(IDLE_SECONDS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            preexec_fn=_lower_priority, env={**WORKER_ENVIRONMENT, **os.environ})
    proc.stderr_file = stderr  # what ``stop`` and error messages read
    return proc


class _NoPandas:
    """An import hook that says pandas is not there (a worker never needs it, and pyarrow would
    import it, ~0.2 s, on its first use)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used in a parsing worker")
        return None


def keep_out_pandas() -> None:
    sys.meta_path.insert(0, _NoPandas)


def stop(proc: subprocess.Popen) -> str:
    """End a worker; returns the end of what it wrote to stderr."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        try:
            pipe.close()
        except OSError:  # a dead worker's stdin can't take the rest of its buffer
            pass
    stderr = getattr(proc, "stderr_file", None)
    if stderr is None:
        return ""
    try:
        stderr.seek(0)
        return stderr.read().decode(errors="replace")[-2000:]
    finally:
        stderr.close()


def _lower_priority() -> None:
    try:
        os.nice(NICENESS)
    except OSError:
        pass


def _top_up(wanted: int) -> None:
    """Keep ``wanted`` live workers in the pool (holding ``_lock``)."""
    for proc in [p for p in _pool if p.poll() is not None]:
        _pool.remove(proc)
        stop(proc)
    while len(_pool) < wanted:
        _pool.append(spawn())


def warm_up_for(run_dir, cache_root: Path | None = None) -> None:
    """``warm_up`` when a cold read of ``run_dir`` would use workers: its JSON lines add up to
    ``MIN_BYTES`` or more and no cache of a folder of that name is as new as its newest file (a
    look at sizes and times only; the exact cache is known only once the loader runs)."""
    try:
        files = [entry.stat() for entry in os.scandir(run_dir) if entry.name.endswith(".jsonl") and entry.is_file()]
    except OSError:
        return
    if sum(st.st_size for st in files) < MIN_BYTES:
        return
    from .cache import cached_since

    if not cached_since(run_dir, max(st.st_mtime_ns for st in files), cache_root):
        warm_up()  # a cache that looks current would make workers only slow the read down


def warm_up(wanted: int | None = None) -> None:
    """Start the pool's workers now, without waiting for them; nothing when a read holds it."""
    if _lock.acquire(blocking=False):
        try:
            _top_up(wanted or count())
        finally:
            _lock.release()


@contextlib.contextmanager
def borrow(wanted: int):
    """``wanted`` live workers of the pool for one read, or fresh ones (ended afterwards) when
    another read holds the pool. If the read fails, the pool's workers are ended: the next read
    starts afresh."""
    if not _lock.acquire(blocking=False):
        procs = [spawn() for _ in range(wanted)]
        try:
            yield procs
        finally:
            for proc in procs:
                stop(proc)
        return
    try:
        _top_up(wanted)
        yield _pool[:wanted]
    except BaseException:
        while _pool:
            stop(_pool.pop())
        raise
    finally:
        _lock.release()


def shutdown() -> None:
    """End every pooled worker (tests, and a process about to exit, may call it)."""
    with _lock:
        while _pool:
            stop(_pool.pop())
