"""The package installs as the `rl-board` command, and that command works outside the repository."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow  # every test installs the package with pip or serves the page


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The project installed with pip (its dependencies come from the test environment): (target, env)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(REPO)], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    return target, env


def test_rl_board_command_runs_summary_from_anywhere(installed, tmp_path):
    """`rl-board summary` from the installed script reads the TRL demo: 12 files of 16 rows."""
    target, env = installed
    script = target / "bin" / "rl-board"
    proc = subprocess.run([sys.executable, str(script), "summary", str(REPO / "rollout_samples" / "trl_grpo_demo"),
                           "--json", "--no-cache"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert (got["format"], got["files"], got["lines_ok"]) == ("parquet", 12, 192)
    imported = subprocess.run([sys.executable, "-c", "import rl_board; print(rl_board.__file__)"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, check=True).stdout
    assert imported.startswith(str(target))  # the installed copy, not the repository's


def test_rl_board_serve_starts_the_page(installed, tmp_path):
    """`rl-board serve ROOT --port P` answers on 127.0.0.1:P with the packaged page script."""
    target, env = installed
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(target / "bin" / "rl-board"), "serve",
                             str(REPO / "rollout_samples"), "--port", str(port)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as reply:
                    assert reply.read() == b"ok"
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
                assert time.monotonic() < deadline, "rl-board serve did not answer within 60 s"
                time.sleep(0.5)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def test_serve_refuses_a_missing_root(installed, tmp_path):
    """`rl-board serve` with a folder that does not exist exits 2 and names it."""
    target, env = installed
    proc = subprocess.run([sys.executable, str(target / "bin" / "rl-board"), "serve", str(tmp_path / "nope")],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "nope" in proc.stderr
