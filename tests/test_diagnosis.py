"""Why a folder does not open: rl-board detect, the note of a command, the sidebar's message."""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import command, write_lines
from ray_writers import verl_dump
from streamlit.testing.v1 import AppTest

from rl_board.store.diagnosis import compute_diagnosis

REPO = Path(__file__).resolve().parents[1]


def _detect(*args):
    proc = command("detect", *map(str, args))
    return proc.returncode, proc.stdout, proc.stderr


def _rollouts(folder: Path, steps):
    for step in steps:
        verl_dump(folder, step, ["q"], ["a"], ["1"], [1.0], {"acc": [True]})


@pytest.mark.slow
def test_detect_names_reader_files_splits_and_steps(tmp_path):
    """A folder that opens: its reader, files, splits and the steps its file names carry."""
    _rollouts(tmp_path / "exp" / "rollout_data", [1, 2, 3, 5])
    _rollouts(tmp_path / "exp" / "val_data", [0, 5])
    code, out, _ = _detect(tmp_path / "exp", "--json")
    got = json.loads(out)
    assert code == 0 and got["reader"] == "verl" and got["file_count"] == 6
    assert got["splits"] == ["train", "validation"] and got["steps"] == [0, 1, 2, 3, 5]
    code, out, _ = _detect(tmp_path / "exp")
    assert code == 0 and "reader: verl" in out and "steps: 0..3, 5" in out


@pytest.mark.slow
def test_detect_says_why_a_folder_does_not_open(tmp_path):
    """An experiment folder with a rollout folder only: no reader; what was found, the first line's keys,
    the sub-folder that opens, the closest reader and what it expects, and one thing to try."""
    _rollouts(tmp_path / "exp" / "rollout_data", [1, 2])
    code, out, _ = _detect(tmp_path / "exp", "--json")
    got = json.loads(out)
    assert code == 1 and got["reader"] is None
    assert got["found"]["files_by_kind"] == {".jsonl": 2}
    assert got["found"]["first_line"] == {"file": "rollout_data/1.jsonl", "keys": ["input", "output", "gts", "score", "step", "acc"]}
    assert got["runs_below"] == [{"folder": "rollout_data", "reader": "jsonl"}]
    assert got["closest"]["reader"] == "verl" and got["closest"]["files_of_its_layout"] == 2
    assert got["try"].startswith("open a sub-folder: rollout_data")


def test_pickles_are_named_never_opened(tmp_path):
    """A folder of pickles: named as pickles the board never opens (loading one would raise here)."""
    folder = tmp_path / "dump" / "batches"
    folder.mkdir(parents=True)

    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('unpickled')",))

    (folder / "0.pkl").write_bytes(pickle.dumps(Boom()))
    got = compute_diagnosis(tmp_path / "dump")
    assert got["reader"] is None and got["pickles"] == ["batches/0.pkl"] and "never unpickles" in got["try"]


@pytest.mark.slow
def test_summary_of_an_empty_run_says_what_it_holds(tmp_path):
    """summary of a folder no reader opens prints the diagnosis on stderr."""
    _rollouts(tmp_path / "exp" / "rollout_data", [1])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(tmp_path / "exp")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1
    assert "note: no run files here." in proc.stderr and "try: open a sub-folder: rollout_data" in proc.stderr


def test_sidebar_says_why_a_root_holds_no_run(tmp_path):
    """The sidebar, given a folder of pickles as root, shows what it found and what to try, as text."""
    folder = tmp_path / "root" / "x" / "deep"
    folder.mkdir(parents=True)
    (folder / "1.pkl").write_bytes(b"\x80\x04N.")
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key="root").input(str(tmp_path / "root")).run()
    assert not at.exception
    assert any("No run in this folder" in e.value for e in at.sidebar.error)
    text = "\n".join(t.value for t in at.sidebar.text)
    assert "pickles (never unpickled): x/deep/1.pkl" in text and "try:" in text


@pytest.mark.slow
def test_an_unrelated_folder_names_no_closest_reader(tmp_path):
    """Folders of JSON lines no trainer writes (keys a, b) match only readers' suffix patterns
    (skyrl's */*.jsonl, verl's [0-9]*.jsonl): no closest reader, no "it expects" line."""
    (tmp_path / "logs" / "a" / "b").mkdir(parents=True)
    (tmp_path / "logs" / "a" / "b" / "x.jsonl").write_text('{"a": 1, "b": 2}\n')
    (tmp_path / "logs" / "a" / "1.jsonl").write_text('{"a": 1, "b": 2}\n')
    code, out, _ = _detect(tmp_path / "logs")
    assert code == 1 and "closest reader" not in out and "expects" not in out
    assert compute_diagnosis(tmp_path / "logs")["closest"] is None


def test_detect_looks_twelve_levels_down(tmp_path):
    """A file 12 folder levels down is looked at (deeper than AReaL's 7), one 13 levels down is not."""
    twelve = tmp_path.joinpath("top", *map(str, range(1, 13)))
    twelve.mkdir(parents=True)
    (twelve / "x.jsonl").write_text('{"a": 1}\n')
    (twelve / "13").mkdir()
    (twelve / "13" / "y.jsonl").write_text('{"a": 1}\n')
    assert compute_diagnosis(tmp_path / "top")["found"]["files_looked_at"] == 1


@pytest.mark.slow
def test_a_command_error_is_not_preceded_by_a_detect_block(tmp_path):
    """summary --split of a folder that holds no run prints the error alone: no detect block first."""
    _rollouts(tmp_path / "exp" / "rollout_data", [1])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(tmp_path / "exp"), "--split", "nope"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "folder:" not in proc.stderr


@pytest.mark.slow
def test_detect_names_the_trainer_metrics_the_run_offers(tmp_path):
    """A run whose parent holds the trainer's metrics JSONL: detect names it relative to the run
    ("../train_metrics.jsonl"), as the Trainer metrics area finds it; a run with none has no such line."""
    _rollouts(tmp_path / "exp" / "rollout_data", [1, 2])
    (tmp_path / "exp" / "train_metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n')
    _rollouts(tmp_path / "bare" / "rollout_data", [1])
    assert compute_diagnosis(tmp_path / "exp" / "rollout_data")["metrics"] == "../train_metrics.jsonl"
    code, out, _ = _detect(tmp_path / "exp" / "rollout_data")
    assert code == 0 and "trainer metrics: ../train_metrics.jsonl (rl-board metrics)" in out.splitlines()
    assert compute_diagnosis(tmp_path / "bare" / "rollout_data")["metrics"] is None
    assert "trainer metrics" not in _detect(tmp_path / "bare" / "rollout_data")[1]


def test_detect_names_a_run_two_levels_down_and_never_quotes_a_tokenizer(tmp_path):
    """A trainer's output folder holding a tokenizer and its run two folders down (``logs/exp_001``): detect
    names that sub-folder by its path and suggests opening it, and the first line it quotes is the run's,
    not ``tokenizer.json``'s."""
    out = tmp_path / "output"
    (out / "model").mkdir(parents=True)
    (out / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE"}}')
    (out / "model" / "config.json").write_text('{"architectures": ["Qwen2"]}')
    write_lines(out / "logs" / "exp_001" / "rollout_data_rank0.jsonl", [{"step": 1, "reward": 1.0, "response": "a"}])
    got = compute_diagnosis(out)
    assert got["reader"] is None and got["runs_below"] == [{"folder": "logs/exp_001", "reader": "jsonl"}]
    assert got["found"]["first_line"] == {"file": "logs/exp_001/rollout_data_rank0.jsonl",
                                          "keys": ["step", "reward", "response"]}
    assert got["try"].startswith("open a sub-folder: logs/exp_001 (jsonl)")
def test_detect_names_the_keys_of_a_first_line_over_a_mebibyte(tmp_path):
    """A first line of 2 MB (a long judge's rationale) still has its keys named, in the writer's order."""
    for step in (1, 2):
        verl_dump(tmp_path / "exp" / "rollout_data", step, ["q"], ["a"], ["1"], [1.0], {"judge_rationale": ["r" * 2_000_000]})
    got = compute_diagnosis(tmp_path / "exp")
    assert got["found"]["first_line"] == {"file": "rollout_data/1.jsonl",
                                          "keys": ["input", "output", "gts", "score", "step", "judge_rationale"]}
