"""The read on a real local Ray cluster (``store.cluster``, ``rl-board index RUN --ray``): Ray tasks parse
the same byte ranges into the cache, the commands then open the run from it without reading the logs and
print what a local read prints; a cluster that can't be reached is one line."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest
from conftest import REPO, close_to, sample, write_lines
from conftest import command_process as command

from rl_board.analysis.source import RunSource
from rl_board.base.defaults import EOS_TOKEN, PAD_TOKEN
from rl_board.store import cluster, ranges

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # every test starts a Ray cluster
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_cluster():
    """A Ray cluster of 2 CPUs on this machine, joined by this process (``ray.init(num_cpus=2)``)."""
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield
    ray.shutdown()


COMMANDS = (("summary", "--json"), ("search", "--regex", "the", "--json"), ("findings", "--json"))


def test_an_index_on_ray_is_what_a_local_read_gives(local_cluster, tmp_path, monkeypatch, capsys):
    """``index --ray`` hands many ranges to Ray tasks, reports progress on stderr; a reader then opens the
    run from the cache (no file read) and summary, search and findings print what a local read prints."""
    run = tmp_path / "ppo_demo"
    shutil.copytree(REPO / "rollout_samples" / "ppo_demo", run)
    write_lines(run / "rollout_data_rank9.jsonl",
                [sample(i % 4 + 1, float(i % 7), prompt=f"p{i}", response=f"the answer {i}") for i in range(300)])
    expected = {argv: command(argv[0], str(run), *argv[1:], "--no-cache") for argv in COMMANDS}
    monkeypatch.setenv(cluster.RAY_ENV, "")  # restored after the test (index sets it for its read)
    monkeypatch.setattr(ranges, "MIN_RANGE_BYTES", 50_000)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 50_000)
    from rl_board.cli import main

    assert main(["index", str(run), "--ray", "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    sizes = sum(p.stat().st_size for p in run.iterdir())
    assert report["ray_tasks"] > 8 and cluster.LAST_READ["done"] == report["ray_tasks"]
    assert report["samples"] == 480 + 300 and report["files_read"] == 5
    assert f"of {sizes / 1e6:.1f} MB, {report['ray_tasks']} of {report['ray_tasks']} Ray tasks" in err
    monkeypatch.delenv(cluster.RAY_ENV)
    again = RunSource(run, PAD_TOKEN, eos_token=EOS_TOKEN)  # the settings index read with (the defaults)
    again.refresh()
    assert set(again.last_status.values()) == {"cached"}  # opened from what the Ray tasks wrote
    for argv, local in expected.items():
        cached = command(argv[0], str(run), *argv[1:])
        assert local.returncode == cached.returncode == 0, cached.stderr
        assert close_to(json.loads(cached.stdout), json.loads(local.stdout)), argv


def test_an_unreachable_cluster_is_one_line(tmp_path, isolated_cache):
    """``--ray HOST:PORT`` where nothing listens: one line naming the address, exit 2, nothing cached."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = tmp_path / "run"
    write_lines(run / "r.jsonl", [sample(1, 1.0)])
    result = command("index", str(run), "--ray", f"127.0.0.1:{port}")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "can't be reached" in lines[0]
    assert not list(isolated_cache.rglob("manifest.json"))  # this test's cache (the command inherits it)


def test_ray_is_not_asked_without_the_setting(tmp_path, monkeypatch):
    """Without RL_BOARD_RAY (or --ray) a read never touches the cluster code: the local pool reads it."""
    monkeypatch.delenv(cluster.RAY_ENV, raising=False)
    monkeypatch.setattr(cluster, "run_ranges", lambda *a, **k: pytest.fail("Ray was asked"))
    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 1.0), sample(2, 2.0)])
    assert RunSource(tmp_path / "run").refresh().samples["reward"].tolist() == [1.0, 2.0]


def test_a_failing_ray_task_is_one_line_naming_its_file(local_cluster, tmp_path):
    """A range whose file is gone when its Ray task runs: ``ClusterError``, one line naming the file."""
    from rl_board.readers import ReadOptions, reader_for

    gone = tmp_path / "gone.jsonl"
    with pytest.raises(cluster.ClusterError) as caught:
        cluster.run_ranges(reader_for("jsonl"), [(str(gone), 0, 100)], str(tmp_path), ReadOptions(), None, "auto")
    message = str(caught.value)
    assert str(gone) in message and "FileNotFoundError" in message and "\n" not in message


def test_the_page_reads_on_ray_with_rl_board_ray(local_cluster, tmp_path, monkeypatch):
    """With RL_BOARD_RAY set, the page's Load hands the run's ranges to Ray tasks and shows the run."""
    from page_steps import load, open_page

    from rl_board.views import keys

    write_lines(tmp_path / "run" / "rank0.jsonl",
                [sample(i % 3 + 1, float(i % 5), prompt=f"p{i}", response=f"r{i}") for i in range(2000)])
    monkeypatch.setenv(cluster.RAY_ENV, "auto")
    monkeypatch.setattr(ranges, "MIN_RANGE_BYTES", 20_000)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 20_000)
    cluster.LAST_READ.clear()
    at = load(open_page(tmp_path, "run"))
    assert not at.exception
    assert cluster.LAST_READ["tasks"] > 2 and cluster.LAST_READ["done"] == cluster.LAST_READ["tasks"]
    assert at.slider(key=keys.STEP).max == 3


def parent_of(pid: int) -> int:
    """The parent process id of ``pid`` (field 4 of ``/proc/PID/stat``, read after the ``)`` that ends
    the command name, which may itself hold spaces or parentheses)."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return int(fh.read().rsplit(b")", 1)[1].split()[1])


def started_here(pid: int) -> bool:
    """Whether ``pid`` descends from this test process: the raylet that ``ray.init`` starts is its child
    and the raylet forks the workers, so only this session's Ray workers pass, never another user's."""
    me = os.getpid()
    for _ in range(64):  # a process tree is shallow; the bound guards against a pid reused mid-walk
        if pid == me:
            return True
        if pid <= 1:
            return False
        pid = parent_of(pid)
    return False


def test_only_this_sessions_ray_workers_count_as_started_here(local_cluster):
    """The kill test's filter: a Ray task's own process descends from this one; a ``ray::`` titled
    process started outside this test (a stand-in for another user's cluster) and pid 1 don't."""
    import subprocess
    import sys

    @ray.remote
    def own_pid():
        return os.getpid()

    assert started_here(ray.get(own_pid.remote()))
    assert not started_here(1)
    # A process titled like a Ray task but a child of pid 1 (setsid + double fork), as another cluster's is.
    script = ("import os, sys, time\n"
              "if os.fork(): os._exit(0)\n"
              "os.setsid(); sys.stdout.write(str(os.getpid())); sys.stdout.flush()\n"
              "os.close(1); os.close(2); time.sleep(60)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    stranger = int(out.stdout)
    try:
        assert not started_here(stranger)
    finally:
        os.kill(stranger, 15)


def test_ray_workers_killed_mid_read_cost_a_retry_or_one_line(local_cluster, tmp_path, monkeypatch, capsys):
    """Ray worker processes of this test's own cluster (never another's ``ray::`` processes) killed
    (SIGKILL) while ``index --ray`` runs: Ray runs their tasks again
    (``cluster.MAX_RETRIES``), so the run is read whole and the cache it leaves prints what a local read
    prints; a task that died more often than that is one line naming its file. Never a traceback."""
    import signal
    import threading
    import time

    from rl_board.cli import main

    run = tmp_path / "run"
    write_lines(run / "r.jsonl", [sample(i % 10 + 1, float(i % 7), prompt=f"p{i}", response=f"the answer {i} " * 40)
                                  for i in range(6000)])
    expected = command("summary", str(run), "--json", "--no-cache")
    monkeypatch.setenv(cluster.RAY_ENV, "")
    monkeypatch.setattr(ranges, "MIN_RANGE_BYTES", 200_000)
    monkeypatch.setattr(ranges, "RANGE_BYTES", 200_000)
    killed, done = [], threading.Event()

    def kill_running_tasks():  # a task's worker process is titled ray::_task while it runs one
        while not done.is_set() and len(killed) < 3:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as fh:
                        running = fh.read().startswith(b"ray::_task")
                    if running and started_here(int(pid)):
                        os.kill(int(pid), signal.SIGKILL)
                        killed.append(pid)
                        break
                except OSError:
                    continue
            time.sleep(0.005)

    killer = threading.Thread(target=kill_running_tasks)
    killer.start()
    try:
        status = main(["index", str(run), "--ray", "--json"])
    finally:
        done.set()
        killer.join()
    _, err = capsys.readouterr()
    if not killed:
        pytest.skip("every Ray task finished before one could be killed")
    assert "Traceback" not in err
    if status == 0:
        monkeypatch.delenv(cluster.RAY_ENV)
        cached = command("summary", str(run), "--json")
        assert close_to(json.loads(cached.stdout), json.loads(expected.stdout))
    else:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "Ray task" in errors[0] and str(run / "r.jsonl") in errors[0], err
