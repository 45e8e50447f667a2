"""SkyRL's eval dumps: the step from the folder name, per-token scores summed, glued turns split,
its pickles named and never opened."""

import json
from pathlib import Path

import pytest
from conftest import docs_example, step_rows, summary_json
from ray_writers import (
    call,
    skyrl_dump_data,
    skyrl_dump_evals,
    skyrl_prompt,
    skyrl_response,
)

from rl_board.analysis.source import load_run
from rl_board.readers import detect, skyrl

SEARCH = [{"role": "assistant", "content": "<think>look up</think>Searching.", "tool_calls": [call("search", q="Zürich")]}]
OBSERVE = [{"role": "user", "content": "<information>Zürich has 443 037 people.</information>"}]
TOOL = [{"role": "tool", "content": "443037"}]
ANSWER = [{"role": "assistant", "content": "About 443 000."}]

# (rounds, score, data source): assistant turns and tool calls counted by hand
A = ([SEARCH, OBSERVE, ANSWER], [0.0] * 9 + [1.0], "search/nq")   # 2 turns, 1 call, reward 1.0
B = ([SEARCH, TOOL, SEARCH, TOOL, ANSWER], 0.5, "search/nq")       # 3 turns, 2 calls, reward 0.5
C = ([ANSWER], [0.25, 0.0, 0.25], "math")                           # 1 turn, 0 calls, reward 0.5
D = ([SEARCH, OBSERVE, ANSWER], 0.0, "math")                        # 2 turns, 1 call, reward 0.0


def _dump(export: Path, step, samples):
    outputs = {"prompt_token_ids": [skyrl_prompt(f"Q{i}") for i in range(len(samples))],
               "response_ids": [skyrl_response(r) for r, _, _ in samples],
               "rewards": [s for _, s, _ in samples], "stop_reasons": ["stop"] * len(samples)}
    skyrl_dump_evals(export, step, outputs, [d for _, _, d in samples], ["search"] * len(samples),
                     [{"k": 1}] * len(samples), {"eval/all/avg_score": 0.5})


def _export(root: Path) -> Path:
    export = root / "export"
    _dump(export, 0, [A, C])
    _dump(export, 10, [A, B, C, D])
    _dump(export, None, [B])
    skyrl_dump_data(export, "global_step_10_training_input")
    return export


@pytest.mark.slow
def test_export_folder_opens_the_eval_dumps(tmp_path):
    """summary --json of export_path: per step (from the folder name) the samples of every data source,
    mean reward (per-token scores summed), assistant turns and tool calls per sample; the metrics file
    is no sample; the pickle is named as unreadable, never opened."""
    export = _export(tmp_path)
    assert detect(export) is skyrl and detect(export / "dumped_evals") is skyrl
    got = summary_json(export)
    assert got["format"] == "skyrl" and got["lines_bad"] == 0
    assert step_rows(got) == {0: (2, pytest.approx(0.75), pytest.approx(1.5), pytest.approx(0.5)),
                           10: (4, pytest.approx(0.5), pytest.approx(2.0), pytest.approx(1.0))}
    assert [f["file"] for f in got["files_unreadable"]] == ["dumped_data/global_step_10_training_input.pkl"]
    assert "never unpickles" in got["files_unreadable"][0]["error"]
    assert step_rows(summary_json(export, "--split", "eval_only")) == {0: (1, 0.5, 3.0, 2.0)}


def test_turns_of_a_sample(tmp_path):
    """A sample's turns: the prompt's system and user turns, then assistant, tool (the <information>
    observation) and assistant turns, the call and reasoning taken out."""
    run = load_run(_export(tmp_path), cache_root=False)
    assert run.splits == ("eval", "eval_only")
    records = [run.record_parts(i) for i in range(len(run.samples))]
    canonical, others = next(r for r in records if r[1]["data_source"] == "search/nq")
    turns = canonical["messages"]
    plain = next(r for r in records if r[1]["data_source"] == "math")[0]["messages"]
    assert [(t["role"], t["content"]) for t in plain[2:]] == [("assistant", "About 443 000.")]  # EOS dropped
    assert [(t["role"], t["content"]) for t in turns] == [
        ("system", "Answer with tools."), ("user", "Q0"), ("assistant", "Searching."),
        ("tool", "Zürich has 443 037 people."), ("assistant", "About 443 000.")]
    assert turns[2]["reasoning"] == "look up" and turns[2]["tool_calls"][0]["name"] == "search"
    assert canonical["reward"] == 1.0 and others["data_source"] == "search/nq"


@pytest.mark.slow
def test_bad_lines_are_named_and_the_rest_load(tmp_path):
    """A line without a score, one whose score list holds a string, and one whose response is a number
    are named with file and line; the other samples load."""
    export = _export(tmp_path)
    path = export / "dumped_evals" / "global_step_10_evals" / "math.jsonl"
    good = json.loads(path.read_text().splitlines()[0])
    bad = [{k: v for k, v in good.items() if k != "score"}, {**good, "score": [0.5, "x"]},
           {**good, "output_response": 7}]
    path.write_text("".join(json.dumps(o) + "\n" for o in [*bad, good]))
    got = summary_json(export)
    errors = {e["line"]: e["error"] for e in got["errors"]}
    assert {e["file"] for e in got["errors"]} == {"dumped_evals/global_step_10_evals/math.jsonl"}
    assert set(errors) == {1, 2, 3}
    assert "score" in errors[1] and "numbers" in errors[2] and "output_response" in errors[3]
    assert step_rows(got)[10][0] == 3  # A, B from search_nq.jsonl and the good math line


def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/skyrl.md's SkyRL line: reward 1.0 (the per-token list summed), 2 assistant turns, 1 call."""
    block = docs_example("skyrl", '"input_prompt"')
    folder = tmp_path / "dumped_evals" / "global_step_4_evals"
    folder.mkdir(parents=True)
    (folder / "search_nq.jsonl").write_text(block.strip() + "\n", encoding="utf-8")
    assert step_rows(summary_json(tmp_path)) == {4: (1, 1.0, 2.0, 1.0)}
