"""The one file lock the store takes: a cache folder while it is read or changed, a run's tags while they
are rewritten. Built on ``filelock`` (``flock`` on Linux and macOS, ``msvcrt`` locking on Windows), so the
package imports and locks on every platform; the lock file stays behind, empty, between holders."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout


@contextlib.contextmanager
def locked(path: Path, wait: bool = True, touch: bool = False) -> Iterator[None]:
    """Hold the exclusive lock on the file ``path`` (created, with its folder, where missing) for the
    ``with`` block. With ``wait`` False, raises ``BlockingIOError`` at once when another holder has it;
    ``touch`` sets the lock file's mtime to now (a cache folder's "last used" time)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path), timeout=-1 if wait else 0, mode=0o644)
    try:
        lock.acquire()
    except Timeout as exc:
        raise BlockingIOError(f"{path} is locked by another process") from exc
    try:
        if touch:
            os.utime(path)
        yield
    finally:
        lock.release()
