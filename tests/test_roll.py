"""ROLL's rollout dumps: one line of columns per step, JSON strings inside, one sample per trajectory."""

import json
from pathlib import Path

import pytest
from conftest import docs_example, step_rows, summary_json
from ray_writers import (
    roll_dump_rollout_trajectories,
    roll_trajectory_batch,
    roll_write_to_json_process,
)

from rl_board.analysis.source import load_run
from rl_board.readers import detect, roll

SYSTEM = {"role": "system", "content": "You can call tools."}
USER = {"role": "user", "content": "Wie spät ist es in Tokyo?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "clock", "arguments": '{"tz": "Asia/Tokyo"}'}}]}
HERMES = {"role": "assistant", "content": 'Checking.\n<tool_call>\n{"name": "clock", "arguments": {"tz": "UTC"}}\n</tool_call>'}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "21:04"}
ANSWER = {"role": "assistant", "content": "Es ist 21:04 Uhr."}


def _trajectory(messages, step_rewards):
    return {"messages": messages, "step_rewards": step_rewards, "tools": [{"name": "clock"}],
            "num_actions": sum(m["role"] == "assistant" for m in messages)}


# assistant turns and tool calls by hand: T1 2 turns 1 call, reward 1.0; T2 3 turns 2 calls, 0.5; T3 1 turn, 0
T1 = _trajectory([SYSTEM, USER, CALL, RESULT, ANSWER], [0.0, 1.0])
T2 = _trajectory([SYSTEM, USER, CALL, RESULT, HERMES, RESULT, ANSWER], [0.0, 0.25, 0.25])
T3 = _trajectory([SYSTEM, USER, ANSWER], [0.0])


# A text env (OpenReward's): calls as Hermes blocks in the answer, results as user <tool_response>
# messages; the episode ends on the tool result of the submitting call, which only the env's last
# observation holds. A ROCK env's last observation is the string "SESSION_END".
BASH = {"role": "assistant", "content": '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>'}
LISTING = {"role": "user", "content": "<tool_response>\na.txt\n</tool_response>"}
SUBMIT = {"role": "assistant", "content": 'Done.\n<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>'}
ACCEPTED = {"role": "user", "content": "<tool_response>\naccepted\n</tool_response>"}
# by hand: T4 2 assistant turns, 2 calls, reward 0 + 1; T5 1 turn, 0 calls, reward 1.0
T4 = _trajectory([USER, BASH, LISTING, SUBMIT, ACCEPTED], [0.0, 1.0])
T5 = {**_trajectory([SYSTEM, USER, ANSWER], [1.0]), "last_observation": "SESSION_END"}


def _dump(folder: Path, step: int, trajectories):
    batch, config = roll_trajectory_batch(trajectories)
    roll_dump_rollout_trajectories(str(folder), step, batch, config)


@pytest.mark.slow
def test_agentic_dump_one_sample_per_trajectory(tmp_path):
    """Stepwise rows without trajectory data are dropped by the writer; each trajectory is one sample
    with its episode reward, assistant turns and tool calls (OpenAI tool_calls and Hermes blocks)."""
    _dump(tmp_path / "dump", 1, [T1, T2, T3])
    _dump(tmp_path / "dump", 2, [T2, T2])
    line = (tmp_path / "dump" / "rollout_dump_data.step_1.jsonl").read_text()
    assert line.count("\n") == 1 and len(json.loads(line)["trajectory_data"]) == 3
    assert detect(tmp_path / "dump") is roll
    got = summary_json(tmp_path / "dump")
    assert got["format"] == "roll" and got["lines_bad"] == 0
    assert step_rows(got) == {1: (3, pytest.approx(0.5), pytest.approx(2.0), pytest.approx(1.0)),
                           2: (2, pytest.approx(0.5), pytest.approx(3.0), pytest.approx(2.0))}
    assert got["steps"][1]["tool_calls"] == {"clock": 4}


def test_record_shows_turns_and_decoded_columns(tmp_path):
    """A sample's record: the turns, the Hermes call read from the content, trajectory_data decoded."""
    _dump(tmp_path / "dump", 1, [T2])
    run = load_run(tmp_path / "dump", cache_root=False)
    canonical, others = run.record_parts(0)
    turns = canonical["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert turns[4]["content"] == "Checking." and turns[4]["tool_calls"][0]["arguments"] == '{"tz": "UTC"}'
    assert others["trajectory_data"]["reward_info"]["step_rewards"] == [0.0, 0.25, 0.25]
    assert canonical["reward"] == 0.5


@pytest.mark.slow
def test_a_non_json_string_in_a_column_costs_only_its_row(tmp_path):
    """A trajectory_data value that is not JSON and a reward that is a string are named with file, line
    and row; the other rows load."""
    _dump(tmp_path / "dump", 1, [T1, T2, T3])
    path = tmp_path / "dump" / "rollout_dump_data.step_1.jsonl"
    obj = json.loads(path.read_text())
    obj["trajectory_data"][0] = obj["trajectory_data"][0][:-5]
    data = json.loads(obj["trajectory_data"][2])
    data["reward_info"]["episode_reward"] = "high"
    obj["trajectory_data"][2] = json.dumps(data)
    path.write_text(json.dumps(obj, ensure_ascii=False) + "\n")
    got = summary_json(tmp_path / "dump")
    assert [(e["file"], e["line"]) for e in got["errors"]] == [("rollout_dump_data.step_1.jsonl", 1)] * 2
    assert got["errors"][0]["error"].startswith("row 0: 'trajectory_data' is not JSON")
    assert got["errors"][1]["error"].startswith("row 2: 'trajectory_data.reward_info.episode_reward' must be a number")
    assert step_rows(got) == {1: (1, 0.5, 3.0, 2.0)}


def test_rlvr_dump(tmp_path):
    """An RLVR dump: responses and scores columns, one sample per row."""
    data = {"global_step": [3, 3], "prompt": ["1+1?", "2+2?"], "responses": ["2", "5"], "scores": [1.0, 0.0],
            "ground_truth": ["2", "4"], "id": ["a", "b"]}
    roll_write_to_json_process(str(tmp_path / "r"), data, [[k, "string"] for k in data])
    run = load_run(tmp_path / "r", cache_root=False)
    assert run.report.reader == "roll" and run.samples["reward"].tolist() == [1.0, 0.0]
    assert run.with_text(run.samples)["response"].tolist() == ["2", "5"]


@pytest.mark.slow
def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/roll.md's ROLL line: step 5, reward 1.0, 2 assistant turns, 1 call."""
    block = docs_example("roll", '"trajectory_data"')
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "rollout_dump_data.step_5.jsonl").write_text(block.strip() + "\n", encoding="utf-8")
    assert step_rows(summary_json(tmp_path / "d")) == {5: (1, 1.0, 2.0, 1.0)}


@pytest.mark.slow
def test_turns_come_from_the_last_observation(tmp_path):
    """ROLL's messages column stops at the last call's answer; the env's last observation adds the
    final tool result: it is read for the turns (user <tool_response> messages as tool turns), and a
    string last observation (ROCK's) leaves the messages column's turns."""
    _dump(tmp_path / "dump", 7, [T4, T5])
    obj = json.loads((tmp_path / "dump" / "rollout_dump_data.step_7.jsonl").read_text())
    assert len(json.loads(obj["messages"][0])[0]) == 4  # the writer's messages: no final tool result
    assert step_rows(summary_json(tmp_path / "dump")) == {7: (2, 1.0, 1.5, 1.0)}
    run = load_run(tmp_path / "dump", cache_root=False)
    turns = run.record_parts(0)[0]["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "tool", "assistant", "tool"]
    assert [t["content"] for t in turns if t["role"] == "tool"] == ["a.txt", "accepted"]
    assert [c["name"] for t in turns for c in t["tool_calls"]] == ["bash", "submit"]
    assert run.with_text(run.samples)["response"].tolist() == ["Done.", "Es ist 21:04 Uhr."]


@pytest.mark.slow
def test_the_docs_last_observation_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/roll.md's last_observation line: step 6, reward 1.0, 2 assistant turns, 2 calls."""
    block = docs_example("roll", "List the files")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "rollout_dump_data.step_6.jsonl").write_text(block.strip() + "\n", encoding="utf-8")
    assert step_rows(summary_json(tmp_path / "d")) == {6: (1, 1.0, 2.0, 2.0)}
    turns = load_run(tmp_path / "d", cache_root=False).record_parts(0)[0]["messages"]
    assert [t["content"] for t in turns if t["role"] == "tool"] == ["a.txt", "accepted"]


@pytest.mark.slow
def test_each_sample_of_a_line_has_its_own_address(tmp_path):
    """ROLL's one line holds three samples: each has the address FILE:1#ROW, used alike by the batch's
    source column, search, tags (set by address and exported) and links; a line of one sample keeps FILE:LINE."""
    from conftest import command

    from rl_board.base import fields as F

    _dump(tmp_path / "dump", 1, [T1, T2, T3])
    name = "rollout_dump_data.step_1.jsonl"
    run = load_run(tmp_path / "dump", cache_root=False)
    assert run.with_text(run.samples)["source"].tolist() == [f"{name}:1#0", f"{name}:1#1", f"{name}:1#2"]
    found = json.loads(command("search", str(tmp_path / "dump"), "--regex", "Uhr", "--json").stdout)
    assert [(s["line"], s["position"], s["reward"]) for s in found["samples"]] == [(1, 0, 1.0), (1, 1, 0.5), (1, 2, 0.0)]
    env = {"RL_BOARD_TAGS_DIR": str(tmp_path / "tags")}
    tagged = command("tags", str(tmp_path / "dump"), "--sample", f"{name}:1#1", "--add", "half", env=env)
    assert tagged.returncode == 0, tagged.stderr
    shown = json.loads(command("tags", str(tmp_path / "dump"), "--json", env=env).stdout)
    assert [(s["position"], s["reward"]) for s in shown["samples"]] == [(1, 0.5)]
    exported = [json.loads(x) for x in command("tags", str(tmp_path / "dump"), "--export", env=env).stdout.splitlines()]
    assert [(e["line"], e["position"], e["reward"]) for e in exported] == [(1, 1, 0.5)]
    assert F.parse_address(f"{name}:1#2") == (name, 1, 2) and F.parse_address(f"{name}:1") == (name, 1, -1)
    assert F.address(name, 1) == f"{name}:1" and F.address("a#b.jsonl", 3) == "a#b.jsonl:3"
    assert F.parse_address("a#b.jsonl:3") == ("a#b.jsonl", 3, -1)


@pytest.mark.slow
def test_findings_name_the_sample_of_a_line_by_its_address(tmp_path):
    """An empty answer in the middle row of each step's line: empty_responses names FILE:1#1 each step, the
    sample the evidence shows is that row."""
    from conftest import command

    from rl_board.analysis.findings import compute_evidence, compute_findings

    empty = _trajectory([SYSTEM, USER, {"role": "assistant", "content": ""}], [0.0])
    for step in (1, 2, 3):
        _dump(tmp_path / "dump", step, [T1, empty, T2])
    got = json.loads(command("findings", str(tmp_path / "dump"), "--json").stdout)
    found = {f["kind"]: f["samples"] for f in got["findings"]}
    assert found["empty_responses"] == [f"rollout_dump_data.step_{s}.jsonl:1#1" for s in (1, 2, 3)]
    run = load_run(tmp_path / "dump", cache_root=False)
    finding = next(f for f in compute_findings(run).findings if f.kind == "empty_responses")
    assert [e.sample_id for e in compute_evidence(run, finding)] == found["empty_responses"]
