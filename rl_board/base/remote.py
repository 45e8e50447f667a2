"""Runs at URLs: the fsspec filesystem of a URL (``s3://``, ``gs://``, ``az://``, ``hf://``, ``memory://``,
``file://``; fsspec and its implementations imported only when a URL is given, each an optional extra),
``RemotePath`` (a URL's file or folder, with the pure parts of a path and the rest through its
filesystem), and the one line a store's fault gives (``fault_line``: the URL named, no traceback,
no credential). Imports nothing of ``rl_board`` but ``access`` and ``defaults``."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import PurePosixPath
from typing import BinaryIO

from .access import (
    ROOTS_ENV,
    OutsideAllowedFolders,
    RootError,
    url_roots,
)
from .defaults import setting

#: what each optional extra brings, by URL scheme (the message for a scheme whose package is missing)
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure",
          "adl": "azure", "hf": "hf"}


#: how long a store may take, and how often a request is tried again (s3://; the environment's names below)
CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT = "RL_BOARD_STORE_CONNECT_TIMEOUT", 5.0  # seconds to connect
READ_TIMEOUT_ENV, DEFAULT_READ_TIMEOUT = "RL_BOARD_STORE_READ_TIMEOUT", 10.0  # seconds waiting for an answer
RETRIES_ENV, DEFAULT_RETRIES = "RL_BOARD_STORE_RETRIES", 2  # tries after the first (500, 503, a timeout)


def store_limits() -> tuple[float, float, int]:
    """(connect timeout s, read timeout s, retries) as the environment sets them, else the defaults."""
    return (setting(CONNECT_TIMEOUT_ENV), setting(READ_TIMEOUT_ENV), int(setting(RETRIES_ENV)))


def _store_options(scheme: str) -> dict:
    """The filesystem's options that bound a request (``store_limits``): botocore's timeouts and its
    standard retry mode (exponential backoff with jitter) for s3. Other schemes keep their library's."""
    if scheme.lower() not in ("s3", "s3a"):
        return {}
    connect, read, retries = store_limits()
    return {"config_kwargs": {"connect_timeout": connect, "read_timeout": read,
                              "retries": {"total_max_attempts": 1 + retries, "mode": "standard"}}}


def _bound(fs) -> None:
    """s3fs tries a failed call again on its own (5 times, each with botocore's own tries): once here,
    botocore's bounded retries being the only ones."""
    if type(fs).__module__.startswith("s3fs"):
        fs.retries = 1


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
        self.scheme = scheme or scheme_of(fs)  # as the user wrote it (az://, not adlfs's first name abfs://)

    def _new(self, pure) -> RemotePath:
        return RemotePath(self.fs, pure, self.scheme)

    # -- pure -----------------------------------------------------------------------------------

    def __str__(self) -> str:
        return f"{self.scheme}://{self.pure}"

    def __repr__(self) -> str:
        return f"RemotePath({str(self)!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, RemotePath) and self.pure == other.pure and scheme_of(self.fs) == scheme_of(other.fs)

    def __hash__(self) -> int:
        return hash((scheme_of(self.fs), self.pure))

    def __lt__(self, other: RemotePath) -> bool:
        return self.pure < other.pure

    def __truediv__(self, other) -> RemotePath:
        return self._new(self.pure / str(other))

    def __reduce__(self):
        return (remote_path_of, (str(self),))

    name = property(lambda self: self.pure.name)
    suffix = property(lambda self: self.pure.suffix)
    suffixes = property(lambda self: self.pure.suffixes)
    stem = property(lambda self: self.pure.stem)
    parts = property(lambda self: self.pure.parts)
    parent = property(lambda self: self._new(self.pure.parent))
    parents = property(lambda self: [self._new(p) for p in self.pure.parents])

    def joinpath(self, *others) -> RemotePath:
        return self._new(self.pure.joinpath(*map(str, others)))

    def with_name(self, name: str) -> RemotePath:
        return self._new(self.pure.with_name(name))

    def with_suffix(self, suffix: str) -> RemotePath:
        return self._new(self.pure.with_suffix(suffix))

    def relative_to(self, other) -> PurePosixPath:
        return self.pure.relative_to(other.pure if isinstance(other, RemotePath) else other)

    def match(self, pattern: str) -> bool:
        return self.pure.match(pattern)

    def as_posix(self) -> str:
        return str(self)

    def expanduser(self) -> RemotePath:
        return self

    def absolute(self) -> RemotePath:
        return self

    def resolve(self, strict: bool = False) -> RemotePath:
        """The path with ``.`` and ``..`` taken out (an object store has no symlinks); a ``file://``
        path with its symlinks followed too, as a local path's are (``os.path.realpath``)."""
        if scheme_of(self.fs) == "file":
            return self._new(os.path.realpath(str(self.pure)))
        return self._new(normalised_key(str(self.pure)))

    # -- through the filesystem -----------------------------------------------------------------

    def _key(self) -> str:
        return str(self.pure)

    def exists(self) -> bool:
        return self.fs.exists(self._key())

    def is_file(self) -> bool:
        return self.fs.isfile(self._key())

    def is_dir(self) -> bool:
        return self.fs.isdir(self._key())

    def iterdir(self) -> Iterator[RemotePath]:
        key = self._key().rstrip("/")
        for found in self.fs.ls(key, detail=False):
            found = found.rstrip("/")
            if found != key:
                yield self._new(found)

    def glob(self, pattern: str) -> Iterator[RemotePath]:
        for found in self.fs.glob(posixpath.join(self._key(), pattern)):
            yield self._new(found)

    def rglob(self, pattern: str) -> Iterator[RemotePath]:
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


def scheme_of(fs) -> str:
    protocol = fs.protocol
    return protocol if isinstance(protocol, str) else protocol[0]


def normalised_key(key: str) -> str:
    """``key`` with ``.`` and ``..`` taken out; ``RootError`` for one that climbs above the top."""
    lead = "/" if key.startswith("/") else ""
    parts = _components(key, key)
    return lead + "/".join(parts) if parts or lead else "."


def _components(path: str, shown: str) -> list[str]:
    """``path``'s components with ``.`` and empty ones out and ``..`` taken back; ``RootError`` naming
    ``shown`` for one that climbs above the top."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise RootError(f"{shown}: '..' climbs above the top of the store.")
            parts.pop()
        else:
            parts.append(part)
    return parts


#: a query parameter that carries a credential: a signed URL's ``X-Amz-Signature``/``X-Amz-Credential``/
#: ``X-Amz-Security-Token``, Azure SAS's ``sig``, ``X-Goog-Signature``, ``token``, ``access_token``, ``api_key``...
_CREDENTIAL_PARAM = re.compile(r"sig|token|key|secret|pass|credential|auth|session", re.I)
_WHERE_CREDENTIALS_GO = ("put them where the library reads them (the environment, ~/.aws, application "
                         "default credentials, the HF token).")


def refuse_credentials(url: str) -> None:
    """``RootError`` (naming neither the key nor the secret) for a URL carrying a credential: in its
    user part (``s3://KEY:SECRET@bucket/run``) or a query parameter (``?sig=``, ``X-Amz-Signature=``,
    ``?token=``). Such a URL would otherwise be printed, logged and named in cache folders."""
    scheme, _, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0] and scheme.lower() not in ("hf",):
        raise RootError(f"{scheme}://…: credentials in a URL are not accepted; " + _WHERE_CREDENTIALS_GO)
    query = rest.partition("?")[2]
    if any(_CREDENTIAL_PARAM.search(param.partition("=")[0]) for param in re.split(r"[&;]", query)):
        raise RootError(f"{shown_url(url)}: credentials in a URL's query are not accepted; " + _WHERE_CREDENTIALS_GO)


#: schemes that name the same fsspec filesystem (compared as one by ``check_url_text``)
_SAME_SCHEME = {"s3a": "s3", "gcs": "gs", "abfs": "az", "abfss": "az"}


def _chain(url: str) -> list[tuple[str, list[str]]]:
    """``url`` cut into its fsspec chain (``zip://x::ftp://host/a`` is two links), each link its scheme
    (lower case, aliases as one) and its path's components (``.`` and empty ones out, ``..`` taken back;
    ``RootError`` for one that climbs above the top). A link without ``://`` (``simplecache``) has no path."""
    links = []
    for link in url.split("::"):
        scheme, sep, rest = link.partition("://")
        scheme = scheme.lower()
        parts = _components(rest, shown_url(url)) if sep else []
        links.append((_SAME_SCHEME.get(scheme, scheme), parts))
    return links


def _under(links: list, root: list) -> bool:
    """Whether the chain ``links`` has ``root``'s links, each of the same scheme and at or below its path."""
    return len(links) == len(root) and all(
        scheme == root_scheme and parts[:len(root_parts)] == root_parts
        for (scheme, parts), (root_scheme, root_parts) in zip(links, root))


def check_url_text(url: str) -> None:
    """The door before any connection: ``OutsideAllowedFolders`` unless ``url``, read as text, lies under
    one of the URL prefixes of ``RL_BOARD_ROOTS`` (nothing to check when it is unset). Every link of a
    chained URL (``simplecache::s3://…``, ``zip://x::ftp://…``) is checked, its scheme and its host or
    bucket and path, so a URL outside the roots builds no filesystem: nothing is resolved, connected to or
    sent. (``location`` then checks again once the filesystem is made, following a ``file://`` link.)"""
    prefixes = url_roots()
    if prefixes is None:
        return
    links = _chain(url)
    for prefix in prefixes:
        try:
            if _under(links, _chain(prefix)):
                return
        except RootError:  # a prefix climbing above its top allows nothing (``location`` says so)
            continue
    raise OutsideAllowedFolders(f"{shown_url(url)} is outside the allowed folders (set by {ROOTS_ENV}).")


def url_fs(url: str, *, checked: bool = True):
    """(fsspec filesystem, normalised key) for ``url``; ``RootError`` with a plain message for a URL
    that can't be used (fsspec or the scheme's package missing, credentials written in the URL), and
    ``OutsideAllowedFolders`` for one outside ``RL_BOARD_ROOTS`` (``check_url_text``, before the
    filesystem is made). ``checked=False`` only for a URL the operator set (the shared cache)."""
    scheme = url.partition("://")[0]
    refuse_credentials(url)
    if checked:
        check_url_text(url)
    try:
        import fsspec.core
    except ImportError:
        raise RootError(f"{shown_url(url)}: reading a URL needs fsspec: pip install \"rl-board[s3]\" "
                        "(or [gcs], [azure], [hf]).") from None
    try:
        fs, key = fsspec.core.url_to_fs(url, **_store_options(scheme))
        _bound(fs)
    except ImportError:
        extra = EXTRAS.get(scheme.lower())
        raise RootError(f"{shown_url(url)}: reading {scheme}:// URLs needs "
                        + (f'pip install "rl-board[{extra}]".' if extra else "its fsspec package installed.")) from None
    except ValueError as exc:  # an unknown protocol
        raise RootError(f"{shown_url(url)}: {exc}") from None
    key = normalised_key(key)
    return fs, (getattr(fs, "root_marker", "") or ".") if key == "." else key  # the store's top: "/" in memory://


def shown_url(url: str) -> str:
    """``url`` as it may be printed: no user part (``KEY:SECRET@``), no query (``?sig=…``), at most 200
    characters."""
    scheme, sep, rest = url.partition("://")
    if sep:
        host, slash, path = rest.partition("/")
        rest = host.rpartition("@")[2] + slash + path
        url = scheme + sep + (rest.partition("?")[0] + "?…" if "?" in rest else rest)
    return url if len(url) <= 200 else url[:200] + "…"


def is_store_top(path: RemotePath) -> bool:
    """Whether ``path`` is an object store's top, above every bucket (``s3://``, ``s3://.``, ``s3://b/..``):
    never a run or an allowed root. ``file://`` and ``memory://`` have no buckets: their top is ``/``, a
    folder like any other (as a local root may be ``/``)."""
    return scheme_of(path.fs) not in ("file", "memory") and str(path.pure) in (".", "/", "")


def remote_path_of(url: str, *, checked: bool = True) -> RemotePath:
    fs, key = url_fs(url, checked=checked)
    return RemotePath(fs, key, url.partition("://")[0].lower())


def remote_path(url: str, *, checked: bool = True) -> RemotePath:
    """The file or folder a URL names, on its filesystem. Its text is checked against the URL prefixes
    of ``RL_BOARD_ROOTS`` before the filesystem is made (``check_url_text``); ``checked=False`` only for
    a URL the operator set (the shared cache). ``RootError`` when unusable."""
    return remote_path_of(url, checked=checked)


def within_root(path: RemotePath, root: RemotePath) -> bool:
    """Whether ``path`` is ``root`` or below it, part by part (``s3://team-evil`` is not under ``s3://team``)."""
    return scheme_of(path.fs) == scheme_of(root.fs) and (path.pure == root.pure or root.pure in path.pure.parents)


class RemoteFiles:
    """An fsspec filesystem, as a run location reads it (a URL's run)."""

    def __init__(self, fs):
        self.fsspec = fs
        self.name = scheme_of(fs)

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
     "the store is throttling requests ({tries}; try again later)"),
    (("ReadTimeout", "Read timeout"),
     "the endpoint did not answer within {read:g} s ({tries}; " + READ_TIMEOUT_ENV + " and " + RETRIES_ENV
     + " change that)"),
    (("InternalError", "ServiceUnavailable", "(500)", "(502)", "(504)", "Errno 121"),
     "the store answered with a server error ({tries}; try again later)"),
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
    _, read, retries = store_limits()
    tries = ("retried" if not str(where).startswith(("s3://", "s3a://"))  # another library's own retries
             else f"tried {1 + retries} times" if retries else "tried once")
    for words, meaning in _FAULTS:
        if any(word in text for word in words):
            return f"{where}: {meaning.format(read=read, tries=tries)}."
    first = (texts[0].splitlines() or [""])[0][:200]
    return f"{where}: could not be read ({scrub(first)})."


def scrub(text: str) -> str:
    """``text`` with the value of every credential-like variable of the environment replaced by ``***``."""
    for name, value in os.environ.items():
        if value and len(value) >= 8 and any(w in name.upper() for w in ("SECRET", "TOKEN", "PASSWORD", "KEY",
                                                                           "CREDENTIAL", "SAS")):
            text = text.replace(value, "***")
    return text
