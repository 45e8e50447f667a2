"""Retake the docs' screenshots: python docs/shoot.py (the page on rollout_samples/, in Debian's chromium).

Starts the board with start.sh on a free port, opens each view by link, waits for it to draw and
writes docs/*.png. Not run by the tests; run it after a change to what the page draws.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

from playwright.sync_api import expect, sync_playwright

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "rollout_samples"
SHOTS = {  # file -> (link parameters, text that shows the view has drawn, element to scroll to)
    "screenshot.png": ({"run": "ppo_demo", "area": "overview"}, "Diagnostic curves", None),
    "tokens.png": ({"run": "ppo_demo", "area": "batch", "step": "10"}, "Per-token heatmap", "Per-token heatmap"),
    "turns.png": ({"run": "prime_rl_agent_demo", "area": "batch"}, "assistant turns", "assistant turns"),
}
#: Shots of runs outside rollout_samples/: file -> (root, link parameters, text drawn, element to scroll to)
OTHER_SHOTS = {
    # TRL's completions logged to W&B offline with images (tests/make_wandb_image_fixtures.py)
    "images-turns.png": (REPO / "tests" / "data" / "wandb_images" / "wandb",
                         {"run": "offline-run-20261127_195252-trlvlm01", "area": "batch", "step": "1", "sort": "images"},
                         "View whole", "assistant turn"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def board(**env):
    """The board started with start.sh on a free port (``env``: more environment), until the block ends:
    yields its address once it answers."""
    port = _free_port()
    env = {**os.environ, "RL_BOARD_PORT": str(port), "RL_BOARD_VENV": sys.prefix, **env}
    proc = subprocess.Popen(["bash", str(REPO / "start.sh")], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url + "/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)


def chromium(p):
    """Debian's chromium, headless, with the flags this machine needs."""
    return p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"])


def main() -> int:
    with board() as url, sync_playwright() as p:
        browser = chromium(p)
        shots = {name: (ROOT, *shot) for name, shot in SHOTS.items()}
        shots.update(OTHER_SHOTS)
        if len(sys.argv) > 1:  # python docs/shoot.py images-turns.png: only those named
            shots = {name: shot for name, shot in shots.items() if name in sys.argv[1:]}
        for name, (root, params, ready, scroll) in shots.items():
            page = browser.new_page(viewport={"width": 1500, "height": 1300})
            page.goto(f"{url}/?{urlencode({'root': str(root), **params})}")
            expect(page.get_by_text(ready).first).to_be_visible(timeout=120_000)
            if scroll:
                page.get_by_text(scroll).first.evaluate("e => e.scrollIntoView({block: 'start'})")
            time.sleep(4)  # charts finish drawing
            page.screenshot(path=str(REPO / "docs" / name))
            page.close()
            print("wrote", name)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
