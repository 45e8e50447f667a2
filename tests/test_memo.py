"""A summary kept beside the caches (``rl_board.store.memo``) is served only while the run's files are as they were."""

import json
import os
import time

from conftest import sample, write_lines

from rl_board.cli import main
from rl_board.store import memo


def _age(folder, seconds=60):
    """Files written more than a moment ago (a memo is not kept for a file just changed)."""
    past = time.time() - seconds
    for path in folder.rglob("*"):
        os.utime(path, (past, past))


def _summary(capsys, *args):
    code = main(["summary", *map(str, args), "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else None, captured.err


def _run(folder):
    write_lines(folder / "rank0.jsonl", [sample(1, 1.0), sample(1, 3.0), sample(2, 5.0), "{broken"])
    _age(folder)
    return folder


def _forbid_reads(monkeypatch):
    import rl_board.analysis.source

    def fail(*args, **kwargs):
        raise AssertionError("the run was read")

    monkeypatch.setattr(rl_board.analysis.source, "load_run", fail)


def test_a_second_summary_is_served_without_reading(tmp_path, capsys, monkeypatch):
    run = _run(tmp_path / "run")
    code, first, err = _summary(capsys, run)
    assert code == 0 and [s["reward_mean"] for s in first["steps"]] == [2.0, 5.0]
    _forbid_reads(monkeypatch)
    code, second, err_again = _summary(capsys, run)
    assert (code, second, err_again) == (0, first, err)


def test_any_change_to_the_files_reads_again(tmp_path, capsys):
    run = _run(tmp_path / "run")
    _summary(capsys, run)
    with open(run / "rank0.jsonl", "a") as fh:  # a line appended
        fh.write(json.dumps(sample(3, 7.0)) + "\n")
    _age(run)
    _, got, _ = _summary(capsys, run)
    assert [s["step"] for s in got["steps"]] == [1, 2, 3]
    write_lines(run / "rank1.jsonl", [sample(3, 9.0)])  # a file added
    _age(run)
    _, got, _ = _summary(capsys, run)
    assert got["steps"][-1]["reward_mean"] == 8.0  # (7 + 9) / 2


def test_no_memo_is_kept_for_files_changed_a_moment_ago(tmp_path, capsys):
    """A file rewritten again within its clock's tick would look unchanged: a run whose files changed
    in the last two seconds is read every time."""
    run = tmp_path / "run"
    write_lines(run / "rank0.jsonl", [sample(1, 1.0)])
    _summary(capsys, run)
    assert not list(memo._root(None).glob("*.json"))
    _age(run)
    _summary(capsys, run)
    assert len(list(memo._root(None).glob("*.json"))) == 1


def test_other_settings_are_other_memos_and_no_cache_keeps_none(tmp_path, capsys, monkeypatch):
    run = _run(tmp_path / "run")
    _summary(capsys, run, "--no-cache")
    assert not list(memo._root(None).glob("*.json"))
    _summary(capsys, run)
    _, got, _ = _summary(capsys, run, "--pad-token", "none")
    assert got["settings"]["pad_token"] is None
    assert len(list(memo._root(None).glob("*.json"))) == 2


def test_cache_clear_removes_a_runs_memos(tmp_path, capsys, monkeypatch):
    run, other = _run(tmp_path / "run"), _run(tmp_path / "other")
    _summary(capsys, run)
    _summary(capsys, other)
    assert main(["cache", "clear", str(run)]) == 0
    kept = [json.loads(p.read_text())["run"] for p in memo._root(None).glob("*.json")]
    assert kept == [str(other.resolve())]
    assert main(["cache", "clear"]) == 0
    assert not list(memo._root(None).glob("*.json"))


def test_json_pieces_join_to_json_dumps_text():
    """A summary-shaped dict (a list of 10,000 step dicts, longer than a chunk, with unicode, None, nested and
    empty dicts and lists) gives in pieces exactly json.dumps' text; a NaN in a chunk still raises."""
    import json

    import pytest

    from rl_board.store.memo import LIST_CHUNK, json_pieces

    steps = [{"step": i, "reward_mean": i / 7, "extras": {f"k{i % 3}": 1.5} if i % 2 else {}, "name": "é\u2028"}
             for i in range(10_000)]
    value = {"settings": {"pad": None, "fields": {}}, "errors": [], "steps": steps, "notes": ["a", "b"],
             "checks": {"x": 0}, "empty": {}}
    assert len(steps) > LIST_CHUNK
    assert "".join(json_pieces(value)) == json.dumps(value, ensure_ascii=False, allow_nan=False)
    with pytest.raises(ValueError):
        "".join(json_pieces({"steps": [{"v": float("nan")}] * (LIST_CHUNK + 1)}))
