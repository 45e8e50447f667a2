"""The runs list: every run under a root at any depth, with its counts, and the page's first screen."""

from __future__ import annotations

import json
import lzma
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO, sample, write_lines
from streamlit.testing.v1 import AppTest

from rl_board.analysis.source import load_run
from rl_board.store.discovery import describe_runs, discover_runs
from rl_board.views import keys


@pytest.fixture
def tree(tmp_path):
    """Thirteen-trainer style folder: runs 1–3 levels down, a compressed one, and folders no reader reads."""
    root = tmp_path / "outputs"
    write_lines(root / "ppo" / "rollout_data_rank0.jsonl", [sample(s, 0.5) for s in (1, 1, 2)])
    write_lines(root / "verl" / "rollout_data" / "1.jsonl", [sample(1, 1.0)])
    write_lines(root / "verl" / "rollout_data" / "2.jsonl", [sample(2, 0.0), sample(2, 1.0)])
    write_lines(root / "nested" / "logs" / "exp_001" / "r.jsonl", [sample(3, 1.0)])
    (root / "trl" / "output" / "completions").mkdir(parents=True)
    pq.write_table(pa.table({"step": pa.array([4, 4], pa.int64()), "prompt": ["a", "b"], "completion": ["x", "y"],
                             "r": [1.0, 0.0]}), root / "trl" / "output" / "completions" / "completions_00004.parquet")
    packed = root / "packed" / "data_rank0.jsonl.xz"
    packed.parent.mkdir()
    packed.write_bytes(lzma.compress(b"".join(json.dumps(sample(s, 1.0)).encode() + b"\n" for s in (1, 2, 3))))
    (root / "checkpoints").mkdir()
    (root / "checkpoints" / "rollouts_step_1.pt").write_bytes(b"\x80\x04not opened")
    (root / "hf").mkdir()
    (root / "hf" / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.1}]}))
    (root / ".hidden").mkdir()
    write_lines(root / ".hidden" / "x.jsonl", [sample(1, 1.0)])
    return root


def test_every_run_at_any_depth_is_listed_by_relative_path(tree):
    """Runs one to three levels down are found with their format and files; size and last write are
    the files' own (os.stat); a hidden folder is not looked into."""
    found = discover_runs(tree)
    assert found.names() == ["nested/logs/exp_001", "packed", "ppo", "trl/output/completions", "verl/rollout_data"]
    by_name = {run.name: run for run in found.runs}
    assert by_name["trl/output/completions"].format == "parquet" and by_name["ppo"].format == "jsonl"
    verl = by_name["verl/rollout_data"]
    files = [tree / "verl" / "rollout_data" / n for n in ("1.jsonl", "2.jsonl")]
    assert verl.files == 2 and verl.size == sum(os.stat(f).st_size for f in files)
    assert verl.last_write == max(os.stat(f).st_mtime_ns for f in files) / 1e9
    assert verl.steps == 2 and verl.samples is None and verl.counted_from == "file names"  # 1.jsonl, 2.jsonl
    assert by_name["packed"].compressed == 1 and by_name["packed"].files == 1


def test_folders_of_logs_no_reader_reads_are_named_with_the_reason(tree):
    """A folder of pickles and one of a trainer's metrics are listed as not read, each saying why."""
    found = discover_runs(tree)
    reasons = {u.name: u.reason for u in found.unclaimed}
    assert set(reasons) == {"checkpoints", "hf"}
    assert "1 .pt file" in reasons["checkpoints"] and "never opened" in reasons["checkpoints"]
    assert "metrics" in reasons["hf"]




def test_trackios_own_trace_store_is_not_offered_as_a_run(tree):
    """A trackio project folder's logbook (trace_sources.json beside traces/raw/SESSION.jsonl, the agent
    transcript trackio's logbook_trace.refresh_trace copies there) is no run: the runs are the tree's."""
    project = tree / "trackio" / "my-project"
    (project / "traces" / "raw").mkdir(parents=True)
    (project / "trace_sources.json").write_text(json.dumps({"schema_version": 1, "sessions": [{"id": "s1"}]}))
    write_lines(project / "traces" / "raw" / "s1.jsonl", [
        {"type": "session_meta", "payload": {"id": "s1", "cwd": "/work"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": "hi"}}])
    before = discover_runs(tree).names()
    assert all("trackio" not in name for name in before)
    assert all("trackio" not in u.name for u in discover_runs(tree).unclaimed)


def test_a_tokenizer_folder_is_no_trainer_metrics(tree):
    """A model's tokenizer/ folder (tokenizer.json, tokenizer_config.json, special_tokens_map.json) is
    not listed as a folder of logs: it was called "a trainer's metrics?"."""
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (tree / "ppo" / "tokenizer").mkdir(exist_ok=True)
        (tree / "ppo" / "tokenizer" / name).write_text("{}")
    found = discover_runs(tree)
    assert {u.name for u in found.unclaimed} == {"checkpoints", "hf"}


def test_a_run_folder_given_as_the_root_opens_itself(tree):
    """The root itself is the run: listed as "."."""
    assert discover_runs(tree / "ppo").names() == ["."]


def test_steps_and_samples_come_from_the_cache_while_the_files_are_as_read(tree):
    """After a read, the cache's counts are listed (2 steps, 3 samples, counted by hand); once a file
    changes they are unknown again, never stale."""
    assert discover_runs(tree).runs[2].samples is None
    load_run(tree / "ppo")
    ppo = next(r for r in discover_runs(tree).runs if r.name == "ppo")
    assert (ppo.steps, ppo.samples, ppo.counted_from) == (2, 3, "cache")
    with open(tree / "ppo" / "rollout_data_rank0.jsonl", "a") as fh:
        fh.write(json.dumps(sample(7, 1.0)) + "\n")
    ppo = next(r for r in discover_runs(tree).runs if r.name == "ppo")
    assert (ppo.steps, ppo.samples) == (None, None)


def test_the_walk_is_bounded_and_says_so(tree):
    """With a depth of 1, the runs deeper down are left out and a note names a folder not looked into;
    after six folders, the walk stops and says so."""
    shallow = discover_runs(tree, max_depth=1)
    assert shallow.names() == ["packed", "ppo"]
    assert [note for note in shallow.notes if "deeper than 1" in note] == [
        "Folders deeper than 1 level below the root are not looked into (e.g. nested/logs)."]  # said once
    few = discover_runs(tree, max_folders=6)  # breadth first: the root, checkpoints, hf, nested, packed, ppo
    assert few.names() == ["packed", "ppo"] and any("Stopped after 6 folders" in note for note in few.notes)
    assert shallow.cut and few.cut and not discover_runs(tree).cut


def test_the_rows_read_as_text(tree):
    """describe_runs gives "–" for unknown counts and the splits joined."""
    row = describe_runs(discover_runs(tree).runs)[0]
    assert row["Run"] == "nested/logs/exp_001" and row["Samples"] == "–" and row["Splits"] == "–"


def _page(root) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.session_state[keys.ROOT] = str(root)
    return at.run()


def test_the_first_screen_lists_the_runs_and_one_click_opens_one(tree):
    """Before any run is loaded, the page lists every run as a button with its format, and the folders not
    read; clicking a nested run opens it (its tabs show, the sidebar picks it)."""
    at = _page(tree)
    assert not at.exception
    labels = [b.label.replace("\\", "") for b in at.main.button]
    assert labels == ["nested/logs/exp_001", "packed", "ppo", "trl/output/completions", "verl/rollout_data"]
    assert "parquet" in [t.value for t in at.main.text]
    assert any(t.value.startswith("Not read: checkpoints/") for t in at.main.text)
    assert not any("Pick a run" in i.value for i in at.info)
    at.main.button[4].click().run()
    assert not at.exception and len(at.tabs) > 0
    assert at.sidebar.selectbox(key=keys.RUN).value == "verl/rollout_data"
    assert any("3 samples loaded" in t.value for t in at.text)


def test_the_bundled_samples_open_on_ppo_demo():
    """With the bundled samples as the root, the run picked first is ppo_demo (the walk of docs/getting-started.md)."""
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    assert at.sidebar.selectbox(key=keys.RUN).value == "ppo_demo"
    assert len(at.main.button) == 6


def test_a_run_folder_as_the_root_is_no_dead_end(tree):
    """Typing a run folder as the root lists it and opens it with one click, without an error."""
    at = _page(tree / "ppo")
    assert not at.exception and not at.sidebar.error
    at.main.button[0].click().run()
    assert any("3 samples loaded" in t.value for t in at.text)


def test_a_tokenizer_folder_and_a_run_folders_metrics_are_not_unread_logs(tmp_path):
    """A model's tokenizer folder holds no logs (not "a trainer's metrics?"); a run folder holding
    rollouts/ with its metrics and text log beside them is the run's (the Trainer metrics area of
    mine/rollouts reads its parent's metrics), not "no reader reads this layout"; a folder of metrics with
    no run below it still is named."""
    root = tmp_path / "outputs"
    (root / "model" / "tokenizer").mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json"):
        (root / "model" / "tokenizer" / name).write_text("{}")
    write_lines(root / "mine" / "rollouts" / "rollout_data_rank0.jsonl", [sample(1, 1.0)])
    write_lines(root / "mine" / "train_metrics.jsonl", [{"step": 1, "loss": 0.5}])
    (root / "mine" / "train.log").write_text("step 1 loss 0.5\n")
    write_lines(root / "alone" / "train_metrics.jsonl", [{"step": 1, "loss": 0.5}])
    found = discover_runs(root)
    assert found.names() == ["mine/rollouts"]
    assert [u.name for u in found.unclaimed] == ["alone"]


def test_a_run_reached_through_symlink_loops_is_listed_once(tmp_path):
    """A run holding a link back to the root, a second link to the run and a loop of two links: the run
    is listed once, by its own folder's name (before, once per path: run, run/up/run, ... to the depth)."""
    root = tmp_path / "root"
    write_lines(root / "run" / "r.jsonl", [sample(1, 1.0)])
    (root / "run" / "up").symlink_to(root)
    (root / "alias").symlink_to(root / "run")
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    found = discover_runs(root)
    assert found.names() == ["run"]


def _without_root_override() -> list[str]:
    """The prefix that runs a command without root's power to read any folder (its capabilities dropped
    from the bounding set), so a folder of mode 000 is unreadable as it is for anyone else."""
    if os.geteuid() != 0:
        return []
    import shutil

    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: every folder is readable")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


@pytest.mark.slow
def test_an_unreadable_folder_beside_a_run_is_skipped_and_named(tmp_path):
    """A folder beside a run that can't be read (mode 000): ``summary`` opens the run (the tokenizer search
    skips it; before, a PermissionError traceback), and the runs list skips it and names it in a note."""
    import subprocess
    import sys

    root = tmp_path / "root"
    write_lines(root / "run" / "r.jsonl", [sample(1, 1.0), sample(2, 0.5)])
    locked = root / "locked"
    locked.mkdir()
    prefix = _without_root_override()
    locked.chmod(0)
    try:
        probe = subprocess.run([*prefix, "ls", str(locked)], capture_output=True, timeout=60)
        if probe.returncode == 0:
            pytest.skip("this machine lets the test read a folder of mode 000")
        summary = subprocess.run([*prefix, sys.executable, "-m", "rl_board", "summary", str(root / "run"), "--json",
                                  "--no-cache"], capture_output=True, text=True, cwd=REPO, timeout=300)
        listing = subprocess.run([*prefix, sys.executable, "-c", "import json, sys; from rl_board.store.discovery "
                                  "import discover_runs; d = discover_runs(sys.argv[1]); print(json.dumps([d.names(), "
                                  "d.notes]))", str(root)], capture_output=True, text=True, cwd=REPO, timeout=300)
    finally:
        locked.chmod(0o755)
    assert summary.returncode == 0 and "Traceback" not in summary.stderr, summary.stderr
    assert [s["step"] for s in json.loads(summary.stdout)["steps"]] == [1, 2]
    names, notes = json.loads(listing.stdout)
    assert names == ["run"] and any("locked" in n and "could not be read" in n for n in notes), listing.stderr


def test_a_cache_whose_segments_each_hold_one_step_is_counted(tree):
    """verl writes a file a step: each segment's step is one value, which the segment leaves out and notes.
    The runs list still counts the cached run's 2 steps and its 3 samples (1 and 2 lines, written above)."""
    load_run(tree / "verl" / "rollout_data")
    verl = next(r for r in discover_runs(tree).runs if r.name == "verl/rollout_data")
    assert (verl.steps, verl.samples, verl.counted_from) == (2, 3, "cache")
