"""OpenPipe ART trajectory parquet: one sample per trajectory, step from the file name, split from its folder."""

import json

from agent_writers import write_art

from rl_board.analysis.source import load_run
from rl_board.analysis.summary import build_summary
from rl_board.readers import art, detect
from rl_board.store.loader import list_runs


def _choice(content, tool_calls=None):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"finish_reason": "tool_calls" if tool_calls else "stop", "index": 0, "message": message, "logprobs": None}


CALL = [{"id": "t1", "type": "function", "function": {"name": "search_inbox", "arguments": '{"q": "Straße"}'}}]


def _trajectory(reward, answer="Found it.", metrics=None):
    return {"messages_and_choices": [
        {"role": "system", "content": "You are an email agent."},
        {"role": "user", "content": "Find the mail about Straße 5"},
        _choice(None, CALL),
        {"role": "tool", "tool_call_id": "t1", "content": "<script>alert('x')</script> 1 result"},
        _choice(answer)], "reward": reward, "metrics": metrics or {"correct": reward}, "metadata": {"scenario": 3}}


def test_art_run(tmp_path):
    """Steps from 0003/0004.parquet, rewards as written, the sentinel of an empty group skipped, the
    model's choices trainable, metrics as extras, val as a second split."""
    model = tmp_path / ".art" / "proj" / "models" / "agent-1"
    write_art(model, "train", 3, [[_trajectory(1.0), _trajectory(0.0, answer="")], []])
    write_art(model, "train", 4, [[_trajectory(0.5)]])
    write_art(model, "val", 4, [[_trajectory(1.0)]])
    assert detect(model) is art
    assert list_runs(model.parent) == ["agent-1"]
    run = load_run(model, cache_root=False)
    assert run.splits == ("train", "val") and run.split == "train"
    assert run.samples["step"].tolist() == [3, 3, 4]
    assert run.samples["reward"].tolist() == [1.0, 0.0, 0.5]
    assert run.samples["extra:correct"].tolist() == [1.0, 0.0, 0.5]
    assert run.samples["extra:num_tool_calls"].tolist() == [1.0, 1.0, 1.0]
    texts = run.with_text(run.samples)
    assert texts["response"].tolist() == ["Found it.", "", "Found it."]
    assert texts["prompt"][0] == "You are an email agent.\n\nFind the mail about Straße 5"
    turns = run.record_parts(0)[0]["messages"]
    assert [t["trainable"] for t in turns] == [False, False, True, False, True]
    assert turns[2]["tool_calls"] == [{"id": "t1", "name": "search_inbox", "arguments": '{"q": "Straße"}'}]
    steps = build_summary(run)["steps"]
    assert [(s["step"], s["samples"], s["reward_mean"], s["turns_mean"], s["tool_calls"]) for s in steps] == [
        (3, 2, 0.5, 2.0, {"search_inbox": 2}), (4, 1, 0.5, 2.0, {"search_inbox": 1})]
    assert load_run(model, cache_root=False, split="val").samples["reward"].tolist() == [1.0]


def test_art_row_without_messages_reads_trajectory_json():
    """A format-2 row whose messages are null takes its turns from trajectory_json's choices."""
    row = {"trajectory_index": 0, "reward": 1.0, "messages": None,
           "trajectory_json": json.dumps({"messages_and_choices": [{"role": "user", "content": "hi"},
                                                                   _choice("yo")]})}
    got = art.row_sample(row, 2)
    assert [(t["role"], t["content"], t["trainable"]) for t in got["messages"]] == [
        ("user", "hi", False), ("assistant", "yo", True)]
