"""trackio databases: one sample per trace row, numeric metadata as extras, opened read-only."""

import os

import pytest
from agent_writers import write_trackio

from rl_board.analysis.source import load_run
from rl_board.analysis.summary import build_summary
from rl_board.readers import detect, trackio
from rl_board.readers.base import FileError


def _messages(answer):
    return [{"role": "user", "content": [{"type": "text", "text": "Summarise this page"},
                                         {"_type": "trackio.image", "file_path": "a.png", "caption": None}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "fetch", "arguments": {"url": "x"}}}]},
            {"role": "tool", "name": "fetch", "content": "<h1>Ünïcode</h1>"},
            {"role": "assistant", "content": answer}]


def test_trackio_database(tmp_path):
    """Rows of two steps; reward from the metadata (a trace without one has none), the other
    numbers as extras; each database is a split; the files and their folder are left exactly as
    they were."""
    db = tmp_path / "runs" / "traces" / "my-project.db"
    write_trackio(db, "run-a", 0, "rollouts", [
        (_messages("A page."), {"reward": 1.0, "rewards/accuracy": 1.0, "advantage": 0.5, "group_id": 7}),
        (_messages(""), {"reward": 0.0, "rewards/accuracy": 0.0, "advantage": float("nan"), "group_id": 7})])
    write_trackio(db, "run-a", 8, "rollouts", [(_messages("B"), {"model_version": 8})])
    write_trackio(db.with_name("other.db"), "run-b", 0, "rollouts", [(_messages("C"), {"reward": 0.5})])
    before = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in db.parent.iterdir()}
    assert detect(db.parent) is trackio
    run = load_run(db.parent, cache_root=False, split="my-project")
    assert run.splits == ("my-project", "other")
    assert run.samples["step"].tolist() == [0, 0, 8]
    rewards = run.samples["reward"].tolist()
    assert rewards[:2] == [1.0, 0.0] and rewards[2] != rewards[2]  # none: NaN
    assert run.samples["extra:rewards/accuracy"].tolist()[:2] == [1.0, 0.0]
    assert run.samples["extra:group_id"].tolist()[:2] == [7.0, 7.0]
    texts = run.with_text(run.samples)
    assert texts["prompt"][0] == "Summarise this page\n[image]" and texts["response"].tolist() == ["A page.", "", "B"]
    turns = run.record_parts(0)[0]["messages"]
    assert turns[1]["tool_calls"] == [{"id": "c", "name": "fetch", "arguments": '{"url": "x"}'}]
    assert turns[2]["content"] == "<h1>Ünïcode</h1>"
    steps = build_summary(run)["steps"]
    assert [(s["step"], s["samples"], s["turns_mean"], s["tool_calls"]) for s in steps] == [
        (0, 2, 2.0, {"fetch": 2}), (8, 1, 2.0, {"fetch": 1})]
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in db.parent.iterdir()}
    assert after == before


def test_a_database_without_traces_is_named(tmp_path):
    """A .db without a traces table is an unreadable file with the reason; nothing is written."""
    import sqlite3

    conn = sqlite3.connect(tmp_path / "p.db")
    conn.execute("CREATE TABLE metrics (step INTEGER)")
    conn.commit()
    conn.close()
    mtime = os.stat(tmp_path / "p.db").st_mtime_ns
    run = load_run(tmp_path, cache_root=False)
    assert run.report.lines_ok == 0 and "no readable traces table" in run.report.unreadable[0][1]
    assert os.stat(tmp_path / "p.db").st_mtime_ns == mtime


def _rl_board(*argv, timeout=120):
    """``rl-board ARGV`` as its own process; the timeout only guards the test run against a hang."""
    import subprocess
    import sys

    from conftest import REPO

    return subprocess.run([sys.executable, "-m", "rl_board", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


@pytest.mark.slow
def test_a_traces_view_that_never_ends_is_refused(tmp_path):
    """A 4 KB database whose ``traces`` is a VIEW counting to 10**11 (hours of SQLite's time before): the
    read ends at once, the file named as unreadable with the reason, never a hang."""
    import sqlite3

    db = tmp_path / "proj.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE VIEW traces AS WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c "
                 "WHERE n < 100000000000) SELECT max(n) AS rowid, 1 AS step, 'k' AS key, 0 AS trace_index, "
                 "'r' AS run_name, '[]' AS messages, '{}' AS metadata FROM c")
    conn.commit()
    conn.close()
    assert db.stat().st_size <= 8192
    done = _rl_board("summary", str(tmp_path), "--no-cache", "--json")
    assert "Traceback" not in done.stderr, done.stderr
    assert "proj.db" in done.stderr and "traces is a view" in done.stderr


@pytest.mark.slow
def test_a_query_past_the_time_limit_is_interrupted_and_named(tmp_path, monkeypatch):
    """A traces table of 200,000 rows read under a limit of a microsecond (``RL_BOARD_SQLITE_SECONDS``):
    SQLite's progress handler stops the query; the file is unreadable with the limit and how to raise
    it named. Under a limit of 60 s the same table reads whole."""
    import sqlite3

    conn = sqlite3.connect(tmp_path / "big.db")
    conn.execute("CREATE TABLE traces (step INTEGER, key TEXT, trace_index INTEGER, run_name TEXT, messages TEXT, "
                 "metadata TEXT)")
    conn.executemany("INSERT INTO traces VALUES (?, 'k', 0, 'r', '[]', '{}')", ((i,) for i in range(200_000)))
    conn.commit()
    conn.close()
    monkeypatch.setenv(trackio.QUERY_SECONDS_ENV, "0.000001")
    with pytest.raises(FileError) as caught:
        trackio.read_table(tmp_path / "big.db")
    assert trackio.QUERY_SECONDS_ENV in str(caught.value) and "limit" in str(caught.value)
    monkeypatch.setenv(trackio.QUERY_SECONDS_ENV, "60")
    table, errors, rows = trackio.read_table(tmp_path / "big.db")
    assert (table.num_rows, errors, rows) == (200_000, [], 200_000)


@pytest.mark.slow
def test_a_fifo_named_like_a_database_is_not_opened(tmp_path):
    """A FIFO named ``proj.db`` (no writer: opening it would wait forever) beside nothing else: ``detect``
    and ``summary`` end and say no reader opens the folder."""
    os.mkfifo(tmp_path / "proj.db")
    detected = _rl_board("detect", str(tmp_path))
    assert detected.returncode == 1 and "Traceback" not in detected.stderr
    summary = _rl_board("summary", str(tmp_path), "--no-cache")
    assert "Traceback" not in summary.stderr and "no run files" in summary.stderr
