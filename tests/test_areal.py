"""AReaL's trajectory dumps: one line per LLM call, chained into trajectories by their prompts."""

import json
from pathlib import Path

import pytest
from conftest import docs_example, step_rows, summary_json
from ray_writers import areal_dump_trajectory, areal_individual_traj, call

from rl_board.analysis.source import load_run
from rl_board.readers import areal, detect

PROMPT = [{"role": "system", "content": "Use the calculator."}, {"role": "user", "content": "Combien font 12×12 ?"}]
CALC = {"role": "assistant", "content": "<think>multiply</think>", "tool_calls": [call("calc", expr="12*12")]}
RESULT = {"role": "tool", "content": "144"}
ANSWER = {"role": "assistant", "content": "12×12 = 144."}

# (later messages, reward): 2 calls = 2 turns, 1 tool call; 3 calls = 3 turns, 2 tool calls; 1 call
TWO = ([CALC, RESULT, ANSWER], 1.0)
THREE = ([CALC, RESULT, CALC, RESULT, ANSWER], 0.5)
ONE = ([ANSWER], 0.0)


def _trial(root: Path) -> Path:
    def dump(task_id, version, trajectories, is_eval=False):
        traj = areal_individual_traj([(PROMPT, later, r) for later, r in trajectories], version)
        return areal_dump_trajectory(root, "gsm8k", "trial0", traj, task_id, is_eval)

    dump(0, 1, [TWO, ONE])           # a task's group: two trajectories, 3 calls
    dump(1, 1, [THREE])
    dump(2, 2, [TWO, TWO, THREE])
    return dump(0, 2, [ONE, THREE], is_eval=True)


@pytest.mark.slow
def test_trial_folder_counts_trajectories_not_calls(tmp_path):
    """summary --json of the trial folder: per version folder, trajectories (not calls), their mean
    reward, assistant turns and tool calls; eval-rollout is the split eval."""
    trial = _trial(tmp_path)
    assert trial == tmp_path / "logs" / "areal" / "gsm8k" / "trial0"
    assert detect(trial) is areal and detect(trial / "rollout") is areal
    lines = sum(1 for _ in (trial / "rollout" / "1").glob("*.jsonl") for _ in _.open())
    assert lines == 2 + 1 + 3  # calls written: TWO, ONE, THREE
    got = summary_json(trial)
    assert got["format"] == "areal" and got["lines_bad"] == 0
    assert step_rows(got) == {1: (3, pytest.approx(0.5), pytest.approx(2.0), pytest.approx(1.0)),
                           2: (3, pytest.approx(2.5 / 3), pytest.approx(7 / 3), pytest.approx(4 / 3))}
    assert step_rows(summary_json(trial, "--split", "eval")) == {2: (2, 0.25, 2.0, 1.0)}
    assert got["steps"][0]["extras"]["llm_calls"] == pytest.approx(2.0)


def test_trajectory_turns(tmp_path):
    """A trajectory's record: system, user, then assistant (reasoning, call), tool and assistant turns."""
    run = load_run(_trial(tmp_path), cache_root=False)
    canonical, others = run.record_parts(0)
    turns = canonical["messages"]
    assert [(t["role"], t["content"]) for t in turns] == [
        ("system", "Use the calculator."), ("user", "Combien font 12×12 ?"), ("assistant", ""),
        ("tool", "144"), ("assistant", "12×12 = 144.")]
    assert turns[2]["reasoning"] == "multiply" and turns[2]["tool_calls"][0]["name"] == "calc"
    assert canonical["reward"] == 1.0 and others["task_id"] == 0


@pytest.mark.slow
def test_bad_lines_are_named_and_the_rest_load(tmp_path):
    """A call whose completion is a number and one without a reward are named with file and line; the
    other calls still form their trajectories."""
    trial = _trial(tmp_path)
    path = trial / "rollout" / "2" / "2.jsonl"
    lines = path.read_text().splitlines()  # TWO (lines 1-2), TWO (3-4), THREE (5-7)
    bad = json.loads(lines[2])
    bad["completion"] = 7
    missing = json.loads(lines[6])
    del missing["reward"]
    lines[2], lines[6] = json.dumps(bad), json.dumps(missing)
    path.write_text("\n".join(lines) + "\n")
    got = summary_json(trial)
    assert [(e["file"], e["line"]) for e in got["errors"]] == [("rollout/2/2.jsonl", 3), ("rollout/2/2.jsonl", 7)]
    assert "'completion' must be a string" in got["errors"][0]["error"] and "reward" in got["errors"][1]["error"]
    # trajectories left: TWO; line 4 alone; THREE's first two calls
    assert step_rows(got)[2][0] == 3


@pytest.mark.slow
def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/areal.md's two AReaL lines are one trajectory: 2 assistant turns, 1 tool call, reward 1.0."""
    block = docs_example("areal", '"task_id": 7')
    folder = tmp_path / "trial" / "rollout" / "3"
    folder.mkdir(parents=True)
    (folder / "7.jsonl").write_text(block.strip() + "\n", encoding="utf-8")
    assert step_rows(summary_json(tmp_path / "trial")) == {3: (1, 1.0, 2.0, 1.0)}


def test_the_runs_list_counts_version_folders_not_task_ids(tmp_path):
    """The runs list names the trial once, with 2 steps (version folders 1 and 2 of rollout/), not the 3
    task ids its file names carry nor the eval split's."""
    from rl_board.store.discovery import discover_runs

    _trial(tmp_path)
    found = discover_runs(tmp_path / "logs", cache_root=tmp_path / "cache")
    assert [(r.name, r.format, r.steps, r.counted_from) for r in found.runs] == [
        ("areal/gsm8k/trial0", "areal", 2, "file names")]


def test_the_runs_list_finds_a_trial_eight_folders_down(tmp_path):
    """AReaL's ``fileroot/logs/{user}/{exp}/{trial}`` below a team's share (``cluster/nfs/team/fileroot``):
    the trial, 8 folder levels under the root, is listed; the walk is bounded by folders, not depth."""
    from rl_board.store.discovery import discover_runs

    _trial(tmp_path / "cluster" / "nfs" / "team" / "fileroot")
    found = discover_runs(tmp_path, cache_root=tmp_path / "cache", details=False)
    assert found.names() == ["cluster/nfs/team/fileroot/logs/areal/gsm8k/trial0"] and not found.cut
