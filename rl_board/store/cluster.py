"""The read on a Ray cluster: the same byte-range tasks the local workers take, as Ray tasks.

With ``RL_BOARD_RAY=ADDRESS`` (``rl-board index RUN --ray [ADDRESS]`` sets it for its read), a run's
ranges (``ranges.tasks_for``) go to ``ray.remote`` tasks on the user's cluster instead of the local
pool: each task reads its range straight from the run's location (a URL, or a path every node sees)
through ``ranges.ingest_range`` and writes its segment into the cache folder, which must therefore be
one every node can write (a shared filesystem path; the cache folder of this machine for a cluster on
it). The caller then opens the segments as it opens those of its own workers. ``ADDRESS`` is what
``ray.init(address=...)`` takes: ``auto`` (the cluster this machine is on), ``HOST:PORT``,
``ray://HOST:PORT``; ``local`` starts a cluster on this machine for the read, with one CPU per CPU
this process may use. A driver that already joined a cluster (``ray.init`` earlier in the process)
uses that one.

Ray is an optional extra (``pip install "rl-board[ray]"``); without it nothing here is imported.
Credentials are never shipped with a task: each node reads with its own (environment, instance role).
A task that raises is one line naming its range's file; a task whose worker or node dies is retried
by Ray (``MAX_RETRIES``) and then is one line too. Nothing of a failed read is kept in the cache.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

from ..base.access import RootError

RAY_ENV = "RL_BOARD_RAY"
MAX_RETRIES = 3  # times Ray runs a task again whose worker process or node died
CONNECT_TIMEOUT_S = 5.0  # seconds to reach a HOST:PORT before the cluster is called unreachable (Ray's own
# client keeps retrying for minutes)

#: the last read on the cluster: its address, how many tasks, and how many came back
LAST_READ: dict = {}


class ClusterError(RootError):
    """The Ray cluster can't be reached, or a task on it failed: one line naming the address or the file."""


def address() -> str | None:
    """``$RL_BOARD_RAY``: the cluster reads go to, or None (the local pool)."""
    return os.environ.get(RAY_ENV, "").strip() or None


def _reachable(where: str) -> None:
    """``ClusterError`` at once when ``HOST:PORT`` (or ``ray://HOST:PORT``) accepts no connection."""
    target = where.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local": Ray finds (or starts) the cluster itself, and says quickly when it can't
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ClusterError(f"the Ray cluster at {where} can't be reached ({exc.strerror or type(exc).__name__}).") \
            from None


def connect(where: str) -> None:
    """Join the cluster at ``where`` (once per process; a process already joined keeps its cluster)."""
    try:
        import ray
    except ImportError:
        raise ClusterError('reading on a Ray cluster needs Ray: pip install "rl-board[ray]".') from None
    if ray.is_initialized():
        return
    _reachable(where)
    package_parent = str(Path(__file__).resolve().parents[2])  # rl_board importable by a task on this machine
    options = dict(logging_level="ERROR", log_to_driver=False, configure_logging=True,
                   runtime_env={"env_vars": {"PYTHONPATH": package_parent}})
    if where == "local":
        from . import workers

        options["num_cpus"] = workers.count()
    else:
        options["address"] = where
    try:
        ray.init(**options)
    except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... for a cluster it can't join
        first = (str(exc).splitlines() or [""])[0][:200]
        raise ClusterError(f"the Ray cluster at {where} can't be joined ({type(exc).__name__}: {first}).") from None


def _task(path: str, start: int, stop: int, out_dir: str, reader: str, options: str, where: str | None,
          publish: str | None = None) -> dict:
    """One range, on a cluster node: parsed into a segment in ``out_dir`` (with ``publish``, the shared
    cache's URL folder: written on the node, then put there under a temporary key moved to its name);
    the ``RangeResult``'s fields, or ``{"fault": line}`` when the run's store failed (a line the caller
    raises)."""
    import tempfile
    from dataclasses import asdict

    from ..base.location import restore
    from ..base.remote import LocationError, fault_line, remote_path
    from ..readers import ReadOptions, reader_for
    from .ranges import ingest_range

    location = restore(where) if where is not None else None
    with tempfile.TemporaryDirectory(prefix="rl_board-task-") as scratch:
        try:
            result = ingest_range(reader_for(reader), path, start, stop, scratch if publish else out_dir,
                                  ReadOptions.from_json(options), location=location)
        except LocationError as exc:
            return {"fault": str(exc)}
        if publish and result.segment is not None:
            from .shared import SharedCache

            try:
                SharedCache._publish(remote_path(publish, checked=False), result.segment, Path(scratch) / result.segment)
            except Exception as exc:  # a store's errors are many kinds
                return {"fault": fault_line(publish, exc)}
    fields = asdict(result)
    del fields["table"]  # a segment file in out_dir, or in the shared cache
    return fields


def _fetch(publish: str, names: list[str], out_dir: str) -> None:
    """Bring the segments the tasks put in the shared cache at ``publish`` into this machine's ``out_dir``."""
    from ..base.remote import remote_path

    folder = remote_path(publish, checked=False)
    for name in names:
        tmp = Path(out_dir) / f".tmp-fetch-{name}"
        try:
            folder.fs.get_file(str((folder / name).pure), str(tmp))
            os.replace(tmp, Path(out_dir) / name)
        finally:
            tmp.unlink(missing_ok=True)


def run_ranges(reader, tasks: list[tuple[str, int, int]], out_dir: str, options, location, where: str,
               progress: Callable[[int], None] | None = None, publish: str | None = None) -> list:
    """Every (path, start, stop) range parsed by a Ray task into ``out_dir`` (with ``publish``, into the
    shared cache's URL folder, then fetched into ``out_dir``); ``RangeResult``s in task order.
    ``progress`` gets each finished task's bytes. Raises ``ClusterError`` (or ``LocationError`` for the
    run's store), leaving nothing half-read to keep."""
    from .ranges import RangeResult

    connect(where)
    import ray

    remote = ray.remote(num_cpus=1, max_retries=MAX_RETRIES)(_task)
    shared = location.to_json() if location is not None else None
    refs = {remote.remote(path, start, stop, out_dir, reader.NAME, options.to_json(), shared, publish): index
            for index, (path, start, stop) in enumerate(tasks)}
    LAST_READ.clear()
    LAST_READ.update(address=where, tasks=len(tasks), done=0, published=0)
    results: dict[int, RangeResult] = {}
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                index = refs[ref]
                try:
                    fields = ray.get(ref)
                except Exception as exc:  # RayTaskError, WorkerCrashedError, NodeDiedError...
                    path = tasks[index][0]
                    cause = getattr(exc, "cause", None) or exc
                    first = (str(cause).splitlines() or [""])[0][:200]
                    raise ClusterError(f"a Ray task reading {path} failed ({type(cause).__name__}: {first}).") \
                        from None
                if "fault" in fields:
                    from ..base.remote import LocationError

                    raise LocationError(fields["fault"])
                result = RangeResult(**fields)
                result.errors = [tuple(e) for e in result.errors]
                results[index] = result
                LAST_READ["done"] += 1
                if progress is not None:
                    progress(tasks[index][2] - tasks[index][1])
    except BaseException:
        for ref in pending:  # the read stops here: nothing more of it is wanted
            try:
                ray.cancel(ref)
            except Exception:  # noqa: S110 - a task that finished meanwhile can't be cancelled
                pass
        raise
    if publish:
        names = [r.segment for r in results.values() if r.segment is not None]
        try:
            _fetch(publish, names, out_dir)
        except Exception as exc:  # a store's errors are many kinds
            from ..base.remote import LocationError, fault_line

            raise LocationError(fault_line(publish, exc)) from None
        LAST_READ["published"] = len(names)
    return [results[i] for i in range(len(tasks))]


def describe_progress(done: int, total: int) -> str:
    """A progress line for stderr: bytes and tasks done."""
    tasks = f", {LAST_READ.get('done', 0)} of {LAST_READ['tasks']} Ray tasks" if LAST_READ.get("tasks") else ""
    return f"read {done / 1e6:.1f} of {total / 1e6:.1f} MB{tasks}"

