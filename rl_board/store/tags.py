"""Tags and notes on samples ("reward hack", "good", free text), kept in a file beside the cache.

**Where.** One JSON file per run folder under ``tags_root()`` (``$RL_BOARD_TAGS_DIR``, else the
folder ``tags`` in the cache root, ``cache.default_cache_root()``): never in the log folder, and
never removed by the cache's size limit or ``rl-board cache clear``, which only delete run caches.

**Key.** A sample is named by its file (its name in the run, ``Run.files``) and its 1-based line
(row, for a table file): ``FILE:LINE``, as links and findings name samples. That name does not
depend on how the run is read (pad and EOS tokens, field mapping, max samples per step) nor on the
cache, and the lines of a log keep their numbers as it grows, so tags survive re-opening, refreshes,
other settings and a cleared cache. A content hash alone would not do: two identical lines would share
tags, and showing tags in the batch table would mean hashing every line of the run. So each entry also
keeps a hash of its line as it was when tagged (``digest``): when the file was rewritten and that line
is now another sample, the tag is listed as *changed* and not shown on the new sample.

**Writes.** Every change is a read-modify-write of the file under an exclusive ``flock`` of a lock file
beside it (threads of one page server and separate processes alike wait for each other, so no
session's change is lost), written to a temporary file and renamed into place (a reader sees the old
file or the new one, never half of one).

This module keeps the file and its writes; which samples of a loaded run carry which tags, and their
exports, are ``rl_board.analysis.tagged``'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from ..base import fields as F
from ..base.location import as_path
from .cache import default_cache_root
from .locks import locked

TAGS_DIR_ENV = "RL_BOARD_TAGS_DIR"
TAGS_VERSION = 1
#: Offered on every sample; tags typed before are offered too.
SUGGESTED_TAGS = ("reward hack", "good", "bad", "wrong answer", "format error", "repetition")
MAX_TAG_CHARS = 100  # characters of one tag
MAX_NOTE_CHARS = 10_000  # characters of one note
MAX_FILE_BYTES = 64 * 2**20  # a run's tags file grows no further (viewers of a shared board can all write)
ANY_TAG = "*"  # a search for this tag finds every tagged sample


class TagsError(Exception):
    """A tags file that can't be read or written, or a tag that is not allowed; the message says which."""


class TagConflict(TagsError):
    """The sample's tags changed in another session since they were shown (``current`` holds them now)."""

    def __init__(self, current: Entry | None):
        super().__init__("Another session changed this sample's tags or note since they were shown.")
        self.current = current


@dataclass(frozen=True)
class Entry:
    """One sample's tags and note. ``file``/``line``/``position``: where the sample is (its address,
    ``FILE:LINE`` or ``FILE:LINE#K``, ``fields.address``; position -1 for a line of one sample); ``step``:
    its step; ``digest``: sha1 of its line when tagged (None when it could not be read); ``updated``: UTC."""

    file: str
    line: int
    step: int
    tags: tuple[str, ...] = ()
    note: str = ""
    digest: str | None = None
    updated: str = ""
    position: int = -1

    @property
    def key(self) -> str:
        return sample_name(self.file, self.line, self.position)

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, **({"position": self.position} if self.position >= 0 else {}),
                "step": self.step, "tags": list(self.tags), "note": self.note, "digest": self.digest,
                "updated": self.updated}

    @classmethod
    def from_json(cls, raw) -> Entry:
        """An entry from its JSON; ``ValueError`` when it has the wrong shape."""
        if not isinstance(raw, dict):
            raise ValueError("an entry is not an object")
        file, line, step = raw.get("file"), raw.get("line"), raw.get("step")
        tags, note, digest = raw.get("tags", []), raw.get("note", ""), raw.get("digest")
        if not isinstance(file, str) or not _is_int(line) or not _is_int(step):
            raise ValueError("an entry's file, line or step has the wrong type")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags) or not isinstance(note, str):
            raise ValueError("an entry's tags or note have the wrong type")
        if digest is not None and not isinstance(digest, str):
            raise ValueError("an entry's digest is not a string")
        position = raw.get("position", -1)
        if not _is_int(position):
            raise ValueError("an entry's position has the wrong type")
        return cls(file, line, step, tuple(tags), note, digest, str(raw.get("updated", "")), max(position, -1))


def _content(entry: Entry | None) -> tuple:
    """(tags, note) of ``entry``; no entry is no tags and no note."""
    return (entry.tags, entry.note) if entry is not None else ((), "")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def sample_name(file: str, line: int, position: int = -1) -> str:
    """The sample's address (``FILE:LINE``, or ``FILE:LINE#K`` for one of a line's several samples), its name
    in links, findings and tags (``fields.address``)."""
    return F.address(file, line, position)


def tags_root() -> Path:
    """``$RL_BOARD_TAGS_DIR``, else ``tags`` in the cache root."""
    if os.environ.get(TAGS_DIR_ENV):
        return Path(os.environ[TAGS_DIR_ENV]).expanduser()
    return default_cache_root() / "tags"


def tags_path(run_dir: Path | str, root: Path | None = None) -> Path:
    """The tags file of ``run_dir``: one per absolute run folder (symlinks resolved), named so a person
    can tell whose it is."""
    resolved = str(as_path(run_dir).expanduser().resolve())  # a URL run: its normalised URL
    digest = hashlib.sha1(resolved.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return (root or tags_root()) / f"{Path(resolved).name}-{digest}.json"


def clean_tags(tags) -> tuple[str, ...]:
    """``tags`` stripped, without empties or repeats, in their order; ``TagsError`` for a tag that is too
    long or holds a comma or a line break (the table and the command line separate tags by commas)."""
    out: list[str] = []
    for tag in tags:
        tag = str(tag).strip()
        if not tag or tag in out:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise TagsError(f"A tag is at most {MAX_TAG_CHARS} characters: {tag[:40]!r}… is {len(tag)}.")
        if "," in tag or "\n" in tag or "\r" in tag:
            raise TagsError(f"A tag can't hold a comma or a line break: {tag!r}.")
        if tag == ANY_TAG:
            raise TagsError(f"{ANY_TAG!r} is not a tag: searching for it finds every tagged sample.")
        out.append(tag)
    return tuple(out)


def clean_note(note: str | None) -> str:
    note = (note or "").strip()
    if len(note) > MAX_NOTE_CHARS:
        raise TagsError(f"A note is at most {MAX_NOTE_CHARS:,} characters; this one has {len(note):,}.")
    return note


def _read(path: Path) -> dict[str, Entry]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise TagsError(f"Can't read the tags file {path}: {exc}") from exc
    try:
        raw = json.loads(text)
        if not isinstance(raw, dict) or raw.get("version") != TAGS_VERSION or not isinstance(raw.get("samples"), dict):
            raise ValueError(f"not a tags file of version {TAGS_VERSION}")
        entries = [Entry.from_json(value) for value in raw["samples"].values()]
    except ValueError as exc:  # JSONDecodeError is one
        # never "no tags": the next write would replace a file someone may want back
        raise TagsError(f"The tags file {path} is damaged ({exc}); it is left as it is. Move it away to start "
                        "a new one.") from exc
    return {entry.key: entry for entry in entries}


def load_tags(run_dir: Path | str, root: Path | None = None) -> dict[str, Entry]:
    """Every tagged sample of ``run_dir``: ``FILE:LINE`` -> entry ({} when none was tagged). Reads
    without the lock: the file is only ever replaced whole. ``TagsError`` when it can't be read."""
    return _read(tags_path(run_dir, root))


def stamp(run_dir: Path | str, root: Path | None = None) -> tuple | None:
    """What identifies the tags file's current version (it is replaced, never edited): a cache key."""
    try:
        st = tags_path(run_dir, root).stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


@contextlib.contextmanager
def _locked(path: Path):
    held = contextlib.ExitStack()
    try:
        held.enter_context(locked(path.with_name(path.name + ".lock")))
    except OSError as exc:
        raise TagsError(f"Can't write tags in {path.parent}: {exc}") from exc
    with held:
        yield


def _write(path: Path, run_dir: Path | str, entries: dict[str, Entry]) -> None:
    payload = {"version": TAGS_VERSION, "run_dir": str(as_path(run_dir).expanduser().resolve()),
               "samples": {key: entries[key].to_json() for key in sorted(entries)}}
    try:
        data = json.dumps(payload, ensure_ascii=False, indent=1).encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate (from a command-line argument): not text
        raise TagsError(f"A tag or note is not valid text ({exc.reason}); not saved.") from exc
    if len(data) > MAX_FILE_BYTES:
        raise TagsError(f"The tags of this run would take more than {MAX_FILE_BYTES // 2**20} MiB; not saved.")
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise TagsError(f"Can't write the tags file {path}: {exc}") from exc


def update_tags(run_dir: Path | str, key: str, change: Callable[[Entry | None], Entry | None],
                root: Path | None = None) -> Entry | None:
    """Change one sample's entry: ``change`` gets its entry as stored now (None when untagged) and
    returns the new one (None, or one without tags and note, removes it). Runs under the file's lock,
    on what is stored at that moment, so concurrent sessions' changes are all kept. Returns what was
    stored. ``change`` may raise (``TagConflict``) to leave the file as it is."""
    path = tags_path(run_dir, root)
    with _locked(path):
        entries = _read(path)
        new = change(entries.get(key))
        if new is None or (not new.tags and not new.note):
            if key not in entries:
                return None
            del entries[key]
            new = None
        else:
            if new.key != key:
                raise ValueError(f"the entry of {key} names {new.key}")
            entries[key] = replace(new, updated=datetime.now(UTC).isoformat(timespec="seconds"))
            new = entries[key]
        _write(path, run_dir, entries)
        return new


def set_tags(run_dir: Path | str, entry: Entry, shown: Entry | None | object = ..., root: Path | None = None
             ) -> Entry | None:
    """Store ``entry`` (its tags and note replace the sample's). With ``shown`` (the entry the user saw,
    None for none), raise ``TagConflict`` when another session changed the sample since."""
    def change(current: Entry | None) -> Entry:
        if shown is not ... and _content(current) != _content(shown):
            raise TagConflict(current)
        return entry

    return update_tags(run_dir, entry.key, change, root)
