"""A real ``rl-board serve`` stops within seconds of SIGTERM or Ctrl-C (SIGINT) while a page has a compressed
run open and its findings checked (issue 38: the checks' thread kept a stopped server alive for an hour).
The test starts the server itself, in a session of its own, and signals only that process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
STOP_WITHIN = 10.0  # seconds from the signal to the server's exit


def _compressed_kl_run(root: Path) -> Path:
    """The findings benchmark's KL-runaway run (token lists, a finding that reads them again) as .jsonl.xz."""
    import importlib.util
    import lzma

    spec = importlib.util.spec_from_file_location("bench_findings", REPO / "benchmarks" / "bench_findings.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.PROMPTS = 16  # 64 samples a step: checks that read 384 late samples again (minutes, seeking in the .xz)
    samples = bench.make_samples("kl_runaway", np.random.default_rng(1), 10, False)
    folder = bench.write_run(samples, "board", root / "klrun", "kl_runaway")
    plain = folder / "rank0.jsonl"
    (folder / "rank0.jsonl.xz").write_bytes(lzma.compress(plain.read_bytes()))
    plain.unlink()
    return folder


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_stops_within_seconds_of_a_signal_with_a_run_open(tmp_path, signum):
    """Open the compressed run in a real browser (its checks start), signal the server: it exits in 10 s."""
    from playwright.sync_api import expect, sync_playwright

    _compressed_kl_run(tmp_path / "runs")
    port = _free_port()
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(tmp_path / "cache")}
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rl_board", "serve", str(tmp_path / "runs"), "--port",
                                 str(port)], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"http://127.0.0.1:{port}")
                sidebar = page.get_by_test_id("stSidebar")
                expect(sidebar.get_by_role("combobox", name="Run")).to_have_value("klrun", timeout=60_000)
                sidebar.get_by_role("button", name="Load").click()
                expect(page.get_by_text("Findings", exact=False).first).to_be_visible(timeout=60_000)
                start = time.monotonic()
                proc.send_signal(signum)
                proc.wait(timeout=STOP_WITHIN + 20)
                took = time.monotonic() - start
            finally:
                browser.close()
        assert took <= STOP_WITHIN, (took, (tmp_path / "server.log").read_text()[-3000:])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
