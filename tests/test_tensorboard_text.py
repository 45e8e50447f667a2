"""Samples logged as TensorBoard text (OpenRLHF's TensorboardLogger): one sample per add_text."""

import ast
import json
from pathlib import Path

import pytest
from conftest import step_rows, summary_and_notes, write_lines
from ray_writers import (
    TextSummaryWriter,
    call,
    openrlhf_sample0,
    openrlhf_tensorboard_log_train,
)

from rl_board.analysis.source import load_run
from rl_board.readers import detect, jsonl, tensorboard_text
from rl_board.scalars import discover, load_scalars

SYSTEM = {"role": "system", "content": "You can call tools."}
TOKYO = [SYSTEM, {"role": "user", "content": "Time in Tokyo?"},
         {"role": "assistant", "content": "", "tool_calls": [call("clock", tz="Asia/Tokyo")]},
         {"role": "tool", "content": "21:04"}, {"role": "assistant", "content": "It is 21:04."}]
# by hand: step 1 2 assistant turns, 1 call (clock), reward 1.0; step 2 1 turn, 0 calls, -0.25
SIEBEN = [{"role": "user", "content": "3+3?"}, {"role": "assistant", "content": "7 — sieben"}]


def _openrlhf(folder: Path) -> Path:
    writer = TextSummaryWriter(folder)
    samples = {1: (openrlhf_sample0(TOKYO), 1.0), 2: (openrlhf_sample0(SIEBEN), -0.25)}
    for step, sample in samples.items():
        openrlhf_tensorboard_log_train(writer, step, {"generated_samples": sample, "policy_loss": 0.5 / step})
    writer.close()
    return folder


@pytest.mark.slow
def test_openrlhf_text_samples_one_per_step(tmp_path):
    """Each add_text is a sample: its step, the text between 'Sample:' and 'Reward:' (OpenRLHF's
    backslash-n as line breaks) split into turns at the start markers the decode left, the reward after
    'Reward:'; the scalars stay the trainer's metrics."""
    run_dir = _openrlhf(tmp_path / "tb" / "ppo_run")
    assert detect(run_dir) is tensorboard_text
    got, notes = summary_and_notes(run_dir)
    assert got["format"] == "tensorboard-text" and got["lines_bad"] == 0
    assert step_rows(got) == {1: (1, 1.0, 2.0, 1.0), 2: (1, -0.25, 1.0, 0.0)}
    assert "all of its samples it saved" in notes
    run = load_run(run_dir, cache_root=False)
    texts = run.with_text(run.samples)
    assert texts["response"].tolist() == ["It is 21:04.", "7 — sieben"]
    assert texts["prompt"].tolist() == ["You can call tools.\n\nTime in Tokyo?", "3+3?"]
    turns = run.record_parts(0)[0]["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert turns[2]["tool_calls"][0]["name"] == "clock" and turns[3]["content"] == "21:04"
    canonical, others = run.record_parts(0)
    assert others["tag"] == "train/generated_samples" and canonical["reward"] == 1.0
    assert [v for _, v in load_scalars(discover(run_dir)).series["train/policy_loss"]] == [0.5, 0.25]


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/tensorboard-text.md's OpenRLHF call: step 3, reward 1.0, 2 assistant turns, 1 call."""
    text = (Path(__file__).parent.parent / "docs" / "formats" / "tensorboard-text.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith('writer.add_text("train/generated_samples"'))
    call = ast.parse(line).body[0].value  # writer.add_text(TAG, TEXT, global_step=N), its values literal
    writer = TextSummaryWriter(tmp_path / "run")
    writer.add_text(*map(ast.literal_eval, call.args), **{k.arg: ast.literal_eval(k.value) for k in call.keywords})
    writer.close()
    got, _ = summary_and_notes(tmp_path / "run")
    assert step_rows(got) == {3: (1, 1.0, 2.0, 1.0)}
    run = load_run(tmp_path / "run", cache_root=False)
    texts = run.with_text(run.samples)
    assert texts["prompt"].tolist() == ["You can call tools.\n\nTime in Tokyo?"]


@pytest.mark.slow
def test_a_text_whose_markers_were_all_dropped_stays_one_response_with_a_note(tmp_path):
    """Decoded with a tokenizer that flags both ChatML markers special (Qwen's), the sequence keeps only its
    role words: it is one response, and the run's notes say why."""
    writer = TextSummaryWriter(tmp_path / "run")
    text = openrlhf_sample0(SIEBEN, ("<|im_start|>", "<|im_end|>", "<|endoftext|>"))
    assert text == "user\n3+3?\nassistant\n7 — sieben\n"
    openrlhf_tensorboard_log_train(writer, 1, {"generated_samples": (text, 1.0)})
    writer.close()
    got, notes = summary_and_notes(tmp_path / "run")
    assert got["steps"][0].get("turns_mean") is None  # no turns
    assert "1 logged text(s) hold a whole conversation whose chat-template markers the decode dropped" in notes
    run = load_run(tmp_path / "run", cache_root=False)
    assert run.with_text(run.samples)["response"].tolist() == [text]
