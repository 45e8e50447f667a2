"""slime's debug rollout data (.pt pickles): opened by torch's restricted loader in a worker process,
never unpickled by the board; without torch each file says what to install."""

import importlib.util
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rl_board.readers import detect, slime

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _summary(*args):
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", "--json", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)
    return json.loads(proc.stdout)


def _worker_output(name: str) -> dict:
    """What torch_load.py printed for a fixture file where torch was installed (make_slime_fixtures.py)."""
    return json.loads((DATA / "slime_json" / f"{name}.json").read_text())


def test_samples_from_what_the_restricted_loader_returned():
    """The worker's JSON of rollout 0 (written by slime's save_debug_rollout_data, loaded with
    weights_only=True): 2 samples, rewards 1.0 and 0.5 (a dict's score), turns and tool calls split
    from the glued response, the response's token ids and mask; the third sample's 3 log-probs for a
    2-token response rejected, named."""
    out = _worker_output("0")
    assert out["returncode"] == 0
    samples, errors = slime.samples_from(json.loads(out["stdout"]), 0)
    assert [s["reward"] for s in samples] == [1.0, 0.5]
    assert errors == [(3, "'rollout_log_probs' has 3 values for a response of 2 tokens (response_length)")]
    first = samples[0]
    assert [t["role"] for t in first["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert first["messages"][2]["tool_calls"][0]["name"] == "calc" and first["messages"][4]["content"] == "It is 4 — vier."
    assert first["token_ids"] == list(range(105, 113)) and first["loss_mask"] == [True] * 3 + [False] * 3 + [True] * 2
    assert samples[1]["extras"]["reward/acc"] == 1.0 and samples[1]["extras"]["truncated"] == 1.0
    assert samples[1]["ground_truth"] == "6"


def test_the_restricted_loader_refuses_a_class_of_the_trainer():
    """A file holding an object of the trainer's own class: torch.load(weights_only=True) refused it."""
    out = _worker_output("2")
    assert out["returncode"] == 4 and "UnpicklingError" in out["stderr"]


@pytest.mark.slow
def test_without_torch_each_file_says_what_to_install(tmp_path, monkeypatch):
    """With no torch for the worker, each .pt is named with the extra to install; a hostile pickle placed
    among them is never run (the board never unpickles)."""
    run = tmp_path / "dump"
    shutil.copytree(DATA / "slime_run", run)
    marker = tmp_path / "ran"

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (run / "rollout_data" / "3.pt").write_bytes(pickle.dumps(Boom()))
    assert detect(run) is slime and detect(run / "rollout_data") is slime
    if HAS_TORCH:  # hide torch from the worker: a folder first on its path with a torch that fails to import
        fake = tmp_path / "notorch" / "torch"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text("raise ImportError('hidden')")
        monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    got = _summary(run)
    assert got["format"] == "slime" and got["lines_ok"] == 0
    unreadable = {f["file"]: f["error"] for f in got["files_unreadable"]}
    assert set(unreadable) == {"rollout_data/0.pt", "rollout_data/1.pt", "rollout_data/2.pt", "rollout_data/3.pt"}
    assert all("pip install 'rl-board[torch]'" in why for why in unreadable.values())
    evals = _summary(run, "--split", "eval")["files_unreadable"]
    assert [f["file"] for f in evals] == ["rollout_data/eval_1.pt"] and "rl-board[torch]" in evals[0]["error"]
    assert not marker.exists()


@pytest.mark.slow
def test_without_torch_a_run_says_once_what_to_install(tmp_path, monkeypatch):
    """A slime run of three .pt files read without torch: the command says what to install once (one note on
    stderr naming the first file and the 2 more), and its file list names the three files without repeating it."""
    if HAS_TORCH:
        _hide_torch(tmp_path, monkeypatch)
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(DATA / "slime_run"), "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    assert (proc.stdout + proc.stderr).count(slime.INSTALL) == 1
    assert "note: Could not read rollout_data/0.pt and 2 more files (" + slime.INSTALL in proc.stderr
    assert "rollout_data/0.pt, rollout_data/1.pt, rollout_data/2.pt: could not be read" in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch is an optional extra (rl-board[torch])")
def test_summary_with_torch(tmp_path):
    """With torch: per rollout id, samples, mean reward, assistant turns and tool calls; eval_1 is the
    eval split; the refused file is named."""
    got = _summary(DATA / "slime_run")
    steps = {s["step"]: (s["samples"], s["reward_mean"], s["turns_mean"], s["tool_calls_mean"]) for s in got["steps"]}
    assert steps == {0: (2, 0.75, 1.5, 0.5), 1: (1, 0.0, 1.0, 0.0)}
    assert [e["line"] for e in got["errors"]] == [3]
    assert [f["file"] for f in got["files_unreadable"]] == ["rollout_data/2.pt"]
    evals = _summary(DATA / "slime_run", "--split", "eval")
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in evals["steps"]] == [(1, 2, 0.5)]


def _hide_torch(tmp_path, monkeypatch):
    """Hide torch from the worker as an environment without it does: a first folder on its path whose
    ``torch`` raises ModuleNotFoundError for itself."""
    fake = tmp_path / "notorch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')")
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch is an optional extra (rl-board[torch])")
def test_a_file_that_needed_torch_opens_once_torch_is_there(tmp_path, monkeypatch):
    """A run opened without torch, then with it: the open run (a refresh) and a new load through the cache
    it wrote both read rollout 0's 2 samples, instead of the failure kept from the first try."""
    from rl_board.analysis.source import RunSource, load_run

    run = tmp_path / "dump"
    shutil.copytree(DATA / "slime_run", run)
    _hide_torch(tmp_path, monkeypatch)
    source = RunSource(run, cache_root=tmp_path / "cache")
    first = source.refresh()
    assert len(first.samples) == 0 and dict(first.report.unreadable)["rollout_data/0.pt"] == slime.INSTALL
    monkeypatch.delenv("PYTHONPATH")
    again = load_run(run, cache_root=tmp_path / "cache")  # a new load, from the cache the first one wrote
    assert sorted(again.samples["reward"]) == [0.0, 0.5, 1.0]  # 0.pt's two, 1.pt's one
    assert sorted(source.refresh().samples["reward"]) == [0.0, 0.5, 1.0]  # the open run, refreshed


def _pt_run(tmp_path, data) -> Path:
    import torch

    (tmp_path / "run" / "rollout_data").mkdir(parents=True)
    torch.save(data, tmp_path / "run" / "rollout_data" / "0.pt")
    return tmp_path / "run"


def _unreadable(run, **env) -> str:
    import os

    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", "--json", str(run)], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "RL_BOARD_CACHE_DIR": str(run.parent / "cache"), **env},
                          timeout=240)  # a hang guard, not a timed assert
    (got,) = json.loads(proc.stdout)["files_unreadable"]
    return got["error"]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch is an optional extra (rl-board[torch])")
def test_a_small_pickle_of_a_billion_shared_numbers_stops_at_the_output_bound(tmp_path):
    """A 14 KB .pt whose list is shared 10^6 times (10^9 numbers once printed) is counted before it is
    made plain: more than the 256 MB of JSON the worker may print, said at once."""
    inner = [0.5] * 1000
    run = _pt_run(tmp_path, {"samples": [{"prompt": "p", "response": "r", "reward": 1.0,
                                          "rollout_log_probs": [[inner] * 1000] * 1000}]})
    assert (run / "rollout_data" / "0.pt").stat().st_size < 20_000
    assert _unreadable(run) == "its data is more than 256 MB as JSON (RL_BOARD_PT_OUTPUT_MB raises the bound)"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch is an optional extra (rl-board[torch])")
def test_the_worker_runs_under_its_memory_bound(tmp_path):
    """A 2 KB .pt holding a tensor of 10^9 numbers over one stored value (stride 0): with the output
    bound raised, making it a list meets the worker's memory bound (RLIMIT_AS), named."""
    import torch

    run = _pt_run(tmp_path, {"samples": [{"prompt": "p", "response": "r", "reward": 1.0,
                                          "x": torch.zeros(1).expand(10 ** 9)}]})
    why = _unreadable(run, RL_BOARD_PT_OUTPUT_MB="1000000", RL_BOARD_PT_MEMORY_GB="1.5")
    assert why == "loading it needs more than 1.5 GB of memory (RL_BOARD_PT_MEMORY_GB raises the bound)"


class Trainers:
    """A class of the trainer's own, which the restricted loader does not build."""


@pytest.mark.slow
@pytest.mark.skipif(not HAS_TORCH, reason="torch is an optional extra (rl-board[torch])")
def test_a_refusal_names_the_class_and_never_suggests_loading_unrestricted(tmp_path):
    """The refused file names the class refused; torch's advice (weights_only=False, allowlisting) is not relayed."""
    run = _pt_run(tmp_path, {"samples": [Trainers()]})
    why = _unreadable(run)
    assert f"the class {__name__}.Trainers" in why or "the class test_slime.Trainers" in why
    assert "weights_only=False" not in why and "add_safe_globals" not in why and "trust" not in why
