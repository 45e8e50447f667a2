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
import posixpath
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterator

from .access import (OutsideAllowedFolders, RootError, allowed_roots, check_allowed, is_url, url_roots,
                     usable_path)

#: what each optional extra brings, by URL scheme (the message for a scheme whose package is missing)
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure",
          "adl": "azure", "hf": "hf"}

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


class RemoteStat:
    """What ``RemotePath.stat`` gives: a file's size, modification time, and its ETag (or version,
    generation) as the object store reports it; ``st_ino`` is the inode where the filesystem has one
    (``file://``), else 0."""

    __slots__ = ("st_size", "st_mtime", "st_mtime_ns", "st_ino", "etag")

    def __init__(self, info: dict):
        self.st_size = int(info.get("size") or 0)
        self.st_mtime_ns = _mtime_ns(info)
        self.st_mtime = self.st_mtime_ns / 1e9
        self.st_ino = int(info.get("ino") or 0)
        self.etag = str(next((info[k] for k in ("ETag", "etag", "VersionId", "version_id", "generation",
                                                 "blob_id", "md5") if info.get(k)), ""))


def _mtime_ns(info: dict) -> int:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "mtime_ns"):
        value = info.get(key)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1e9)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value if key == "mtime_ns" else value * 1e9)
        if isinstance(value, str):
            try:
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1e9)
            except ValueError:
                continue
    return 0


class RemotePath:
    """A file or folder on an fsspec filesystem, named by its URL (``str``). The pure operations are
    ``PurePosixPath``'s; ``exists``, ``is_file``, ``iterdir``, ``glob``, ``stat`` and ``open`` go
    through the filesystem. It has no ``__fspath__``: a local ``open()`` of it is a ``TypeError``,
    never a read of some local file of the same name."""

    __slots__ = ("fs", "pure", "scheme")

    def __init__(self, fs, path: str | PurePosixPath, scheme: str | None = None):
        self.fs, self.pure = fs, PurePosixPath(path)
        self.scheme = scheme or _scheme(fs)  # as the user wrote it (az://, not adlfs's first name abfs://)

    def _new(self, pure) -> "RemotePath":
        return RemotePath(self.fs, pure, self.scheme)

    # -- pure -----------------------------------------------------------------------------------

    def __str__(self) -> str:
        return f"{self.scheme}://{self.pure}"

    def __repr__(self) -> str:
        return f"RemotePath({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RemotePath) and self.pure == other.pure and _scheme(self.fs) == _scheme(other.fs)

    def __hash__(self) -> int:
        return hash((_scheme(self.fs), self.pure))

    def __lt__(self, other: "RemotePath") -> bool:
        return self.pure < other.pure

    def __truediv__(self, other) -> "RemotePath":
        return self._new(self.pure / str(other))

    def __reduce__(self):
        return (_remote_path, (str(self),))

    name = property(lambda self: self.pure.name)
    suffix = property(lambda self: self.pure.suffix)
    suffixes = property(lambda self: self.pure.suffixes)
    stem = property(lambda self: self.pure.stem)
    parts = property(lambda self: self.pure.parts)
    parent = property(lambda self: self._new(self.pure.parent))
    parents = property(lambda self: [self._new(p) for p in self.pure.parents])

    def joinpath(self, *others) -> "RemotePath":
        return self._new(self.pure.joinpath(*map(str, others)))

    def with_name(self, name: str) -> "RemotePath":
        return self._new(self.pure.with_name(name))

    def with_suffix(self, suffix: str) -> "RemotePath":
        return self._new(self.pure.with_suffix(suffix))

    def relative_to(self, other) -> PurePosixPath:
        return self.pure.relative_to(other.pure if isinstance(other, RemotePath) else other)

    def match(self, pattern: str) -> bool:
        return self.pure.match(pattern)

    def as_posix(self) -> str:
        return str(self)

    def expanduser(self) -> "RemotePath":
        return self

    def absolute(self) -> "RemotePath":
        return self

    def resolve(self, strict: bool = False) -> "RemotePath":
        """The path with ``.`` and ``..`` taken out (an object store has no symlinks)."""
        return self._new(_normalised(str(self.pure)))

    # -- through the filesystem -----------------------------------------------------------------

    def _key(self) -> str:
        return str(self.pure)

    def exists(self) -> bool:
        return self.fs.exists(self._key())

    def is_file(self) -> bool:
        return self.fs.isfile(self._key())

    def is_dir(self) -> bool:
        return self.fs.isdir(self._key())

    def iterdir(self) -> Iterator["RemotePath"]:
        key = self._key().rstrip("/")
        for found in self.fs.ls(key, detail=False):
            found = found.rstrip("/")
            if found != key:
                yield self._new(found)

    def glob(self, pattern: str) -> Iterator["RemotePath"]:
        for found in self.fs.glob(posixpath.join(self._key(), pattern)):
            yield self._new(found)

    def rglob(self, pattern: str) -> Iterator["RemotePath"]:
        return self.glob("**/" + pattern)

    def stat(self) -> RemoteStat:
        return RemoteStat(self.fs.info(self._key()))

    def open(self, mode: str = "rb", **kwargs) -> BinaryIO:
        if mode not in ("rb", "r"):
            raise ValueError("a run's files are opened for reading only")
        # no read-ahead: every read here asks for the bytes it needs (a range, a hash's 64 KB, one
        # record), and a block cache would fetch up to 50 MB around each of them
        kwargs.setdefault("cache_type", "none")
        return self.fs.open(self._key(), mode, **kwargs)

    def read_bytes(self) -> bytes:
        with self.open("rb") as fh:
            return fh.read()

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes().decode(encoding, errors)


def _scheme(fs) -> str:
    protocol = fs.protocol
    return protocol if isinstance(protocol, str) else protocol[0]


def _normalised(key: str) -> str:
    """``key`` with ``.`` and ``..`` taken out; ``RootError`` for one that climbs above the top."""
    lead = "/" if key.startswith("/") else ""
    parts: list[str] = []
    for part in key.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise RootError(f"{key}: '..' climbs above the top of the store.")
            parts.pop()
        else:
            parts.append(part)
    return lead + "/".join(parts) if parts or lead else "."


def _url_fs(url: str):
    """(fsspec filesystem, normalised key) for ``url``; ``RootError`` with a plain message for a URL
    that can't be used (fsspec or the scheme's package missing, credentials written in the URL)."""
    scheme, _, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0] and scheme.lower() not in ("hf",):
        raise RootError(f"{scheme}://…: credentials in a URL are not accepted; put them where the library "
                        "reads them (the environment, ~/.aws, application default credentials, the HF token).")
    try:
        import fsspec.core
    except ImportError:
        raise RootError(f"{_shown_url(url)}: reading a URL needs fsspec: pip install \"rl-board[s3]\" "
                        "(or [gcs], [azure], [hf]).") from None
    try:
        fs, key = fsspec.core.url_to_fs(url)
    except ImportError:
        extra = EXTRAS.get(scheme.lower())
        raise RootError(f"{_shown_url(url)}: reading {scheme}:// URLs needs "
                        + (f'pip install "rl-board[{extra}]".' if extra else "its fsspec package installed.")) from None
    except ValueError as exc:  # an unknown protocol
        raise RootError(f"{_shown_url(url)}: {exc}") from None
    key = _normalised(key)
    return fs, (getattr(fs, "root_marker", "") or ".") if key == "." else key  # the store's top: "/" in memory://


def _shown_url(url: str) -> str:
    return url if len(url) <= 200 else url[:200] + "…"


def _remote_path(url: str) -> RemotePath:
    fs, key = _url_fs(url)
    return RemotePath(fs, key, url.partition("://")[0].lower())


def remote_path(url: str) -> RemotePath:
    """The file or folder a URL names, on its filesystem (not checked against the roots: a value a
    location made, such as a tokenizer found beside a run, read again). ``RootError`` when unusable."""
    return _remote_path(url)


def _within(path: RemotePath, root: RemotePath) -> bool:
    """Whether ``path`` is ``root`` or below it, part by part (``s3://team-evil`` is not under ``s3://team``)."""
    return _scheme(path.fs) == _scheme(root.fs) and (path.pure == root.pure or root.pure in path.pure.parents)


class RemoteFiles:
    """An fsspec filesystem, as a run location reads it (a URL's run)."""

    def __init__(self, fs):
        self.fsspec = fs
        self.name = _scheme(fs)

    @staticmethod
    def resolve(path: RemotePath) -> RemotePath:
        return path.resolve()

    @staticmethod
    def entries(folder: RemotePath) -> list[RemotePath]:
        return list(folder.iterdir())

    @staticmethod
    def open(path: RemotePath) -> BinaryIO:
        return path.open("rb")

    def invalidate(self) -> None:
        """Forget listings the filesystem keeps (s3fs's), so a live run's new and grown objects show."""
        self.fsspec.invalidate_cache()

    @property
    def shared(self) -> bool:
        """Whether another process reaches the same files by the URL (not so for ``memory://``)."""
        return self.name != "memory"


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

    def file(self, path: "Path | RemotePath | str") -> "Path | RemotePath":
        """One of this location's files from a path or the ``str`` of one (a task's path)."""
        if isinstance(path, (Path, RemotePath)):
            return path
        if self.is_url:
            return self.path._new(_normalised(self.fs.fsspec._strip_protocol(path)))
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
            return any(_within(resolved, root) for root in self.roots)
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

    def scan(self, folder: Path | None = None, links: list | None = None) -> list[Path]:
        """The files of ``folder`` (default: the run folder; no hidden ones) that resolve inside the roots.
        One ``scandir``: a file's type comes with its entry, and only a symbolic link is resolved (any
        other entry of a folder inside the roots lies inside them). ``links`` gets each symbolic link met."""
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
        path = self.file(path)
        if not self.contains(path):
            raise OutsideAllowedFolders(f"{path} is outside the allowed folders.")
        return self.fs.open(self.fs.resolve(path))

    def read_range(self, path: Path | str, start: int, end: int) -> bytes:
        """Bytes [start, end) of one of the run's files (fewer where the file is shorter)."""
        with self.open(path) as fh:
            fh.seek(start)
            return fh.read(max(0, end - start))

    def stat(self, path: Path | str | None = None) -> os.stat_result:
        return (self.path if path is None else self.file(path)).stat()

    def name_of(self, path: Path) -> str:
        """A file's name in the run: its path relative to the run folder, with ``/``."""
        return path.relative_to(self.path).as_posix()


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
    fs, key = _url_fs(url)
    path = RemotePath(fs, key, url.partition("://")[0].lower())
    roots = None
    if prefixes is not None:
        roots = tuple(root for root in (_url_root(prefix) for prefix in prefixes)
                      if root is not None and _scheme(root.fs) == _scheme(fs))
        if not any(_within(path, root) for root in roots):
            raise OutsideAllowedFolders(f"{_shown_url(url)} is outside the allowed folders (set by RL_BOARD_ROOTS).")
    return RunLocation(path, roots, RemoteFiles(fs), _door=_DOOR)


def _url_root(prefix: str) -> RemotePath | None:
    try:
        return _remote_path(prefix)
    except RootError:
        return None


def restore(text: str) -> RunLocation:
    """The location ``RunLocation.to_json`` wrote (a worker's copy of a location checked at the door)."""
    path, roots = json.loads(text)
    return _restore(path, None if roots is None else tuple(roots))


def _restore(path: str, roots: tuple[str, ...] | None) -> RunLocation:
    if is_url(path):
        remote = _remote_path(path)
        return RunLocation(remote, None if roots is None else tuple(_remote_path(r) for r in roots),
                           RemoteFiles(remote.fs), _door=_DOOR)
    return RunLocation(Path(path), None if roots is None else tuple(Path(r) for r in roots), LOCAL, _door=_DOOR)


class LocationError(RootError):
    """A URL's store could not be reached or read as asked: the message is one line naming the URL and
    what went wrong (never a traceback, never a credential)."""


#: what a store's error says, by words in its type or text, as a person reads it (first match wins)
_FAULTS = (
    (("NoCredentials", "Unable to locate credentials", "credentials not found"),
     "no credentials were found (set them in the environment, ~/.aws, application default credentials or "
     "the HF token)"),
    (("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidClientTokenId", "ExpiredToken", "AuthenticationFailed",
      "InvalidAuthenticationInfo", "invalid credentials"),
     "the credentials were refused (a wrong or expired key)"),
    (("AccessDenied", "Forbidden", "AuthorizationFailure", "PermissionError", "(403)"),
     "access denied (these credentials may not read it)"),
    (("NoSuchBucket", "ContainerNotFound", "bucket does not exist"), "no such bucket"),
    (("FileNotFoundError", "NoSuchKey", "BlobNotFound", "(404)", "Not Found"), "no such object or folder"),
    (("FileExpired", "PreconditionFailed", "(412)", "changed while"), "an object was replaced while it was read"),
    (("SlowDown", "Throttl", "TooManyRequests", "(503)", "(429)"),
     "the store is throttling requests (retried; try again later)"),
    (("EndpointConnectionError", "ConnectError", "ClientConnectorError", "ConnectionRefused", "Connection refused",
      "Could not connect", "Cannot connect", "Name or service not known", "Temporary failure in name resolution",
      "ConnectTimeout", "timed out", "ServerDisconnected"),
     "the endpoint can't be reached"),
)


def fault_line(where, exc: BaseException) -> str:
    """One line saying what went wrong reading ``where`` (a URL): the kind of fault as a person reads
    it, else the error's type and first line, with any credential value from the environment taken out."""
    seen, texts = set(), []
    while exc is not None and id(exc) not in seen:  # the chain: s3fs wraps botocore wraps aiohttp
        seen.add(id(exc))
        texts.append(f"{type(exc).__name__} {exc}")
        exc = exc.__cause__ or exc.__context__
    text = " ".join(texts).replace(str(where), "")  # words in the URL itself (step_403.jsonl) say nothing
    for words, meaning in _FAULTS:
        if any(word in text for word in words):
            return f"{where}: {meaning}."
    first = (texts[0].splitlines() or [""])[0][:200]
    return f"{where}: could not be read ({scrub(first)})."


def scrub(text: str) -> str:
    """``text`` with the value of every credential-like variable of the environment replaced by ``***``."""
    for name, value in os.environ.items():
        if value and len(value) >= 8 and any(w in name.upper() for w in ("SECRET", "TOKEN", "PASSWORD", "KEY",
                                                                           "CREDENTIAL", "SAS")):
            text = text.replace(value, "***")
    return text


def folder_path(text) -> "Path | RemotePath":
    """A root or run folder as a user typed it: a URL's ``RemotePath`` (not checked: a value shown or
    joined, never read from without ``open_location``), else the local path with ``~`` expanded."""
    text = str(text)
    return remote_path(text) if is_url(text) else Path(text).expanduser()


def open_file(path) -> BinaryIO:
    """A run's file opened for reading in binary: a ``RemotePath`` through its filesystem, anything else
    with the built-in ``open``."""
    path = as_path(path)  # a URL string too
    return path.open("rb") if isinstance(path, RemotePath) else open(path, "rb")


def as_path(path) -> "Path | RemotePath":
    """A run's file or folder as a path: a ``RemotePath`` stays one, a URL string becomes one, anything
    else is a local ``Path`` (never ``Path()`` of a ``RemotePath``, which would name a local file)."""
    if isinstance(path, RemotePath):
        return path
    return remote_path(path) if is_url(path) else Path(path)
