"""A columnar cache of parsed rollout files: Arrow IPC segments plus a manifest.

Each source file's parsed samples live in one or more segment files (a cold
parse writes one; each live refresh that finds new lines adds one), memory-mapped
on open so token arrays are read from disk only when a sample is shown. The
manifest records, per source file, what was parsed (``fingerprints.FileEntry``: byte
offset, size, mtime, inode and hashes of the parsed part) and the reader and read
options the rows were made with (format, pad token, field mapping). An entry is used
only when the file is unchanged, or (for formats that append) grew with its parsed
prefix intact; anything else is parsed again.

This module keeps where the caches live (``default_cache_root``, one folder per run and
key), one run's folder (``RunCache``: its lock, manifest and segments) and the size limit
over all of them (least recently used first).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import re
import shutil
import tempfile
from pathlib import Path, PurePosixPath

import platformdirs
import xxhash

from ..base.access import is_url
from ..base.defaults import CACHE_MAX_ENV, parse_size
from ..base.location import as_path
from .fingerprints import (  # noqa: F401 (re-exported: their home before they moved)
    SETTLED_NS,
    SPAN_MIN,
    FileEntry,
    hash_span,
    hash_spans,
    head_tail_hashes,
    prefix_spans,
)
from .locks import locked

CACHE_VERSION = 26  # 26: a segment keeps only its samples with tokens' words (token_words), a response's words are found on first use and kept beside it (issue 52's words); 25: a segment keeps its steps' statistics as its worker computed them (issue 52's steps); 24: verifiers v0 keeps example_id as an extra (issue 51.6b: diff --by id); 23: prime-rl traces keep each reward's logged weight as the extra reward_weight/NAME (issue 48's components); 22: a segment keeps eos_seen per sample (the EOS check on load: issue 48's reward); 21: a segment file is named by the xxh3-128 of its bytes, checked when it is opened (issue 50's trust); 20: turns keep the trainer's per-turn fields (meta) and segments the fault kinds (issue 48's faults); 19: a segment keeps each sample's image count, turns their image references (issue 49's images); 18: TRL conversation columns are turns, image placeholders counted, verl vision runs as [image], images_dropped on verifiers traces (issue 49's vision); 17: a segment leaves its columns of one value out (16: prime-rl's June 23 – July 9, 2026 rollouts, v1 traces in step_N/*_rollouts*.jsonl, are read; 15: a verifiers-v0 results.jsonl under step_N/ takes step N; 14: renamed extra-field names carry a 128-bit hash; 13: readers give turns from more formats)
DEFAULT_CACHE_MAX = 10 * 10**9  # bytes of all run caches together before the least recently used go
MANIFEST = "manifest.json"
_LOCK = ".lock"  # flock'ed while a process reads or writes the folder; its mtime is "last used"


_SEGMENT_NAME = re.compile(r"seg-([0-9a-f]{32})\.arrow")
#: a segment's words kept beside it (``words``): the segment's digest, then that of the file's own bytes
_WORDS_NAME = re.compile(r"words-([0-9a-f]{32})-([0-9a-f]{32})\.arrow")


class SegmentDamaged(ValueError):
    """A segment file of the cache is not the one written under its name: the message says why."""


class Untrusted(ValueError):
    """The shared cache's copy of a run can't be taken: the message says why (``shared``)."""


def segment_name(digest: str) -> str:
    """The name of a segment file whose bytes have the xxh3-128 ``digest`` (hex): the name is the check."""
    return f"seg-{digest}.arrow"


def digest_of(name: str) -> str | None:
    """The digest a segment file's name carries (``segment_name``), None for a name without one."""
    match = _SEGMENT_NAME.fullmatch(name)
    return match[1] if match else None


def file_digest(path: str | Path) -> str:
    """The xxh3-128 (hex) of a file's bytes, hashed from a memory map (several GB/s)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return xxhash.xxh3_128_hexdigest(b"")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return xxhash.xxh3_128_hexdigest(mapped)


def write_named(table, folder: str | Path, name_of) -> str:
    """Write ``table`` (a ``pyarrow.Table``) as an Arrow IPC file in ``folder`` named ``name_of(digest)``, the
    digest the xxh3-128 of its bytes (a segment's ``segment_name``, a words file's ``words_name``): written
    to a temporary file first, so a reader never meets half a file under a name. Returns the name."""
    import pyarrow as pa

    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".arrow")
    os.close(fd)
    try:
        with pa.ipc.new_file(tmp, table.schema) as writer:
            writer.write_table(table)
        name = name_of(file_digest(tmp))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.replace(tmp, Path(folder) / name)  # the same name holds the same bytes: replacing one costs nothing
    return name


def open_checked(path: Path, digest: str):
    """The Arrow IPC file at ``path`` as a table mapping it, once its bytes hash (xxh3-128) to ``digest``
    and its structure is valid; ``SegmentDamaged`` (a ``ValueError``) says why it can't be used, a file
    pyarrow can't open raises ``pyarrow.ArrowException``."""
    import pyarrow as pa

    with open(path, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(fh.fileno()).st_size else b""
    if xxhash.xxh3_128_hexdigest(mapped) != digest:
        raise SegmentDamaged("its bytes don't hash to the digest written with it (edited or damaged since)")
    if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        # the hash read every page of the mapping: let them go (they stay in the page cache), so the
        # process holds only the pages the table's reads touch, as an unchecked file's mapping does
        mapped.madvise(mmap.MADV_DONTNEED)
    table = pa.ipc.open_file(pa.py_buffer(mapped)).read_all()
    table.validate()  # buffers as long as the columns say (O(columns), the bytes are not read)
    return table


def words_name(segment: str, digest: str) -> str:
    """The name of the words file (``words``) of the segment named ``segment``, whose own bytes have the
    xxh3-128 ``digest``: both checks in the name."""
    return f"words-{digest_of(segment)}-{digest}.arrow"


def words_digests(name: str) -> tuple[str, str] | None:
    """(the digest of its segment, the digest of its own bytes) that a words file's name carries
    (``words_name``), None for a name that is not one."""
    match = _WORDS_NAME.fullmatch(name)
    return (match[1], match[2]) if match else None


CACHE_ENV = "RL_BOARD_CACHE_DIR"  # a folder, or a URL: a team's shared cache (``shared``)
APP_NAME = "rl_board"  # the folder named in the platform's cache folder


def default_cache_root() -> Path:
    """``$RL_BOARD_CACHE_DIR``, else the user's cache folder (``user_cache_root``). A URL there is a
    team's shared cache: this process works in its local mirror folder (``mirror_root``)."""
    if os.environ.get("RL_BOARD_CACHE_DIR"):
        url = shared_url()
        return mirror_root(url) if url else Path(os.environ["RL_BOARD_CACHE_DIR"])
    return user_cache_root()


def user_cache_root() -> Path:
    """The platform's cache folder for the board, from ``platformdirs``: ``$XDG_CACHE_HOME/rl_board``,
    else ``~/.cache/rl_board`` on Linux; ``~/Library/Caches/rl_board`` on macOS;
    ``%LOCALAPPDATA%\\rl_board\\Cache`` on Windows."""
    return platformdirs.user_cache_path(APP_NAME, appauthor=False)


def shared_url() -> str | None:
    """``$RL_BOARD_CACHE_DIR`` when it is a URL (a team's shared cache), else None."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return value.rstrip("/") if is_url(value) else None


def mirror_root(url: str) -> Path:
    """The local folder that mirrors the shared cache at ``url`` (one per URL)."""
    return user_cache_root() / "shared" / hashlib.sha1(url.encode()).hexdigest()[:16]


def cache_dir_for(run_dir: Path, key: str, root: Path | None = None) -> Path:
    """The folder caching ``run_dir`` read as ``key`` (reader and read options): one per absolute
    path and key, named so a person can tell which run it holds."""
    resolved = str(as_path(run_dir).resolve())  # a URL's run: its normalised URL
    digest = hashlib.sha1(repr((resolved, key)).encode()).hexdigest()[:16]
    return (root or default_cache_root()) / f"{_name_prefix(resolved)}{digest}"


def cached_since(run_dir: Path, since_ns: int, root: Path | None = None) -> bool:
    """Whether a cache of a run folder of ``run_dir``'s name (with any read options) has a manifest
    written at or after ``since_ns``: a cheap guess that a read will not parse, which the loader
    then checks."""
    prefix = _name_prefix(str(as_path(run_dir).resolve()))
    try:
        return any(entry.name.startswith(prefix)
                   and os.stat(Path(entry.path) / MANIFEST).st_mtime_ns >= since_ns
                   for entry in os.scandir(root or default_cache_root()))
    except OSError:
        return False


def _name_prefix(resolved: str) -> str:
    return f"{PurePosixPath(resolved).name}-"


def cache_limit() -> int:
    """``$RL_BOARD_CACHE_MAX`` in bytes (a number with an optional K, M, G or T), else 10 GB."""
    size = parse_size(os.environ.get(CACHE_MAX_ENV, ""))
    return DEFAULT_CACHE_MAX if size is None else size


class RunCache:
    """The cache folder of one run. Every method either works or raises ``OSError``/``ValueError``.

    Several processes (the page, ``summary``, ``search``) may share a folder: whoever reads or
    changes it holds ``locked()``, so no one deletes or half-reads another's segments."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @contextlib.contextmanager
    def locked(self, wait: bool = True):
        """Hold the folder's exclusive lock (creating the folder); marks it as just used. With
        ``wait`` False, raises ``BlockingIOError`` when another holder has it."""
        with locked(self.folder / _LOCK, wait=wait, touch=True):
            yield

    def manifest_stamp(self) -> tuple | None:
        """What identifies the manifest's current version (it is replaced, never edited)."""
        try:
            st = self.manifest_path().stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file()) if self.folder.is_dir() else 0

    def manifest_path(self) -> Path:
        return self.folder / MANIFEST

    def read_manifest(self, key: str) -> dict[str, FileEntry]:
        """File name -> entry, or {} when there is no manifest for this key (reader and options),
        or one of the wrong shape (valid JSON or not): that is no cache, never an error."""
        try:
            raw = json.loads(self.manifest_path().read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict) or raw.get("version") != CACHE_VERSION or raw.get("key") != key:
            return {}
        files = raw.get("files")
        if not isinstance(files, dict):
            return {}
        try:
            return {str(name): FileEntry.from_json(entry) for name, entry in files.items()}
        except (TypeError, ValueError):
            return {}

    def write_manifest(self, entries: dict[str, FileEntry], key: str, run_dir: Path | None = None) -> None:
        payload = {"version": CACHE_VERSION, "key": key, "run_dir": str(run_dir) if run_dir else None,
                   "files": {name: entry.to_json() for name, entry in entries.items()}}
        self._atomic_write(self.manifest_path(), json.dumps(payload).encode())

    def open_segment(self, name: str, check: bool = False) -> pyarrow.Table:  # noqa: F821 (imported when used)
        """A segment as a table whose buffers map the file: pages load when read. With ``check``, its
        bytes are first hashed against the digest its name carries (``segment_name``) and its
        structure validated: ``SegmentDamaged`` (a ``ValueError``) says why one can't be used; a
        file pyarrow can't open raises ``pyarrow.ArrowException``."""
        import pyarrow as pa  # here: the command line's first look at a cache needs none of it

        if not check:
            return pa.ipc.open_file(pa.memory_map(str(self.folder / name), "r")).read_all()
        expected = digest_of(name)
        if expected is None:
            raise SegmentDamaged("its name carries no digest")
        return open_checked(self.folder / name, expected)

    def remove_segments(self, keep: set[str]) -> None:
        """Delete segment files no manifest entry names, the words files of segments gone (``words_name``),
        and unfinished files (``.tmp-*``: a process killed while writing). Call it holding ``locked()``: then
        no one else is writing."""
        if not self.folder.is_dir():
            return
        kept = {digest_of(name) for name in keep}
        for path in [*self.folder.glob("seg-*.arrow"), *self.folder.glob(".tmp-*")]:
            if path.name not in keep:
                path.unlink(missing_ok=True)
        for path in self.folder.glob("words-*.arrow"):
            digests = words_digests(path.name)
            if digests is None or digests[0] not in kept:
                path.unlink(missing_ok=True)

    def run_dir(self) -> str | None:
        """The run folder this cache holds, as its manifest names it."""
        try:
            run_dir = json.loads(self.manifest_path().read_text()).get("run_dir")
        except (OSError, ValueError, AttributeError):
            return None
        return run_dir if isinstance(run_dir, str) else None

    def last_used(self) -> float:
        try:
            return (self.folder / _LOCK).stat().st_mtime
        except OSError:
            return 0.0

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def empty(self) -> None:
        """Delete everything in the folder but its lock. Call it holding ``locked()``."""
        for path in self.folder.iterdir():
            if path.name != _LOCK:
                path.unlink(missing_ok=True)

    def _atomic_write(self, path: Path, data: bytes) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)


def list_caches(root: Path | None = None) -> list[RunCache]:
    """Every run cache under ``root`` (default ``default_cache_root()``), least recently used first."""
    root = Path(root or default_cache_root())
    if not root.is_dir():
        return []
    caches = [RunCache(d) for d in root.iterdir()
              if d.is_dir() and ((d / MANIFEST).exists() or (d / _LOCK).exists())]
    return sorted(caches, key=RunCache.last_used)


def clear_caches(caches: list[RunCache]) -> int:
    """Delete ``caches`` (each once no process is using it); returns how many went."""
    cleared = 0
    for cache in caches:
        try:
            with cache.locked():
                cache.empty()
            cache.clear()
            cleared += 1
        except OSError:
            continue
    return cleared


def enforce_limit(keep: Path, root: Path | None = None, limit: int | None = None) -> list[Path]:
    """Delete the least recently used run caches until all of them together take at most ``limit``
    bytes (default ``cache_limit()``); never ``keep`` nor one another process is using. Returns
    the folders deleted."""
    limit = cache_limit() if limit is None else limit
    caches = list_caches(root or Path(keep).parent)
    sizes = {c.folder: c.size() for c in caches}
    total = sum(sizes.values())
    evicted = []
    for cache in caches:
        if total <= limit:
            break
        if cache.folder.resolve() == Path(keep).resolve():
            continue
        try:
            with cache.locked(wait=False):
                cache.empty()
        except OSError:  # BlockingIOError among them: in use right now, next time
            continue
        cache.clear()
        total -= sizes[cache.folder]
        evicted.append(cache.folder)
    return evicted
