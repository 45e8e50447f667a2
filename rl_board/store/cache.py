"""A columnar cache of parsed rollout files: Arrow IPC segments plus a manifest.

Each source file's parsed samples live in one or more segment files (a cold
parse writes one; each live refresh that finds new lines adds one), memory-mapped
on open so token arrays are read from disk only when a sample is shown. The
manifest records, per source file, what was parsed (byte offset, size, mtime,
inode and hashes of the file's head and of the bytes just before the offset) and
the reader and read options the rows were made with (format, pad token, field
mapping). An entry is used only when the file is unchanged, or (for formats that
append) grew with its parsed prefix intact; anything else is parsed again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import mmap
import os
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

import xxhash

from ..base.access import is_url
from ..base.compression import codec_of
from ..base.location import as_path, open_file

CACHE_VERSION = 13  # 13: readers give turns from more formats (ROLL, tinker, OpenRLHF, NeMo-RL, token exports)
CACHE_MAX_ENV = "RL_BOARD_CACHE_MAX"
DEFAULT_CACHE_MAX = 10 * 10**9  # bytes of all run caches together before the least recently used go
MANIFEST = "manifest.json"
_LOCK = ".lock"  # flock'ed while a process reads or writes the folder; its mtime is "last used"
_HASH_SPAN = 65536  # bytes hashed at the head of a file and before its parsed offset
SETTLED_NS = 2 * 10**9  # a file changed this close to its read is hashed before its size and time are trusted
SPAN_MIN = 8 << 20  # parsed spans shorter than this are joined with a neighbour in a manifest entry


CACHE_ENV = "RL_BOARD_CACHE_DIR"  # a folder, or a URL: a team's shared cache (``shared``)


def default_cache_root() -> Path:
    """``$RL_BOARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/rl_board``, else ``~/.cache/rl_board``. A URL there
    is a team's shared cache: this process works in its local mirror folder (``mirror_root``)."""
    if os.environ.get("RL_BOARD_CACHE_DIR"):
        url = shared_url()
        return mirror_root(url) if url else Path(os.environ["RL_BOARD_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rl_board"


def shared_url() -> str | None:
    """``$RL_BOARD_CACHE_DIR`` when it is a URL (a team's shared cache), else None."""
    value = os.environ.get(CACHE_ENV, "").strip()
    return value.rstrip("/") if is_url(value) else None


def mirror_root(url: str) -> Path:
    """The local folder that mirrors the shared cache at ``url`` (one per URL)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rl_board" / "shared" / hashlib.sha1(url.encode()).hexdigest()[:16]


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


def hash_span(path: Path, start: int, end: int) -> str:
    """sha1 of bytes [start, end) of ``path``."""
    with open_file(path) as fh:
        fh.seek(start)
        return hashlib.sha1(fh.read(end - start)).hexdigest()


def head_tail_hashes(data: bytes) -> list[str]:
    """[head hash, tail hash] of a file whose bytes [0, offset) are ``data``, as ``FileEntry.describe``
    computes them from the file."""
    return [hashlib.sha1(data[:_HASH_SPAN]).hexdigest(), hashlib.sha1(data[-_HASH_SPAN:]).hexdigest()]


def hash_spans(path: Path, spans: list[tuple[int, int]]) -> list[str]:
    """xxh3-128 of each span [start, end) of ``path``, hashed from a memory map (several GB/s)."""
    if not spans:
        return []
    with open_file(path) as fh:
        try:
            fh.fileno()
        except (OSError, ValueError):  # a URL's object: each span read as one range
            return [xxhash.xxh3_128(_read_span(fh, a, b)).hexdigest() for a, b in spans]
        if os.fstat(fh.fileno()).st_size == 0:
            return [xxhash.xxh3_128(b"").hexdigest() for _ in spans]
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return [xxhash.xxh3_128(view[a:b]).hexdigest() for a, b in spans]
            finally:
                view.release()


def _read_span(fh, start: int, end: int) -> bytes:
    fh.seek(start)
    return fh.read(max(0, end - start))


def prefix_spans(path: Path, offset: int, read: list) -> list[list]:
    """The spans [start, end, xxh3-128] covering bytes [0, offset) of ``path``: those ``read`` gave
    (each range's parser hashed the bytes it read), the gaps between them hashed from the file, and
    runs of spans under ``SPAN_MIN`` bytes joined (hashed again from the file), so a followed log
    keeps few."""
    if len(read) == 1 and read[0][0] == 0 and read[0][1] == offset and read[0][2]:  # read whole at once
        return [list(read[0])]
    spans, at = [], 0
    for start, end, digest in sorted((int(a), int(b), d) for a, b, d in read if b > a):
        if start < at or end > offset:  # overlapping, or beyond what the entry covers: not trusted
            continue
        if start > at:
            spans.append([at, start, None])
        spans.append([start, end, digest])
        at = end
    if at < offset:
        spans.append([at, offset, None])
    joined: list[list] = []
    for span in spans:  # join small neighbours, up to 3 x SPAN_MIN: [a, b) + [b, c) -> [a, c), hashed again
        if joined and (span[1] - span[0] < SPAN_MIN or joined[-1][1] - joined[-1][0] < SPAN_MIN) \
                and span[1] - joined[-1][0] <= 3 * SPAN_MIN:
            joined[-1] = [joined[-1][0], span[1], None]
        else:
            joined.append(list(span))
    missing = [i for i, span in enumerate(joined) if span[2] is None]
    for i, digest in zip(missing, hash_spans(path, [(joined[i][0], joined[i][1]) for i in missing])):
        joined[i][2] = digest
    return joined


@dataclass
class FileEntry:
    """What the cache knows of one source file."""

    size: int
    mtime_ns: int
    inode: int
    offset: int  # bytes parsed: the end of the last complete line
    next_line: int  # 1-based number of the first line not yet parsed
    head_hash: str
    tail_hash: str
    # [start, end, xxh3-128] spans covering the whole parsed part: a line rewritten in its middle changes one
    prefix_spans: list[list] = field(default_factory=list)
    # [segment file, line number of its first line], or [segment file, line, first row, rows] for a slice of a
    # segment several small files share
    segments: list[list] = field(default_factory=list)
    errors: list[list] = field(default_factory=list)  # [line, reason]
    file_error: str | None = None  # why the whole file could not be read
    unterminated: bool = False  # the last line read had no newline (its newline, if it comes, is skipped)
    etag: str = ""  # a URL's object: its ETag (or version) when parsed; with its size, what says it is unchanged
    # when the file was last seen as parsed (ns): a file written within SETTLED_NS of it may be rewritten in the
    # same tick of the file system's clock, same size and time, so it is hashed before it is trusted
    checked_ns: int = 0

    @classmethod
    def describe(cls, path: Path, offset: int, next_line: int, segments, errors,
                 file_error: str | None = None, unterminated: bool = False, read: list = (),
                 hashes: list[str] | None = None) -> "FileEntry":
        """The entry of a file parsed up to ``offset``; ``read``: [start, end, xxh3-128] of the byte
        ranges its parsers hashed as they read them (``prefix_spans``); ``hashes``: the head and tail
        hashes of bytes [0, offset) as read (``head_tail_hashes``), None to hash them from the file."""
        st = path.stat()
        if hashes is None:
            hashes = [hash_span(path, 0, min(offset, _HASH_SPAN)), hash_span(path, max(0, offset - _HASH_SPAN), offset)]
        return cls(
            size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino, offset=offset, next_line=next_line,
            head_hash=hashes[0], tail_hash=hashes[1],
            prefix_spans=prefix_spans(path, offset, list(read)),
            segments=[list(s) for s in segments], errors=[list(e) for e in errors], file_error=file_error,
            unterminated=unterminated, checked_ns=time.time_ns(), etag=getattr(st, "etag", ""),
        )

    def status(self, path: Path, appendable: bool = True) -> str:
        """"same" when the file is as parsed, "grown" when lines were only appended (a format that
        appends; never a compressed file, which is read whole), else "stale"."""
        appendable = appendable and codec_of(path) is None
        try:
            st = path.stat()
        except OSError:
            return "stale"
        if st.st_ino != self.inode or st.st_size < self.offset:
            return "stale"
        if (st.st_size, st.st_mtime_ns, getattr(st, "etag", "")) == (self.size, self.mtime_ns, self.etag):
            if st.st_mtime_ns < self.checked_ns - SETTLED_NS:
                return "same"
            # written moments before it was read: a rewrite since, in the same clock tick, would look the same
            if not self._hashes_match(path):
                return "stale"
            now = time.time_ns()
            if now > st.st_mtime_ns + SETTLED_NS:  # settled now: trusted by its size and time from here on
                self.checked_ns = now
                return "settled"
            return "same"
        if st.st_size == self.size or not appendable:  # rewritten, touched, or a table: nothing cheap
            return "stale"  # proves it unchanged
        return "grown" if self._hashes_match(path) else "stale"

    def _hashes_match(self, path: Path) -> bool:
        """Whether the parsed part of ``path`` hashes as it did: head, tail, then every span (the middle,
        rewritten in place)."""
        if hash_span(path, 0, min(self.offset, _HASH_SPAN)) != self.head_hash:
            return False
        if hash_span(path, max(0, self.offset - _HASH_SPAN), self.offset) != self.tail_hash:
            return False
        spans = [(a, b) for a, b, _ in self.prefix_spans]
        return hash_spans(path, spans) == [d for *_, d in self.prefix_spans]

    @classmethod
    def from_json(cls, raw) -> "FileEntry":
        """An entry from its manifest JSON; ``ValueError`` when it has the wrong shape."""
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        entry = cls(**raw)  # TypeError for a missing or unknown key
        numbers = (entry.size, entry.mtime_ns, entry.inode, entry.offset, entry.next_line, entry.checked_ns)
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
            raise ValueError("a size, time or offset is not an integer")
        if not all(isinstance(h, str) for h in (entry.head_hash, entry.tail_hash, entry.etag)) or not all(
                isinstance(span, list) and len(span) == 3 and all(isinstance(n, int) and not isinstance(n, bool)
                                                                  for n in span[:2]) and isinstance(span[2], str)
                for span in entry.prefix_spans):
            raise ValueError("a hash is not a string")
        if not (isinstance(entry.segments, list) and all(
                isinstance(s, list) and len(s) in (2, 4) and isinstance(s[0], str)
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in s[1:])
                for s in entry.segments)):
            raise ValueError("segments are not [name, line] pairs")
        if not (isinstance(entry.errors, list) and all(isinstance(e, list) and len(e) == 2 for e in entry.errors)):
            raise ValueError("errors are not [line, reason] pairs")
        if any("/" in s[0] or s[0].startswith(".") for s in entry.segments):
            raise ValueError("a segment name is not a file of this folder")
        return entry


def cache_limit() -> int:
    """``$RL_BOARD_CACHE_MAX`` in bytes (a number with an optional K, M, G or T), else 10 GB."""
    text = os.environ.get(CACHE_MAX_ENV, "").strip().upper()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)B?", text)
    if not match:
        return DEFAULT_CACHE_MAX
    return int(float(match[1]) * 1000 ** " KMGT".index(match[2] or " "))


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
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            os.utime(fd)
            yield
        finally:
            os.close(fd)  # closing releases the lock

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
                   "files": {name: asdict(entry) for name, entry in entries.items()}}
        self._atomic_write(self.manifest_path(), json.dumps(payload).encode())

    def open_segment(self, name: str) -> "pyarrow.Table":  # noqa: F821 (pyarrow is imported here, when used)
        """A segment as a table whose buffers map the file: pages load when read."""
        import pyarrow as pa  # here: the command line's first look at a cache needs none of it

        source = pa.memory_map(str(self.folder / name), "r")
        return pa.ipc.open_file(source).read_all()

    def remove_segments(self, keep: set[str]) -> None:
        """Delete segment files no manifest entry names, and unfinished ones (``.tmp-*``: a process
        killed while writing). Call it holding ``locked()``: then no one else is writing."""
        if not self.folder.is_dir():
            return
        for path in [*self.folder.glob("seg-*.arrow"), *self.folder.glob(".tmp-*")]:
            if path.name not in keep:
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
