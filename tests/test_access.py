"""Allowed folders: with RL_BOARD_ROOTS set, nothing outside can be listed or loaded, by any entry point."""

import json
import os
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from conftest import REPO, sample, write_lines
from rl_board.access import OutsideAllowedFolders
from rl_board.loader import list_runs, load_run
from rl_board.views import keys


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """allowed/{run, link -> secret/run}, secret/run, and RL_BOARD_ROOTS = allowed."""
    allowed, secret = tmp_path / "allowed", tmp_path / "secret"
    write_lines(allowed / "run" / "r.jsonl", [sample(1, 1.0)])
    write_lines(secret / "run" / "r.jsonl", [sample(1, 99.0)])
    (allowed / "link").symlink_to(secret / "run")
    (allowed / "run" / "stolen.jsonl").symlink_to(secret / "run" / "r.jsonl")
    monkeypatch.setenv("RL_BOARD_ROOTS", str(allowed))
    return allowed, secret


def test_listing_and_loading_stop_at_the_allowed_folders(layout):
    """Inside loads; outside, a .. escape and a symlink out are refused; a symlinked subfolder or
    file pointing out is neither listed nor read."""
    allowed, secret = layout
    assert list_runs(allowed) == ["run"]  # not "link"
    run = load_run(allowed / "run", cache_root=False)
    assert run.files == ("r.jsonl",) and run.samples["reward"].tolist() == [1.0]
    for path in (secret, secret / "run", allowed / ".." / "secret" / "run", allowed / "link", "~"):
        with pytest.raises(OutsideAllowedFolders, match="outside the allowed folders"):
            list_runs(path) if path in (secret, "~") else load_run(path, cache_root=False)


def test_unset_means_as_before(tmp_path, monkeypatch):
    """Without RL_BOARD_ROOTS every folder can be read."""
    monkeypatch.delenv("RL_BOARD_ROOTS", raising=False)
    write_lines(tmp_path / "anywhere" / "r.jsonl", [sample(1, 1.0)])
    assert list_runs(tmp_path) == ["anywhere"]


def test_command_line_refuses_outside(layout):
    """summary and search exit 2 naming the folder; nothing is printed from it."""
    allowed, secret = layout
    for command in (["summary", str(secret / "run"), "--json"], ["search", str(secret / "run"), "--regex", ".", "--json"]):
        proc = subprocess.run([sys.executable, "-m", "rl_board", *command], capture_output=True, text=True, cwd=REPO,
                              env=os.environ.copy())
        assert proc.returncode == 2 and "outside the allowed folders" in proc.stderr and proc.stdout == ""
    ok = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(allowed / "run"), "--json", "--no-cache"],
                        capture_output=True, text=True, cwd=REPO, env=os.environ.copy())
    assert json.loads(ok.stdout)["lines_ok"] == 1


def test_page_and_link_refuse_outside(layout):
    """Typing an outside root, or opening a link to one, says so and lists no run."""
    allowed, secret = layout
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(secret)).run()
    assert any("outside the allowed folders" in t.value for t in at.sidebar.text)
    assert len(at.sidebar.selectbox) == 0 or keys.RUN not in [s.key for s in at.sidebar.selectbox]
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.query_params.update(root=str(secret), run="run")
    at.run()
    assert any("outside the allowed folders" in t.value for t in at.sidebar.text)
    assert not at.dataframe and not at.exception
