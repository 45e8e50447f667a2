"""prime-rl / verifiers v1 episodes: traces as samples, reward components, trained from effective, splits."""

import json
import subprocess
import sys

import pytest

from agent_writers import v1_chain, v1_episode, v1_node, v1_trace, write_prime_rl
from conftest import REPO
from rl_board.loader import load_run, list_runs
from rl_board.readers import detect, prime_rl
from rl_board.summary import build_summary

SYSTEM = {"role": "system", "content": "Use the calculator."}
IMAGE_USER = {"role": "user", "content": [{"type": "text", "text": "Wie viel ist 2+3? ✓"},
                                          {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]}


def _tool_trace(score: float, error: bool = False, final: str | None = "5") -> dict:
    call = {"role": "assistant", "reasoning_content": "I should add.",
            "tool_calls": [{"id": "c1", "name": "calc", "arguments": '{"expr": "2+3"}'}]}
    result = {"role": "tool", "tool_call_id": "c1",
              "content": "Error: <img src=x onerror=alert(1)>" if error else "<b>5</b>"}
    answer = {"role": "assistant"} if final is None else {"role": "assistant", "content": final}
    nodes = v1_chain([(SYSTEM, False), (IMAGE_USER, False), (call, True), (result, False), (answer, True)])
    return v1_trace(nodes, {"correct": {"score": score, "weight": 1.0}, "format": {"score": 1.0, "weight": 0.5},
                            "judge": None}, {"tool_errors": float(error), "broken": None})


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "runs" / "prime"
    write_prime_rl(out, 1, "train", "all", [v1_episode("e1", 1, [_tool_trace(1.0)]),
                                            v1_episode("e2", 1, [_tool_trace(0.0, error=True, final=None)]),
                                            v1_episode("e3", 1, [], errors=[{"type": "SandboxError", "message": "boom"}])])
    write_prime_rl(out, 1, "train", "effective", [v1_episode("e1", 1, [_tool_trace(1.0)])])
    write_prime_rl(out, 2, "train", "all", [v1_episode("e4", 2, [_tool_trace(1.0), _tool_trace(0.0)])])
    write_prime_rl(out, 2, "eval", "all", [v1_episode("v1", 2, [_tool_trace(1.0)])])
    return out


def test_detected_as_one_run_with_splits(run_dir):
    """The folder tree is one prime-rl run; its splits are the kind/subset folders, train/all read first."""
    assert detect(run_dir) is prime_rl
    assert list_runs(run_dir.parent) == ["prime"]
    run = load_run(run_dir, cache_root=False)
    assert run.splits == ("eval/all", "train/all", "train/effective") and run.split == "train/all"
    assert load_run(run_dir, cache_root=False, split="eval/all").samples["step"].tolist() == [2]


def test_each_trace_is_a_sample_with_reward_components(run_dir):
    """reward = Σ score × weight over the scored rewards (1 + 0.5, 0 + 0.5); the components and metrics
    are extras; an episode without traces is named with its error."""
    run = load_run(run_dir, cache_root=False)
    s = run.samples
    assert s["step"].tolist() == [1, 1, 2, 2]
    assert s["reward"].tolist() == [1.5, 0.5, 1.5, 0.5]
    assert s["extra:reward/correct"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert s["extra:reward/format"].tolist() == [0.5] * 4
    assert "extra:reward/judge" not in s and "extra:broken" not in s
    assert s["extra:tool_errors"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert run.report.errors == (("rollouts/step_1/train/all/traces.jsonl", 3,
                                  "episode has no traces (it failed before any): SandboxError: boom"),)


def test_trained_marks_the_samples_of_the_effective_batch(run_dir):
    """A sample of all whose episode id is in effective has trained 1; others 0 (step 2 has no
    effective file yet: nothing trained)."""
    run = load_run(run_dir, cache_root=False)
    assert run.samples["extra:trained"].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_turns_prompt_response_and_counts(run_dir):
    """Prompt from the system and image user turns, response the last assistant turn (empty when it
    has no content), 2 assistant turns and 1 tool call each; trainable = sampled."""
    run = load_run(run_dir, cache_root=False)
    texts = run.with_text(run.samples)
    assert texts["prompt"].tolist()[0] == "Use the calculator.\n\nWie viel ist 2+3? ✓\n[image]"
    assert texts["response"].tolist()[:2] == ["5", ""]
    assert run.samples["extra:num_turns"].tolist() == [2.0] * 4
    assert run.samples["extra:num_tool_calls"].tolist() == [1.0] * 4
    canonical, others = run.record(1)
    turns = canonical["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert [t["trainable"] for t in turns] == [False, False, True, False, True]
    assert turns[2]["tool_calls"] == [{"id": "c1", "name": "calc", "arguments": '{"expr": "2+3"}'}]
    assert turns[2]["reasoning"] == "I should add."
    assert turns[3]["content"] == "Error: <img src=x onerror=alert(1)>"
    assert others["id"] == "e2"


def test_final_branch_is_the_conversation():
    """With two leaves (a compacted branch), the turns are the path to the last leaf."""
    nodes = [v1_node({"role": "user", "content": "a"}), v1_node({"role": "assistant", "content": "old"}, True, 0),
             v1_node({"role": "assistant", "content": "new"}, True, 0)]
    assert [n["message"]["content"] for n in prime_rl.branch(nodes)] == ["a", "new"]


def test_summary_and_search_over_turns(run_dir):
    """summary --json: per step samples, mean reward, turns_mean, tool_calls_mean and the tool_calls
    map; search --in messages finds text inside a tool result."""
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run_dir), "--json", "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    summary = json.loads(proc.stdout)
    assert summary["format"] == "prime-rl"
    got = [(s["step"], s["samples"], s["reward_mean"], s["turns_mean"], s["tool_calls_mean"], s["tool_calls"])
           for s in summary["steps"]]
    assert got == [(1, 2, 1.0, 2.0, 1.0, {"calc": 2}), (2, 2, 1.0, 2.0, 1.0, {"calc": 2})]
    proc = subprocess.run([sys.executable, "-m", "rl_board", "search", str(run_dir), "--regex", "onerror",
                           "--in", "messages", "--json", "--no-cache"], capture_output=True, text=True, cwd=REPO)
    found = json.loads(proc.stdout)
    assert found["matches"] == 1 and found["samples"][0]["line"] == 2
    eval_summary = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run_dir), "--json", "--no-cache",
                                   "--split", "eval/all"], capture_output=True, text=True, cwd=REPO)
    assert [s["step"] for s in json.loads(eval_summary.stdout)["steps"]] == [2]


def test_step_from_a_nested_field(run_dir, tmp_path):
    """step=run.work.step takes the step the episode was dispatched at instead of its folder's."""
    out = tmp_path / "late"
    write_prime_rl(out, 5, "train", "all", [v1_episode("e9", 4, [_tool_trace(1.0)])])
    assert load_run(out, cache_root=False).samples["step"].tolist() == [5]
    run = load_run(out, cache_root=False, fields=(("step", "run.work.step"),))
    assert run.samples["step"].tolist() == [4]
    assert run.record(0)[0]["step"] == 4


def test_summary_has_no_turn_keys_for_runs_without_messages(tmp_path):
    """A run of plain lines keeps the summary's keys as they were."""
    (tmp_path / "r.jsonl").write_text('{"step": 1, "reward": 1.0}\n')
    step = build_summary(load_run(tmp_path, cache_root=False))["steps"][0]
    assert "turns_mean" not in step and "tool_calls" not in step
