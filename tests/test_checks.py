"""Checks on load: log-probabilities above 0 and per-token lists of different lengths, counted by hand,
named in the load report (page and summary); the shipped demos hold none."""

import json
import subprocess
import sys

import pytest
from conftest import REPO, sample, write_lines

from rl_board.analysis.checks import compute_data_checks
from rl_board.analysis.source import load_run
from rl_board.views import keys


def _run(folder):
    write_lines(folder / "rank0.jsonl", [
        sample(1, 1.0, logprobs=[-1.0, 0.5, -0.2], ref_logprobs=[0.25, 1.5, -1.0, -2.0]),  # lists of 3 and 4
        sample(1, 0.0, logprobs=[-1.0, -0.5], ref_logprobs=[-1.0, 0.0], rollout_logprobs=[None, 2.0]),
    ])
    write_lines(folder / "rank1.jsonl", [sample(2, 0.0, logprobs=[0.1], ref_logprobs=[-1.0])])
    return folder


def test_values_above_zero_and_unequal_lists_are_counted_and_named(tmp_path):
    """logprobs: 0.5 and 0.1 (2 values, 2 samples); ref_logprobs: 0.25 and 1.5 (0.0 is not above 0);
    rollout_logprobs: 2.0; one sample with lists of 3 and 4. The messages name list, count and first line."""
    run = load_run(_run(tmp_path), cache_root=False)
    found = {c.kind: c for c in compute_data_checks(run.samples, run.files)}
    assert set(found) == {"logprobs_above_0", "ref_logprobs_above_0", "rollout_logprobs_above_0", "lengths_differ"}
    assert (found["logprobs_above_0"].values, found["logprobs_above_0"].samples) == (2, 2)
    assert found["logprobs_above_0"].first == "rank0.jsonl:1" and found["logprobs_above_0"].largest == 0.5
    assert (found["ref_logprobs_above_0"].values, found["ref_logprobs_above_0"].largest) == (2, 1.5)
    assert (found["rollout_logprobs_above_0"].values, found["rollout_logprobs_above_0"].first) == (1, "rank0.jsonl:2")
    assert (found["lengths_differ"].samples, found["lengths_differ"].first) == (1, "rank0.jsonl:1")
    assert "ref_logprobs: 2 values above 0 in 1 sample" in found["ref_logprobs_above_0"].message
    assert "probability of 4.482" in found["ref_logprobs_above_0"].message  # exp(1.5)


@pytest.mark.slow
def test_summary_prints_the_counts(tmp_path):
    """``summary --json`` has ``checks`` with every count (0 when clean)."""
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(_run(tmp_path)), "--json", "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    assert json.loads(proc.stdout)["checks"] == {"logprobs_above_0": 2, "ref_logprobs_above_0": 2,
                                                 "rollout_logprobs_above_0": 1, "lengths_differ": 1,
                                                 "eos_never_seen": 0}  # no tokens: never checked


@pytest.mark.slow
def test_the_load_report_names_them_on_the_page(tmp_path):
    """The page's load report lists the checks that found something."""
    from streamlit.testing.v1 import AppTest

    _run(tmp_path / "bad")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(tmp_path)).run()
    at.sidebar.button(key=keys.LOAD).click().run()
    assert not at.exception
    # the whole message inside one box: its title and every check's line
    text = [w.value for w in at.warning if w.value.startswith("Numbers a log should not hold:")][0]
    assert "ref_logprobs: 2 values above 0 in 1 sample (first at rank0.jsonl:1)" in text
    assert "1 sample with per-token lists of different lengths (first at rank0.jsonl:1)" in text


def test_shipped_demos_hold_no_log_probability_above_zero():
    """Every log-probability of every shipped demo, read straight from its lines, is at most 0."""
    above = 0
    for path in (REPO / "rollout_samples").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for name in ("logprobs", "ref_logprobs", "rollout_logprobs"):
                above += sum(1 for v in record.get(name) or () if v is not None and v > 0)
    assert above == 0
