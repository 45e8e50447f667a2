"""Faults that lose nothing: a writer that died before its newline, processes sharing a cache while
the run grows, a parse killed half-way, a cache write that fails, files truncated or rotated."""

import json
import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO, sample, write_lines

from rl_board.analysis.source import RunSource, load_run
from rl_board.demo import write_train_run


def _summary(run, cache=None, *extra):
    env = {**os.environ, **({"RL_BOARD_CACHE_DIR": str(cache)} if cache else {})}
    proc = subprocess.Popen([sys.executable, "-m", "rl_board", "summary", str(run), "--json", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    return proc


def _result(proc):
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out)


def test_a_whole_last_line_without_newline_loads_once(tmp_path):
    """A finished last line whose newline never came is loaded; when the newline and another line
    follow, nothing is read twice and line numbers stay right. A half-written one stays pending."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"step": 1, "reward": 1.0}\n{"step": 1, "reward": 2.0}')
    source = RunSource(tmp_path)
    run = source.refresh()
    assert run.samples["reward"].tolist() == [1.0, 2.0] and run.report.pending == ()
    assert _result(_summary(tmp_path, None, "--no-cache"))["lines_ok"] == 2  # the summary agrees
    with path.open("ab") as fh:
        fh.write(b'\n{"step": 2, "reward": 3.0}\n{"step": 2, "rew')
    run = source.refresh()
    assert run.samples["reward"].tolist() == [1.0, 2.0, 3.0] and run.samples["line"].tolist() == [1, 2, 3]
    assert run.report.pending == ("r.jsonl",) and run.report.lines_bad == 0
    assert RunSource(tmp_path).refresh().samples["line"].tolist() == [1, 2, 3]  # from the cache, the same
    assert run.sample_tokens(run.samples.index[1]).tokens == []  # the unterminated line reads back


def test_two_processes_share_a_growing_run_cache(tmp_path):
    """Two summaries started together, round after round while the run grows, on a fresh or a shared
    cache: each prints what an uncached read prints."""
    run = tmp_path / "run"
    write_train_run(run, steps=12, samples_per_step=64, max_tokens=160, ranks=6, digits=None)  # ~1 s to parse
    for round_ in range(8):
        cache = tmp_path / ("cache-shared" if round_ % 2 else f"cache-{round_}")
        pair = [_summary(run, cache), _summary(run, cache)]
        results = [_result(p) for p in pair]
        expected = _result(_summary(run, None, "--no-cache"))
        assert results[0] == expected and results[1] == expected, f"round {round_}"
        for rank in (0, 3):  # the trainer writes on
            with (run / f"rollout_data_rank{rank}.jsonl").open("a") as fh:
                fh.write(json.dumps(sample(10 + round_, float(round_), response="more")) + "\n")


#: a summary that SIGKILLs itself the first time the segment store's method ``sys.argv[1]`` is called
_KILLED_AT = """import os, signal, sys
from rl_board.store.segments import SegmentStore
setattr(SegmentStore, sys.argv[1], lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL))
sys.argv = ["rl-board", "summary", sys.argv[2], "--json"]
from rl_board.cli import run
run()
"""


@pytest.mark.parametrize("point", ["open", "save"])
def test_killed_during_a_cold_parse_then_reopened(tmp_path, point):
    """SIGKILL at a fixed point of the first load (``open``: every segment written, none taken in yet;
    ``save``: segments compacted, the manifest not written): the next load is complete and correct, and
    nothing the killed process left behind stays in the cache."""
    run = tmp_path / "run"
    write_train_run(run, steps=30, samples_per_step=64, max_tokens=200, ranks=2, digits=None)
    cache = tmp_path / "cache"
    victim = subprocess.run([sys.executable, "-c", _KILLED_AT, point, str(run)], capture_output=True, cwd=REPO,
                            env={**os.environ, "RL_BOARD_CACHE_DIR": str(cache)})
    assert victim.returncode == -signal.SIGKILL, victim.stderr
    assert any(cache.rglob("seg-*")) and not any(cache.rglob("manifest.json"))  # it died half-way
    assert _result(_summary(run, cache)) == _result(_summary(run, None, "--no-cache"))
    folder = next(p for p in cache.iterdir() if p.name != "memos")  # the run's cache folder, not summary's memos
    assert not list(folder.glob(".tmp-*"))
    manifest = json.loads((folder / "manifest.json").read_text())
    named = {seg for entry in manifest["files"].values() for seg, _ in entry["segments"]}
    assert {p.name for p in folder.glob("seg-*")} == named


def test_a_failing_cache_write_loads_the_run_uncached(tmp_path):
    """A file size limit (a full disk) stops the cache write part-way: the run loads in memory, says
    so, and its numbers are those of an uncached read."""
    run = tmp_path / "run"
    write_train_run(run, steps=6, samples_per_step=32, max_tokens=64, ranks=1)
    code = ("import json, resource, signal, sys\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (32768, 32768))\n"
            "from rl_board.base.defaults import EOS_TOKEN, PAD_TOKEN\n"
            "from rl_board.analysis.source import load_run\n"
            "from rl_board.analysis.summary import build_summary\n"
            "run = load_run(sys.argv[1], PAD_TOKEN, eos_token=EOS_TOKEN)\n"
            "print(json.dumps({'notes': run.report.notes, 'summary': build_summary(run)}))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(run)], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "RL_BOARD_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert any("without a cache" in note for note in got["notes"])
    expected = _result(_summary(run, None, "--no-cache"))
    del expected["settings"]
    assert got["summary"] == expected


def test_truncated_and_rotated_files_are_read_again_with_a_note(tmp_path):
    """A followed file that shrank, or was replaced by rotation, is read from the start and named."""
    write_lines(tmp_path / "a.jsonl", [sample(1, 1.0), sample(1, 2.0)])
    write_lines(tmp_path / "b.jsonl", [sample(1, 5.0)])
    source = RunSource(tmp_path, cache_root=False)
    source.refresh()
    write_lines(tmp_path / "a.jsonl", [sample(2, 7.0)])  # truncated and rewritten
    rotated = tmp_path / "b.jsonl.new"
    write_lines(rotated, [sample(3, 9.0), sample(3, 8.0)])
    os.replace(rotated, tmp_path / "b.jsonl")  # a new file under the old name
    run = source.refresh()
    assert sorted(run.samples["reward"].tolist()) == [7.0, 8.0, 9.0]
    notes = "\n".join(run.report.notes)
    assert "a.jsonl was truncated, rewritten or replaced" in notes and "b.jsonl was truncated" in notes
    assert load_run(tmp_path, cache_root=False).samples["reward"].tolist() == [7.0, 9.0, 8.0]


def test_an_unterminated_object_then_a_new_line_reads_as_a_fresh_load_does(tmp_path):
    """A dead writer's object without newline, then a new writer's line: live follow (in-process and
    from the cache) and a fresh load both show line 1 and one bad line 2 (the two objects run together)."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"step": 1, "reward": 1.0}\n{"step": 1, "reward": 2.0}')
    source = RunSource(tmp_path, cache_root=False)
    cached = RunSource(tmp_path)
    assert source.refresh().samples["reward"].tolist() == [1.0, 2.0]
    assert cached.refresh().samples["reward"].tolist() == [1.0, 2.0]
    with path.open("ab") as fh:
        fh.write(b'{"step": 2, "reward": 3.0}\n')
    for run in (source.refresh(), cached.refresh(), RunSource(tmp_path).refresh(),
                load_run(tmp_path, cache_root=False)):
        assert run.samples["reward"].tolist() == [1.0]
        assert [(f, line) for f, line, _ in run.report.errors] == [("r.jsonl", 2)]


def test_a_failed_cache_write_leaves_no_orphan_segment_and_the_command_says_so(tmp_path):
    """A file size limit lets a small file's segment be written and stops a big one's: the summary
    notes it read without a cache, and the cache folder keeps no segment."""
    import resource

    run = tmp_path / "run"
    write_lines(run / "a.jsonl", [sample(1, 1.0)])
    write_lines(run / "b.jsonl", [sample(2, float(i), response="x" * 200) for i in range(400)])  # ~100 KB of rows

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (32768, 32768))

    cache = tmp_path / "cache"
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run), "--json"], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "RL_BOARD_CACHE_DIR": str(cache)},
                          preexec_fn=limit)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["lines_ok"] == 401
    assert "without a cache" in proc.stderr
    assert list(cache.rglob("seg-*")) == [] and list(cache.rglob(".tmp-*")) == []
