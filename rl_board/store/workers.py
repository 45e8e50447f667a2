"""Parsing worker processes kept warm, so a cold open does not wait for interpreters to start.

A worker is a plain ``python`` subprocess running ``rl_board.store.ingest --serve`` (not
multiprocessing: nothing of the caller's main module is re-imported, so this works
from Streamlit, notebooks and scripts alike). ``warm_up()`` starts the pool without
waiting: the page calls it as it first draws, so the workers' imports run while the
page draws. A process that runs one thread and has imported the reading code already
(a command, on Linux) forks its workers instead (``fork``) for a short read with few workers
(``short_read``): they share its imports and take a task at once, where three interpreters
importing the same modules on two cores would keep the read waiting; for a long read, or many
workers, they are new interpreters all the same, which a command starts at its own start
(``warm_up_for``) so that they import while it does. ``borrow()`` lends the pool to one read at a time; a
second read at the same moment gets fresh workers. A worker left idle for
``IDLE_SECONDS`` exits (freeing what its last parse used), and is started again the
next time it is needed.

This module imports nothing heavy: calling it costs a few milliseconds.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

from ..base.defaults import setting

IDLE_SECONDS = 300  # a worker with nothing to do for this long exits
MIN_BYTES = 16 << 20  # a read of fewer new bytes is done in the calling process (``ingest``)
NICENESS = 5  # workers yield the cores to the page's server (and a command's own start) when both want them

# A worker's memory: Arrow's arrays from the C allocator (its jemalloc pool set itself up on a worker's
# first read, 20-40 % of that read on a small run here), and the C allocator keeping a block's memory for
# the next block rather than returning and faulting it in again. A setting the user made wins.
WORKER_ENVIRONMENT = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                      "MALLOC_TRIM_THRESHOLD_": str(128 << 20)}

# the module whose ``serve(idle_seconds)`` a worker runs, named rather than imported (it imports this
# one): a spawned worker runs it as ``__main__ --serve``, a forked one finds it already imported
ENTRY = "rl_board.store.ingest"
#: what a worker's task loop parses with, which the entry imports only when a task needs it (a command hands
#: out its first range without them): a process imports them before it forks workers, so each starts with
#: them as before, instead of every forked worker importing them again (a spawned one imports them itself)
READING_MODULES = ("pyarrow", "rl_board.readers.jsonlines", "rl_board.derive.samples")

_lock = threading.Lock()
_pool: list = []  # subprocess.Popen (spawned) or Forked workers


WORKERS_ENV = "RL_BOARD_WORKERS"  # a positive number of parsing workers, instead of one per usable CPU
CGROUP = Path("/sys/fs/cgroup")


def count() -> int:
    """How many workers a read uses: ``RL_BOARD_WORKERS`` when set to a positive number, else one per
    CPU this process may use (``usable_cpus``)."""
    value = setting(WORKERS_ENV)  # at most 256
    return int(value) if value is not None else usable_cpus()


def usable_cpus(cgroup: Path = CGROUP) -> int:
    """The CPUs this process may use: those of its affinity (``taskset``, a container's cpuset), fewer
    where a cgroup CPU quota (``docker --cpus 2``, a Kubernetes limit) allows less than that
    (rounded up: 1.5 CPUs of quota is 2 workers). Not the host's count: a container limited to 2 CPUs
    on a 64-core host gets 2."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        cpus = os.cpu_count() or 1
    quota = cgroup_quota(cgroup)
    if quota is not None:
        cpus = min(cpus, max(1, math.ceil(quota)))
    return max(1, cpus)


def _own_cgroup(cgroup: Path) -> Path:
    """This process's cgroup v2 folder under ``cgroup`` (``/proc/self/cgroup``'s ``0::/path``), else ``cgroup``."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = cgroup / line[3:].strip().lstrip("/")
                return own if (own / "cpu.max").is_file() else cgroup
    except OSError:
        pass
    return cgroup


def cgroup_quota(cgroup: Path = CGROUP) -> float | None:
    """CPUs of this process's cgroup quota (cgroup v2 ``cpu.max`` of its own cgroup, else v1
    ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``); None without a quota or a readable cgroup."""
    try:
        quota, period = (_own_cgroup(cgroup) / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def spawn() -> subprocess.Popen:
    """Start one worker (it reads tasks from its stdin, one JSON line each; see ``ingest``)."""
    package_parent = str(Path(__file__).resolve().parents[2])
    # this very package, first on the path: ``-m`` would put the working folder (which may hold
    # another copy of rl_board) ahead of it
    start = (f"import sys; sys.path.insert(0, {package_parent!r}); from rl_board.store import workers; "
             f"workers.keep_out_pandas(); import runpy; runpy.run_module({ENTRY!r}, run_name='__main__')")
    stderr = tempfile.TemporaryFile()  # a file, not a pipe: a chatty worker can't block on it
    proc = subprocess.Popen([sys.executable, "-c", start, "--serve", str(IDLE_SECONDS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            preexec_fn=_lower_priority, env={**WORKER_ENVIRONMENT, **os.environ})
    proc.stderr_file = stderr  # what ``stop`` and error messages read
    return proc


class Forked:
    """A worker made by ``fork``: the part of ``subprocess.Popen`` the pool and ``stop`` use."""

    def __init__(self, pid: int, stdin, stdout, stderr_file):
        self.pid, self.stdin, self.stdout, self.stderr_file = pid, stdin, stdout, stderr_file
        self.returncode = None

    def poll(self, flags: int = os.WNOHANG):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -1
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self):
        return self.poll(0)

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def can_fork() -> bool:
    """Whether this process may fork its workers: on Linux, running one thread (a command; never
    the page's server, whose other threads a fork would copy in mid-step)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def forkable() -> bool:
    """``can_fork``, with the reading code imported (a fork then starts with nothing left to import)."""
    return can_fork() and ENTRY in sys.modules


def fork() -> Forked:
    """A worker forked from this process: the same task loop as a spawned one, on two pipes, with
    nothing of this process open in it but them (no lock on a cache folder outlives its holder)."""
    tasks_in, tasks_out = os.pipe()
    results_in, results_out = os.pipe()
    stderr = tempfile.TemporaryFile()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid == 0:
        _forked_worker(tasks_in, results_out, stderr.fileno())  # never returns
    os.close(tasks_in)
    os.close(results_out)
    return Forked(pid, os.fdopen(tasks_out, "wb"), os.fdopen(results_in, "rb"), stderr)


def _forked_worker(tasks: int, results: int, stderr: int) -> None:
    code = 1
    try:
        gc.freeze()  # what this process inherited is never collected here (a file object it held
        # would otherwise close, on collection, a descriptor number this worker has reused)
        os.dup2(tasks, 0)
        os.dup2(results, 1)
        os.dup2(stderr, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        sys.stdin = open(0, closefd=False)  # the worker's streams, for its whole life
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        _lower_priority()
        keep_out_pandas()
        _own_memory()
        sys.modules[ENTRY].serve(IDLE_SECONDS)
        code = 0
    except BaseException:  # noqa: B036 - whatever happens, this process must end here, never return
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _own_memory() -> None:
    """In a forked worker, what ``WORKER_ENVIRONMENT`` sets for a spawned one (a setting the user made wins)."""
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
        import pyarrow as pa

        pa.set_memory_pool(pa.system_memory_pool())
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    for name, option in (("MALLOC_MMAP_THRESHOLD_", -3), ("MALLOC_TRIM_THRESHOLD_", -1)):  # glibc's M_MMAP_THRESHOLD,
        if name not in os.environ:  # M_TRIM_THRESHOLD
            mallopt(option, int(WORKER_ENVIRONMENT[name]))


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


def stop(proc) -> str:
    """End a worker; returns the end of what it wrote to stderr (nothing the second time)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdin, proc.stdout):
        try:
            pipe.close()
        except OSError:  # a dead worker's stdin can't take the rest of its buffer
            pass
    stderr = getattr(proc, "stderr_file", None)
    if stderr is None or stderr.closed:
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


def _top_up(wanted: int, ready: Callable | None = None, size: int | None = None) -> None:
    """Keep ``wanted`` live workers in the pool (holding ``_lock``); ``ready`` is called with each of the
    first ``wanted`` as soon as it is there (a live one at once, a new one as it is made), so a read can
    hand it a range before the next is forked (16 forks of a large process take a good part of a second).
    New ones are forked only for a short read with few workers (``size`` bytes, ``short_read``)."""
    forks = forkable() and (size is None or short_read(size, wanted))
    if forks and len(_pool) < wanted:
        for module in READING_MODULES:
            importlib.import_module(module)
    for proc in [p for p in _pool if p.poll() is not None]:
        _pool.remove(proc)
        stop(proc)
    if ready is not None:
        for proc in _pool[:wanted]:
            ready(proc)
    while len(_pool) < wanted:
        _pool.append(fork() if forks else spawn())
        if ready is not None:
            ready(_pool[-1])


#: a process that may fork (``can_fork``) still makes its workers new interpreters for a read of this many
#: bytes or more, or with this many workers or more (a command starts them at its own start): forked workers
#: and their parent share its pages copy-on-write, and on a long read the copies cost more than the workers'
#: own imports (10x, 5.4 GB on 2 cores: 10.6 s spawned at the command's start, 15-16.8 s forked; full,
#: 540 MB: 1.44-1.54 s spawned, 1.61-1.82 s forked), as do 16 forks of a large process; on a short read
#: with few workers, three interpreters importing on two cores keep the read waiting (135 MB: 0.69-0.73 s
#: spawned, 0.57-0.62 s forked; 270 MB: even). Measured with the package's bytecode compiled, as installed.
EARLY_SPAWN_BYTES = 256 << 20
EARLY_SPAWN_WORKERS = 4


def short_read(size: int, wanted: int) -> bool:
    """Whether a read of ``size`` bytes by ``wanted`` workers is short enough to fork them (where
    ``can_fork``): under ``EARLY_SPAWN_BYTES`` with fewer than ``EARLY_SPAWN_WORKERS``."""
    return size < EARLY_SPAWN_BYTES and wanted < EARLY_SPAWN_WORKERS


def warm_up_for(run_dir, cache_root: Path | None = None) -> None:
    """``warm_up`` when a cold read of ``run_dir`` would use workers: its JSON lines add up to
    ``MIN_BYTES`` or more and no cache of a folder of that name is as new as its newest file (a
    look at sizes and times only; the exact cache is known only once the loader runs). Nothing when a
    read would use one worker (it reads in the calling process then), nor when this process may fork
    them later and the read is short with few workers (``EARLY_SPAWN_BYTES``, ``EARLY_SPAWN_WORKERS``)."""
    wanted = count()
    if wanted < 2:
        return
    try:
        files = [entry.stat() for entry in os.scandir(run_dir) if entry.name.endswith(".jsonl") and entry.is_file()]
    except OSError:
        return
    size = sum(st.st_size for st in files)
    if size < MIN_BYTES or (can_fork() and short_read(size, wanted)):
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
def borrow(wanted: int, ready: Callable | None = None, size: int | None = None):
    """``wanted`` live workers of the pool for one read (of ``size`` bytes: new workers are forked only
    for a short one, see ``short_read``), or fresh ones (ended afterwards) when another read holds the
    pool; ``ready`` (optional) is called with each as soon as it is there. If the read fails, the pool's
    workers are ended: the next read starts afresh."""
    if not _lock.acquire(blocking=False):
        procs = []
        try:
            for _ in range(wanted):
                procs.append(spawn())
                if ready is not None:
                    ready(procs[-1])
            yield procs
        finally:
            for proc in procs:
                stop(proc)
        return
    try:
        _top_up(wanted, ready, size)
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
