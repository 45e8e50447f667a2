"""Samples logged as TensorBoard text (OpenRLHF's TensorboardLogger): one sample per add_text."""

import json
from pathlib import Path

from conftest import summary_and_notes, write_lines
from ray_writers import TextSummaryWriter, openrlhf_tensorboard_log_train

from rl_board.analysis.source import load_run
from rl_board.readers import detect, jsonl, tensorboard_text
from rl_board.scalars import discover, load_scalars


def _openrlhf(folder: Path) -> Path:
    writer = TextSummaryWriter(folder)
    samples = {1: ("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4", 1.0),
               2: ("<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n7 — sieben", -0.25)}
    for step, sample in samples.items():
        openrlhf_tensorboard_log_train(writer, step, {"generated_samples": sample, "policy_loss": 0.5 / step})
    writer.close()
    return folder


def test_openrlhf_text_samples_one_per_step(tmp_path):
    """Each add_text is a sample: its step, the text between 'Sample:' and 'Reward:' (OpenRLHF's
    backslash-n as line breaks), the reward after 'Reward:'; the scalars stay the trainer's metrics."""
    run_dir = _openrlhf(tmp_path / "tb" / "ppo_run")
    assert detect(run_dir) is tensorboard_text
    got, notes = summary_and_notes(run_dir)
    assert got["format"] == "tensorboard-text" and got["lines_bad"] == 0
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in got["steps"]] == [(1, 1, 1.0), (2, 1, -0.25)]
    assert "all of its samples it saved" in notes
    run = load_run(run_dir, cache_root=False)
    assert run.with_text(run.samples)["response"].tolist()[1] == "<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n7 — sieben"
    canonical, others = run.record(0)
    assert others["tag"] == "train/generated_samples" and canonical["reward"] == 1.0
    assert [v for _, v in load_scalars(discover(run_dir)).series["train/policy_loss"]] == [0.5, 0.25]


def test_json_texts_are_records_and_a_bad_one_is_named(tmp_path):
    """A logged text that is a JSON object is read as a record; one whose reward is text is named."""
    writer = TextSummaryWriter(tmp_path / "run")
    writer.add_text("samples", json.dumps({"prompt": "p", "response": "r", "reward": 0.5}), 3)
    writer.add_text("samples", json.dumps({"prompt": "p", "response": "r", "reward": "x"}), 3)
    writer.close()
    got, _ = summary_and_notes(tmp_path / "run")
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in got["steps"]] == [(3, 1, 0.5)]
    assert [(e["line"], e["error"]) for e in got["errors"]] == [(2, "'reward' must be a number, got \"x\"")]


def test_event_files_beside_rollout_lines_stay_scalars(tmp_path):
    """A run folder of rollout lines with a TensorBoard event file holding text is still read as lines."""
    _openrlhf(tmp_path / "run")
    write_lines(tmp_path / "run" / "rank0.jsonl", [{"step": 1, "reward": 0.5, "response": "x"}])
    assert detect(tmp_path / "run") is jsonl
