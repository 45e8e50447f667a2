"""Docs that can't drift: the CLI reference is what docs/gen_cli.py makes from the parser, every reader
has a section on the formats pages, every shell block marked runnable runs against the bundled runs,
the site builds with ``mkdocs build --strict``, and the README stays a front page whose links resolve."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
FORMATS = DOCS / "formats"
RUNNABLE = "<!-- runnable -->"
READER_LINE = re.compile(r"^Reader: `([^`]+)`$", re.M)


def _gen_cli():
    """docs/gen_cli.py, imported from its file (docs/ is no package)."""
    spec = importlib.util.spec_from_file_location("gen_cli", DOCS / "gen_cli.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of every ```bash or ```sh block that directly follows a ``<!-- runnable -->``
    line (blank lines between them allowed); other blocks are examples to read, not to run."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != RUNNABLE:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or lines[j].strip() not in ("```bash", "```sh"):
            raise ValueError(f"line {i + 1}: {RUNNABLE} is not followed by a ```bash block")
        end = j + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        blocks.append((j + 1, "\n".join(lines[j + 1:end]) + "\n"))
        i = end + 1
    return blocks


def _all_runnable() -> list[tuple[str, str]]:
    """(page:line, code) of every runnable block of the docs and the README."""
    pages = sorted(DOCS.rglob("*.md")) + [REPO / "README.md"]
    return [(f"{page.relative_to(REPO)}:{line}", code)
            for page in pages for line, code in runnable_blocks(page.read_text(encoding="utf-8"))]


def run_block(code: str, folder: Path) -> subprocess.CompletedProcess:
    """Run ``code`` with bash (-e, pipefail) in ``folder`` holding a copy of rollout_samples/, with a
    cache and tags folder of its own and ``rl-board`` on the PATH (this checkout's, by this Python)."""
    if not (folder / "rollout_samples").exists():
        shutil.copytree(REPO / "rollout_samples", folder / "rollout_samples")
    bin_dir = folder / ".bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "rl-board"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rl_board "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("RL_BOARD_TAGS_DIR", "RL_BOARD_ROOTS")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO),
               RL_BOARD_CACHE_DIR=str(folder / ".cache"))
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def undocumented_readers(names, formats_dir: Path) -> tuple[list[str], list[str]]:
    """(reader names without a ``Reader: `NAME` `` section on a formats page, sections naming no reader)."""
    documented = set()
    for page in formats_dir.glob("*.md"):
        documented.update(READER_LINE.findall(page.read_text(encoding="utf-8")))
    return sorted(set(names) - documented), sorted(documented - set(names))


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site`` (skips the test where mkdocs, an extra of
    requirements-docs.txt, is not installed)."""
    pytest.importorskip("mkdocs")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
                           "-d", str(site)], capture_output=True, text=True, env=env, timeout=300)


def test_cli_reference_is_what_the_parser_makes():
    """docs/cli.md is exactly what docs/gen_cli.py makes from rl_board/cli/parser.py (run it after a change)."""
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == _gen_cli().render()


def test_cli_reference_check_fails_on_drift(tmp_path):
    """An option added to a command changes the page (its bullet appears), and --check on a page that
    lacks a line exits 1 while the checked-in page passes."""
    from rl_board.cli.parser import _parser

    gen = _gen_cli()
    parser = _parser()
    summary = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    summary.choices["summary"].add_argument("--brand-new", help="an option the docs don't have yet")
    drifted = gen.render(parser)
    assert "- `--brand-new BRAND_NEW`: an option the docs don't have yet" in drifted
    assert drifted != (DOCS / "cli.md").read_text(encoding="utf-8")
    stale = tmp_path / "cli.md"
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    stale.write_text(page.replace("- `--json`: print one JSON object\n", "", 1))
    assert gen.main(["--check", "--page", str(stale)]) == 1
    assert gen.main(["--check"]) == 0


def test_every_reader_has_a_section_on_the_formats_pages():
    """Each reader of rl_board.readers.READERS is named by a 'Reader: `NAME`' line on a docs/formats page,
    and every such line names a reader that exists."""
    from rl_board.readers import READERS

    assert undocumented_readers([r.NAME for r in READERS], FORMATS) == ([], [])


def test_reader_check_fails_on_drift(tmp_path):
    """A reader added without a page, and a page left for a reader removed, are both reported."""
    from rl_board.readers import READERS

    names = [r.NAME for r in READERS]
    assert undocumented_readers(names + ["brand-new"], FORMATS) == (["brand-new"], [])
    for page in FORMATS.glob("*.md"):
        shutil.copy(page, tmp_path / page.name)
    (tmp_path / "gone.md").write_text("# Gone\n\nReader: `gone`\n")
    assert undocumented_readers(names, tmp_path) == ([], ["gone"])


def test_runnable_blocks_are_found_only_where_marked():
    """Only a bash block right after the marker is runnable; a marker without a block is an error."""
    text = "```bash\nnot this\n```\n\n<!-- runnable -->\n\n```bash\nrl-board cache list\n```\n```bash\nnor this\n```\n"
    assert runnable_blocks(text) == [(7, "rl-board cache list\n")]
    with pytest.raises(ValueError):
        runnable_blocks("<!-- runnable -->\nsome text\n")


def test_docs_have_runnable_blocks():
    """The getting-started walk and the formats pages hold runnable blocks (so the next test checks them)."""
    where = {name.split(":")[0] for name, _ in _all_runnable()}
    assert "docs/getting-started.md" in where and any(w.startswith("docs/formats/") for w in where)


@pytest.mark.slow
@pytest.mark.parametrize("where, code", _all_runnable(), ids=[name for name, _ in _all_runnable()])
def test_runnable_block_runs(where, code, tmp_path):
    """Every block marked runnable exits 0 against a copy of the bundled runs."""
    done = run_block(code, tmp_path)
    assert done.returncode == 0, f"{where}\n{code}\nstdout:\n{done.stdout[-2000:]}\nstderr:\n{done.stderr[-2000:]}"


@pytest.mark.slow
def test_a_broken_runnable_block_fails(tmp_path):
    """The runner reports a block that no longer works: an option the command lost exits non-zero,
    as does a failing command before a working one."""
    assert run_block("rl-board summary rollout_samples/ppo_demo --no-such-option\n", tmp_path).returncode != 0
    assert run_block("rl-board detect rollout_samples/no_such_run\nrl-board cache list\n", tmp_path).returncode != 0
    assert run_block("rl-board detect rollout_samples/ppo_demo\n", tmp_path).returncode == 0


@pytest.mark.slow
def test_site_builds_strict(tmp_path):
    """mkdocs build --strict succeeds: every page is in the nav, no link or anchor is broken."""
    done = mkdocs_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_site_build_fails_on_a_broken_anchor(tmp_path):
    """A link to a heading that does not exist fails the strict build, naming the link."""
    shutil.copytree(DOCS, tmp_path / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "numbers.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [gone](findings.md#no-such-heading).\n")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-heading" in done.stdout + done.stderr


def test_readme_is_a_front_page_whose_links_resolve():
    """README.md is at most 150 lines, and every relative link in it names a file of the repository
    (an anchor into a docs page is checked by the strict build of that page)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert local and all((REPO / link).exists() for link in local), [l for l in local if not (REPO / l).exists()]


def test_getting_started_points_at_a_prompt_that_recurs():
    """The walk's prompt-over-training step names a sample whose prompt ppo_demo asks at the five steps
    it says, counted from the JSON lines."""
    import json

    text = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    name, line = re.search(r"open `(rollout_data_rank\d\.jsonl):(\d+)`", text).groups()
    run = REPO / "rollout_samples" / "ppo_demo"
    prompt = json.loads((run / name).read_text().splitlines()[int(line) - 1])["prompt"]
    steps = sorted(json.loads(raw)["step"] for path in run.glob("*.jsonl") for raw in path.read_text().splitlines()
                   if json.loads(raw)["prompt"] == prompt)
    said = re.search(r"asked at steps ([\d, and]+)\)", text).group(1).replace(" and ", ", ")
    assert steps == [int(s) for s in said.split(", ")] and len(steps) >= 3


def test_the_docs_home_links_every_format_page():
    """docs/index.md, the docs' home, names every format: it links each format page."""
    home = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    pages = {p.name for p in FORMATS.glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"\]\(formats/([^)#]+\.md)", home))
    assert pages <= linked, sorted(pages - linked)


def test_readme_names_the_port_setting():
    """The README says how to serve the page on another port (start.sh reads RL_BOARD_PORT)."""
    assert "RL_BOARD_PORT" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "RL_BOARD_PORT" in (REPO / "start.sh").read_text(encoding="utf-8")


def test_readme_links_every_format_page():
    """The README's table of trainers links each format page of the docs."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    pages = {p.name for p in FORMATS.glob("*.md")} - {"index.md"}
    linked = set(re.findall(r"\]\(docs/formats/([^)#]+\.md)", readme))
    assert pages <= linked, sorted(pages - linked)


def test_the_page_doc_names_every_area_of_the_page():
    """docs/page.md counts the page's areas (``views.main.AREAS``) in words, names each in its opening list, and
    gives each a row of its table of areas, in the page's order."""
    from rl_board.views.main import AREAS

    text = (REPO / "docs" / "page.md").read_text()
    words = {5: "five", 6: "six", 7: "seven", 8: "eight"}
    assert f"shown in {words[len(AREAS)]} areas, a tab each" in text
    rows = [line.split("**")[1] for line in text.splitlines() if line.startswith("| **")]
    assert rows[:len(AREAS)] == list(AREAS)
    opening = text.split("## Area by area")[0]
    assert all(f"**{area}**" in opening for area in AREAS)
