"""When a source file's parsed part can be trusted: what the cache's manifest keeps of each file
(``FileEntry``: size, time, inode, the bytes parsed and their hashes) and the hashes themselves (sha1 of
the head and of the bytes before the parsed offset, xxh3-128 of spans covering the whole parsed part).

An entry is used only when the file is unchanged, or (for formats that append) grew with its parsed
prefix intact (``FileEntry.status``); a file written moments before it was read is hashed before its
size and time are trusted (``SETTLED_NS``).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import xxhash

from ..base.compression import codec_of
from ..base.location import open_file

_HASH_SPAN = 65536  # bytes hashed at the head of a file and before its parsed offset
SETTLED_NS = 2 * 10**9  # a file changed this close to its read is hashed before its size and time are trusted
SPAN_MIN = 8 << 20  # parsed spans shorter than this are joined with a neighbour in a manifest entry


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
    errors: list[list] = field(default_factory=list)  # [line, reason] of the first rejected lines
    unlisted: int = 0  # rejected lines counted past those listed in ``errors``
    file_error: str | None = None  # why the whole file could not be read
    unterminated: bool = False  # the last line read had no newline (its newline, if it comes, is skipped)
    etag: str = ""  # a URL's object: its ETag (or version) when parsed; with its size, what says it is unchanged
    # when the file was last seen as parsed (ns): a file written within SETTLED_NS of it may be rewritten in the
    # same tick of the file system's clock, same size and time, so it is hashed before it is trusted
    checked_ns: int = 0

    @classmethod
    def describe(cls, path: Path, offset: int, next_line: int, segments, errors,
                 file_error: str | None = None, unterminated: bool = False, read: list = (),
                 hashes: list[str] | None = None, unlisted: int = 0) -> FileEntry:
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
            unterminated=unterminated, checked_ns=time.time_ns(), etag=getattr(st, "etag", ""), unlisted=unlisted,
        )

    def status(self, path: Path, appendable: bool = True, ends: bool = False) -> str:
        """"same" when the file is as parsed, "grown" when lines were only appended (a format that
        appends; never a compressed file, which is read whole), else "stale". With ``ends`` (a run opened
        from the cache), a file of the same size and time has its first and last blocks hashed as well
        (``_ends_match``): a file replaced by one of its size with its time restored (``cp -p``) is stale."""
        appendable = appendable and codec_of(path) is None
        try:
            st = path.stat()
        except OSError:
            return "stale"
        if st.st_ino != self.inode or st.st_size < self.offset:
            return "stale"
        if (st.st_size, st.st_mtime_ns, getattr(st, "etag", "")) == (self.size, self.mtime_ns, self.etag):
            if st.st_mtime_ns < self.checked_ns - SETTLED_NS:
                # a URL's object: its ETag changes with its bytes, no range is read
                return "stale" if ends and not self.etag and not self._ends_match(path) else "same"
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

    def _ends_match(self, path: Path) -> bool:
        """Whether the first and last ``_HASH_SPAN`` bytes of the parsed part of ``path`` hash as they did
        (``head_hash``, ``tail_hash``): one open, at most two reads of 64 KB."""
        head_end, tail_start = min(self.offset, _HASH_SPAN), max(0, self.offset - _HASH_SPAN)
        try:
            with open_file(path) as fh:
                head = tail = fh.read(head_end)
                if tail_start:  # else the parsed part is one block, both hashes of it
                    fh.seek(tail_start)
                    tail = fh.read(self.offset - tail_start)
        except OSError:
            return False
        return hashlib.sha1(head).hexdigest() == self.head_hash and hashlib.sha1(tail).hexdigest() == self.tail_hash

    def _hashes_match(self, path: Path) -> bool:
        """Whether the parsed part of ``path`` hashes as it did: head, tail, then every span (the middle,
        rewritten in place)."""
        if hash_span(path, 0, min(self.offset, _HASH_SPAN)) != self.head_hash:
            return False
        if hash_span(path, max(0, self.offset - _HASH_SPAN), self.offset) != self.tail_hash:
            return False
        spans = [(a, b) for a, b, _ in self.prefix_spans]
        return hash_spans(path, spans) == [d for *_, d in self.prefix_spans]

    def to_json(self) -> dict:
        """The entry as its manifest JSON holds it (``dataclasses.asdict``'s keys and values, without its deep
        copy of every list: 0.27 s of 1,250 files' manifest)."""
        return {name: getattr(self, name) for name in _ENTRY_FIELDS}

    @classmethod
    def from_json(cls, raw) -> FileEntry:
        """An entry from its manifest JSON; ``ValueError`` when it has the wrong shape."""
        if not isinstance(raw, dict):
            raise ValueError("not an object")
        entry = cls(**raw)  # TypeError for a missing or unknown key
        numbers = (entry.size, entry.mtime_ns, entry.inode, entry.offset, entry.next_line, entry.checked_ns,
                   entry.unlisted)
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


_ENTRY_FIELDS = tuple(f.name for f in fields(FileEntry))
