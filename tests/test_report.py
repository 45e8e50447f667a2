"""``rl-board report``: one self-contained HTML file of a run, read as HTML here and opened in a real
Chromium (with every network request refused) in the tests marked ``browser``."""

from __future__ import annotations

import html
import json
import random
import re
import time
from pathlib import Path

import pytest
from conftest import REPO

from rl_board.cli import main

CHROMIUM = "/usr/bin/chromium"
PPO = REPO / "rollout_samples" / "ppo_demo"
HOSTILE = ["<img", "src=x", "onerror=window.pwned=1>", "</div><script>window.pwned=3</script>", "&amp;"]
HOSTILE_FOLDER = "<img src=x onerror=window.pwned=4>"  # the run's folder name is shown too
HOSTILE_PROMPT = "<script>window.pwned=2</script> question"


def _findings(run: Path, capsys) -> list[dict]:
    capsys.readouterr()  # what was printed before
    assert main(["findings", str(run), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["findings"]


def _report(run: Path, out: Path, *extra: str) -> str:
    assert main(["report", str(run), "-o", str(out), *extra]) == 0
    return out.read_text(encoding="utf-8")


def _write_hostile_run(folder: Path) -> None:
    """A run whose late, high-reward responses spread markup that would run a script if it were HTML: the
    reward-hacking check raises a finding whose phrases and samples hold it; every prompt holds a script."""
    rng = random.Random(0)
    vocab = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
    lines = []
    for step in range(1, 9):
        for i in range(16):
            late = step > 4 and i % 2 == 0
            words = [rng.choice(vocab) for _ in range(6)] + (HOSTILE if late else [rng.choice(vocab) for _ in range(5)])
            logprobs = [-0.5 - 0.1 * (k % 3) for k in range(len(words))]
            lines.append({"step": step, "reward": (2.0 if late else 0.0) + rng.random() * 0.1,
                          "prompt": f"{HOSTILE_PROMPT} {i}", "response": " ".join(words), "response_tokens": words,
                          "logprobs": logprobs, "ref_logprobs": [v - 0.2 for v in logprobs]})
    folder.mkdir(parents=True)
    (folder / "rank0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.slow
def test_report_has_every_finding_and_asks_nothing_of_the_network(tmp_path, capsys):
    """Each finding of ``findings --json`` has its section, in the same order; no element loads anything from
    elsewhere (no src, href or url() pointing at a scheme), and plotly's script is inlined once."""
    page = _report(PPO, tmp_path / "r.html")
    kinds = [f["kind"] for f in _findings(PPO, capsys)]
    assert kinds and re.findall(r'<section class="rlb-finding [^"]*" data-kind="([^"]*)"', page) == kinds
    markup = re.sub(r"<script\b.*?</script>", "", page, flags=re.S)  # plotly's code names URLs it never loads
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", markup, re.I)
    assert not re.search(r"<link\b", markup, re.I) and "@import" not in markup and "<script src" not in page
    assert page.count("plotly.js v") == 1  # plotly's banner: the library once, not once a figure


def test_samples_are_bounded_and_the_making_is_told(tmp_path):
    """``--samples 1`` shows one sample under each finding that has samples; the end says the command,
    the settings and the version."""
    page = _report(PPO, tmp_path / "r.html", "--samples", "1", "--steps", "5:10")
    sections = page.split('<section class="rlb-finding ')[1:]
    assert sections and all(s.count('class="rlb-sample"') <= 1 for s in sections)
    assert any(s.count('class="rlb-sample"') == 1 for s in sections)
    assert "--samples 1 --steps 5:10" in page and "rl-board version" in page
    assert "5 → 10 (6 steps" in page  # the recap covers steps 5 to 10 (ppo_demo has every step)


@pytest.mark.slow
def test_report_names_the_run_by_its_folder_and_its_path_only_when_asked(tmp_path, monkeypatch):
    """Without a flag the report holds no absolute local path (title, recap, the command at its end: the run
    and -o shortened to .../NAME); with --full-path its title and recap name the run's absolute path."""
    import shutil

    run = tmp_path / "deep" / "exp7"
    shutil.copytree(PPO, run)
    page = _report(run, tmp_path / "r.html", "--samples", "0")
    assert str(tmp_path) not in page
    assert "<h1>rl-board report: exp7</h1>" in page and "rl-board report .../exp7 -o .../r.html --samples 0" in page
    full = _report(run, tmp_path / "f.html", "--samples", "0", "--full-path")
    assert f"<h1>rl-board report: {run}</h1>" in full and f"<td>{run}</td>" in full
    monkeypatch.chdir(run)  # `report .`: the file is named after the folder, not "."
    assert main(["report", ".", "--samples", "0"]) == 0
    assert (run / "exp7.report.html").is_file() and "<h1>rl-board report: exp7</h1>" in (run / "exp7.report.html").read_text()


def test_a_report_that_fails_writes_no_file(tmp_path, monkeypatch, capsys):
    """A run of which no line loads is exit 1 with the reason, and neither -o's file nor the default one (nor
    a partial one) is left behind."""
    run = tmp_path / "broken"
    run.mkdir()
    (run / "rank0.jsonl").write_text("not json\n{also not\n")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["report", str(run), "-o", str(tmp_path / "out.html")]) == 1
    assert main(["report", str(run)]) == 1
    assert "no report was written" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]


def test_report_escapes_the_run_text(tmp_path):
    """The hostile run's markup is in the file only escaped: no tag of it, and no handler, reaches the HTML."""
    run = tmp_path / HOSTILE_FOLDER
    _write_hostile_run(run)
    page = _report(run, tmp_path / "r.html")
    assert "pwned" in page  # its text is there…
    assert "<script>window.pwned" not in page and "<img src=x" not in page  # …never as markup
    assert not re.search(r"<[a-z]+[^>]*\bonerror=window", page)


def test_long_texts_are_cut_with_their_length_said(tmp_path):
    """A run of 46 KB responses without per-token numbers (and one 12 KB prompt): each sample's response and
    prompt in the report is the text's first 2,000 characters at most, and the note beside it gives the
    text's full length, counted here from the lines written."""
    rng = random.Random(0)
    vocab = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"]
    lines = []
    for step in range(1, 9):
        for i in range(16):
            late = step > 4 and i % 2 == 0  # late high-reward responses spread one long phrase
            words = [rng.choice(vocab) for _ in range(6)] + (["as", "you", "can", "clearly", "see"] * 2000 if late
                                                             else [rng.choice(vocab) for _ in range(5)])
            lines.append({"step": step, "reward": (2.0 if late else 0.0) + rng.random() * 0.1,
                          "prompt": f"question {i} " + "why " * (3000 if i == 0 else 1), "response": " ".join(words)})
    run = tmp_path / "long"
    run.mkdir()
    (run / "rank0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    page = _report(run, tmp_path / "r.html")
    blocks = page.split('<div class="rlb-sample">')[1:]
    cut = 0
    for block in blocks:
        line = int(re.search(r"rank0\.jsonl:(\d+)", block)[1])
        written = lines[line - 1]
        text = re.search(r'<div class="rlb-finding-text"[^>]*>(.*?)</div>', block, re.S)[1]
        shown = html.unescape(re.sub(r"</?mark>", "", text))
        assert len(shown) <= 2_000 and written["response"].startswith(shown)
        said = re.search(r"The first ([\d,]+) of the response's ([\d,]+) characters", block)
        if len(written["response"]) > 2_000:
            cut += 1
            assert said and int(said[1].replace(",", "")) == len(shown)
            assert int(said[2].replace(",", "")) == len(written["response"])
        else:
            assert said is None and shown == written["response"]
        prompt = re.search(r"The first 2,000 of the prompt's ([\d,]+) characters", block)
        assert (prompt is not None) == (len(written["prompt"]) > 2_000)
        if prompt:
            assert int(prompt[1].replace(",", "")) == len(written["prompt"])
    assert cut >= 3  # the phrase finding's samples are the long ones
    markup = re.sub(r"<script\b.*?</script>", "", page, flags=re.S)  # plotly's inline 4.6 MB aside
    assert len(markup) < 100_000  # the 8 samples shown hold 46 KB responses each


def _open_offline(path: Path):
    """Open ``path`` in Debian's Chromium with every request that is not file: or data: refused; yields
    (page, attempted URLs, dialog messages)."""
    from playwright.sync_api import sync_playwright

    attempted, dialogs = [], []

    def refuse(route):
        url = route.request.url
        if url.startswith(("file:", "data:", "about:")):
            route.continue_()
        else:
            attempted.append(url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.route("**/*", refuse)
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            yield page, attempted, dialogs
        finally:
            browser.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_report_in_chromium_offline_shows_every_finding(tmp_path, capsys):
    """In Chromium with the network refused: no request is attempted, the curves are drawn by the inlined
    plotly, and every finding of ``findings --json`` is on the page with its samples' coloured tokens."""
    from playwright.sync_api import expect

    findings = _findings(PPO, capsys)
    report = tmp_path / "ppo.html"
    _report(PPO, report)
    for page, attempted, _ in _open_offline(report):
        expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=30_000)
        for finding in findings:
            section = page.locator(f'section[data-kind="{finding["kind"]}"]')
            expect(section).to_be_visible()
            expect(section.locator("h3")).to_have_text(finding["kind"])
            for address in finding["samples"][:3]:
                expect(section.get_by_text(address)).to_be_visible()
        assert page.locator(".rlb-finding .rlb-tok").count() > 0  # ppo_demo logs per-token numbers
        time.sleep(0.5)
        assert attempted == []


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (./test.sh installs it)")
def test_hostile_run_report_runs_no_script_in_chromium(tmp_path):
    """In Chromium: the hostile run's report sets no global, opens no dialog, creates no img, and shows its
    markup as the characters the run logged."""
    run = tmp_path / HOSTILE_FOLDER
    _write_hostile_run(run)
    report = tmp_path / "hostile.html"
    _report(run, report)
    for page, attempted, dialogs in _open_offline(report):
        section = page.locator('section[data-kind="reward_with_spreading_phrases"]')
        section.wait_for(timeout=30_000)
        time.sleep(1)  # a handler, if any ran, would have run by now
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert dialogs == [] and attempted == []
        assert page.locator("img").count() == 0
        text = section.inner_text()
        assert "</div><script>window.pwned=3</script>" in text and HOSTILE_PROMPT in text
        assert HOSTILE_FOLDER in page.locator("h1").inner_text()


@pytest.mark.slow
def test_page_button_downloads_the_same_report(monkeypatch, capsys):
    """The page's download button, for the run on screen, builds the report with every finding of
    ``findings --json``, the run's folder name (not its path) in its title, and the page named as its maker."""
    import streamlit as st
    from page_steps import load_run
    from streamlit.runtime.media_file_manager import MediaFileManager

    from rl_board.views import keys

    built = []
    register = MediaFileManager.add_deferred

    def keep(self, data_callable, *args, **kwargs):  # the button's callable, as Streamlit registers it
        built.append(data_callable)
        return register(self, data_callable, *args, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = load_run(REPO / "rollout_samples", "ppo_demo", keys.OVERVIEW)
    assert not at.exception
    assert [b.proto.label for b in at.get("download_button")] == ["Download a report (HTML)"]
    page = built[-1]().decode("utf-8")
    kinds = [f["kind"] for f in _findings(PPO, capsys)]
    assert re.findall(r'<section class="rlb-finding [^"]*" data-kind="([^"]*)"', page) == kinds
    assert "<h1>rl-board report: ppo_demo</h1>" in page and "report button" in page
    assert str(PPO) not in page
