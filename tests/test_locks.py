"""The store's one file lock (store/locks.py, on filelock) and the cache folder's place (platformdirs)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from rl_board.store.locks import locked

_TRY = ("import sys\nfrom rl_board.store.locks import locked\n"
        "try:\n    with locked(sys.argv[1], wait=False):\n        print('got it')\n"
        "except BlockingIOError:\n    print('busy')\n")


def _other_process_tries(path: Path) -> str:
    return subprocess.run([sys.executable, "-c", _TRY, str(path)], capture_output=True, text=True, cwd=REPO,
                          check=True).stdout.strip()


def test_a_held_lock_keeps_another_process_out_until_released(tmp_path):
    """While this process holds the lock another process is refused at once (wait=False); after, it gets it."""
    path = tmp_path / "deep" / "folder" / ".lock"  # the folders are made
    with locked(path):
        assert _other_process_tries(path) == "busy"
    assert _other_process_tries(path) == "got it"
    assert path.is_file()  # the lock file stays: a cache folder's "last used" time is its mtime


def test_touch_marks_the_lock_file_just_used(tmp_path):
    """``touch`` sets the lock file's mtime to now; without it, the mtime is left as it was."""
    path = tmp_path / ".lock"
    path.write_bytes(b"")
    os.utime(path, (1_000_000, 1_000_000))
    with locked(path):
        pass
    assert path.stat().st_mtime == 1_000_000
    with locked(path, touch=True):
        pass
    assert path.stat().st_mtime > 1_000_000 + 10 ** 9


@pytest.mark.slow
def test_no_module_imports_fcntl():
    """``fcntl`` is Unix-only: no module of the package imports it, so it imports on Windows too."""
    found = []
    for path in (REPO / "rl_board").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] == "fcntl"]
    assert found == []


@pytest.mark.skipif(sys.platform != "linux", reason="the Linux folder names")
def test_the_cache_folder_is_the_linux_one_unless_moved(tmp_path):
    """On Linux the cache is ``~/.cache/rl_board`` (as before platformdirs), ``$XDG_CACHE_HOME/rl_board``
    when that is set, and ``$RL_BOARD_CACHE_DIR`` over both."""
    code = "from rl_board.store.cache import default_cache_root; print(default_cache_root())"

    def root(**env):
        base = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "RL_BOARD_CACHE_DIR")}
        return subprocess.run([sys.executable, "-c", code], env={**base, "HOME": str(tmp_path), **env},
                              capture_output=True, text=True, cwd=REPO, check=True).stdout.strip()

    assert root() == str(tmp_path / ".cache" / "rl_board")
    assert root(XDG_CACHE_HOME=str(tmp_path / "xdg")) == str(tmp_path / "xdg" / "rl_board")
    assert root(XDG_CACHE_HOME=str(tmp_path / "xdg"), RL_BOARD_CACHE_DIR=str(tmp_path / "mine")) == str(tmp_path / "mine")
