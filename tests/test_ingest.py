"""Parsing in worker processes gives exactly what parsing in one process gives."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import sample, write_lines

from rl_board.analysis.source import RunSource
from rl_board.store import batches, ingest, ranges, workers
from rl_board.store.cache import list_caches

# how a read starts its workers: forked from this process (a command on Linux: pytest runs one
# thread), or spawned as new interpreters (the page, whose server runs threads)
START = ["fork", "spawn"]


def _start(how, monkeypatch):
    workers.shutdown()  # no warm worker from an earlier test
    # a thread an earlier test left idle (a page's, a pool's) is no concern of the forked worker's
    monkeypatch.setattr(workers, "forkable", lambda: how == "fork")


@pytest.mark.slow
@pytest.mark.parametrize("how", START)
def test_workers_match_one_process(tmp_path, monkeypatch, how):
    """Many small ranges over two workers: same rows, line numbers, byte offsets and errors."""
    lines = []
    for i in range(300):
        lines.append(sample(i % 7, float(i), prompt=f"p{i}", logprobs=[-1.0, -float(i % 5)], ref_logprobs=[-2.0, -1.0]))
        if i % 37 == 0:
            lines.append("{broken line")
        if i % 53 == 0:
            lines.append("")
    write_lines(tmp_path / "run" / "rank0.jsonl", lines)
    write_lines(tmp_path / "run" / "rank1.jsonl", lines[::-1])
    expected = RunSource(tmp_path / "run", cache_root=False).refresh()
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 2000)
    _start(how, monkeypatch)
    calls = []
    real = ingest._run_in_workers
    monkeypatch.setattr(ingest, "_run_in_workers", lambda *a: calls.append(len(a[1])) or real(*a))
    got = RunSource(tmp_path / "run").refresh()
    assert calls and calls[0] > 10  # it really split the files and used the workers
    where = ["row", "seg"]  # which segment holds a row depends on how the files were split
    pd.testing.assert_frame_equal(expected.samples.drop(columns=where), got.samples.drop(columns=where))
    assert expected.report.errors == got.report.errors and len(got.report.errors) == 2 * 9
    last = got.samples.index[-1]
    assert got.sample_tokens(last).logprobs.tolist() == expected.sample_tokens(last).logprobs.tolist()
    assert all(isinstance(p, workers.Forked) == (how == "fork") for p in workers._pool) and len(workers._pool) == 2


def test_split_ranges_end_on_line_boundaries(tmp_path):
    """Every range but the last ends just after a newline, and together they cover the bytes."""
    path = write_lines(tmp_path / "r.jsonl", [sample(1, float(i), prompt="x" * (i % 50)) for i in range(200)])
    data = path.read_bytes()
    cut = ranges.split_ranges(path, 0, len(data), size=500)
    assert cut[0][0] == 0 and cut[-1][1] == len(data)
    for (_, end), (start, _) in zip(cut, cut[1:]):
        assert end == start and data[end - 1:end] == b"\n"


@pytest.mark.parametrize("how", START)
def test_failed_workers_fall_back_to_parsing_here(tmp_path, monkeypatch, how):
    """If the worker processes die, the ranges are parsed in this process: same run, nothing lost."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(i % 3, float(i)) for i in range(200)] + ["{bad"])
    expected = RunSource(tmp_path / "run", cache_root=False).refresh()
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 1000)
    _start(how, monkeypatch)
    if how == "spawn":
        monkeypatch.setattr(ingest.sys, "executable", "/bin/false")  # every worker exits at once
    else:
        monkeypatch.setattr(ingest, "serve", lambda idle: os._exit(3))  # a forked worker runs this copy
    got = RunSource(tmp_path / "run").refresh()
    assert got.samples["reward"].tolist() == expected.samples["reward"].tolist()
    assert got.report.errors == expected.report.errors == (("r.jsonl", 201, got.report.errors[0][2]),)


@pytest.mark.slow
@pytest.mark.parametrize("how", START)
def test_warm_workers_are_reused_across_reads(tmp_path, monkeypatch, how):
    """A second read is handed to the same worker processes the first one used (no new start)."""
    lines = [sample(i % 5, float(i), prompt=f"p{i}", logprobs=[-1.0, -0.5]) for i in range(400)]
    write_lines(tmp_path / "a" / "r.jsonl", lines)
    write_lines(tmp_path / "b" / "r.jsonl", lines[::-1])
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 4000)
    _start(how, monkeypatch)
    workers.warm_up(2)
    started = {p.pid for p in workers._pool}
    first = RunSource(tmp_path / "a").refresh()
    second = RunSource(tmp_path / "b").refresh()
    assert {p.pid for p in workers._pool} == started and len(started) == 2
    assert sorted(first.samples["reward"]) == sorted(second.samples["reward"]) == [float(i) for i in range(400)]


def test_warm_up_for_a_run_skips_small_or_cached_runs(tmp_path, monkeypatch):
    """Workers are started at a command's start only for a run large enough, read by more than one
    worker, and not when a cache newer than it exists; a process that may fork its workers later starts
    them early only for a long read or many workers."""
    calls = []
    monkeypatch.setattr(workers, "warm_up", lambda *a: calls.append(a))
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    monkeypatch.setattr(workers, "can_fork", lambda: False)
    size = write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 1.0)]).stat().st_size
    workers.warm_up_for(tmp_path / "run", tmp_path / "cache")
    assert calls == []  # too small
    monkeypatch.setattr(workers, "MIN_BYTES", 1)
    workers.warm_up_for(tmp_path / "run", tmp_path / "cache")
    assert len(calls) == 1
    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    workers.warm_up_for(tmp_path / "run", tmp_path / "cache")
    assert len(calls) == 1  # one worker: the read is done in the calling process
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    monkeypatch.setattr(workers, "can_fork", lambda: True)
    workers.warm_up_for(tmp_path / "run", tmp_path / "cache")
    assert len(calls) == 1  # a short read, two workers: forked when the read starts
    monkeypatch.setenv(workers.WORKERS_ENV, str(workers.EARLY_SPAWN_WORKERS))
    workers.warm_up_for(tmp_path / "run", tmp_path / "cache")
    assert len(calls) == 2  # many workers: spawned now
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    monkeypatch.setattr(workers, "EARLY_SPAWN_BYTES", size)
    workers.warm_up_for(tmp_path / "run", tmp_path / "cache")
    assert len(calls) == 3  # a long read: spawned now
    cached = tmp_path / "cache" / "run-0123456789abcdef"
    cached.mkdir(parents=True)
    (cached / "manifest.json").write_text("{}")
    workers.warm_up_for(tmp_path / "run", tmp_path / "cache")
    assert len(calls) == 3  # a cache as new as the run: no workers


def test_forked_workers_hold_nothing_of_the_reader(tmp_path, monkeypatch):
    """Workers forked inside a read (which holds the run's cache folder locked) keep no copy of that
    lock, or of any other file the reader had open: once the read is over, the folder can be locked
    again while they live on; and they are forked before the read starts a thread of its own."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(i % 5, float(i), logprobs=[-1.0]) for i in range(400)])
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 4000)
    _start("fork", monkeypatch)
    events = []
    real_fork, real_imports = workers.fork, RunSource._import_snapshot_modules
    monkeypatch.setattr(workers, "fork", lambda: events.append("fork") or real_fork())
    monkeypatch.setattr(RunSource, "_import_snapshot_modules", lambda self: events.append("thread") or real_imports(self))
    with open(tmp_path / "held-open.txt", "w"):
        got = RunSource(tmp_path / "run", cache_root=tmp_path / "cache").refresh()
        pids = [p.pid for p in workers._pool]
        assert events == ["fork", "fork", "thread"] and all(p.poll() is None for p in workers._pool)
        for pid in pids:  # what each worker has open: its pipes and its stderr file, no more
            names = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert not any(name.endswith((".lock", "held-open.txt")) for name in names), names
        [cache] = list_caches(tmp_path / "cache")
        with cache.locked(wait=False):  # BlockingIOError if a worker still held the read's lock
            pass
    assert sorted(got.samples["reward"]) == [float(i) for i in range(400)]


def test_worker_count_follows_the_cpus_this_process_may_use():
    """One worker per CPU of the affinity: a process pinned to one core of this machine gets one worker,
    not one per core of the host; RL_BOARD_WORKERS sets the count."""
    code = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
           "from rl_board.store import workers; print(workers.count())"
    env = {k: v for k, v in os.environ.items() if k != "RL_BOARD_WORKERS"}
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert got.stdout.strip() == "1"
    env["RL_BOARD_WORKERS"] = "3"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert got.stdout.strip() == "3"


def test_a_cgroup_quota_caps_the_workers(tmp_path):
    """A cgroup v2 quota of 1.5 CPUs gives 2 workers, v1's quota/period the same; no quota leaves the affinity."""
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert workers.cgroup_quota(tmp_path) == 1.5
    assert workers.usable_cpus(tmp_path) == min(2, len(os.sched_getaffinity(0)))
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert workers.cgroup_quota(tmp_path) is None
    assert workers.usable_cpus(tmp_path) == len(os.sched_getaffinity(0))
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert workers.cgroup_quota(tmp_path) == 0.5 and workers.usable_cpus(tmp_path) == 1


def test_ranges_are_sized_so_every_worker_gets_several():
    """A read is cut into about four ranges per worker, between 4 MB and 24 MB each: 540 MB on 16 workers
    in ~8.4 MB ranges (not 24 MB ones that leave most workers idle in a second round), on 2 in 24 MB ones."""
    mb = 1 << 20
    assert ranges.range_bytes(540 * mb, 16) == -(-540 * mb // 64)
    assert ranges.range_bytes(540 * mb, 2) == 24 * mb
    assert ranges.range_bytes(20 * mb, 16) == 4 * mb


def _small_files_run(run):
    """120 small files as verl writes them ({step}.jsonl), with a rejected line, extra fields first met in
    different files, a blank line and a last line without its newline among them."""
    for step in range(120):
        lines = [sample(step, step / 10, prompt="p", response=f"r{step}"), sample(step, 1.0, prompt="q", response="s")]
        if step == 7:
            lines.insert(1, "not json")
        if step == 9:
            lines[0]["acc"] = 1
        if step == 0:
            lines[1]["mid"] = 2.5
        if step == 3:
            lines[0]["zeta"] = 1.5
        if step == 5:
            lines[1]["alpha"] = 0.5
        if step == 11:
            lines.insert(1, "   ")
        write_lines(run / f"{step}.jsonl", lines)
    with open(run / "60.jsonl", "ab") as fh:
        fh.write(b'{"step": 60, "reward": 0.25}')


@pytest.mark.slow
def test_many_small_files_are_batched_and_read_as_one_by_one(tmp_path, monkeypatch):
    """120 small files read in batches (a few segments in the cache) give the samples, lines, offsets and
    rejected lines that reading them one by one gives, and so does a re-open from the cache."""
    run = tmp_path / "run"
    _small_files_run(run)
    batched = RunSource(run, cache_root=tmp_path / "cache").refresh()
    segments = list((list_caches(tmp_path / "cache")[0].folder).glob("seg-*.arrow"))
    assert len(segments) <= 2  # one batch, and the file without its last newline read alone
    reopened = RunSource(run, cache_root=tmp_path / "cache").refresh()
    monkeypatch.setattr(batches, "BATCH_MIN_FILES", 10**9)
    alone = RunSource(run, cache_root=False).refresh()
    assert batched.report.errors == alone.report.errors == (("7.jsonl", 2, batched.report.errors[0][2]),)
    columns = [c for c in alone.samples.columns if c != "row"]  # row: its place in the segment it lives in
    assert [c for c in columns if c.startswith("extra:")] == ["extra:mid", "extra:zeta", "extra:alpha", "extra:acc"]
    texts = ["prompt", "response", "source"]
    for got in (batched, reopened):
        assert list(got.samples.columns) == list(alone.samples.columns)
        pd.testing.assert_frame_equal(got.samples[columns], alone.samples[columns])
        assert got.report.lines_ok == 241
        assert got.with_text(got.samples)[texts].equals(alone.with_text(alone.samples)[texts])
        assert (got.word_counts() == alone.word_counts()).all()
        assert (got.text_matches("response", "^r1") == alone.text_matches("response", "^r1")).all()
        assert got.text_matches("response", "^r1").sum() == 31  # r1, r10-r19, r100-r119
    row = alone.samples.index[(alone.samples["step"] == 60) & (alone.samples["reward"] == 0.25)][0]
    assert batched.record_parts(row)[0]["reward"] == 0.25
    row = alone.samples.index[(alone.samples["step"] == 30) & (alone.samples["reward"] == 3.0)][0]
    assert batched.record_parts(row)[0]["response"] == "r30"
    assert batched.with_text(batched.samples.loc[[row]])["response"].tolist() == ["r30"]


def test_an_unchanged_run_of_small_files_is_not_read_again(tmp_path):
    """A refresh of an unchanged run of batched small files reads nothing and returns the same snapshot."""
    run = tmp_path / "run"
    _small_files_run(run)
    source = RunSource(run, cache_root=False)
    first = source.refresh()
    assert source.refresh() is first


@pytest.mark.slow
def test_small_files_that_grow_are_read_on_in_a_batch(tmp_path):
    """100 one-line files that each get a second line: the refresh reads the new lines in a batch (line 2
    of each file, at its own offset), and a re-open from the cache gives the same samples."""
    run = tmp_path / "run"
    for i in range(100):
        write_lines(run / f"{i}.jsonl", [sample(i, 0.0, response="old")])
    source = RunSource(run, cache_root=tmp_path / "cache")
    assert source.refresh().report.lines_ok == 100
    first = [(run / f"{i}.jsonl").stat().st_size for i in range(100)]  # where each file's second line starts
    for i in range(100):
        with open(run / f"{i}.jsonl", "a") as fh:
            fh.write(json.dumps(sample(i, 1.0, response="new")) + "\n")
    grown = source.refresh()
    assert set(source.last_status.values()) == {"appended"}
    assert len(list(list_caches(tmp_path / "cache")[0].folder.glob("seg-*.arrow"))) == 2  # a batch each read
    assert grown.report.lines_ok == 200
    new = grown.samples[grown.samples["reward"] == 1.0]
    assert new["step"].tolist() == list(range(100))
    assert new["line"].tolist() == [2] * 100 and new["offset"].tolist() == first
    assert grown.with_text(new)["response"].tolist() == ["new"] * 100
    reopened = RunSource(run, cache_root=tmp_path / "cache").refresh()
    columns = [c for c in grown.samples.columns if c != "row"]
    pd.testing.assert_frame_equal(reopened.samples[columns], grown.samples[columns])
    texts = reopened.with_text(reopened.samples)["response"].tolist()
    assert texts == grown.with_text(grown.samples)["response"].tolist()


def test_a_command_starts_workers_early_only_for_its_own_pool(tmp_path, monkeypatch, capsys):
    """A command that reads a run asks for its workers at its start, except when its ranges go to a Ray
    cluster (RL_BOARD_RAY): no local interpreter is started for nothing."""
    from rl_board.cli import _main

    calls = []
    monkeypatch.setattr(workers, "warm_up_for", lambda *a, **k: calls.append(a))
    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 1.0)])
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", str(tmp_path / "cache"))
    assert _main(["summary", str(tmp_path / "run"), "--json"]) == 0
    assert len(calls) == 1
    monkeypatch.setenv("RL_BOARD_RAY", "127.0.0.1:9")  # nothing listens there: the read fails at once
    _main(["summary", str(tmp_path / "run"), "--json", "--no-cache"])
    assert len(calls) == 1
    capsys.readouterr()


def test_a_long_read_spawns_its_workers_where_a_short_one_forks_them(tmp_path, monkeypatch):
    """The pool forks new workers only for a short read with few workers (workers.short_read); a read of
    EARLY_SPAWN_BYTES or more gets new interpreters, from a command or from Python alike."""
    made, real_spawn = [], workers.spawn  # every worker is a real spawned one; the test records which was asked
    monkeypatch.setattr(workers, "forkable", lambda: True)
    monkeypatch.setattr(workers, "fork", lambda: made.append("fork") or real_spawn())
    monkeypatch.setattr(workers, "spawn", lambda: made.append("spawn") or real_spawn())
    for size, expected in ((workers.EARLY_SPAWN_BYTES - 1, ["fork", "fork"]),
                           (workers.EARLY_SPAWN_BYTES, ["spawn", "spawn"])):
        workers.shutdown()
        made.clear()
        with workers.borrow(2, size=size) as procs:
            assert len(procs) == 2
        assert made == expected, size
    workers.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("how", START)
@pytest.mark.parametrize("shape", ["prime-rl", "trl"])
def test_files_read_whole_are_dealt_to_workers(tmp_path, monkeypatch, how, shape):
    """A format read whole (prime-rl's traces, TRL's Parquet) goes to the workers a file a task: the
    same rows, extras (prime-rl's ``trained``, read from the ``effective`` file beside each ``all``
    file), rejected lines and unreadable files as one process reading every file in turn."""
    from rl_board.demo.prime_rl import write_prime_rl_run
    from rl_board.demo.trl import write_trl_run

    run = tmp_path / "run"
    if shape == "prime-rl":
        write_prime_rl_run(run, steps=6)
        with open(run / "rollouts" / "step_2" / "train" / "all" / "traces.jsonl", "ab") as fh:
            fh.write(b"{not an episode\n")
        files = 6  # train/all (each reads the effective file beside it)
    else:
        write_trl_run(run)  # 12 logged steps
        (run / "completions_00007.parquet").write_bytes(b"PAR1 not a parquet file")
        files = 13
    monkeypatch.setenv(workers.WORKERS_ENV, "2")
    expected = RunSource(run, cache_root=False).refresh()
    monkeypatch.setattr(ingest, "WHOLE_MIN_BYTES", 0)
    _start(how, monkeypatch)
    calls = []
    real = ingest._run_in_workers
    monkeypatch.setattr(ingest, "_run_in_workers", lambda *a: calls.append(len(a[1])) or real(*a))
    got = RunSource(run, cache_root=tmp_path / "cache").refresh()
    assert calls == [files]  # every file of the run was one worker's task
    where = ["row", "seg"]
    pd.testing.assert_frame_equal(expected.samples.drop(columns=where), got.samples.drop(columns=where))
    assert got.report.lines_ok == expected.report.lines_ok > 0
    assert got.report.errors == expected.report.errors
    assert got.report.unreadable == expected.report.unreadable
    if shape == "prime-rl":
        assert [e[:2] for e in got.report.errors] == [("rollouts/step_2/train/all/traces.jsonl", 13)]
        assert set(got.samples["extra:trained"]) == {0.0, 1.0}
    else:
        assert [u[0] for u in got.report.unreadable] == ["completions_00007.parquet"]


def _run_of_every_shape(run):
    """Steps each in a file of its own (verl's ``{step}.jsonl``: whole in a range, or cut by a small one) and
    steps spread over two rank files out of step order (cut across files and ranges): GRPO groups with and
    without equal rewards, per-token lists, an extra in every sample but some (NaN in one series, not in the
    others), one in a single step only (sparse)."""
    rng = np.random.default_rng(52)
    for step in range(6):
        write_lines(run / f"{step}.jsonl", [
            sample(step, float(rng.integers(0, 2)) if i % 16 >= 8 else 1.0,
                   prompt=f"q{step}-{i // 8}", response=" ".join(["a", "b"] * int(rng.integers(1, 9))),
                   logprobs=rng.normal(-1, 0.5, 4).round(6).tolist(), ref_logprobs=rng.normal(-1, 0.5, 4).round(6).tolist(),
                   acc=float(rng.random()) if i % 5 else None, **({"rare": float(rng.random())} if step == 3 else {}))
            for i in range(48)])
    for rank in range(2):
        write_lines(run / f"rank{rank}.jsonl", [
            sample(6 + (i * 7 + rank) % 5, float(rng.normal()), prompt=f"p{i % 12}", response="x y z " * (i % 4),
                   acc=float(rng.random()))
            for i in range(150)])


@pytest.mark.slow
def test_summary_and_step_table_are_the_same_bytes_at_1_2_and_4_workers(tmp_path, monkeypatch):
    """``summary --json`` prints the same bytes, and the step table holds the same bits, whether one process
    reads the run or 2 or 4 workers read it in ranges that cut some steps and hold others whole: the
    workers' numbers for a step one range holds, the parent's for one cut across ranges or files, the
    parent's alone (no worker's numbers) for every step, and the run opened again from its cache, the same
    bits."""
    from conftest import command

    from rl_board.analysis import steps as step_stats
    from rl_board.analysis.steps import compute_step_stats, dense_steps

    run = tmp_path / "run"
    _run_of_every_shape(run)
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 8000)  # 2 workers: most step files (11 KB) one range; 4: two
    monkeypatch.setattr(ranges, "MIN_RANGE_BYTES", 0)
    used, known = [], []
    real = ingest._run_in_workers
    monkeypatch.setattr(ingest, "_run_in_workers", lambda *a: used.append((len(a[1]), a[4])) or real(*a))
    given = step_stats._given_stats
    monkeypatch.setattr(step_stats, "_given_stats", lambda *a: known.append(given(*a)[0].tolist()) or given(*a))
    printed, tables = {}, {}
    for count in (1, 2, 4):
        workers.shutdown()  # the pool of the count before
        monkeypatch.setenv(workers.WORKERS_ENV, str(count))
        out = command("summary", str(run), "--json", env={"RL_BOARD_CACHE_DIR": str(tmp_path / f"cache{count}")})
        assert out.returncode == 0, out.stderr
        printed[count] = out.stdout
        loaded = RunSource(run, cache_root=tmp_path / f"pages{count}").refresh()
        tables[count] = dense_steps(loaded.steps)
        alone = dense_steps(compute_step_stats(loaded._samples))
        pd.testing.assert_frame_equal(tables[count], alone, check_exact=True)
        assert tables[count].to_numpy(float).tobytes() == alone.to_numpy(float).tobytes()
        again = dense_steps(RunSource(run, cache_root=tmp_path / f"pages{count}").refresh().steps)  # from the cache
        assert again.to_numpy(float).tobytes() == alone.to_numpy(float).tobytes()
    workers.shutdown()
    # steps 0..5 each one file: whole in a segment at 1 and 2 workers (4: some cut in two); 6..10 over two files
    # (each count: the command, the page, the parent alone, the page's re-open)
    assert known[0] == known[1] == known[3] == [True] * 6 + [False] * 5 and not any(known[2])
    assert known[-1][6:] == [False] * 5 and known[-1][:6] != [True] * 6
    # the workers read it in more ranges than files (the command and the page, at each count)
    assert [n for _, n in used] == [2, 2, 4, 4] and all(ranges_ > 8 for ranges_, _ in used)
    assert printed[2] == printed[1] and printed[4] == printed[1]
    summary = json.loads(printed[1])
    assert [s["samples"] for s in summary["steps"]] == [48] * 6 + [60] * 5  # 300 rank lines over steps 6..10
    assert summary["steps"][3]["extras"].keys() == {"acc", "rare"} and "rare" not in summary["steps"][2]["extras"]
    acc = [json.loads(line).get("acc") for line in (run / "4.jsonl").read_text().splitlines()]
    acc = [a for a in acc if a is not None]
    assert summary["steps"][4]["extras"]["acc"] == pytest.approx(math.fsum(acc) / len(acc), rel=1e-9, abs=1e-3)
    for count in (2, 4):
        pd.testing.assert_frame_equal(tables[count], tables[1], check_exact=True)


def test_a_file_read_from_its_start_brings_its_head_and_tail_hashes(tmp_path, monkeypatch):
    """A range read from a file's start hashes its first and last 64 KiB as it reads (blocks of 4 KiB here, a
    last line without its newline): the cache entry holds the sha1s of the file's bytes and the parent reads
    none of them again; a file with a line passed over (over the line limit) is hashed from the file, the same."""
    import hashlib

    from rl_board.store import fingerprints

    run = tmp_path / "run"
    write_lines(run / "small.jsonl", [sample(1, 1.0, response="a")])
    write_lines(run / "long.jsonl", [sample(i % 3, float(i), response="w " * 40) for i in range(900)])
    (run / "open.jsonl").write_bytes(b"".join(json.dumps(sample(2, float(i), response="z " * 30)).encode() + b"\n"
                                              for i in range(700)) + json.dumps(sample(2, 9.0)).encode())
    write_lines(run / "skipped.jsonl", [sample(1, 0.5), sample(1, 0.25, response="x" * 12_000), sample(1, 2.0)])
    monkeypatch.setattr(ranges, "READ_CHUNK", 4096)
    monkeypatch.setenv("RL_BOARD_MAX_LINE_MB", "0.01")  # 10,485 bytes: the 12 KB line is passed over
    monkeypatch.setenv(workers.WORKERS_ENV, "1")
    hashed = []
    real = fingerprints.hash_span
    monkeypatch.setattr(fingerprints, "hash_span", lambda path, a, b: hashed.append(path.name) or real(path, a, b))
    loaded = RunSource(run, cache_root=tmp_path / "cache").refresh()
    assert loaded.report.lines_bad == 1 and len(loaded.samples) == 1 + 900 + 701 + 2
    assert set(hashed) == {"skipped.jsonl"}
    (manifest,) = (tmp_path / "cache").glob("*/manifest.json")
    entries = json.loads(manifest.read_text())["files"]
    for name in ("small.jsonl", "long.jsonl", "open.jsonl", "skipped.jsonl"):
        data = (run / name).read_bytes()
        assert len(data) > 65536 or name in ("small.jsonl", "skipped.jsonl")
        entry = entries[name]
        assert entry["offset"] == len(data)
        assert entry["head_hash"] == hashlib.sha1(data[:65536]).hexdigest(), name
        assert entry["tail_hash"] == hashlib.sha1(data[-65536:]).hexdigest(), name


@pytest.mark.parametrize("shape", ["floats", "a rare extra", "two reads", "extras past the limit"])
def test_numbers_are_gathered_as_workers_give_segments_back(tmp_path, monkeypatch, shape):
    """A cold read through workers gathers each segment's numbers into the run's columns as its range comes
    back, in the ranges' order, while the others are read; the snapshot takes those columns: the same frame
    as one process reading the run. Where that can't give ``gather``'s columns (an extra with few values, which
    ``gather`` keeps sparse), the numbers are made again and gathered after the read; where the run's parts are
    not those segments (a second read of new lines: its segments follow the cached ones), the numbers made as
    they came are gathered after the read, their pages read in up to ``NUMBERS_AHEAD_BYTES``: the same frame
    each time."""
    from rl_board.store import columns, segments
    from rl_board.store import numbers as numbers_module

    def lines(offset):
        return [sample(i % 5, float(i) / 7, prompt=f"p{i % 9}", acc=float(i % 3),
                       **({"rare": 0.25} if shape == "a rare extra" and i == 350 else {}),
                       **({f"e{i // 100}": 1.0} if shape == "extras past the limit" else {}))
                for i in range(offset, offset + 400)]

    write_lines(tmp_path / "run" / "rank0.jsonl", lines(0))
    write_lines(tmp_path / "run" / "rank1.jsonl", lines(0)[::-1])
    monkeypatch.setattr(ingest, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 3000)
    monkeypatch.setattr(numbers_module, "NUMBERS_AHEAD_BYTES", 6000)
    monkeypatch.setattr(segments, "SMALL_SEGMENT_BYTES", 0)  # no file's segments merged after the read
    monkeypatch.setattr(columns, "SPARSE_MIN_ROWS", 0)
    if shape == "extras past the limit":  # e0..e3 and acc: five extras, four kept
        monkeypatch.setenv("RL_BOARD_MAX_EXTRA_FIELDS", "4")
    _start("fork", monkeypatch)
    from rl_board.store.loader import RunLoader

    made, read_in = [], []
    take, touch = RunLoader.take_numbers, numbers_module.Numbers._read_in
    monkeypatch.setattr(RunLoader, "take_numbers", lambda self: made.append(take(self)) or made[-1])
    monkeypatch.setattr(numbers_module.Numbers, "_read_in", lambda self, *a: (touch(self, *a), read_in.append(self.ahead)))
    source = RunSource(tmp_path / "run")
    got = source.refresh()
    if shape == "two reads":
        with open(tmp_path / "run" / "rank0.jsonl", "a") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in lines(400))
        got = source.refresh()
    workers.shutdown()
    numbers = made[-1]
    expected = RunSource(tmp_path / "run", cache_root=False).refresh()
    if shape == "floats":  # every segment gathered as it came, the snapshot took those columns
        assert numbers.gathering is not None and len(numbers.gathered) > 4 and not read_in
    elif shape == "extras past the limit":  # gathered after the read, the extras capped as before
        assert numbers.gathering is None and not read_in
        assert len([c for c in got.samples.columns if c.startswith("extra:")]) == 4
    elif shape == "a rare extra":  # gathered after the read, as before: kept sparse
        assert numbers.gathering is None and not read_in
        assert isinstance(got._samples["extra:rare"].array, pd.arrays.SparseArray)
    else:  # the numbers made as they came, gathered after the read; their pages read in within the bound
        assert numbers.gathering is None and read_in and all(ahead <= 6000 for ahead in read_in)
    where = ["row", "seg"]  # which segment holds a row depends on how the files were cut
    pd.testing.assert_frame_equal(expected.samples.drop(columns=where), got.samples.drop(columns=where))


def test_ranges_are_handed_out_in_order_but_the_last_largest_first():
    """Ranges go to the workers in their places' order (so they come back nearly in order and each is gathered
    while the others are parsed), but the last ``AHEAD_RANGES`` × workers go largest first (a small
    remainder fills the end): with 2 workers, the last four of ten are handed out by size, a tie by place."""
    sizes = [10, 10, 3, 10, 10, 10, 4, 10, 6, 4]  # ranges 6..9 are the last four: 10, 6, then 4 and 4
    tasks = [(f"f{i}.jsonl", 0, size) for i, size in enumerate(sizes)]
    queue = ingest._handing_order(tasks, 2)
    handed = [queue.pop()[0] for _ in range(len(queue))]
    assert ingest.AHEAD_RANGES == 2
    assert handed == [0, 1, 2, 3, 4, 5, 7, 8, 6, 9]
    # fewer ranges than the workers hold at the end: all largest first
    assert [place for place, _ in ingest._handing_order(tasks[:3], 2)[::-1]] == [0, 1, 2]
    assert [place for place, _ in ingest._handing_order(tasks[6:9], 2)[::-1]] == [1, 2, 0]
