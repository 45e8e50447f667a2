"""Many viewers on one app: N real headless Chromium sessions on the same run at once.

Usage:  python benchmarks/bench_viewers.py [--size small|full] [--sessions 4]

It starts the app (``benchmarks/timed_app.py``: the page of ``app.py`` with the server's answer
to each rerun timed) on a free local port with an empty cache, then runs, each in its own process
with its own Debian Chromium: first one session alone (the baseline), then N sessions at once in
a fresh app. Each session opens the run by a link (no click), waits for it, then moves the step
slider five times. Two times per step change:

- the server's answer: from the request reaching the server until it sent "script finished",
  taken on the server (what more viewers make slower: they share its one process);
- until painted: from the key press until the address bar shows the new step, no element of the
  previous run is left and the next frame is painted (what the viewer waits for; here the N
  browsers share this machine's two cores with the server, where real viewers each have their own).

Reported: each median and max, the app's peak RSS (VmHWM), and how many times the run was parsed
(the cache folders written). Nothing is asserted: the printed table goes in docs/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_load import ensure_run  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
MOVES = 5


# The page is painted when the script has finished (it writes the step into the address bar last),
# the browser has replaced every element of the previous run (none is marked stale) and the app is
# idle; then we wait for the next paint.
_RERUN_DONE = """([slider, before]) => slider.value !== before
    && new URLSearchParams(location.search).get('step') === slider.value
    && !document.querySelector('[data-stale="true"]')
    && !document.querySelector('[data-testid="stStatusWidgetRunningIcon"]')"""
_NEXT_PAINT = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def _session(url: str, out: Path) -> None:
    """One viewer: open the link, wait for the run, move the step MOVES times; write timings to ``out``."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        start = time.perf_counter()
        page.goto(url)
        slider = page.get_by_role("slider", name="Step")
        expect(slider).to_be_visible(timeout=600_000)
        handle = slider.element_handle()
        page.wait_for_function(_RERUN_DONE, arg=[handle, None], timeout=600_000, polling=5)
        page.evaluate(_NEXT_PAINT)
        loaded = time.perf_counter() - start
        painted = []
        for _ in range(MOVES):
            before = slider.input_value()
            slider.focus()
            start = time.perf_counter()
            page.keyboard.press("ArrowLeft")
            page.wait_for_function(_RERUN_DONE, arg=[handle, before], timeout=60_000, polling=5)
            page.evaluate(_NEXT_PAINT)
            painted.append(time.perf_counter() - start)
        browser.close()
    out.write_text(json.dumps({"load": loaded, "painted": painted}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def phase(run: Path, sessions: int) -> dict:
    """A fresh app and cache; ``sessions`` viewers at once."""
    with tempfile.TemporaryDirectory(prefix="rl_board-viewers-") as tmp:
        cache, port = Path(tmp) / "cache", _free_port()
        env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache)}
        answers = Path(tmp) / "answers.jsonl"
        env["RL_BOARD_BENCH_ANSWERS"] = str(answers)
        app = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(REPO / "benchmarks" / "timed_app.py"),
                                "--server.port", str(port), "--server.address", "127.0.0.1",
                                "--server.headless", "true"],
                               cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(240):
                try:
                    urllib.request.urlopen(url + "/_stcore/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.5)
            link = f"{url}/?{urlencode({'root': str(run.parent), 'run': run.name})}"
            outs = [Path(tmp) / f"session{i}.json" for i in range(sessions)]
            procs = [subprocess.Popen([sys.executable, __file__, "--session", link, "--out", str(o)], cwd=REPO)
                     for o in outs]
            if any(p.wait() for p in procs):
                raise RuntimeError("a viewer session failed")
            results = [json.loads(o.read_text()) for o in outs]
            by_session = {}
            for line in answers.read_text().splitlines():
                answer = json.loads(line)
                by_session.setdefault(answer["session"], []).append(answer["answered"] - answer["asked"])
            # a session's last MOVES reruns are its step changes (before them: opening the run)
            answered = [t for times in by_session.values() for t in times[-MOVES:]]
            rss = _peak_rss_mb(app.pid)
            parsed = len([d for d in cache.iterdir() if (d / "manifest.json").exists()]) if cache.exists() else 0
        finally:
            app.terminate()
            app.wait(timeout=30)
    summary = {"sessions": sessions, "loads": [r["load"] for r in results], "rss_mb": rss,
               "run_caches_written": parsed}
    for measure, times in (("answered", answered), ("painted", [t for r in results for t in r["painted"]])):
        summary[measure] = {"median": statistics.median(times), "max": max(times), "count": len(times)}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("small", "full"), default="full")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--session", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.session:
        _session(args.session, args.out)
        return 0
    run = ensure_run(args.size)
    one = phase(run, 1)
    many = phase(run, args.sessions)
    print(f"Run: {args.size}; {args.sessions} headless Chromium sessions at once vs one alone\n")
    print(f"| measure | one session | {args.sessions} sessions | ratio | target |\n|---|---|---|---|---|")
    print(f"| open by link, until the run shows (max) | {max(one['loads']):.2f} s | {max(many['loads']):.2f} s | | |")
    for measure, label in (("answered", "server's answer to a step change"),
                           ("painted", "step change until the page is painted")):
        a, b = one[measure], many[measure]
        target = "≤ 0.25 s" if measure == "answered" else ""
        print(f"| {label} (median) | {a['median']:.3f} s | {b['median']:.3f} s | "
              f"{b['median'] / a['median']:.2f} × | {target} |")
        print(f"| {label} (max) | {a['max']:.3f} s | {b['max']:.3f} s | | |")
    print(f"| app peak RSS | {one['rss_mb']:.0f} MiB | {many['rss_mb']:.0f} MiB | "
          f"{many['rss_mb'] / one['rss_mb']:.2f} × | ≤ 1.5 × one session |")
    print(f"| run caches written (parses) | {one['run_caches_written']} | {many['run_caches_written']} | | 1 |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
