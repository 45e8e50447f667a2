"""Where a run lives: one value, made at the door and read through everywhere below it.

``open_location(path)`` is the door: it turns what a user, a link or a command gave into a
``RunLocation`` after checking it against the allowed folders (``access``) once. The value holds
the normalised folder, the allowed roots as they were at that moment and the filesystem the run
is read through: the local one for a path, an fsspec filesystem for a URL (``s3://bucket/runs/a``,
``gs://``, ``az://``, ``hf://``, ``memory://``, ``file://``: ``fsspec.core.url_to_fs``, imported
only when a URL is given). A URL's files are ``RemotePath`` values: the pure parts of a
``PurePosixPath`` (name, suffix, ``/``, ``relative_to``, ``match``) and the rest (listing, glob,
stat, open) through that filesystem, so the readers and the store above read a URL's run as they
read a folder. Listing, stat, opening
a file and reading a byte range go through it, and each keeps to the roots it holds: an entry of
the folder that resolves outside them (a symlink out) is neither listed nor opened. Nothing below
the door takes a bare path for a run or reads ``RL_BOARD_ROOTS`` again.

There is no other way to make a ``RunLocation``: its constructor refuses to be called directly, so
a path from outside the allowed folders can't become one.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .access import (
    ROOTS_ENV,
    OutsideAllowedFolders,
    RootError,
    RootsMisconfigured,
    allowed_roots,
    check_allowed,
    is_url,
    url_roots,
    usable_path,
)
from .remote import (
    RemoteFiles,
    RemotePath,
    is_store_top,
    normalised_key,
    remote_path,
    remote_path_of,
    scheme_of,
    shown_url,
    url_fs,
    within_root,
)


class NotRegular(OSError):
    """A path that is no regular file (a FIFO, a device, a socket): never opened for reading, named."""


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is that is no regular file, in words ("a FIFO")."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def special_reason(path) -> str:
    """The load report's reason for a special file (a FIFO, a device, a socket) a listing left out:
    one line, from ``os.stat`` (never opened, so never waited on)."""
    try:
        kind = kind_of(os.stat(path).st_mode)
    except OSError as exc:
        return exc.strerror or str(exc)
    return f"{kind}, not a regular file: not read"


def open_regular(path, flags: int = 0) -> BinaryIO:
    """The local file at ``path`` opened for reading in binary, if it is a regular file: opened without
    blocking (a FIFO with no writer would wait forever) and checked, else ``NotRegular`` naming what
    it is. ``flags``: more ``os.open`` flags (``O_NOFOLLOW``)."""
    more = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | flags
    fh = open(path, "rb", opener=lambda name, base: os.open(name, base | more))  # noqa: SIM115 - returned open
    try:
        mode = os.fstat(fh.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = kind_of(mode)
            raise NotRegular(f"{Path(path).name} is {kind}, not a regular file: skipped")
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fh.fileno(), True)
        return fh
    except BaseException:
        fh.close()
        raise


_DOOR = object()  # what only ``open_location`` passes: a RunLocation is made at the door or not at all


class LocalFiles:
    """The local filesystem, as a run location reads it (the one filesystem implemented today)."""

    name = "local"

    @staticmethod
    def resolve(path: Path) -> Path:
        return path.resolve()

    @staticmethod
    def entries(folder: Path) -> list[Path]:
        return list(folder.iterdir())

    @staticmethod
    def open(path: Path) -> BinaryIO:
        """Open for reading in binary without following a symlink swapped in at the last component."""
        return open_regular(path, getattr(os, "O_NOFOLLOW", 0))


LOCAL = LocalFiles()


class RunLocation:
    """A run's folder, allowed and normalised, with the filesystem it lives on (see the module)."""

    __slots__ = ("path", "roots", "fs")

    def __init__(self, path: Path, roots: tuple[Path, ...] | None, fs: LocalFiles = LOCAL, *, _door=None):
        if _door is not _DOOR:
            raise TypeError("a RunLocation is made by open_location(path), which checks the allowed folders")
        self.path, self.roots, self.fs = path, roots, fs

    def __repr__(self) -> str:
        return f"RunLocation({str(self.path)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RunLocation) and (self.path, self.roots, self.fs.name) == (other.path, other.roots,
                                                                                             other.fs.name)

    def __hash__(self) -> int:
        return hash((self.path, self.roots, self.fs.name))

    def __reduce__(self):  # a worker process gets the same value, checked as it was
        return (_restore, (str(self.path), None if self.roots is None else tuple(map(str, self.roots))))

    def to_json(self) -> str:
        """The location as a worker gets it with its task (``restore``): the path or URL and the roots."""
        return json.dumps(self.__reduce__()[1])

    @property
    def is_url(self) -> bool:
        return isinstance(self.path, RemotePath)

    @property
    def shared(self) -> bool:
        """Whether worker processes (or a cluster's tasks) reach the same files through this location."""
        return getattr(self.fs, "shared", True)

    def file(self, path: Path | RemotePath | str) -> Path | RemotePath:
        """One of this location's files from a path or the ``str`` of one (a task's path)."""
        if isinstance(path, (Path, RemotePath)):
            return path
        if self.is_url:
            return self.path._new(normalised_key(self.fs.fsspec._strip_protocol(path)))
        return Path(path)

    def invalidate(self) -> None:
        """Forget what the filesystem keeps of earlier listings (nothing, for local folders)."""
        invalidate = getattr(self.fs, "invalidate", None)
        if invalidate is not None:
            invalidate()

    # -- what lies inside ------------------------------------------------------------------------

    def contains(self, path: Path | str) -> bool:
        """Whether ``path`` (``..`` and symlinks followed) lies inside the roots this location was
        opened under (always, when they were unrestricted). A path that can't be resolved does not."""
        if self.roots is None:
            return True
        try:
            resolved = self.fs.resolve(self.file(path))
        except (OSError, RuntimeError, ValueError):
            return False
        if isinstance(resolved, RemotePath):
            return any(within_root(resolved, root) for root in self.roots)
        return any(resolved == root or root in resolved.parents for root in self.roots)

    def within(self, path: Path | str) -> RunLocation:
        """A folder at or below this one (a split, a sub-run) or one of its parents up to a root, as a
        location of the same roots. ``OutsideAllowedFolders`` when it resolves outside them."""
        folder = self.file(path)
        if not self.contains(folder):
            raise OutsideAllowedFolders(f"{folder} is outside the allowed folders.")
        return RunLocation(folder, self.roots, self.fs, _door=_DOOR)

    def entries(self, folder: Path | None = None) -> list[Path]:
        """The entries of ``folder`` (default: the run folder) that resolve inside the roots."""
        found = self.fs.entries(self.path if folder is None else self.file(folder))
        return found if self.roots is None else [p for p in found if self.contains(p)]

    def scan(self, folder: Path | None = None, links: list | None = None, specials: list | None = None
             ) -> list[Path]:
        """The files of ``folder`` (default: the run folder; no hidden ones) that resolve inside the roots.
        One ``scandir``: a file's type comes with its entry, and only a symbolic link is resolved (any
        other entry of a folder inside the roots lies inside them). ``links`` gets each symbolic link met;
        ``specials`` (a list) each entry that is no regular file nor folder (a FIFO, a device, a socket),
        which is then listed too (never opened: the caller names it as not read)."""
        folder = self.path if folder is None else self.file(folder)
        if isinstance(folder, RemotePath):  # one listing through the store's filesystem (no links there)
            return [p for p in folder.iterdir() if not p.name.startswith(".") and p.is_file()
                    and (self.roots is None or self.contains(p))]
        inside = self.contains(folder)
        found = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                path = folder / entry.name
                try:
                    link = entry.is_symlink()
                    special = not entry.is_file()  # follows a link
                    if special and (specials is None or entry.is_dir() or (link and not path.exists())):
                        continue
                except OSError:
                    continue
                if link and links is not None:
                    links.append(path)
                if (inside and not link) or self.roots is None or self.contains(path):
                    found.append(path)
                    if special:
                        specials.append(path)
        return found

    def files(self, pattern: str, specials: list | None = None) -> Iterator[Path]:
        """The files of the run folder matching the glob ``pattern``, none with a hidden component
        and none resolving outside the roots. ``specials`` (a list): as in ``scan``."""
        for path in self.path.glob(pattern):
            if any(part.startswith(".") for part in path.relative_to(self.path).parts):
                continue
            regular = path.is_file()
            special = not regular and specials is not None and path.exists() and not path.is_dir()
            if (regular or special) and self.contains(path):
                if special:
                    specials.append(path)
                yield path

    def open(self, path: Path | str) -> BinaryIO:
        """One of the run's files opened for reading in binary: inside the roots now (it may have
        become a symlink out since it was listed) and opened without following a symlink.
        Raises ``OutsideAllowedFolders`` or ``OSError``."""
        path = self.file(path)
        if not self.contains(path):
            raise OutsideAllowedFolders(f"{path} is outside the allowed folders.")
        return self.fs.open(self.fs.resolve(path))

    def read_range(self, path: Path | str, start: int, end: int) -> bytes:
        """Bytes [start, end) of one of the run's files (fewer where the file is shorter)."""
        with self.open(path) as fh:
            fh.seek(start)
            return fh.read(max(0, end - start))


def open_location(path: Path | str | RunLocation) -> RunLocation:
    """The door: ``path`` as a ``RunLocation``, checked against the allowed folders now (the one
    check of an open). A location is returned as it is. Raises ``OutsideAllowedFolders`` (the same
    message whether or not the path exists) or ``RootError`` for a path no file can have."""
    if isinstance(path, RunLocation):
        return path
    if isinstance(path, RemotePath):
        path = str(path)
    if is_url(path):
        return _open_url(path)
    roots = allowed_roots()
    if roots is None:
        usable_path(path)  # RootError for a path no file can have
    else:
        check_allowed(path, roots)
    return RunLocation(usable_path(path), None if roots is None else tuple(roots), LOCAL, _door=_DOOR)


def _open_url(url: str) -> RunLocation:
    """The door for a URL: its filesystem, the normalised key, checked against the allowed URL
    prefixes of ``RL_BOARD_ROOTS`` (matched part by part after normalisation)."""
    prefixes = url_roots()
    fs, key = url_fs(url)
    path = RemotePath(fs, key, url.partition("://")[0].lower())
    if is_store_top(path):
        raise RootError(f"{shown_url(url)} names no bucket (the whole store): give a bucket or a folder in one.")
    roots = None
    if prefixes is not None:
        roots = tuple(root for root in (_url_root(prefix) for prefix in prefixes)
                      if root is not None and scheme_of(root.fs) == scheme_of(fs))
        resolved = path.resolve()  # a file:// path's symlinks followed, as a local path's are
        if not any(within_root(resolved, root) for root in roots):
            raise OutsideAllowedFolders(f"{shown_url(url)} is outside the allowed folders (set by RL_BOARD_ROOTS).")
    return RunLocation(path, roots, RemoteFiles(fs), _door=_DOOR)


def _url_root(prefix: str) -> RemotePath | None:
    """An allowed URL prefix, normalised (and a ``file://`` one resolved); None for one whose
    scheme can't be used here. ``RootsMisconfigured`` for one at a store's top (``s3://``, ``s3://.``,
    ``s3://bucket/..``), which must never mean "allow every bucket"."""
    try:
        root = remote_path_of(prefix).resolve()
    except RootError:
        return None
    if is_store_top(root):
        raise RootsMisconfigured(f"{ROOTS_ENV} holds {shown_url(prefix)}, a whole store: name a bucket or a "
                                 "folder in one.")
    return root


def restore(text: str) -> RunLocation:
    """The location ``RunLocation.to_json`` wrote (a worker's copy of a location checked at the door)."""
    path, roots = json.loads(text)
    return _restore(path, None if roots is None else tuple(roots))


def _restore(path: str, roots: tuple[str, ...] | None) -> RunLocation:
    if is_url(path):
        remote = remote_path_of(path)
        return RunLocation(remote, None if roots is None else tuple(remote_path_of(r) for r in roots),
                           RemoteFiles(remote.fs), _door=_DOOR)
    return RunLocation(Path(path), None if roots is None else tuple(Path(r) for r in roots), LOCAL, _door=_DOOR)


def folder_path(text) -> Path | RemotePath:
    """A root or run folder as a user typed it: a URL's ``RemotePath`` (not checked: a value shown or
    joined, never read from without ``open_location``), else the local path with ``~`` expanded."""
    text = str(text)
    return remote_path(text) if is_url(text) else Path(text).expanduser()


def open_file(path) -> BinaryIO:
    """A run's file opened for reading in binary: a ``RemotePath`` through its filesystem, anything else
    with the built-in ``open``."""
    path = as_path(path)  # a URL string too
    return path.open("rb") if isinstance(path, RemotePath) else open_regular(path)


def as_path(path) -> Path | RemotePath:
    """A run's file or folder as a path: a ``RemotePath`` stays one, a URL string becomes one, anything
    else is a local ``Path`` (never ``Path()`` of a ``RemotePath``, which would name a local file)."""
    if isinstance(path, RemotePath):
        return path
    return remote_path(path) if is_url(path) else Path(path)
