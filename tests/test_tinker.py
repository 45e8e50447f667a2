"""tinker-cookbook's rollout summaries: one sample per trajectory, one turn per LLM call, no text."""

import json
from pathlib import Path

import pytest
from conftest import docs_example, step_rows, summary_json
from ray_writers import (
    tinker_serialize,
    tinker_write_logtree,
    tinker_write_metrics,
    tinker_write_rollouts,
)

from rl_board.analysis.source import load_run
from rl_board.readers import detect, tinker
from rl_board.scalars import discover, load_scalars


def _transition(reward, done, ac_len=10, ob_len=30, logs=None):
    return {"ob_len": ob_len, "ac_len": ac_len, "reward": reward, "episode_done": done,
            "metrics": {"format": 1.0}, "logs": logs or {}}


def _traj(rewards, final_reward, logs=None):
    transitions = [_transition(r, k == len(rewards) - 1, logs=logs if k == 0 else None) for k, r in enumerate(rewards)]
    return {"transitions": transitions, "final_ob_len": 80, "final_reward": final_reward, "metrics": {"correct": 1.0}}


def _log_path(root: Path) -> Path:
    log = root / "run"
    # iteration 0: two groups, 3 trajectories of 1, 2 and 3 LLM calls; totals 1.0, 0.5 + 0.5 = 1.0, 0.0
    groups0 = [{"tags": ["gsm8k"], "trajectories": [_traj([1.0], 0.0, {"question": "¿2+2?"}), _traj([0.25, 0.25], 0.5)]},
               {"tags": ["gsm8k"], "trajectories": [_traj([0.0, 0.0, 0.0], 0.0)]}]
    tinker_write_rollouts(log, 0, tinker_serialize("train", 0, groups0))
    tinker_write_logtree(log, 0)
    tinker_write_rollouts(log, 3, tinker_serialize("train", 3, [{"tags": [], "trajectories": [_traj([2.0], 0.0)]}]))
    tinker_write_rollouts(log, 3, tinker_serialize("eval/gsm8k", 3, [{"tags": [], "trajectories": [_traj([1.0, 0.0], 0.0)]}], 3),
                          base_name="eval_gsm8k")
    for step in (0, 1, 2, 3):
        tinker_write_metrics(log, {"env/all/reward/total": step / 10, "optim/lr": 1e-5}, step)
    return log


@pytest.mark.slow
def test_log_folder_opens_with_splits_and_scalars(tmp_path):
    """summary --json of the log folder: per iteration, trajectories, mean total reward and LLM calls
    per trajectory (no tool calls recorded); eval_gsm8k is a split; metrics.jsonl is the scalars."""
    log = _log_path(tmp_path)
    assert detect(log) is tinker
    got = summary_json(log)
    assert got["format"] == "tinker" and got["lines_bad"] == 0
    assert step_rows(got) == {0: (3, pytest.approx(2 / 3), pytest.approx(2.0), 0.0), 3: (1, 2.0, 1.0, 0.0)}
    assert got["steps"][0]["extras"]["ac_tokens"] == pytest.approx(20.0)  # (10 + 20 + 30) / 3
    assert step_rows(summary_json(log, "--split", "eval_gsm8k")) == {3: (1, 1.0, 2.0, 0.0)}
    assert discover(log) == (log / "metrics.jsonl").resolve()
    series = load_scalars(log / "metrics.jsonl").series["env/all/reward/total"]
    assert [s for s, _ in series] == [0, 1, 2, 3]


def test_record_names_the_logtree_and_shows_logs(tmp_path):
    """A trajectory's record: one assistant turn per call holding its logs as text; the iteration's
    logtree files named, not parsed."""
    run = load_run(_log_path(tmp_path), cache_root=False)
    canonical, others = run.record_parts(0)
    assert [t["content"] for t in canonical["messages"]] == ["question: ¿2+2?"]
    assert others["logtree"] == ["iteration_000000/train.html", "iteration_000000/train_logtree.json"]


@pytest.mark.slow
def test_bad_records_are_named_and_the_rest_load(tmp_path):
    """A record whose total_reward is a string and one without steps are named; the others load."""
    log = _log_path(tmp_path)
    path = log / "iteration_000000" / "train_rollout_summaries.jsonl"
    lines = path.read_text().splitlines()
    a, b = json.loads(lines[0]), json.loads(lines[1])
    a["total_reward"] = "1.0"
    b["steps"] = None
    path.write_text("\n".join([json.dumps(a), json.dumps(b), lines[2]]) + "\n")
    got = summary_json(log)
    assert [(e["file"], e["line"]) for e in got["errors"]] == [("iteration_000000/train_rollout_summaries.jsonl", 1),
                                                                ("iteration_000000/train_rollout_summaries.jsonl", 2)]
    assert "'total_reward' must be a number" in got["errors"][0]["error"] and "'steps'" in got["errors"][1]["error"]
    assert step_rows(got)[0] == (1, 0.0, 3.0, 0.0)


@pytest.mark.slow
def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/tinker.md's tinker record: iteration 4, reward 1.0, 2 LLM calls, 21 action tokens."""
    block = docs_example("tinker", '"schema_version": 1')
    folder = tmp_path / "log" / "iteration_000004"
    folder.mkdir(parents=True)
    (folder / "train_rollout_summaries.jsonl").write_text(block.strip() + "\n", encoding="utf-8")
    got = summary_json(tmp_path / "log")
    assert step_rows(got) == {4: (1, 1.0, 2.0, 0.0)} and got["steps"][0]["extras"]["ac_tokens"] == 21.0


def _tool_use_log(root: Path) -> Path:
    """One iteration of a tool-use env: each step's logs as ``AgentToolMessageEnv.step`` writes them."""
    first = {"assistant_content": "Let me look.", "tool_call_0": 'search({"query": "weather"})',
             "tool_result_0": '{"results": ["sunny"]}', "tool_call_1": 'clock({"tz": "UTC"})',
             "tool_result_1": "21:04"}
    answer = {"assistant_content": "Sunny, at 21:04."}
    parse = {"assistant_content": "Oops.", "parse_errors": "bad JSON"}
    # by hand: A 2 assistant turns, 2 calls, reward 1.0; B 2 assistant turns, 0 calls, reward 0.0
    a = {"transitions": [_transition(0.0, False, logs=first), _transition(1.0, True, logs=answer)],
         "final_ob_len": 90, "final_reward": 0.0, "metrics": {"num_tool_calls": 7.0}}
    b = {"transitions": [_transition(0.0, False, logs=parse), _transition(0.0, True, logs=answer)],
         "final_ob_len": 90, "final_reward": 0.0, "metrics": {"num_tool_calls": 1.0}}
    log = root / "tools"
    tinker_write_rollouts(log, 2, tinker_serialize("train", 2, [{"tags": ["weather"], "trajectories": [a, b]}]))
    return log


@pytest.mark.slow
def test_tool_calls_and_results_from_the_step_logs(tmp_path):
    """tool_call_i / tool_result_i of a step's logs are the assistant turn's calls and tool turns after it;
    the trajectory's logged num_tool_calls keeps its own name and value."""
    log = _tool_use_log(tmp_path)
    got = summary_json(log)
    assert step_rows(got) == {2: (2, 0.5, 2.0, 1.0)}  # calls (2 + 0) / 2
    assert got["steps"][0]["tool_calls"] == {"search": 1, "clock": 1}
    assert got["steps"][0]["extras"]["trajectory_metrics.num_tool_calls"] == pytest.approx(4.0)  # (7 + 1) / 2
    run = load_run(log, cache_root=False)
    canonical, others = run.record_parts(0)
    turns = canonical["messages"]
    assert [(t["role"], t["content"]) for t in turns] == [
        ("assistant", "Let me look."), ("tool", '{"results": ["sunny"]}'), ("tool", "21:04"),
        ("assistant", "Sunny, at 21:04.")]
    assert [(c["name"], c["arguments"]) for c in turns[0]["tool_calls"]] == [
        ("search", '{"query": "weather"}'), ("clock", '{"tz": "UTC"}')]
    assert run.with_text(run.samples)["response"].tolist() == ["Sunny, at 21:04.", "Sunny, at 21:04."]
    assert others["steps"][0]["logs"] == {}
    assert run.record_parts(1)[1]["steps"][0]["logs"] == {"parse_errors": "bad JSON"}


@pytest.mark.slow
def test_the_docs_tool_use_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/tinker.md's tool-use record: iteration 2, reward 1.0, 2 assistant turns, 1 call."""
    block = docs_example("tinker", "tool_call_0")
    folder = tmp_path / "log" / "iteration_000002"
    folder.mkdir(parents=True)
    (folder / "train_rollout_summaries.jsonl").write_text(block.strip() + "\n", encoding="utf-8")
    got = summary_json(tmp_path / "log")
    assert step_rows(got) == {2: (1, 1.0, 2.0, 1.0)}
    assert got["steps"][0]["extras"]["trajectory_metrics.num_tool_calls"] == 1.0
