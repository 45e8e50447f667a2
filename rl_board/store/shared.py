"""A cache shared by a team at a URL: ``RL_BOARD_CACHE_DIR=s3://bucket/rl-board-cache``.

Each process keeps its working cache in a local mirror folder (segments must be memory-mapped), under
``<the user's cache folder>/shared/<hash of the URL>/`` (``cache.user_cache_root``), one run cache
folder per run as always. The URL holds the same folders: ``URL/<run cache folder>/manifest.json`` and the segment files it names.

- Opening a run, a process first **pulls**: when the URL's manifest differs from its own, it fetches
  every segment that manifest names and it lacks, then takes the manifest. A run another process read
  opens from its segments, without reading the logs.
- After a read, it **pushes**: every segment its manifest names that the URL lacks is uploaded under a
  temporary key (``.tmp-…``) and then moved to its name; the manifest is published last, the same way.
  A reader never sees a manifest naming a segment that is not there, nor half a segment.
- Two processes reading the same run at once each parse it and publish a complete manifest naming
  their own segments (names are random, never shared): whichever is published last, the URL names a
  complete read, and both readers got complete, identical results.

Failures to reach the URL cost only the sharing: the local cache works as before and a note says why.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from ..base.remote import RemotePath, fault_line, remote_path
from .cache import CACHE_ENV, MANIFEST, RunCache, mirror_root, shared_url  # noqa: F401 (where the mirror lives)


def _segments(manifest: bytes) -> set[str]:
    files = json.loads(manifest).get("files") or {}
    return {name for entry in files.values() for name, _ in entry.get("segments", [])}


class SharedCache:
    """The shared cache at one URL (see the module)."""

    def __init__(self, url: str):
        self.url = url
        self.root: RemotePath = remote_path(url)

    @classmethod
    def from_env(cls) -> SharedCache | None:
        url = shared_url()
        return cls(url) if url else None

    def _folder(self, cache: RunCache) -> RemotePath:
        return self.root / cache.folder.name

    def pull(self, cache: RunCache) -> bool:
        """Take the URL's manifest of ``cache``'s run (and the segments it names that are missing here)
        when it differs from the local one; whether it did. Call holding ``cache.locked()``."""
        remote = self._folder(cache)
        try:
            manifest = (remote / MANIFEST).read_bytes()
        except FileNotFoundError:
            return False
        try:
            if cache.manifest_path().read_bytes() == manifest:
                return False
        except OSError:
            pass
        cache.folder.mkdir(parents=True, exist_ok=True)
        for name in sorted(_segments(manifest)):
            if "/" in name or name.startswith(".") or (cache.folder / name).exists():
                continue
            tmp = cache.folder / f".tmp-{uuid.uuid4().hex}"
            try:
                remote.fs.get_file(str((remote / name).pure), str(tmp))
                os.replace(tmp, cache.folder / name)
            finally:
                tmp.unlink(missing_ok=True)
        cache._atomic_write(cache.manifest_path(), manifest)
        return True

    def push(self, cache: RunCache) -> None:
        """Publish ``cache``'s manifest and the segments it names that the URL lacks (segments first,
        each under a temporary key moved to its name; the manifest last)."""
        manifest = cache.manifest_path().read_bytes()
        remote = self._folder(cache)
        fs = remote.fs
        try:
            if (remote / MANIFEST).read_bytes() == manifest:
                return
        except FileNotFoundError:
            pass
        fs.invalidate_cache()
        try:
            there = {Path(p).name for p in fs.ls(str(remote.pure), detail=False)}
        except FileNotFoundError:
            there = set()
        for name in sorted(_segments(manifest) - there):
            self._publish(remote, name, cache.folder / name)
        self._publish(remote, MANIFEST, cache.manifest_path())

    @staticmethod
    def _publish(remote: RemotePath, name: str, local: Path) -> None:
        fs = remote.fs
        tmp = str((remote / f".tmp-{uuid.uuid4().hex}-{name}").pure)
        fs.put_file(str(local), tmp)
        try:
            fs.mv(tmp, str((remote / name).pure))
        finally:
            if fs.exists(tmp):
                fs.rm(tmp)

    def note(self, what: str, exc: Exception) -> str:
        """What the user reads when the shared cache could not be used (one line, no secret)."""
        return f"Could not {what} the shared cache: {fault_line(self.url, exc)} The local cache was used."

