"""Which folders the board may read: all of them, or only those inside ``RL_BOARD_ROOTS``.

When the page is shared beyond this machine, anyone who reaches it could otherwise list and
read every log the process can. With ``RL_BOARD_ROOTS`` (folders separated by ``:``) set,
every path from a user, a link, discovery, the command line, a re-read or the cache command
goes through ``check_allowed`` (after resolving ``~``, ``..`` and symlinks), and nothing
outside is listed or read. A path outside gets the same message whether or not it exists.
Re-reads of a file listed earlier open it with ``open_allowed``: resolved and checked again,
then opened without following a symlink swapped in since.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOTS_ENV = "RL_BOARD_ROOTS"


class RootError(ValueError):
    """The root or run folder can't be used; the message says why and what is expected."""


class OutsideAllowedFolders(RootError):
    """A path lies outside ``RL_BOARD_ROOTS``."""


class RootsMisconfigured(RootError):
    """``RL_BOARD_ROOTS`` is set but names no usable folder."""


def usable_path(path: Path | str) -> Path:
    """``path`` with ``~`` expanded; ``RootError`` with a plain message for a path no folder can
    have (a NUL byte, an unknown ``~user``, a name too long for the file system)."""
    text = str(path)
    if "\0" in text:
        raise RootError("This path contains a NUL character; no file can have that name.")
    try:
        expanded = Path(text).expanduser()
    except RuntimeError:  # ~user of a user that doesn't exist
        raise RootError(f"{_shown(text)}: no such user's home folder.") from None
    if any(len(os.fsencode(part)) > 255 for part in expanded.parts) or len(os.fsencode(text)) > 4000:
        raise RootError(f"{_shown(text)}: a name in this path is too long for the file system.")
    return expanded


def _shown(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def allowed_roots() -> list[Path] | None:
    """The allowed folders, resolved; None when ``RL_BOARD_ROOTS`` is unset (everything is allowed).
    Raises ``RootsMisconfigured`` when it is set but blank, or names no folder that exists: that
    must never mean "allow everything"."""
    value = os.environ.get(ROOTS_ENV)
    if value is None:
        return None
    parts = [part.strip() for part in split_roots(value) if part.strip()]
    if not parts:
        raise RootsMisconfigured(f"{ROOTS_ENV} is set but blank: name the folders to allow, or unset it.")
    roots = []
    for part in parts:
        if is_url(part):  # a URL prefix: kept as its normalised form, matched part by part (``url_root``)
            continue
        try:
            roots.append(usable_path(part).resolve())
        except (RootError, OSError) as exc:
            raise RootsMisconfigured(f"{ROOTS_ENV} holds an unusable folder: {exc}") from None
    if len(roots) == len(parts) and not any(root.is_dir() for root in roots):
        raise RootsMisconfigured(f"{ROOTS_ENV} names no folder that exists: {value!r}.")
    return roots


#: a URL: a scheme (``s3``, ``gs``, ``az``, ``hf``, ``memory``, ``file``...) and ``://``
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path) -> bool:
    """Whether ``path`` is a URL (``s3://bucket/prefix``) rather than a path on this machine."""
    return isinstance(path, str) and bool(_URL.match(path))


def split_roots(value: str) -> list[str]:
    """``RL_BOARD_ROOTS`` cut at its separators (``:``), a URL's ``://`` left whole."""
    return re.split(r"%s(?!//)" % re.escape(os.pathsep), value)


def url_roots() -> list[str] | None:
    """The allowed URL prefixes of ``RL_BOARD_ROOTS`` as written (``location`` normalises them); None
    when it is unset (everything is allowed), [] when it names local folders only."""
    value = os.environ.get(ROOTS_ENV)
    if value is None:
        return None
    return [part.strip() for part in split_roots(value) if is_url(part.strip())]


def check_roots() -> None:
    """Raise ``RootsMisconfigured`` when ``RL_BOARD_ROOTS`` is set but unusable (call at start)."""
    allowed_roots()


def is_allowed(path: Path | str, roots: list[Path] | None = None) -> bool:
    """Whether ``path`` (resolved: ``~``, ``..`` and symlinks followed) lies inside an allowed folder.
    A path that can't be resolved is not allowed (when folders are restricted)."""
    roots = allowed_roots() if roots is None else roots
    if roots is None:
        return True
    try:
        resolved = usable_path(path).resolve()
    except (RootError, OSError):
        return False
    return any(resolved == root or root in resolved.parents for root in roots)


def check_allowed(path: Path | str, roots: list[Path] | None = None) -> None:
    """Raise ``OutsideAllowedFolders`` (naming only the path given) unless ``path`` is allowed (inside
    ``roots``, default the allowed folders read now); ``RootError`` for a path no file can have. The
    message is the same whether or not it exists."""
    usable_path(path)
    if not is_allowed(path, roots):
        raise OutsideAllowedFolders(f"{_shown(str(path), 300)} is outside the allowed folders (set by {ROOTS_ENV}).")


def open_allowed(path: Path | str):
    """Open ``path`` for reading in binary, checked again now: resolved, inside the allowed
    folders, and opened without following a symlink (one swapped in after the check fails
    with ``OSError``). Raises ``OutsideAllowedFolders`` or ``OSError``."""
    check_allowed(path)
    resolved = usable_path(path).resolve()
    fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    return os.fdopen(fd, "rb")
