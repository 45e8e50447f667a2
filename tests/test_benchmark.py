"""The benchmark runs end to end in its small mode, so it can't rot. Timings are printed, never asserted."""

import json
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow  # every test runs the benchmark as its own process


def test_benchmark_small_mode_produces_its_table(tmp_path):
    """`bench_load.py --size small` opens, re-opens and redraws a generated run and reports every number."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_load.py"), "--size", "small",
                           "--json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| cold open (page Load, empty cache) |" in proc.stdout
    got = json.loads(out.read_text())
    assert got["cold"]["samples"] == 64 and got["reopen"]["samples"] == 64  # the last step's batch, both times
    for key in ("load", "step", "sort", "sample", "rss_mb"):
        assert got["cold"][key] > 0 and got["reopen"][key] > 0
    assert got["floor_s"] > 0


def test_shapes_benchmark_quick_mode_reports_every_case(tmp_path):
    """`bench_shapes.py --quick` opens each case in a fresh process; the numbers of samples and extras
    are those written (2,000 lines of distinct keys keep 256; one line of 20,000 keys keeps 256)."""
    out = tmp_path / "shapes.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_shapes.py"), "--quick",
                           "--json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["keys"]["distinct"]["samples"] == 2000 and got["keys"]["distinct"]["extras"] == 256
    assert got["wide"]["one line"]["samples"] == 1 and got["wide"]["one line"]["extras"] == 256
    for count in (200, 800, 10_000):
        for case in got[f"files {count}"].values():
            assert case["samples"] == count and case["found"] == count and case["peak_rss_mb"] > 0


def test_diff_benchmark_quick_mode_matches_every_prompt(tmp_path):
    """`bench_diff.py --quick` lines two cached runs of 25,600 samples up: every one of the 1,600 prompts
    matched, and only the one in eight whose rewards B changed can move (the rest exactly unchanged)."""
    out = tmp_path / "diff.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_diff.py"), "--quick",
                           "--json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["samples"] == [25_600, 25_600] and got["matched"] == got["floor_matched"] == 1_600
    assert got["regressions"] + got["improvements"] <= 200 and got["unchanged"] >= 1_400


def test_prime_rl_floor_parses_both_files_and_counts_the_all_files_samples(tmp_path):
    """The `primerl` size's floor parses every line of each step's train ``all`` and ``effective`` traces
    (what the default split's read parses) and counts as samples the episodes of the ``all`` files, each
    one trace, as many as the board reads."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_load

    from rl_board.analysis.source import RunSource
    from rl_board.demo.prime_rl import write_prime_rl_run

    write_prime_rl_run(tmp_path / "run", steps=4, prompts=3, group=4)
    got = bench_load.phase_floor(tmp_path / "run")
    train = sorted((tmp_path / "run" / "rollouts").glob("step_*/train/*/traces.jsonl"))
    effective = [p for p in train if p.parent.name == "effective"]
    assert len(train) == 4 + len(effective) and effective  # eval files (every 4 steps) are not read
    assert got["lines"] == sum(len(p.read_bytes().splitlines()) for p in train)
    assert got["samples"] == 4 * 3 * 4 == RunSource(tmp_path / "run", cache_root=False).refresh().report.lines_ok


def test_interactive_benchmark_compares_two_releases_on_the_same_matches(tmp_path):
    """`bench_interactive.py --size small --no-page --baseline REPO` opens the run from one cache with
    each release, twice, and times the search and the findings: every probe finds the same matches."""
    out = tmp_path / "interactive.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_interactive.py"), "--size", "small",
                           "--no-page", "--baseline", str(REPO), "--json", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| run-wide search (" in proc.stdout and "warning" not in proc.stderr
    got = json.loads(out.read_text())
    probes = got["this release"] + got["baseline"]
    assert len(probes) == 4 and len({p["matches"] for p in probes}) == 1
    assert all(p["samples"] == 10 * 64 and p["per_step"] == p["matches"] and p["search"] > 0 for p in probes)


def test_worker_benchmark_times_every_stage_of_the_files_it_reads(tmp_path):
    """`bench_worker.py --size small --files 2` reads both rank files of 10 steps x 64 samples (640 lines) and
    times each stage of a worker's read (and of the page's, which keeps the words) and the orjson floor, a
    line at a time."""
    out = tmp_path / "worker.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_worker.py"), "--size", "small",
                           "--files", "2", "--repeat", "1", "--json", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(out.read_text())
    assert (got["files"], got["lines"]) == (2, 640)
    assert set(got["us_per_line"]) == {"read", "parse", "derive", "of which: words found and encoded",
                                       "of which: 4-grams counted", "write", "whole range (ingest_range)",
                                       "page: derive, words kept", "page: whole range, words kept",
                                       "floor (orjson.loads a line)"}
    assert all(value > 0 for value in got["us_per_line"].values())
    assert "| whole range (ingest_range) |" in proc.stdout


def test_kernels_benchmark_times_every_kept_kernel(tmp_path):
    """`bench_kernels.py` at a small scale checks each kept kernel's output equals its library alternative's
    (it stops otherwise) and times both."""
    out = tmp_path / "kernels.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_kernels.py"), "--scale", "0.05",
                           "--repeat", "1", "--json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(out.read_text())
    kept = got["kernels"]
    assert [row["alternative"] for row in kept] == ["groupby().cumcount()", "pyarrow.json", "Table.group_by"]
    assert all(row["kernel_s"] > 0 and row["alternative_s"] > 0 for row in kept)
    # the candidates for the words' ids, each checked (by the script) to give the same repeat_4gram
    assert [row["candidate"] for row in got["candidates"]] == ["words as string_view", "8,192 responses at a time"]
    assert all(row["now_s"] > 0 and row["candidate_s"] > 0 for row in got["candidates"])


def test_diff_benchmark_opens_both_runs_from_the_cache_index_wrote(tmp_path):
    """`bench_diff.py --quick --template` opens A and B from the cache `rl-board index` wrote, parsing no file
    again (B's ChatML-wrapped verl dumps included: opened with other read settings than index's, they were
    read again from their files, about ten times the plain dumps' time), and matches all 1,600 prompts on
    their user content."""
    out = tmp_path / "diff.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_diff.py"), "--quick", "--template",
                           "--json", str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["files_read"] == [0, 0]
    assert got["prompt_match"] == "user content" and got["matched"] == 1_600 and got["floor_matched"] == 0
