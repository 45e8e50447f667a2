"""Which folders the board may read: all of them, or only those inside ``RL_BOARD_ROOTS``.

When the page is shared beyond this machine, anyone who reaches it could otherwise list and
read every log the process can. With ``RL_BOARD_ROOTS`` (folders separated by ``:``) set,
every entry point (the sidebar, a link, the compare picker, the command line) checks a path
after resolving ``~``, ``..`` and symlinks, and nothing outside is listed or read.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOTS_ENV = "RL_BOARD_ROOTS"


class RootError(ValueError):
    """The root or run folder can't be used; the message says why and what is expected."""


class OutsideAllowedFolders(RootError):
    """A path lies outside ``RL_BOARD_ROOTS``."""


def allowed_roots() -> list[Path] | None:
    """The allowed folders, resolved; None when ``RL_BOARD_ROOTS`` is unset (everything is allowed)."""
    value = os.environ.get(ROOTS_ENV, "")
    if not value.strip():
        return None
    return [Path(part.strip()).expanduser().resolve() for part in value.split(os.pathsep) if part.strip()]


def is_allowed(path: Path | str, roots: list[Path] | None = None) -> bool:
    """Whether ``path`` (resolved: ``~``, ``..`` and symlinks followed) lies inside an allowed folder."""
    roots = allowed_roots() if roots is None else roots
    if roots is None:
        return True
    resolved = Path(path).expanduser().resolve()
    return any(resolved == root or root in resolved.parents for root in roots)


def check_allowed(path: Path | str) -> None:
    """Raise ``OutsideAllowedFolders`` (naming only the path given) unless ``path`` is allowed."""
    if not is_allowed(path):
        raise OutsideAllowedFolders(f"{path} is outside the allowed folders (set by {ROOTS_ENV}).")
