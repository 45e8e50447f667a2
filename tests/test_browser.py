"""End to end in a real headless Chromium: start the app as start.sh does, load the demo, sort by KL."""

import contextlib
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO

CHROMIUM = "/usr/bin/chromium"
OUTPUT = REPO / "tests" / "output"
PAD = "<|endoftext|>"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _max_kl_of_last_step(run: Path) -> tuple[int, float]:
    """The newest step and its largest per-sample mean k3, computed straight from the JSON lines over
    the positions the page counts by default: up to and including the first <|endoftext|> (the EOS)."""
    samples = [json.loads(line) for f in sorted(run.glob("*.jsonl")) for line in f.read_text().splitlines()]
    step = max(s["step"] for s in samples)
    best = -math.inf
    for s in (s for s in samples if s["step"] == step):
        n = s["response_tokens"].index(PAD) + 1 if PAD in s["response_tokens"] else len(s["logprobs"])
        ks = [math.exp(r - p) - 1 - (r - p) for p, r in zip(s["logprobs"][:n], s["ref_logprobs"][:n])]
        best = max(best, sum(ks) / len(ks))
    return step, best


@contextlib.contextmanager
def _page(url: str, width: int, height: int):
    """A page of Debian's Chromium, headless, opened at ``url``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url)
            yield page
        finally:
            browser.close()


def _open_area(page, name: str) -> None:
    """Click the tab of one of the page's areas."""
    from playwright.sync_api import expect

    tab = page.get_by_role("tab", name=name)
    expect(tab).to_be_visible(timeout=60_000)
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true", timeout=30_000)


def _load_in_page(page, root: Path, run: str, area: str | None = "Batch and sample") -> None:
    """Type ``root`` into the sidebar, pick ``run``, press Load and open ``area``."""
    from playwright.sync_api import expect

    sidebar = page.get_by_test_id("stSidebar")
    box = sidebar.get_by_label("Root folder")  # the start of its label
    box.fill(str(root))
    box.press("Enter")
    expect(sidebar.get_by_role("combobox", name="Run")).to_have_value(run, timeout=30_000)
    sidebar.get_by_role("button", name="Load").click()
    if area:
        _open_area(page, area)


def _in_view(page, locator) -> bool:
    """Whether the element's top lies inside the browser's window."""
    box = locator.bounding_box()
    return box is not None and 0 <= box["y"] < page.viewport_size["height"]


def _open_bundled_and_sort(page, run: str, sort_by: str, loaded_text: str | None = None) -> None:
    """Pick a bundled run in the sidebar, press Load, and sort the batch by ``sort_by``."""
    from playwright.sync_api import expect

    sidebar = page.get_by_test_id("stSidebar")
    _pick_option(page, sidebar.get_by_test_id("stSelectbox").filter(has_text="Run"), run, exact=False)
    sidebar.get_by_role("button", name="Load").click()
    if loaded_text:
        # ``first``: while the page reruns, Streamlit may briefly show the old line beside the new one
        expect(page.get_by_text(loaded_text, exact=False).first).to_be_visible(timeout=60_000)
    _open_area(page, "Batch and sample")
    sort = page.get_by_test_id("stSelectbox").filter(has_text="Sort samples by")
    expect(sort).to_be_visible(timeout=60_000)
    _settled(page)
    _pick_option(page, sort, sort_by)


def _settled(page, timeout_ms: int = 30_000) -> None:
    """Wait until the page has no element a rerun is still redrawing (Streamlit's ``data-stale``)."""
    page.wait_for_function("""() => !document.querySelector('[data-stale="true"]')""", timeout=timeout_ms)


@pytest.fixture
def server(tmp_path):
    """The app as a user starts it (start.sh), its output in a file: a pipe nobody reads stops the server
    once it is full (64 KiB of warnings), and every session with it. A failing test prints the log's end."""
    port = _free_port()
    env = {**os.environ, "RL_BOARD_PORT": str(port), "RL_BOARD_VENV": sys.prefix}
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["bash", str(REPO / "start.sh")], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("start.sh exited: " + log_path.read_text(errors="replace"))
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the app did not answer within 120 s")
    yield url
    os.killpg(proc.pid, 15)
    proc.wait(timeout=20)
    text = log_path.read_text(errors="replace")
    print(f"--- the server's log ({len(text)} characters), its end:\n{text[-3000:]}")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_load_demo_and_sort_by_kl_in_chromium(server):
    """In Chromium: pick ppo_demo, Load, sort by KL mean; the first sample is the step's top KL."""
    from playwright.sync_api import expect

    step, top_kl = _max_kl_of_last_step(REPO / "rollout_samples" / "ppo_demo")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with _page(server, 1600, 2400) as page:
        _open_bundled_and_sort(page, "ppo_demo", "KL mean")
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(rf"^#1 · reward .* · KL k3 {re.escape(f'{top_kl:.4g}')} · "),
                                     timeout=30_000)
        expect(page.get_by_test_id("stDataFrame").first).to_be_visible()
        expect(page.get_by_text("Per-token heatmap")).to_be_visible(timeout=30_000)
        table = page.get_by_test_id("stDataFrame").first
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + 12, box["y"] + 35 + 35 * 2.5)  # the row marker of the third row
        expect(picker).to_have_value(re.compile(r"^#3 · "), timeout=30_000)
        assert page.get_by_test_id("stException").count() == 0
        page.screenshot(path=str(OUTPUT / "sorted_by_kl.png"), full_page=True)
    assert (OUTPUT / "sorted_by_kl.png").stat().st_size > 10_000
    assert step == 30


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_a_click_on_a_table_cell_opens_its_row(server):
    """In Chromium: a click in the middle of a row of the batch table (a cell, not the checkbox at its
    left) opens that row's sample: the fourth row, then the second."""
    from playwright.sync_api import expect

    with _page(server, 1600, 2400) as page:
        _open_bundled_and_sort(page, "ppo_demo", "reward")
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(r"^#1 · "), timeout=30_000)
        table = page.get_by_test_id("stDataFrame").first
        table.scroll_into_view_if_needed()
        for row in (4, 2):
            box = table.bounding_box()
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + 35 + 35 * (row - 0.5))  # mid-row, a cell
            expect(picker).to_have_value(re.compile(rf"^#{row} · "), timeout=30_000)
        assert page.get_by_test_id("stException").count() == 0


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_auto_refresh_shows_lines_appended_while_open(server, tmp_path):
    """In Chromium: with auto-refresh on, lines a trainer appends appear without pressing anything, and
    the step the user went back to stays (in the address too)."""
    from urllib.parse import parse_qs, urlparse

    from playwright.sync_api import expect

    log = tmp_path / "live" / "rank0.jsonl"
    log.parent.mkdir()
    log.write_text('{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.6}\n{"step": 3, "reward": 0.6}\n')
    with _page(server, 1400, 1600) as page:
        _load_in_page(page, tmp_path, "live")
        sidebar = page.get_by_test_id("stSidebar")
        expect(page.get_by_text("3 samples loaded")).to_be_visible(timeout=30_000)
        slider = page.get_by_role("slider", name="Step")
        expect(slider).to_have_value("3", timeout=30_000)
        slider.focus()
        page.keyboard.press("ArrowLeft")  # the user goes back to step 2 (neither end of the slider)
        expect(slider).to_have_value("2", timeout=30_000)
        sidebar.get_by_text("Auto-refresh").click()
        seconds = sidebar.get_by_label("every (seconds)")
        expect(seconds).to_be_enabled(timeout=10_000)
        seconds.fill("2")
        seconds.press("Enter")
        time.sleep(1)
        with log.open("a") as fh:
            fh.write('{"step": 4, "reward": 0.7}\n{"step": 5, "reward": 0.9}\n')
        expect(page.get_by_text("5 samples loaded")).to_be_visible(timeout=30_000)
        expect(slider).to_have_attribute("max", "5", timeout=30_000)
        expect(slider).to_have_value("2")  # the step the user is on stays while the run grows
        assert parse_qs(urlparse(page.url).query)["step"] == ["2"]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_trl_parquet_run_in_chromium(server):
    """In Chromium: open the TRL demo (parquet), sort by its advantage column; the first sample's reward
    is the sum of the reward functions of the top-advantage completion, read straight from parquet."""
    import pyarrow.parquet as pq
    from playwright.sync_api import expect

    last = sorted((REPO / "rollout_samples" / "trl_grpo_demo").glob("*.parquet"))[-1]
    rows = pq.read_table(last).to_pylist()
    best = max(r["advantage"] for r in rows)
    rewards = {sum(v for v in (r["accuracy_reward"], r["format_reward"]) if v == v)
               for r in rows if r["advantage"] == best}
    assert len(rewards) == 1  # ties (if any) agree, so the first row is known
    with _page(server, 1600, 2000) as page:
        _open_bundled_and_sort(page, "trl_grpo_demo", "advantage", "parquet · 12 files · 192 samples loaded")
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(rf"^#1 · reward {re.escape(f'{rewards.pop():.4g}')} · "),
                                     timeout=30_000)
        expect(page.get_by_text("Extra fields of this sample").first).to_be_visible()
        assert page.get_by_test_id("stException").count() == 0
        page.screenshot(path=str(OUTPUT / "trl_parquet.png"), full_page=True)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_token_text_creates_no_element_from_model_output(server, tmp_path):
    """In Chromium: tokens that look like markup are shown as text in the coloured response: no img or
    script element is created, no dialog opens, and '&amp;' reads as written."""
    from playwright.sync_api import expect

    hostile = ["<img src=x onerror=alert(1)>", "</span><script>alert(2)</script>", "&amp;", "<b>bold</b>"]
    log = tmp_path / "hostile" / "rank0.jsonl"
    log.parent.mkdir()
    log.write_text(json.dumps({"step": 1, "reward": 1.0, "response": "".join(hostile), "response_tokens": hostile,
                               "logprobs": [-1.0, -2.0, -0.5, -0.1], "ref_logprobs": [-1.5, -1.0, -0.5, -0.3]}) + "\n")
    with _page(server, 1400, 1800) as page:
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        _load_in_page(page, tmp_path, "hostile")
        text = page.locator(".rlb-token-text")
        expect(text).to_be_visible(timeout=30_000)
        expect(text.locator(".rlb-tok")).to_have_count(4)
        assert text.locator("img").count() == 0 and text.locator("script").count() == 0
        assert text.locator("b").count() == 0 and page.locator("img[src='x']").count() == 0
        assert text.inner_text() == "".join(hostile)
        time.sleep(1)  # a dialog, if any, would open right away
        assert dialogs == []
        page.screenshot(path=str(OUTPUT / "token_text.png"), full_page=True)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_search_click_opens_the_sample_in_view(server, tmp_path):
    """In Chromium: search the whole run from the Explore area, click the match (in an earlier step than
    the one shown): the batch area opens at its step, the sample and its tokens are in the window, and
    the batch table marks its row (the 7th by reward: rewards 11 down to 5)."""
    from playwright.sync_api import expect

    lines = []
    for step in (1, 2, 3):
        for i in range(12):
            words = ["needle", "in", "hay"] if (step, i) == (1, 5) else ["plain", "words", str(i)]
            lines.append({"step": step, "reward": float(i), "prompt": f"q{step}-{i}", "response": " ".join(words),
                          "response_tokens": words, "logprobs": [-1.0, -2.0, -0.5],
                          "ref_logprobs": [-1.5, -1.0, -0.5]})
    log = tmp_path / "haystack" / "rank0.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with _page(server, 1500, 900) as page:
        _load_in_page(page, tmp_path, "haystack", "Explore")
        regex = page.get_by_label("Regular expression (RE2 syntax; (?i) for case-insensitive)")
        expect(regex).to_be_visible(timeout=30_000)
        regex.fill("needle")
        regex.press("Enter")
        expect(page.get_by_text("1 of 36 samples match")).to_be_visible(timeout=30_000)
        table = page.get_by_test_id("stDataFrame").first
        _settled(page)
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)  # the row marker of the first (only) row
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(r"^#7 · .*rank0\.jsonl:6$"), timeout=30_000)
        expect(page.get_by_role("tab", name="Batch and sample")).to_have_attribute("aria-selected", "true",
                                                                                   timeout=30_000)
        expect(page.get_by_role("slider", name="Step")).to_have_value("1")
        tokens = page.locator(".rlb-token-text")
        expect(tokens).to_have_text("needleinhay", timeout=30_000)  # tokens as logged
        page.wait_for_function("""() => { const el = document.querySelector('.st-key-batch_sample');
                                          const top = el && el.getBoundingClientRect().top;
                                          return el && top >= 0 && top < window.innerHeight; }""", timeout=30_000)
        assert _in_view(page, picker) and _in_view(page, tokens)
        marked = page.get_by_test_id("stDataFrame").first.locator("tr[role=row][aria-selected=true]")
        expect(marked).to_have_count(1)
        expect(marked).to_have_attribute("aria-rowindex", "8")  # the header is row 1: the 7th sample is row 8
        expect(marked.locator("td").first).to_have_text("q1-5")
        assert page.get_by_test_id("stException").count() == 0
        page.screenshot(path=str(OUTPUT / "search_opens_sample.png"))


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_the_sort_and_the_address_survive_a_search_and_an_opened_match(server):
    """In Chromium, on ppo_demo: sort the batch by KL mean, search in Explore, open a match of an earlier
    step: the batch is still sorted by KL mean, and the address names the step and the sample shown."""
    from urllib.parse import parse_qs, urlparse

    from playwright.sync_api import expect

    with _page(server, 1500, 1200) as page:
        _open_bundled_and_sort(page, "ppo_demo", "KL mean")
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(r" · KL k3 "), timeout=30_000)
        _open_area(page, "Explore")
        regex = page.get_by_label("Regular expression (RE2 syntax; (?i) for case-insensitive)")
        expect(regex).to_be_visible(timeout=30_000)
        regex.fill("haiku about the number 15")  # the prompts of a few earlier steps
        _pick_option(page, page.get_by_role("combobox", name="in", exact=True), "prompt")
        expect(page.get_by_text(re.compile(r"^\d+ of 480 samples match$"))).to_be_visible(timeout=30_000)
        table = page.get_by_test_id("stDataFrame").first
        _settled(page)
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)  # the row marker of the first match
        expect(page.get_by_role("tab", name="Batch and sample")).to_have_attribute("aria-selected", "true",
                                                                                   timeout=30_000)
        expect(page.get_by_role("combobox", name="Sort samples by")).to_have_value("KL mean", timeout=30_000)
        step = page.get_by_role("slider", name="Step")

        def address_names_what_is_shown(not_step: str):
            """The address's step and sample come to be the slider's and the picker's, and stay so."""
            expect(picker).to_have_value(re.compile(r"rank\d\.jsonl:\d+$"), timeout=30_000)
            shown = {"step": step.input_value(), "sample": picker.input_value().rsplit(" · ", 1)[-1]}
            page.wait_for_function("""s => { const p = new URLSearchParams(location.search);
                                             return p.get('step') === s.step && p.get('sample') === s.sample; }""",
                                   arg=shown, timeout=30_000)
            page.wait_for_timeout(1500)  # nothing later writes another address
            params = parse_qs(urlparse(page.url).query)
            assert params["step"] == [shown["step"]] and params["sample"] == [shown["sample"]]
            assert shown["step"] != not_step and params["sort"] == ["KL mean"] and params["area"] == ["batch"]
            return shown["step"]

        address_names_what_is_shown("30")  # the match's own step, not the newest one shown before
        _open_area(page, "Explore")
        _open_area(page, "Batch and sample")
        expect(page.get_by_role("combobox", name="Sort samples by")).to_have_value("KL mean", timeout=30_000)
        assert page.get_by_test_id("stException").count() == 0


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_sample_picker_labels_follow_the_estimator_and_eos(server):
    """In Chromium: the picker's label of the open sample reads the KL by the estimator just chosen and
    the length by the EOS box just cleared, at once. Expected values are computed here from the JSON
    lines: the top-reward sample of the newest step, k1 = mean log-ratio over its counted positions."""
    from urllib.parse import urlencode

    from playwright.sync_api import expect

    run = REPO / "rollout_samples" / "ppo_demo"
    samples = [json.loads(line) for f in sorted(run.glob("*.jsonl")) for line in f.read_text().splitlines()]
    newest = max(s["step"] for s in samples)
    top = max((s for s in samples if s["step"] == newest), key=lambda s: s["reward"])
    first_pad = top["response_tokens"].index(PAD)

    def k1(n):
        return sum(p - r for p, r in zip(top["logprobs"][:n], top["ref_logprobs"][:n])) / n

    query = urlencode({"root": str(REPO / "rollout_samples"), "run": "ppo_demo", "step": newest})
    with _page(f"{server}/?{query}", 1500, 1600) as page:
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(rf"^#1 · .* · KL k3 .* · len {first_pad + 1} · "), timeout=60_000)
        sidebar = page.get_by_test_id("stSidebar")
        sidebar.get_by_test_id("stSelectbox").filter(has_text="KL estimator").click()
        page.get_by_role("option", name="k1", exact=True).click()
        expect(picker).to_have_value(re.compile(rf"^#1 · .* · KL k1 {re.escape(f'{k1(first_pad + 1):.4g}')} · "
                                                rf"len {first_pad + 1} · "), timeout=30_000)
        sidebar.get_by_text("Tokens and text").click()  # the section of set-once options, closed at first
        eos = sidebar.get_by_role("textbox", name="EOS token")
        eos.fill("")
        eos.press("Enter")  # without an EOS the first pad is a pad: it is no longer counted
        expect(picker).to_have_value(re.compile(rf"^#1 · .* · KL k1 {re.escape(f'{k1(first_pad):.4g}')} · "
                                                rf"len {first_pad} · "), timeout=60_000)
        assert page.get_by_test_id("stException").count() == 0


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_a_link_opens_its_view_in_a_fresh_browser(server):
    """In a fresh Chromium: a link opens that run, step and sample with no click; moving the step
    changes the address."""
    from urllib.parse import parse_qs, urlencode, urlparse

    from playwright.sync_api import expect

    query = urlencode({"root": str(REPO / "rollout_samples"), "run": "ppo_demo", "step": 5,
                       "sample": "rollout_data_rank1.jsonl:18"})
    with _page(f"{server}/?{query}", 1500, 2000) as page:
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(r"rollout_data_rank1\.jsonl:18$"), timeout=60_000)
        slider = page.get_by_role("slider", name="Step")
        expect(slider).to_have_value("5", timeout=30_000)
        slider.focus()
        page.keyboard.press("ArrowRight")
        expect(slider).to_have_value("6", timeout=30_000)
        page.wait_for_function("() => new URLSearchParams(location.search).get('step') === '6'", timeout=30_000)
        assert parse_qs(urlparse(page.url).query)["run"] == ["ppo_demo"]
        # the step views (a fragment of the page) were redrawn for step 6: the picked sample is a line of step 6
        expect(picker).not_to_have_value(re.compile(r"rollout_data_rank1\.jsonl:18$"), timeout=30_000)
        name, line = re.search(r"(\S+\.jsonl):(\d+)$", picker.input_value()).groups()
        logged = (REPO / "rollout_samples" / "ppo_demo" / name).read_text().splitlines()[int(line) - 1]
        assert json.loads(logged)["step"] == 6
        assert page.get_by_test_id("stException").count() == 0


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_clicking_a_curve_point_opens_its_step(server):
    """In Chromium: clicking a point of the reward curve moves the batch to that point's step (read
    from the point plotly drew, not from the board)."""
    from urllib.parse import urlencode

    from playwright.sync_api import expect

    query = urlencode({"root": str(REPO / "rollout_samples"), "run": "ppo_demo", "step": 30})
    with _page(f"{server}/?{query}", 1500, 2000) as page:
        slider = page.get_by_role("slider", name="Step")
        expect(slider).to_have_value("30", timeout=60_000)
        _open_area(page, "Run overview")
        chart = page.get_by_test_id("stPlotlyChart").first  # the reward curves, first in the overview
        point = chart.locator("g.trace.scatter path.point").nth(4)
        expect(point).to_be_visible(timeout=30_000)
        step = point.evaluate("el => el.__data__.x")
        assert step != 30
        point.click(force=True)  # plotly's drag layer lies over the points; a click there selects the point
        # the rerun is over when the address has the new step and no element of the last run is left
        page.wait_for_function(f"""() => new URLSearchParams(location.search).get('step') === '{step}'
                               && !document.querySelector('[data-stale="true"]')""", timeout=30_000)
        expect(slider).to_have_value(str(step), timeout=30_000)
        expect(page.get_by_role("tab", name="Batch and sample")).to_have_attribute("aria-selected", "true",
                                                                                   timeout=30_000)
        assert _in_view(page, slider)
        assert page.get_by_test_id("stException").count() == 0


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_fast_step_changes_never_kill_a_session(server):
    """Four sessions each press through 60 step changes as fast as the keyboard goes; afterwards every
    one still answers: one more step change reaches its address bar and the page, with no error."""
    from urllib.parse import urlencode

    from playwright.sync_api import expect, sync_playwright

    query = urlencode({"root": str(REPO / "rollout_samples"), "run": "ppo_demo", "step": 5})
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"])
        try:
            pages = [browser.new_context(viewport={"width": 1500, "height": 2000}).new_page() for _ in range(4)]
            for page in pages:
                page.goto(f"{server}/?{query}")
            for page in pages:
                slider = page.get_by_role("slider", name="Step")
                expect(slider).to_have_value("5", timeout=90_000)
                slider.focus()
            for i in range(60):  # right, left, right…: 60 changes, ending on step 5
                for page in pages:
                    page.keyboard.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
            for page in pages:  # the burst is over when the page shows the slider's step, settled
                _wait_settled(page, "5", 150_000)
            for page in pages:
                slider = page.get_by_role("slider", name="Step")
                for attempt in range(3):
                    # a press that lands while the last rerun redraws the slider can be dropped by the browser
                    # side (the slider still shows 5); a user presses again. A dead session never reaches 6.
                    slider.focus()
                    page.keyboard.press("ArrowRight")
                    try:
                        _wait_settled(page, "6", 60_000)
                        break
                    except AssertionError:
                        if attempt == 2 or slider.input_value() != "5":
                            raise
                expect(slider).to_have_value("6", timeout=30_000)
                assert page.get_by_test_id("stException").count() == 0
                assert page.get_by_text("Connection error").count() == 0
        finally:
            browser.close()


def _wait_settled(page, step: str, timeout_ms: int) -> None:
    """Wait until the address bar has ``step`` and no element of an earlier rerun is left; the assertion
    says what the page showed instead (address, slider, stale elements, connection error)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    try:
        page.wait_for_function(f"""() => new URLSearchParams(location.search).get('step') === '{step}'
                               && !document.querySelector('[data-stale="true"]')""", timeout=timeout_ms)
    except PlaywrightTimeout:
        seen = page.evaluate("""() => ({url: location.search,
            slider: document.querySelector('input[type="range"][aria-label="Step"]')?.value,
            stale: document.querySelectorAll('[data-stale="true"]').length,
            connection: document.body.innerText.includes('Connection error')})""")
        raise AssertionError(
            f"step {step} did not settle in {timeout_ms / 1000:.0f} s; the page showed {seen}") from None


def _pick_option(page, widget, name: str, tries: int = 6, exact: bool = True) -> None:
    """Open ``widget``'s list and pick option ``name``; a list a rerun closed before it drew is opened again."""
    option = page.get_by_role("option", name=name, exact=exact)
    for _ in range(tries - 1):
        widget.click()
        try:
            option.wait_for(timeout=5_000)
        except Exception:  # playwright's TimeoutError: the list closed under a rerun
            continue
        option.click()
        return
    widget.click()
    option.click()


def _long_token_run(folder: Path, n: int = 40) -> None:
    """One sample of ``n`` byte-BPE tokens (Ġ spaces, Ċ newlines) with every per-token list."""
    tokens = ["Ġw%d" % i if i % 3 == 0 else ("Ċ" if i % 7 == 0 else "t%d" % i) for i in range(n)]
    logp = [-0.05 - (i % 5) * 0.37 for i in range(n)]
    ref = [-0.11 - (i % 4) * 0.41 for i in range(n)]
    folder.mkdir(parents=True)
    (folder / "r.jsonl").write_text(json.dumps({
        "step": 1, "reward": 1.0, "response": "".join(tokens), "response_tokens": tokens, "logprobs": logp,
        "ref_logprobs": ref, "rollout_logprobs": logp, "values": [0.3 + 0.01 * i for i in range(n)],
        "token_rewards": [-0.01] * (n - 1) + [1.0], "entropy": [0.5 + (i % 3) * 0.4 for i in range(n)]}) + "\n")


def _overlaps(boxes) -> list:
    """Pairs of boxes (x, y, width, height) that overlap."""
    return [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]]


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_token_heatmap_reads_and_whitespace_shows(server, tmp_path):
    """In Chromium, a 40-token sample with its six default heatmap rows: no two numbers drawn in the heatmap's cells
    overlap, each row's colour bar is at least 30 px tall and no two of the bars' labels overlap; in the running
    text Ġ is a space and Ċ a newline, each marked (· and ↵) with the real character kept."""
    from urllib.parse import urlencode

    from playwright.sync_api import expect

    _long_token_run(tmp_path / "long")
    with _page(f"{server}/?{urlencode({'root': str(tmp_path), 'run': 'long', 'area': 'batch'})}", 1500, 2600) as page:
        chart = page.get_by_test_id("stPlotlyChart").filter(has_text="Per-token heatmap")
        expect(chart).to_be_visible(timeout=60_000)
        chart.scroll_into_view_if_needed()
        expect(chart.locator("g.colorbar").first).to_be_visible(timeout=30_000)
        drawn = chart.evaluate("""el => {
            const box = t => { const r = t.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; };
            return {cells: Array.from(el.querySelectorAll('.heatmaplayer text')).filter(t => t.textContent).map(box),
                    bars: Array.from(el.querySelectorAll('g.colorbar')).map(g => ({
                        labels: Array.from(g.querySelectorAll('text')).filter(t => t.textContent).map(box),
                        fill: box(g.querySelector('.cbfills') || g)}))};
        }""")
        assert len(drawn["bars"]) == 6  # kl, log_ratio, token_reward, advantage, entropy, mismatch_k3
        assert _overlaps(drawn["cells"]) == []
        for bar in drawn["bars"]:
            assert bar["fill"][3] >= 30 and bar["labels"]
        assert _overlaps([label for bar in drawn["bars"] for label in bar["labels"]]) == []  # nor across bars
        text = page.locator(".rlb-token-text")
        assert "Ġ" not in text.inner_text() and "Ċ" not in text.inner_text()
        space = text.locator(".rlb-ws").first
        assert space.inner_text() == " "  # the real space is kept (copying the text gives the text)
        assert space.evaluate("el => getComputedStyle(el, '::after').content") == '"·"'
        newline = text.locator(".rlb-nl").first
        assert newline.evaluate("el => getComputedStyle(el, '::before').content") == '"↵"'
        assert page.get_by_test_id("stException").count() == 0
        page.screenshot(path=str(OUTPUT / "token_heatmap.png"), full_page=True)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_same_prompt_word_diff_is_drawn_as_text(server, tmp_path):
    """In Chromium: the same prompt in two runs, responses full of markup and Markdown: each response is
    one diff block; words only in the chosen response are struck through (del), words only in the other
    are marked (ins), exactly as written; no img, script or bold element is created, no dialog opens."""
    from playwright.sync_api import expect

    chosen = "Answer: <b>4</b> &amp; **done** <img src=x onerror=alert(1)>"
    earlier = "Answer: <b>5</b> &amp; **done**"
    other = "Answer: <script>alert(2)</script> **done**"
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "rank0.jsonl").write_text(
        json.dumps({"step": 1, "reward": 0.25, "prompt": "Q", "response": earlier}) + "\n"
        + json.dumps({"step": 2, "reward": 0.5, "prompt": "Q", "response": chosen}) + "\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "rank0.jsonl").write_text(
        json.dumps({"step": 3, "reward": 0.75, "prompt": "Q", "response": other}) + "\n")
    with _page(server, 1500, 2400) as page:
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        _load_in_page(page, tmp_path, "base")
        page.get_by_text("Same prompt across steps and runs (word diff)").click()
        expect(page.locator(".rlb-diff-block")).to_have_count(2, timeout=30_000)  # the loaded run's, drawn
        _pick_option(page, page.get_by_test_id("stMultiSelect").filter(has_text="Also in runs"), "other")
        blocks = page.locator(".rlb-diff-block")
        expect(blocks).to_have_count(3, timeout=30_000)
        expect(blocks.nth(0).locator(".rlb-diff-head")).to_contain_text("base · step 1 · rank0.jsonl:1 · reward 0.25")
        expect(blocks.nth(1).locator(".rlb-diff-head")).to_contain_text("the chosen response")
        expect(blocks.nth(2).locator(".rlb-diff-head")).to_contain_text("other · step 3 · rank0.jsonl:1 · reward 0.75")
        # by hand: earlier vs chosen replaces <b>4</b> by <b>5</b> and drops the image text
        assert blocks.nth(0).locator("ins").all_inner_texts() == ["<b>5</b>"]
        assert [t.strip() for t in blocks.nth(0).locator("del").all_inner_texts()] == [
            "<b>4</b>", "<img src=x onerror=alert(1)>"]
        assert blocks.nth(1).locator(".rlb-diff").inner_text() == chosen
        assert blocks.nth(1).locator("del, ins").count() == 0
        assert " ".join(blocks.nth(2).locator("ins").all_inner_texts()).split() == ["<script>alert(2)</script>"]
        diffs = page.locator(".rlb-diff")
        for tag in ("img", "script", "b", "strong", "em"):
            assert diffs.locator(tag).count() == 0, tag
        assert page.locator("img[src='x']").count() == 0
        decoration = blocks.nth(0).locator("del").first.evaluate("e => getComputedStyle(e).textDecorationLine")
        assert "line-through" in decoration
        time.sleep(1)  # a dialog, if any, would open right away
        assert dialogs == [] and page.get_by_test_id("stException").count() == 0
        page.screenshot(path=str(OUTPUT / "prompt_diff.png"), full_page=True)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_tag_a_sample_and_open_a_tagged_one(server, tmp_path):
    """In Chromium: type a new tag and a note on the open sample, saved as they change (the table shows
    them); then in the list
    of tagged samples click one of an earlier step: the step follows and that sample opens."""
    from playwright.sync_api import expect

    lines = [{"step": step, "reward": float(i), "prompt": f"q{step}{i}", "response": f"answer {step}{i}"}
             for step in (1, 2) for i in range(2)]
    log = tmp_path / "tagme" / "rank0.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with _page(server, 1500, 2400) as page:
        _load_in_page(page, tmp_path, "tagme")
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(r"rank0\.jsonl:4$"), timeout=30_000)  # step 2, reward 1 first
        tags = page.get_by_test_id("stMultiSelect").filter(has=page.get_by_text("Tags", exact=True))
        for _ in range(3):  # a rerun of a loaded machine can swallow what was typed: type it again
            tags.click()
            page.keyboard.type("<b>odd</b> one")
            page.keyboard.press("Enter")
            page.keyboard.press("Escape")
            try:
                expect(tags).to_contain_text("<b>odd</b> one", timeout=10_000)
                break
            except AssertionError:
                continue
        expect(tags).to_contain_text("<b>odd</b> one")
        expect(page.get_by_test_id("stDataFrame").first).to_contain_text("<b>odd</b> one", timeout=30_000)
        note = page.get_by_role("textbox", name="Note")
        for _ in range(3):  # the tag's save reruns the page: a note typed while it redraws can be swallowed
            note.fill("looks **fine**")
            note.press("Tab")  # leaving the box saves it (no Save button)
            try:
                expect(page.get_by_test_id("stDataFrame").first).to_contain_text("looks **fine**", timeout=15_000)
                break
            except AssertionError:
                continue
        expect(page.get_by_test_id("stDataFrame").first).to_contain_text("looks **fine**", timeout=30_000)
        store = next((Path(os.environ["RL_BOARD_CACHE_DIR"]) / "tags").glob("tagme-*.json"))  # the server's too
        saved = json.loads(store.read_text())["samples"]["rank0.jsonl:4"]
        assert saved["tags"] == ["<b>odd</b> one"] and saved["note"] == "looks **fine**"
        # tag a step-1 sample the same way, then open it from the list
        step = page.get_by_role("slider", name="Step")
        step.focus()
        page.keyboard.press("ArrowLeft")
        expect(picker).to_have_value(re.compile(r"rank0\.jsonl:2$"), timeout=30_000)
        _pick_option(page, tags, "good")  # saved as it is picked
        page.keyboard.press("Escape")
        expect(page.get_by_text("Saved.")).to_be_visible(timeout=30_000)
        step.focus()
        page.keyboard.press("ArrowRight")
        expect(picker).to_have_value(re.compile(r"rank0\.jsonl:4$"), timeout=30_000)
        _open_area(page, "Explore")
        page.get_by_text("Tagged samples", exact=True).click()
        expect(page.get_by_text("2 tagged samples")).to_be_visible(timeout=30_000)
        table = page.get_by_test_id("stDataFrame").last  # below Explore's own table
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)  # the row marker of the first row: step 1
        expect(page.get_by_role("tab", name="Batch and sample")).to_have_attribute("aria-selected", "true",
                                                                                   timeout=30_000)
        expect(picker).to_have_value(re.compile(r"rank0\.jsonl:2$"), timeout=30_000)
        assert page.get_by_test_id("stException").count() == 0
        assert page.locator("b", has_text="odd").count() == 0  # the tag is text, never bold


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_turn_view_shows_a_tool_result_that_looks_like_html_as_text(server, tmp_path):
    """In Chromium: an agent sample's turns are drawn, and a tool result that looks like HTML reads as
    written: no img, script or b element is created and no dialog opens."""
    from agent_writers import v1_chain, v1_episode, v1_trace, write_prime_rl
    from playwright.sync_api import expect

    hostile = "<img src=x onerror=alert(1)></code><script>alert(2)</script><b>bold</b>"
    nodes = v1_chain([({"role": "user", "content": "fetch it"}, False),
                      ({"role": "assistant", "tool_calls": [{"id": "c1", "name": "fetch", "arguments": "{}"}]}, True),
                      ({"role": "tool", "tool_call_id": "c1", "content": hostile}, False),
                      ({"role": "assistant", "content": "done"}, True)])
    write_prime_rl(tmp_path / "agent", 1, "train", "all",
                   [v1_episode("e", 1, [v1_trace(nodes, {"ok": {"score": 1.0, "weight": 1.0}}, {})])])
    with _page(server, 1400, 2400) as page:
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        _load_in_page(page, tmp_path, "agent")
        result = page.locator(".st-key-turn-3")
        expect(result).to_be_visible(timeout=60_000)
        expect(result).to_contain_text(hostile, timeout=60_000)  # code blocks draw once their highlighter loads
        expect(page.locator(".st-key-turn-4")).to_contain_text("done", timeout=60_000)
        assert result.locator("img").count() == 0 and result.locator("script").count() == 0
        assert result.locator("b").count() == 0 and page.locator("img[src='x']").count() == 0
        time.sleep(1)  # a dialog, if any, would open right away
        assert dialogs == []
        page.screenshot(path=str(OUTPUT / "turn_view.png"), full_page=True)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_token_export_shows_decoded_tokens_with_untrained_positions_dimmed(server):
    """In Chromium: a prime-rl token export opened by a link draws its tokens decoded with the tokenizer
    beside it, the untrained positions (prompt, tool result) faint and uncoloured, the trained ones coloured."""
    from urllib.parse import urlencode

    from playwright.sync_api import expect
    from tokenizers import Tokenizer

    demo = REPO / "rollout_samples" / "prime_rl_tokens_demo"
    name = "token_exports/step_10/rank_0.jsonl"
    line = json.loads((demo / name).read_text().splitlines()[2])  # the third sequence calls a tool
    tok = Tokenizer.from_file(str(demo / "tokenizer.json"))
    untrained = line["loss_mask"].count(False)
    query = urlencode({"root": str(REPO / "rollout_samples"), "run": "prime_rl_tokens_demo", "step": 10,
                       "sample": f"{name}:3"})
    with _page(f"{server}/?{query}", 1500, 2400) as page:
        spans = page.locator(".rlb-token-text .rlb-tok")
        expect(spans).to_have_count(len(line["token_ids"]), timeout=60_000)
        faint = page.locator(".rlb-token-text .rlb-untrained")
        expect(faint).to_have_count(untrained)
        assert faint.first.evaluate("e => getComputedStyle(e).opacity") == "0.35"
        assert faint.first.evaluate("e => getComputedStyle(e).backgroundColor") == "rgba(0, 0, 0, 0)"
        first_trained = line["loss_mask"].index(True)
        trained = spans.nth(first_trained)
        assert trained.evaluate("e => getComputedStyle(e).opacity") == "1"
        assert trained.evaluate("e => getComputedStyle(e).backgroundColor") != "rgba(0, 0, 0, 0)"
        texts = spans.evaluate_all("els => els.map(e => e.textContent)")
        want = [tok.decode([i], skip_special_tokens=False) for i in line["token_ids"]]
        assert texts == [t.replace("▁", " ").replace("Ġ", " ").replace("Ċ", "\n") for t in want]
        assert page.get_by_test_id("stException").count() == 0


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_turn_view_colours_the_trained_turns_tokens_as_text(server):
    """In Chromium: an agent sample of the prime-rl demo opened by a link draws each trained turn's tokens
    decoded with the tokenizer beside it, its template scaffold faint and uncoloured, its sampled tokens
    coloured; a tool call's '<tool_call>' markup reads as text (no element is made); an untrained turn
    has no coloured tokens."""
    from urllib.parse import urlencode

    from playwright.sync_api import expect
    from tokenizers import Tokenizer

    demo = REPO / "rollout_samples" / "prime_rl_agent_demo"
    name = "rollouts/step_8/train/all/traces.jsonl"
    lines = (demo / name).read_text().splitlines()
    number, nodes = next((n, json.loads(line)["traces"][0]["nodes"]) for n, line in enumerate(lines, start=1)
                         if any(node["message"].get("tool_calls") for node in json.loads(line)["traces"][0]["nodes"]))
    turn = next(i for i, node in enumerate(nodes) if node["sampled"] and node["message"].get("tool_calls"))
    node = nodes[turn]
    tok = Tokenizer.from_file(str(demo / "tokenizer.json"))
    want = [tok.decode([i], skip_special_tokens=False).replace("Ġ", " ").replace("Ċ", "\n")
            for i in node["token_ids"]]
    assert "<tool_call>" in "".join(want)
    query = urlencode({"root": str(REPO / "rollout_samples"), "run": "prime_rl_agent_demo", "step": 8,
                       "sample": f"{name}:{number}"})
    with _page(f"{server}/?{query}", 1500, 3000) as page:
        box = page.locator(f".st-key-turn-{turn + 1}")
        spans = box.locator(".rlb-token-text .rlb-tok")
        expect(spans).to_have_count(len(node["token_ids"]), timeout=60_000)
        assert spans.evaluate_all("els => els.map(e => e.textContent)") == want
        faint = box.locator(".rlb-token-text .rlb-untrained")
        expect(faint).to_have_count(node["mask"].count(False))
        assert faint.first.evaluate("e => getComputedStyle(e).opacity") == "0.35"
        assert faint.first.evaluate("e => getComputedStyle(e).backgroundColor") == "rgba(0, 0, 0, 0)"
        trained = spans.nth(node["mask"].index(True))
        assert trained.evaluate("e => getComputedStyle(e).backgroundColor") != "rgba(0, 0, 0, 0)"
        assert page.locator("tool_call").count() == 0 and box.locator("tool_call").count() == 0
        tool = next(i for i, n in enumerate(nodes) if n["message"]["role"] == "tool")
        expect(page.locator(f".st-key-turn-{tool + 1}")).to_be_visible()
        assert page.locator(f".st-key-turn-{tool + 1} .rlb-token-text").count() == 0
        assert page.get_by_test_id("stException").count() == 0
        box.scroll_into_view_if_needed()
        page.screenshot(path=str(OUTPUT / "turn_tokens.png"))


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_diff_area_lists_regressions_and_a_click_opens_both_sides(server, tmp_path):
    """In Chromium: the Diff area with board lines as A and shuffled verl dumps as B lists the three
    prompts whose rewards B changed as regressions; a click on the second row (What is 7 * 6?, delta
    -0.25 by hand) opens its samples of both sides, four each, with B's changed word marked; the
    address keeps run B."""
    from urllib.parse import parse_qs, urlparse

    from playwright.sync_api import expect
    from test_diff import _write_pair

    _write_pair(tmp_path)
    with _page(server, 1500, 2400) as page:
        _load_in_page(page, tmp_path / "runs", "board", area="Diff")
        _pick_option(page, page.get_by_test_id("stSelectbox").filter(has_text="Run B"), "verl")
        expect(page.get_by_text("3 worse in B")).to_be_visible(timeout=30_000)
        table = page.get_by_test_id("stDataFrame").first
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + 35 + 35 * 1.5)  # mid second row, a cell
        opened = page.get_by_role("combobox", name="Prompt opened")
        expect(opened).to_have_value(re.compile(r"What is 7 \* 6\?$"), timeout=30_000)
        blocks = page.locator(".rlb-diff-block")
        expect(blocks).to_have_count(8, timeout=30_000)
        assert "changed" in " ".join(blocks.locator("ins").all_inner_texts())
        assert page.get_by_test_id("stException").count() == 0
        query = parse_qs(urlparse(page.url).query)
        assert query["area"] == ["diff"] and query["diff_run"] == ["verl"]
        page.screenshot(path=str(OUTPUT / "diff_area.png"), full_page=True)


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_a_sort_survives_a_search_and_the_address_names_what_is_shown(server):
    """In Chromium, on ppo_demo: sort by KL mean, search in Explore, open the first match, go to Explore
    and back: the sort is still KL mean, and the address names the step the slider shows and the sample
    the picker shows (it held step=25 for a step-30 sample)."""
    from urllib.parse import parse_qs, urlparse

    from playwright.sync_api import expect

    def address() -> dict:
        return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}

    def names_what_is_shown() -> None:
        slider = page.get_by_role("slider", name="Step")
        picker = page.get_by_role("combobox", name="Sample (in table order)")
        expect(picker).to_have_value(re.compile(r" · rollout_data_rank\d\.jsonl:\d+$"), timeout=30_000)
        shown = re.search(r"(rollout_data_rank\d\.jsonl:\d+)$", picker.input_value()).group(1)
        page.wait_for_function("s => new URLSearchParams(location.search).get('sample') === s", arg=shown,
                               timeout=30_000)
        expect(slider).to_have_value(address()["step"])

    with _page(server, 1500, 1000) as page:
        _open_bundled_and_sort(page, "ppo_demo", "KL mean")
        expect(page).to_have_url(re.compile(r"sort=KL"), timeout=30_000)
        names_what_is_shown()
        _open_area(page, "Explore")
        regex = page.get_by_label("Regular expression (RE2 syntax; (?i) for case-insensitive)")
        regex.fill("so the answer is correct")
        regex.press("Enter")
        expect(page.get_by_text(re.compile(r"of 480 samples match"))).to_be_visible(timeout=30_000)
        table = page.get_by_test_id("stDataFrame").first
        expect(table).to_be_visible(timeout=30_000)
        page.wait_for_timeout(1000)  # the matches' table is drawn again once the search settles
        _settled(page)
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + 12, box["y"] + 35 + 35 * 4.5)  # the row marker of the fifth match
        expect(page.get_by_role("tab", name="Batch and sample")).to_have_attribute("aria-selected", "true",
                                                                                    timeout=30_000)
        sort = page.get_by_role("combobox", name="Sort samples by")
        expect(sort).to_have_value("KL mean", timeout=30_000)
        names_what_is_shown()
        _open_area(page, "Explore")
        _open_area(page, "Batch and sample")
        expect(sort).to_have_value("KL mean", timeout=30_000)
        names_what_is_shown()
        assert address()["sort"] == "KL mean"
        assert page.get_by_test_id("stException").count() == 0


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_the_address_names_what_is_shown_after_any_sequence(server):
    """In Chromium, on ppo_demo: sort by KL mean, search in Explore, open a match of step 25, then areas
    switched back and forth (at once, not waiting for the page), the step moved by the keyboard (arrows,
    End, Home) and by dragging the slider, the sort changed, a step picked from the reward curve, back
    and forward: after each, once the page settles, the address's step, sample and sort are the slider's,
    the picker's and the sort box's (the address once kept step=25 while step 30 was shown)."""
    from playwright.sync_api import expect

    def check(what: str) -> None:
        """Wait until the page settles with the address naming what it shows, and stays so."""
        for _ in range(2):  # the second time: nothing written later undid it
            try:
                page.wait_for_function(f"""() => {{ const s = {shown_js}; return s.stale === 0 && s.picker !== null
                    && s.picker.endsWith(' · ' + s.sample) && s.slider === s.step && s.sortBox === s.sort
                    && s.area === 'batch'; }}""", timeout=20_000)
            except Exception:
                raise AssertionError(f"after {what}: the page showed {page.evaluate(shown_js)}") from None
            page.wait_for_timeout(1500)
        shown = page.evaluate(shown_js)
        steps.append((shown["step"], shown["sort"]))

    def drag_slider(dx: float) -> None:
        thumb = page.get_by_role("slider", name="Step").bounding_box()
        y = thumb["y"] + thumb["height"] / 2
        page.mouse.move(thumb["x"] + thumb["width"] / 2, y)
        page.mouse.down()
        page.mouse.move(thumb["x"] + thumb["width"] / 2 + dx, y, steps=10)
        page.mouse.up()

    #: what the page shows (slider, picker, sort box, stale elements) and what its address names
    shown_js = """(() => { const p = new URLSearchParams(location.search);
        const value = label => document.querySelector(`input[aria-label="${label}"]`)?.value ?? null;
        return {slider: value("Step"), picker: value("Sample (in table order)"), sortBox: value("Sort samples by"),
                stale: document.querySelectorAll('[data-stale="true"]').length, area: p.get("area"),
                step: p.get("step"), sample: p.get("sample"), sort: p.get("sort")}; })()"""
    steps: list[tuple[str, str]] = []  # (step, sort) shown after each action
    with _page(server, 1500, 1000) as page:
        _open_bundled_and_sort(page, "ppo_demo", "KL mean")
        check("sorting by KL mean")
        _open_area(page, "Explore")
        regex = page.get_by_label("Regular expression (RE2 syntax; (?i) for case-insensitive)")
        regex.fill("haiku about the number 15")  # the prompts of a few earlier steps
        _pick_option(page, page.get_by_role("combobox", name="in", exact=True), "prompt")
        expect(page.get_by_text(re.compile(r"^\d+ of 480 samples match$"))).to_be_visible(timeout=30_000)
        table = page.get_by_test_id("stDataFrame").first
        page.wait_for_timeout(1000)  # the matches' table is drawn again once the search settles
        _settled(page)
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        page.mouse.click(box["x"] + 12, box["y"] + 35 + 17)  # the row marker of the first match
        expect(page.get_by_role("tab", name="Batch and sample")).to_have_attribute("aria-selected", "true",
                                                                                    timeout=30_000)
        check("opening a match")
        slider = page.get_by_role("slider", name="Step")
        for area in ("Explore", "Run overview", "Explore"):
            _open_area(page, area)
            _open_area(page, "Batch and sample")  # at once: the other area's run may not be over
            slider.focus()
            page.keyboard.press("ArrowRight")
            check(f"{area}, back and ArrowRight")
        for key in ("End", "ArrowLeft", "Home"):
            slider.focus()
            page.keyboard.press(key)
            check(f"the {key} key")
        drag_slider(400)
        check("dragging the slider right")
        _pick_option(page, page.get_by_test_id("stSelectbox").filter(has_text="Sort samples by"), "response length")
        check("sorting by response length")
        _open_area(page, "Run overview")
        point = page.get_by_test_id("stPlotlyChart").first.locator("g.trace.scatter path.point").nth(4)
        expect(point).to_be_visible(timeout=30_000)
        point.click(force=True)  # plotly's drag layer lies over the points; a click there selects the point
        expect(page.get_by_role("tab", name="Batch and sample")).to_have_attribute("aria-selected", "true",
                                                                                    timeout=30_000)
        check("a click on the reward curve")
        back = len(steps)
        page.go_back()  # to the overview the curve was clicked in
        page.wait_for_function(f"() => {{ const s = {shown_js}; return s.area === 'overview' && s.stale === 0; }}",
                               timeout=20_000)
        expect(page.get_by_role("tab", name="Run overview")).to_have_attribute("aria-selected", "true",
                                                                               timeout=30_000)
        page.go_back()
        check("back twice")
        page.go_forward()
        page.go_forward()
        check("forward twice")
        # the match's step, then a step up after each return, End, a step down, Home, all sorted by KL mean
        assert steps[1:8] == [(s, "KL mean") for s in ("25", "26", "27", "28", "30", "29", "1")], steps
        assert steps[8][0] != "1" and steps[8][1] == "KL mean", steps  # dragged up from step 1
        assert steps[9][1] == "response length" and steps[10] == ("5", "response length"), steps  # the 5th point
        assert steps[back:] == [steps[9], steps[10]], steps  # back shows the batch as it was, forward the click's
        assert page.get_by_test_id("stException").count() == 0
