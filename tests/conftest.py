"""Shared fixtures: real files on disk in a temporary folder, an isolated cache, clean Streamlit caches."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(items):
    """Mark the browser tests ``browser`` (and ``slow``). Other tests are marked ``slow`` one by one where
    they are defined: each that starts the page many times or other processes (pip, the benchmark, a
    server) or takes more than about half a second here, so ``-m "not browser and not slow"`` is the quick
    run (docs/contributing/tests.md)."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if module == "test_browser":
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own cache folder, so no test reads another's cache."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(autouse=True)
def findings_drawn_at_once(monkeypatch):
    """The page's findings panel waits for its checks up to ``RL_BOARD_FINDINGS_WAIT`` seconds and fills
    in later after that; tests of the page read it in the same run (one test checks the later filling)."""
    monkeypatch.setenv("RL_BOARD_FINDINGS_WAIT", "60")


@pytest.fixture(autouse=True)
def clear_streamlit_caches():
    """Streamlit's caches live for the whole test process; start each test without them."""
    yield
    st = sys.modules.get("streamlit")
    if st is None:  # nothing cached if the test never touched Streamlit
        return
    st.cache_data.clear()
    st.cache_resource.clear()


def write_lines(path: Path, lines) -> Path:
    """Write ``lines`` (dicts become JSON, str and bytes are written as they are) one per line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = bytearray()
    for line in lines:
        if isinstance(line, dict):
            out += json.dumps(line).encode()
        elif isinstance(line, str):
            out += line.encode()
        else:
            out += line
        out += b"\n"
    path.write_bytes(bytes(out))
    return path


def sample(step: int, reward: float, **extra) -> dict:
    return {"step": step, "reward": reward, **extra}


def command(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``rl-board ARGV`` run in this process through the command line's own ``main`` (the parser, the
    commands, their workers and exit codes; no interpreter start), with ``env`` added for the call: its
    stdout and stderr are captured as a process's would be. Tests of what only a process shows (signals,
    the exit's flush, the import cost) use ``command_process``."""
    from rl_board.cli import main

    saved = dict(os.environ)
    os.environ.update(env or {})
    out, err = _captured(), _captured()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(argv))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["rl-board", *argv], status, _text(out), _text(err))


def command_process(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``rl-board ARGV`` as its own process (the real command line, its own workers), with ``env`` added."""
    return subprocess.run([sys.executable, "-m", "rl_board", *argv], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, **(env or {})}, timeout=300)


def _captured() -> io.TextIOWrapper:
    """A text stream with a byte ``buffer`` beneath, as a process's stdout has (``tags --export`` writes bytes)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape", newline="\n",
                            write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", "replace")


def close_to(a, b) -> bool:
    """``a`` equals ``b``, numbers within 1e-12 relative (the tolerance runs read elsewhere are held to)."""
    if isinstance(a, float) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close_to(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close_to(x, y) for x, y in zip(a, b))
    return a == b


def summary_json(*args) -> dict:
    """``rl-board summary --json ARGS`` as its own process, which must succeed."""
    proc = command("summary", "--json", *map(str, args))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def summary_and_notes(*args) -> tuple[dict, str]:
    """(``rl-board summary --json ARGS`` as its own process, what it wrote on stderr: its notes)."""
    proc = command("summary", "--json", *map(str, args))
    return json.loads(proc.stdout), proc.stderr


def docs_example(page: str, marker: str) -> str:
    """The ```json block of docs/formats/PAGE.md that holds ``marker``, without its fences."""
    text = (REPO / "docs" / "formats" / f"{page}.md").read_text()
    return next(b for b in text.split("```json")[1:] if marker in b).split("```")[0]


def step_rows(summary: dict) -> dict:
    """step -> (samples, mean reward, assistant turns and tool calls per sample) of a ``summary --json``."""
    return {s["step"]: (s["samples"], s["reward_mean"], s["turns_mean"], s["tool_calls_mean"]) for s in summary["steps"]}
