"""Where a run lives: one value, made at the door and read through everywhere below it.

``open_location(path)`` is the door: it turns what a user, a link or a command gave into a
``RunLocation`` after checking it against the allowed folders (``access``) once. The value holds
the normalised folder, the allowed roots as they were at that moment and the filesystem the run
is read through (the local one today; a URL's filesystem is one more kind). Listing, stat, opening
a file and reading a byte range go through it, and each keeps to the roots it holds: an entry of
the folder that resolves outside them (a symlink out) is neither listed nor opened. Nothing below
the door takes a bare path for a run or reads ``RL_BOARD_ROOTS`` again.

There is no other way to make a ``RunLocation``: its constructor refuses to be called directly, so
a path from outside the allowed folders can't become one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Iterator

from .access import OutsideAllowedFolders, allowed_roots, check_allowed, usable_path

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
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        return os.fdopen(fd, "rb")


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

    # -- what lies inside ------------------------------------------------------------------------

    def contains(self, path: Path | str) -> bool:
        """Whether ``path`` (``..`` and symlinks followed) lies inside the roots this location was
        opened under (always, when they were unrestricted). A path that can't be resolved does not."""
        if self.roots is None:
            return True
        try:
            resolved = self.fs.resolve(Path(path))
        except (OSError, RuntimeError):
            return False
        return any(resolved == root or root in resolved.parents for root in self.roots)

    def within(self, path: Path | str) -> RunLocation:
        """A folder at or below this one (a split, a sub-run) or one of its parents up to a root, as a
        location of the same roots. ``OutsideAllowedFolders`` when it resolves outside them."""
        folder = Path(path)
        if not self.contains(folder):
            raise OutsideAllowedFolders(f"{folder} is outside the allowed folders.")
        return RunLocation(folder, self.roots, self.fs, _door=_DOOR)

    def entries(self, folder: Path | None = None) -> list[Path]:
        """The entries of ``folder`` (default: the run folder) that resolve inside the roots."""
        found = self.fs.entries(self.path if folder is None else Path(folder))
        return found if self.roots is None else [p for p in found if self.contains(p)]

    def scan(self, folder: Path | None = None, links: list | None = None) -> list[Path]:
        """The files of ``folder`` (default: the run folder; no hidden ones) that resolve inside the roots.
        One ``scandir``: a file's type comes with its entry, and only a symbolic link is resolved (any
        other entry of a folder inside the roots lies inside them). ``links`` gets each symbolic link met."""
        folder = self.path if folder is None else Path(folder)
        inside = self.contains(folder)
        found = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                path = folder / entry.name
                try:
                    link = entry.is_symlink()
                    if not entry.is_file():  # follows a link
                        continue
                except OSError:
                    continue
                if link and links is not None:
                    links.append(path)
                if (inside and not link) or self.roots is None or self.contains(path):
                    found.append(path)
        return found

    def files(self, pattern: str) -> Iterator[Path]:
        """The files of the run folder matching the glob ``pattern``, none with a hidden component
        and none resolving outside the roots."""
        for path in self.path.glob(pattern):
            if (not any(part.startswith(".") for part in path.relative_to(self.path).parts) and path.is_file()
                    and self.contains(path)):
                yield path

    def open(self, path: Path | str) -> BinaryIO:
        """One of the run's files opened for reading in binary: inside the roots now (it may have
        become a symlink out since it was listed) and opened without following a symlink.
        Raises ``OutsideAllowedFolders`` or ``OSError``."""
        path = Path(path)
        if not self.contains(path):
            raise OutsideAllowedFolders(f"{path} is outside the allowed folders.")
        return self.fs.open(self.fs.resolve(path))

    def read_range(self, path: Path | str, start: int, end: int) -> bytes:
        """Bytes [start, end) of one of the run's files (fewer where the file is shorter)."""
        with self.open(path) as fh:
            fh.seek(start)
            return fh.read(max(0, end - start))

    def stat(self, path: Path | str | None = None) -> os.stat_result:
        return os.stat(self.path if path is None else path)

    def name_of(self, path: Path) -> str:
        """A file's name in the run: its path relative to the run folder, with ``/``."""
        return path.relative_to(self.path).as_posix()


def open_location(path: Path | str | RunLocation) -> RunLocation:
    """The door: ``path`` as a ``RunLocation``, checked against the allowed folders now (the one
    check of an open). A location is returned as it is. Raises ``OutsideAllowedFolders`` (the same
    message whether or not the path exists) or ``RootError`` for a path no file can have."""
    if isinstance(path, RunLocation):
        return path
    roots = allowed_roots()
    if roots is None:
        usable_path(path)  # RootError for a path no file can have
    else:
        check_allowed(path, roots)
    return RunLocation(usable_path(path), None if roots is None else tuple(roots), LOCAL, _door=_DOOR)


def _restore(path: str, roots: tuple[str, ...] | None) -> RunLocation:
    return RunLocation(Path(path), None if roots is None else tuple(Path(r) for r in roots), LOCAL, _door=_DOOR)
