"""Retake the docs' screenshots of the same-prompt view and the tagged samples: python docs/shoot_tools.py.

Writes two small runs that share a prompt (one learns to repeat its boxed answer) into a temporary
folder, starts the board with start.sh on a free port (with a cache folder of its own, so the tag it
makes stays there), tags the repeating sample, opens the same-prompt view with both runs and writes
docs/same_prompt.png and docs/tags.png. Not run by the tests; run it after a change to what they draw.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shoot import board, chromium  # noqa: E402  (the same server and browser as docs/shoot.py)

REPO = Path(__file__).resolve().parent.parent
PROMPT = "What is 17 × 23? Put the answer in \\boxed{}."
RUNS = {  # run -> (step, reward, response) of PROMPT; the low-beta run learns to repeat its answer
    "ppo_beta_0.01": [
        (10, 0.62, "17 × 23 = 17 × 20 + 17 × 3 = 340 + 51 = 391. The answer is \\boxed{391}."),
        (20, 0.91, "17 × 23 = 391. The answer is \\boxed{391}."),
        (30, 1.38, "The answer is \\boxed{391}. The answer is \\boxed{391}. The answer is \\boxed{391}. "
                   "The answer is \\boxed{391}."),
    ],
    "ppo_beta_0.10": [
        (10, 0.55, "Let me compute: 17 × 23 = 17 × 20 + 17 × 3 = 340 + 51 = 391. So the answer is \\boxed{391}."),
        (20, 0.71, "17 × 20 = 340 and 17 × 3 = 51, so 17 × 23 = 391. The answer is \\boxed{391}."),
        (30, 0.74, "17 × 23 = 340 + 51 = 391. The answer is \\boxed{391}."),
    ],
}


def write_runs(root: Path) -> None:
    rng = random.Random(3)
    for name, rows in RUNS.items():
        lines = []
        for step, reward, response in rows:
            words = response.split()
            logprobs = [round(-abs(rng.gauss(0.3, 0.3)), 3) for _ in words]
            ref = [round(lp - abs(rng.gauss(0.005 * step, 0.05)), 3) for lp in logprobs]
            lines.append({"step": step, "reward": reward, "prompt": PROMPT, "response": response,
                          "response_tokens": words, "logprobs": logprobs, "ref_logprobs": ref})
            for other in ("What is 12 + 45?", "Name three primes."):
                lines.append({"step": step, "reward": round(rng.random(), 2), "prompt": other, "response": "…",
                              "response_tokens": ["…"], "logprobs": [-0.1], "ref_logprobs": [-0.2]})
        (root / name).mkdir(parents=True)
        (root / name / "rank0.jsonl").write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))


def _pick(page, widget, option: str) -> None:
    """Open ``widget``'s list and pick ``option`` (again when a rerun closed the list first)."""
    for _ in range(6):
        widget.click()
        try:
            page.get_by_role("option", name=option).first.click(timeout=5_000)
            return
        except Exception:  # playwright's TimeoutError
            page.keyboard.press("Escape")
    raise RuntimeError(f"could not pick {option!r}")


def shoot(url: str, root: Path) -> None:
    with sync_playwright() as p:
        browser = chromium(p)
        page = browser.new_page(viewport={"width": 1500, "height": 2600})
        page.goto(url)
        sidebar = page.get_by_test_id("stSidebar")
        box = sidebar.get_by_label("Root folder (runs at any depth under it, or a run folder)")
        box.fill(str(root))
        box.press("Enter")
        expect(sidebar.get_by_role("combobox", name="Run")).to_have_value("ppo_beta_0.01", timeout=30_000)
        sidebar.get_by_role("button", name="Load").click()
        tab = page.get_by_role("tab", name="Batch and sample")
        expect(tab).to_be_visible(timeout=60_000)
        tab.click()
        _pick(page, page.get_by_test_id("stSelectbox").filter(has_text="Sort samples by"), "reward")
        time.sleep(2)
        _pick(page, page.get_by_test_id("stMultiSelect").filter(has=page.get_by_text("Tags", exact=True)),
              "reward hack")
        page.keyboard.press("Escape")
        note = page.get_by_role("textbox", name="Note")
        note.fill("Repeats the boxed answer to collect the format reward four times.")
        note.press("Tab")  # leaving the box saves the note
        expect(page.get_by_text("Saved.")).to_be_visible(timeout=30_000)
        page.get_by_text("Same prompt across steps and runs (word diff)").click()
        expect(page.locator(".rlb-diff-block")).to_have_count(3, timeout=30_000)
        _pick(page, page.get_by_test_id("stMultiSelect").filter(has_text="Also in runs"), "ppo_beta_0.10")
        page.keyboard.press("Escape")
        expect(page.locator(".rlb-diff-block")).to_have_count(6, timeout=30_000)
        _pick(page, page.get_by_test_id("stSelectbox").filter(has_text="Compare every response with"),
              "ppo_beta_0.01 · step 10")
        time.sleep(3)
        left = page.get_by_test_id("stMainBlockContainer").bounding_box()["x"] + 20
        top = page.get_by_text("Same prompt across steps and runs (word diff)").bounding_box()
        last = page.locator(".rlb-diff-block").last.bounding_box()
        page.screenshot(path=str(REPO / "docs" / "same_prompt.png"), clip={
            "x": left, "y": top["y"] - 10, "width": 1500 - left - 20, "height": last["y"] + last["height"] - top["y"] + 30})
        print("wrote same_prompt.png")
        page.get_by_role("tab", name="Explore").click()
        page.get_by_text("Tagged samples", exact=True).click()
        expect(page.get_by_text("1 tagged sample.")).to_be_visible(timeout=30_000)
        time.sleep(2)
        start = page.get_by_text("Tagged samples", exact=True).bounding_box()
        end = page.get_by_role("button", name="Download as a JSONL eval set").bounding_box()
        page.screenshot(path=str(REPO / "docs" / "tags.png"), clip={
            "x": left, "y": start["y"] - 10, "width": 1500 - left - 20, "height": end["y"] + end["height"] - start["y"] + 20})
        print("wrote tags.png")
        browser.close()


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        write_runs(root)
        with board(RL_BOARD_CACHE_DIR=str(Path(tmp) / "cache")) as url:
            shoot(url, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
