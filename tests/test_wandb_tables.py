"""Samples logged as W&B tables (OpenRLHF's train/generated_samples): each row once, the step from
the table's own column."""

from pathlib import Path

import pytest
from conftest import docs_example, step_rows, summary_and_notes
from ray_writers import (
    OpenRLHFWandbLogger,
    WandbRun,
    WandbTable,
    call,
    llama3_message,
    openrlhf_sample0,
)

from rl_board.analysis.source import load_run
from rl_board.readers import detect, wandb_tables


def _openrlhf(root: Path) -> Path:
    run = WandbRun(root / "wandb")
    logger = OpenRLHFWandbLogger(run)
    samples = {1: ("user: 2+2? assistant: 4", 1.0), 2: ("user: 3+3? assistant: 7", 0.0), 3: ("user: 1+1? assistant: 2", 1.0),
               4: ("user: 1+1? assistant: 2", 1.0)}  # step 4 repeats step 3's sample: still its own row
    for step, sample in samples.items():
        logger.log_train(step, {"generated_samples": sample, "policy_loss": 0.1 * step})
    return run.dir


@pytest.mark.slow
def test_openrlhf_table_rows_are_taken_once(tmp_path):
    """Four re-logged tables (1, 2, 3, 4 rows): four samples, one per global_step, rewards as logged;
    the note says this is all the trainer saved."""
    run_dir = _openrlhf(tmp_path)
    files = sorted(p.name for p in (run_dir / "files" / "media" / "table" / "train").iterdir())
    assert len(files) == 4 and files[0].startswith("generated_samples_0_")
    assert detect(run_dir) is wandb_tables
    got, notes = summary_and_notes(run_dir)
    assert got["format"] == "wandb-tables" and got["lines_bad"] == 0
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in got["steps"]] == [(1, 1, 1.0), (2, 1, 0.0), (3, 1, 1.0),
                                                                                 (4, 1, 1.0)]
    assert "all of its samples it saved" in notes
    run = load_run(run_dir, cache_root=False)
    assert run.splits == ("train/generated_samples",)
    assert run.with_text(run.samples)["response"].tolist()[:2] == ["user: 2+2? assistant: 4", "user: 3+3? assistant: 7"]


@pytest.mark.slow
def test_a_table_without_a_step_column_uses_wandbs_step_and_bad_rows_are_named(tmp_path):
    """A table with prompt/completion/score columns and no step: the file's wandb step; a row of the
    wrong length and one whose score is text are named; the others load."""
    run = WandbRun(tmp_path / "wandb", "x1", offline=True)
    run.log({"eval/samples": WandbTable(["prompt", "completion", "score", "len"],
                                        [["a", "b", 0.5, 3], ["c", "d", "high", 2], ["e", "f", 1.0]])})
    got, notes = summary_and_notes(run.dir)
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in got["steps"]] == [(0, 1, 0.5)]
    assert [(e["line"], e["error"]) for e in got["errors"]] == [(2, "'reward' must be a number, got \"high\""),
                                                                (3, "row of 3 values for 4 columns")]
    assert got["steps"][0]["extras"] == {"len": 3.0}


def test_the_wandb_folder_lists_its_runs(tmp_path):
    """The wandb folder is a root: each run folder holding tables is a run."""
    from rl_board.store.tracking import list_runs

    _openrlhf(tmp_path)
    WandbRun(tmp_path / "wandb", "empty")
    assert list_runs(tmp_path / "wandb") == ["run-20260101_000000-abc123"]


@pytest.mark.parametrize("split", ["train/generated_samples"])
def test_record_is_the_row(tmp_path, split):
    """A sample's source record is its row as {column: value} with wandb's step."""
    run = load_run(_openrlhf(tmp_path), cache_root=False, split=split)
    canonical, others = run.record_parts(3)
    assert canonical["step"] == 4 and canonical["reward"] == 1.0 and others["wandb_step"] == 6


@pytest.mark.slow
def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/wandb-tables.md's table: two samples at global steps 1 and 2, rewards 1.0 and 0.0."""
    block = docs_example("wandb-tables", '"columns": ["global_step"')
    folder = tmp_path / "run-1-x" / "files" / "media" / "table" / "train"
    folder.mkdir(parents=True)
    (folder / "generated_samples_2_0123456789abcdef0123.table.json").write_text(block.strip())
    got, _ = summary_and_notes(tmp_path / "run-1-x")
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in got["steps"]] == [(1, 1, 1.0), (2, 1, 0.0)]


@pytest.mark.slow
def test_verl_wide_generation_table_is_one_sample_per_number(tmp_path):
    """verl's val/generations (step, input_i, output_i, score_i; re-logged each validation): each
    numbered group is a sample, each row taken once."""
    from ray_writers import verl_log_generations_to_wandb

    run, state = WandbRun(tmp_path / "wandb", "v1"), {}
    verl_log_generations_to_wandb(state, run, [("q1", "a1", 1.0), ("q2", "a2", 0.0), ("q3", "a3", 0.5)], 0)
    verl_log_generations_to_wandb(state, run, [("q1", "b1", 1.0), ("q2", "b2", 1.0), ("q3", "b3", 1.0)], 10)
    got, _ = summary_and_notes(run.dir)
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in got["steps"]] == [(0, 3, 0.5), (10, 3, 1.0)]
    loaded = load_run(run.dir, cache_root=False)
    canonical, _ = loaded.record_parts(4)
    assert canonical["prompt"] == "q2" and canonical["response"] == "b2" and canonical["step"] == 10
    # a row of three samples: each its own address, #K the number's group from 0
    sources = loaded.with_text(loaded.samples)["source"].tolist()
    assert [s.rpartition(":")[2] for s in sources] == ["1#0", "1#1", "1#2", "2#0", "2#1", "2#2"]  # step 10: row 2


@pytest.mark.slow
def test_openrlhf_whole_sequences_are_turns(tmp_path):
    """OpenRLHF's text is the whole sequence decoded with skip_special_tokens=True: where the decode
    left ChatML start markers or Llama 3 headers (end markers gone) it is split into turns; the prompt
    is the turns before the first assistant turn, the response the last assistant turn."""
    tokyo = [{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "Time in Tokyo?"},
             {"role": "assistant", "content": "", "tool_calls": [call("clock", tz="Asia/Tokyo")]},
             {"role": "tool", "content": "21:04"}, {"role": "assistant", "content": "It is 21:04."}]
    llama = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    run = WandbRun(tmp_path / "wandb")
    logger = OpenRLHFWandbLogger(run)
    # by hand: step 1 2 assistant turns, 1 call; step 2 (Llama 3) 1 turn, 0 calls
    logger.log_train(1, {"generated_samples": (openrlhf_sample0(tokyo), 0.5)})
    logger.log_train(2, {"generated_samples": (openrlhf_sample0(
        llama, ("<|begin_of_text|>", "<|eot_id|>"), lambda ms: "<|begin_of_text|>" + "".join(map(llama3_message, ms))), 1.0)})
    got, _ = summary_and_notes(run.dir)
    assert step_rows(got) == {1: (1, 0.5, 2.0, 1.0), 2: (1, 1.0, 1.0, 0.0)}
    loaded = load_run(run.dir, cache_root=False)
    texts = loaded.with_text(loaded.samples)
    assert texts["prompt"].tolist() == ["You can call tools.\n\nTime in Tokyo?", "2+2?"]
    assert texts["response"].tolist() == ["It is 21:04.", "4"]
    turns = loaded.record_parts(0)[0]["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant"]


@pytest.mark.slow
def test_the_docs_turns_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/wandb-tables.md's ChatML row: one sample, 2 assistant turns, 1 call."""
    block = docs_example("wandb-tables", "Time in Tokyo")
    folder = tmp_path / "run-1-x" / "files" / "media" / "table" / "train"
    folder.mkdir(parents=True)
    (folder / "generated_samples_1_0123456789abcdef0123.table.json").write_text(block.strip())
    got, _ = summary_and_notes(tmp_path / "run-1-x")
    assert step_rows(got) == {1: (1, 1.0, 2.0, 1.0)}
