"""Tree layouts: a format that keeps its files in a folder tree, with the step and the split in the paths."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from rl_board import readers
from rl_board.analysis.source import load_run
from rl_board.readers import KeyResolver, layout
from rl_board.readers.record_rows import canonical_row, rows_table
from rl_board.store.loader import list_runs


def _tree_reader() -> types.ModuleType:
    """A minimal tree format, as a new reader module would be: one JSON object per line in
    ``rollouts/step_{N}/{split}/samples.jsonl``; a record without a step takes its folder's."""
    mod = types.ModuleType("tree_format")
    mod.NAME, mod.SUFFIX, mod.ALIASES, mod.APPENDABLE = "tree", ".jsonl", {}, False
    mod.GLOBS = ("rollouts/step_*/*/samples.jsonl",)
    mod.split_of = lambda name: name.split("/")[2]

    def read_table(path: Path, options):
        step = layout.step_in("/".join(path.parts[-3:]))
        resolver, rows, lines, errors = KeyResolver(options.fields), [], [], []
        for number, text in enumerate(path.read_text().splitlines(), 1):
            got = canonical_row(json.loads(text), resolver, default_step=step)
            if isinstance(got, str):
                errors.append((number, got))
            else:
                rows.append(got)
                lines.append(number)
        return rows_table(rows, lines, [n - 1 for n in lines], [0] * len(lines)), errors, len(lines) + len(errors)

    def record(fh, name, offset, length, line):
        obj = json.loads(fh.read().decode().splitlines()[offset])
        obj.setdefault("step", layout.step_in(name))
        return obj

    mod.read_table, mod.record = read_table, record
    return mod


@pytest.fixture
def tree(monkeypatch):
    reader = _tree_reader()
    monkeypatch.setattr(readers.registry, "plugins", lambda: (reader,))  # asked before every built-in
    return reader


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_step_in_reads_each_naming_a_trainer_uses():
    """The step comes from the last component that carries one, in each trainer's naming."""
    assert layout.step_in("rollouts/step_12/train/all/traces.jsonl") == 12
    assert layout.step_in("token_exports/step_3/rank_1.jsonl") == 3
    assert layout.step_in("trajectories/train/0042.parquet") == 42
    assert layout.step_in("episodes/val_step_7_epoch_2/episode_0.json") == 7
    assert layout.step_in("global_step_40/rollouts.jsonl") == 40
    assert layout.step_in("train_data_step9.jsonl") == 9
    assert layout.step_in("step_1/step_5/x.jsonl") == 5  # the deepest wins
    assert layout.step_in("results.jsonl") is None
    assert layout.step_in("rank_0.jsonl") is None


def test_a_tree_run_is_one_run_read_by_split_with_steps_from_its_folders(tmp_path, tree):
    """A folder tree is listed as one run; only the chosen split is read (train by default), files
    are named by their path in the run, and a record without a step takes its folder's."""
    run = tmp_path / "root" / "agent"
    _write(run / "rollouts/step_1/train/samples.jsonl", [{"reward": 1.0}, {"reward": 0.0}])
    _write(run / "rollouts/step_2/train/samples.jsonl", [{"reward": 0.5}])
    _write(run / "rollouts/step_10/train/samples.jsonl", [{"reward": 0.25, "step": 10}])
    _write(run / "rollouts/step_2/eval/samples.jsonl", [{"reward": 0.75}, {"reward": 0.25}, {"reward": 1.0}])
    (run / "rollouts/notes.txt").write_text("not a run file")
    assert list_runs(tmp_path / "root") == ["agent"]

    train = load_run(run, cache_root=tmp_path / "cache")
    assert train.split == "train" and train.splits == ("eval", "train")
    assert train.files == ("rollouts/step_1/train/samples.jsonl", "rollouts/step_2/train/samples.jsonl",
                           "rollouts/step_10/train/samples.jsonl")
    assert list(train.steps.index) == [1, 2, 10]
    assert list(train.steps["samples"]) == [2, 1, 1]
    assert train.steps.loc[1, "reward_mean"] == pytest.approx(0.5)

    evaluation = load_run(run, cache_root=tmp_path / "cache", split="eval")
    assert evaluation.split == "eval" and evaluation.files == ("rollouts/step_2/eval/samples.jsonl",)
    assert evaluation.steps.loc[2, "reward_mean"] == pytest.approx(2.0 / 3)
    canonical, _ = evaluation.record_parts(evaluation.samples.index[1])
    assert canonical["reward"] == 0.25

    again = load_run(run, cache_root=tmp_path / "cache")  # from the cache: the split keys it
    assert again.split == "train" and list(again.steps["samples"]) == [2, 1, 1]


def test_a_tree_file_that_links_out_of_the_allowed_folders_is_not_read(tmp_path, tree, monkeypatch):
    """A step folder that is a symlink out of RL_BOARD_ROOTS is left out; the rest of the run loads."""
    outside = tmp_path / "outside"
    _write(outside / "train/samples.jsonl", [{"reward": 9.0}])
    run = tmp_path / "root" / "agent"
    _write(run / "rollouts/step_1/train/samples.jsonl", [{"reward": 1.0}])
    (run / "rollouts/step_2").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("RL_BOARD_ROOTS", str(tmp_path / "root"))
    loaded = load_run(run, cache_root=tmp_path / "cache")
    assert loaded.files == ("rollouts/step_1/train/samples.jsonl",)
    assert list(loaded.steps.index) == [1]


def test_flat_runs_are_listed_and_named_as_before(tmp_path, tree):
    """A flat folder of JSON lines is still a run of the board's own format, files named by their name."""
    run = tmp_path / "root" / "flat"
    _write(run / "rank0.jsonl", [{"step": 1, "reward": 1.0}])
    (run / "notes.txt").write_text("x")
    assert list_runs(tmp_path / "root") == ["flat"]
    loaded = load_run(run, cache_root=False)
    assert loaded.report.reader == "jsonl" and loaded.files == ("rank0.jsonl",)
    assert loaded.report.ignored_files == ("notes.txt",) and loaded.split is None and loaded.splits == ()


def test_a_trainer_run_opens_from_its_output_folder_or_the_folder_of_its_files(tmp_path):
    """prime-rl's output folder or its rollouts/, rLLM's log folder or its episodes/, ART's model folder
    or its trajectories/: each opens as the same run (the writers' layouts, tests/agent_writers.py)."""
    from agent_writers import v1_chain, v1_episode, v1_trace, write_art, write_prime_rl, write_rllm

    out = tmp_path / "prime"
    trace = v1_trace(v1_chain([({"role": "user", "content": "q"}, False),
                               ({"role": "assistant", "content": "a"}, True)]),
                     {"correct": {"score": 1.0, "weight": 0.5}}, {})
    write_prime_rl(out, 4, "train", "all", [v1_episode("e1", 4, [trace])])
    logs = tmp_path / "rllm"
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    write_rllm(logs / "episodes", 2, "train", "ep:1",
               [{"reward": 0.25, "steps": [{"observation": "q", "model_response": "a", "chat_completions": chat,
                                            "reward": 0.25}]}], True, {})
    model = tmp_path / "art"
    write_art(model, "train", 3, [[{"messages_and_choices": [
        {"role": "user", "content": "q"},
        {"finish_reason": "stop", "index": 0, "message": {"role": "assistant", "content": "a"}}],
        "reward": 0.75, "metrics": {}, "metadata": {}}]])
    for outer, inner, step, reward in ((out, out / "rollouts", 4, 0.5), (logs, logs / "episodes", 2, 0.25),
                                       (model, model / "trajectories", 3, 0.75)):
        for folder in (outer, inner):
            run = load_run(folder, cache_root=False)
            assert list(run.steps.index) == [step], folder
            assert run.steps.loc[step, "reward_mean"] == pytest.approx(reward), folder
