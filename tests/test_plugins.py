"""A third party's reader registers through the entry point group ``rl_board.readers``, without a fork:
tests/data/tsv_reader_plugin is such a package (its own pyproject.toml), put on the path of a fresh
process with the dist-info folder pip writes for it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

PLUGIN = REPO / "tests" / "data" / "tsv_reader_plugin"


def _python(code: str, *args: str, path: Path = PLUGIN) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(REPO)])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, env=env)


def test_the_dist_info_declares_the_entry_point_its_pyproject_does():
    """The entry point pip would write from the package's pyproject.toml is the one the test uses."""
    declared = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]["entry-points"]["rl_board.readers"]
    written = (PLUGIN / "rl_board_tsv-0.1.0.dist-info" / "entry_points.txt").read_text().split()
    assert declared == {"tsv": "rl_board_tsv"}
    assert written == ["[rl_board.readers]", "tsv", "=", "rl_board_tsv"]


@pytest.mark.slow
def test_an_installed_reader_opens_its_format_in_summary(tmp_path):
    """A folder of .tsv files opens with the plugin's reader in ``rl-board summary`` (its parsing
    workers find it too): the per-step counts and reward means are those of the lines, by hand."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.tsv").write_text("step\tprompt\tcompletion\treward\n1\t2+2?\t4\t1.0\n1\t3+3?\t5\t0.0\n")
    (run / "b.tsv").write_text("step\tprompt\tcompletion\treward\n2\tA colour?\tblue\t0.25\n")
    got = _python("import sys\nfrom rl_board.cli import run\nsys.argv = ['rl-board', 'summary', sys.argv[1], "
                  "'--json', '--no-cache']\nrun()\n", str(run))
    assert got.returncode == 0, got.stderr
    summary = json.loads(got.stdout)
    assert summary["format"] == "tsv" and summary["lines_ok"] == 3
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in summary["steps"]] == [(1, 2, 0.5), (2, 1, 0.25)]


@pytest.mark.slow
def test_an_installed_reader_reads_a_sample_again(tmp_path):
    """The plugin's ``record`` reads a sample's line again (its ``completion`` column, the response by its alias)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.tsv").write_text("step\tprompt\tcompletion\treward\n1\t2+2?\t4\t1.0\n3\tA colour?\tblue\t0.25\n")
    code = ("import sys, rl_board\nrun = rl_board.load(sys.argv[1], cache=False)\n"
            "last = run.to_pandas().index[-1]\nprint(run.record(last)['response'])\n")
    got = _python(code, str(run))
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "blue"


@pytest.mark.slow
def test_a_reader_lacking_part_of_the_interface_is_left_out_with_a_warning(tmp_path):
    """A plugin without ``read_table`` (nor ``parse_block``) is refused by name; the built-in readers work on."""
    (tmp_path / "broken_reader.py").write_text('NAME, SUFFIX, ALIASES, APPENDABLE = "broken", ".brk", {}, False\n'
                                              "def record(fh, name, offset, length, line):\n    return {}\n")
    info = tmp_path / "broken_reader-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-reader\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[rl_board.readers]\nbroken = broken_reader\n")
    code = ("import warnings\nwarnings.simplefilter('always')\nfrom rl_board.readers import all_readers\n"
            "print(sorted(r.NAME for r in all_readers()))\n")
    got = _python(code, path=tmp_path)
    assert got.returncode == 0, got.stderr
    names = json.loads(got.stdout.replace("'", '"'))
    assert "broken" not in names and {"jsonl", "parquet", "verl"} <= set(names)
    assert "the reader 'broken' (broken_reader) is left out: it is not APPENDABLE and has no read_table" in got.stderr
