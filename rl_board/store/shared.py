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
  their own segments (a segment's name is the xxh3-128 of its bytes: one name holds one content):
  whichever is published last, the URL names a complete read, and both readers got complete, identical
  results.

The shared cache is a trust boundary: anyone who can write the URL could otherwise decide what every
viewer sees. A pulled manifest is taken only when it names this cache's run and read options (its
``run_dir`` and ``key`` give this very cache folder's name: a manifest copied from another run's
folder, even one outside the viewer's roots, is refused) and gives the SHA-256 digest of every segment
it names (``digests``, written by ``push``); a fetched segment whose bytes don't hash to its digest is
refused. Either is a note, and the run is read here. A manifest's file entries are still checked
against the viewer's own log files (size, time, hashes of the parsed bytes) before any segment is used.
Whoever writes the URL can write digests too, so a pulled copy is also tied to the viewer's logs: rows
drawn at random are read again from the viewer's own files at the offsets the segments hold and must
give the same step, reward, texts and length (``rows_match_logs``; a table file read whole to reach its
row has all its rows compared); else the copy is not used, a note says which row, and the run is read here.
Temporary keys left by a push that died (``.tmp-…``, older than ``TMP_KEY_SECONDS``) are removed at the
next publish.

Failures to reach the URL cost only the sharing: the local cache works as before and a note says why.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
import uuid
from pathlib import Path

from ..base import fields as F
from ..base.compression import codec_of
from ..base.remote import RemotePath, fault_line, remote_path
from .cache import CACHE_ENV, MANIFEST, RunCache, Untrusted, cache_dir_for, mirror_root, shared_url  # noqa: F401

TMP_KEY_SECONDS = 3600  # a temporary key older than this at a publish was left by a push that died
_DIGEST_CHUNK = 1 << 20  # bytes hashed at a time


ROWS_CHECKED = 16  # rows of a pulled copy read again from the viewer's own logs before it is used
WHOLE_FILES_CHECKED = 2  # of them, table files (read whole to reach a row) at most
TABLE_ROWS_CHECKED = 2_000  # rows of a table file read whole compared with the copy's (all of them when fewer)
_COMPARED = (F.STEP, F.REWARD, *F.TEXT_FIELDS, "length")  # what a row read again must give as the copy does


def rows_match_logs(found: dict, paths: dict, reader, options, location, ingest_range, ingest_whole) -> str | None:
    """None when ``ROWS_CHECKED`` rows drawn at random from the segments of ``found`` (file name -> (entry,
    segments), as ``SegmentStore.load`` opened them from a pulled copy) are what the viewer's own files
    (``paths``: file name -> path) give when the bytes at each row's offset are read again; else why not.
    A table file, read whole to reach its row (``WHOLE_FILES_CHECKED`` at most), has every row the copy
    holds of it compared (``TABLE_ROWS_CHECKED`` drawn at random past that many): what it cost to read
    is paid already, and a copy that differs in some of its rows is not passed by the luck of the draw.
    A copy whose manifest and digests were rewritten to serve another run's segments fails here: its rows'
    texts and numbers are not the ones the logs hold at their offsets. The rows are read again by the
    caller's ``ingest_range`` and ``ingest_whole`` (``ranges``', ``ingest``'s: the store reads through
    this module, so it does not import them back)."""
    from .segments import as_table, with_one_value_columns

    rows = [(name, table, i) for name, (_, segments) in found.items() for _, _, table in segments
            for i in range(as_table(table).num_rows)] if sum(
        as_table(t).num_rows for _, segments in found.values() for _, _, t in segments) <= 100_000 else None
    if rows is None:  # many rows: draw segments first, then a row of each
        parts = [(name, table) for name, (_, segments) in found.items() for _, _, table in segments
                 if as_table(table).num_rows]
        picked = [parts[random.randrange(len(parts))] for _ in range(ROWS_CHECKED)] if parts else []
        rows = [(name, table, random.randrange(as_table(table).num_rows)) for name, table in picked]
    else:
        rows = random.sample(rows, min(ROWS_CHECKED, len(rows)))
    whole: set[str] = set()  # table files read whole, every row of theirs compared
    for name, table, i in rows:
        path = paths[name]
        if reader.APPENDABLE and codec_of(path) is None:
            mine = with_one_value_columns(as_table(table)).slice(i, 1).to_pylist()[0]
            start = int(mine["offset"])
            got = ingest_range(reader, str(path), start, start + int(mine["length"]) + 1, None, options,
                               location=location).table
            theirs = got.slice(0, 1).to_pylist() if got is not None else []
            why = _differs(name, [mine], {int(mine["offset"]): row for row in theirs})
        elif reader.APPENDABLE or name in whole or len(whole) >= WHOLE_FILES_CHECKED:
            continue  # a compressed log's offsets are in its expanded bytes; a table compared; past the bound
        else:
            whole.add(name)
            got = ingest_whole(reader, path, path.stat().st_size, None, options).table
            why = _table_differs(name, [as_table(t) for _, _, t in found[name][1]], got)
        if why is not None:
            return why
    return None


def _table_differs(name: str, copy: list, got) -> str | None:
    """Why the copy's rows of table file ``name`` (its segments' tables, ``copy``) are not the rows
    ``got`` (the file read again) holds at their offsets, or None: every row when there are at most
    ``TABLE_ROWS_CHECKED``, else that many drawn at random."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .segments import with_one_value_columns

    starts = np.cumsum([0, *(t.num_rows for t in copy)])
    total = int(starts[-1])
    drawn = np.array(random.sample(range(total), TABLE_ROWS_CHECKED) if total > TABLE_ROWS_CHECKED else range(total),
                     np.int64)
    mine = []
    for table, start, end in zip(copy, starts, starts[1:]):  # the drawn rows of each segment, the columns compared
        picked = drawn[(drawn >= start) & (drawn < end)] - start
        if len(picked):
            part = with_one_value_columns(table).take(pa.array(picked))
            keep = [c for c in ("offset", F.LINE, *_COMPARED) if c in part.column_names]
            mine.extend(part.select(keep).to_pylist())
    theirs: dict[int, dict] = {}
    if got is not None and got.num_rows and mine:
        offsets = pa.array(sorted({int(row["offset"]) for row in mine}), got["offset"].type)
        got = got.filter(pc.is_in(got["offset"], value_set=offsets))
        keep = [c for c in ("offset", *_COMPARED) if c in got.column_names]
        theirs = {int(row["offset"]): row for row in got.select(keep).to_pylist()}
    return _differs(name, mine, theirs)


def _differs(name: str, mine: list[dict], theirs: dict[int, dict]) -> str | None:
    """Why one of the copy's rows ``mine`` is not the row of the logs at its offset (``theirs``: offset ->
    row read again), or None."""
    for row in mine:
        other = theirs.get(int(row["offset"]))
        if other is None or any(not _same(row.get(k), other.get(k)) for k in _COMPARED):
            return (f"its row at line {row.get(F.LINE)} of {name} is not what your copy of {name} holds there "
                    f"(reward {row.get(F.REWARD)!r} in the copy)")
    return None


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _segments(manifest: bytes) -> set[str]:
    files = json.loads(manifest).get("files") or {}
    return {name for entry in files.values() for name, *_ in entry.get("segments", [])}


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_DIGEST_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _check(cache: RunCache, manifest: bytes) -> dict[str, str]:
    """The digests of the segments a pulled ``manifest`` names, once it is found to be this cache's own
    (its run and read options give this cache folder's name) and to give a digest for each segment.
    ``Untrusted`` otherwise."""
    try:
        raw = json.loads(manifest)
        run_dir, key, digests = raw["run_dir"], raw["key"], raw.get("digests")
        named = _segments(manifest)
    except (ValueError, TypeError, KeyError, AttributeError):
        raise Untrusted("its manifest is not one this version writes") from None
    if not isinstance(run_dir, str) or not isinstance(key, str) or cache_dir_for(run_dir, key, cache.folder.parent
                                                                                 ).name != cache.folder.name:
        raise Untrusted("its manifest names another run or other read options than this cache's")
    if not isinstance(digests, dict) or not named <= set(digests):
        raise Untrusted("its manifest gives no digest for some of its segments")
    return {name: str(digests[name]) for name in named}


class SharedCache:
    """The shared cache at one URL (see the module)."""

    def __init__(self, url: str):
        self.url = url
        self.root: RemotePath = remote_path(url, checked=False)  # the operator's URL, not a run's
        self._digests: dict[tuple, str] = {}  # (segment path, size, mtime_ns) -> its digest, hashed once

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
        digests = _check(cache, manifest)
        cache.folder.mkdir(parents=True, exist_ok=True)
        for name in sorted(digests):
            if "/" in name or name.startswith(".") or (cache.folder / name).exists():
                continue
            tmp = cache.folder / f".tmp-{uuid.uuid4().hex}"
            try:
                remote.fs.get_file(str((remote / name).pure), str(tmp))
                if digest(tmp) != digests[name]:
                    raise Untrusted(f"its segment {name} is not the one its manifest names (another digest)")
                os.replace(tmp, cache.folder / name)
            finally:
                tmp.unlink(missing_ok=True)
        cache._atomic_write(cache.manifest_path(), manifest)
        return True

    def push(self, cache: RunCache) -> None:
        """Publish ``cache``'s manifest and the segments it names that the URL lacks (segments first,
        each under a temporary key moved to its name; the manifest last)."""
        manifest = self._signed(cache)
        remote = self._folder(cache)
        fs = remote.fs
        try:
            if (remote / MANIFEST).read_bytes() == manifest:
                return
        except FileNotFoundError:
            pass
        fs.invalidate_cache()
        try:
            listed = fs.ls(str(remote.pure), detail=True)
        except FileNotFoundError:
            listed = []
        there = {Path(entry["name"]).name for entry in listed}
        for name in sorted(_segments(manifest) - there):
            self._publish(remote, name, cache.folder / name)
        self._publish(remote, MANIFEST, manifest)
        self._clean(remote, listed)

    def _signed(self, cache: RunCache) -> bytes:
        """``cache``'s manifest with the SHA-256 digest of each segment it names added (``digests``), as
        published: what a pulling reader checks each segment against."""
        raw = json.loads(cache.manifest_path().read_bytes())
        digests = {}
        for name in sorted(_segments(cache.manifest_path().read_bytes())):
            path = cache.folder / name
            st = path.stat()
            known = (str(path), st.st_size, st.st_mtime_ns)
            if known not in self._digests:
                self._digests[known] = digest(path)
            digests[name] = self._digests[known]
        raw["digests"] = digests
        return json.dumps(raw).encode()

    @staticmethod
    def _clean(remote: RemotePath, listed: list[dict]) -> None:
        """Remove the temporary keys of ``listed`` (the folder before this publish) older than
        ``TMP_KEY_SECONDS``: a push that died left them, one under way is younger."""
        from ..base.remote import RemoteStat

        now = time.time()
        for entry in listed:
            name = Path(entry["name"]).name
            mtime = RemoteStat(entry).st_mtime
            if name.startswith(".tmp-") and 0 < mtime < now - TMP_KEY_SECONDS:
                remote.fs.rm(str((remote / name).pure))

    @staticmethod
    def _publish(remote: RemotePath, name: str, local: Path | bytes) -> None:
        """``local`` (a file, or bytes) put at ``name`` of ``remote``: under a temporary key, then moved."""
        fs = remote.fs
        tmp = str((remote / f".tmp-{uuid.uuid4().hex}-{name}").pure)
        if isinstance(local, bytes):
            fs.pipe_file(tmp, local)
        else:
            fs.put_file(str(local), tmp)
        try:
            fs.mv(tmp, str((remote / name).pure))
        finally:
            if fs.exists(tmp):
                fs.rm(tmp)

    def note(self, what: str, exc: Exception) -> str:
        """What the user reads when the shared cache could not be used (one line, no secret)."""
        if isinstance(exc, Untrusted):
            return f"The shared cache's copy of this run was not used: {exc}. The run was read here."
        return f"Could not {what} the shared cache: {fault_line(self.url, exc)} The local cache was used."

