"""verl's generation dumps with the tool agent loop: the experiment folder opens as train and
validation splits, each glued multi-turn output as its turns."""

import json
from pathlib import Path

import pytest
from conftest import docs_example, step_rows, summary_json
from ray_writers import call, verl_dump, verl_sample

from rl_board.analysis.source import load_run
from rl_board.readers import detect, jsonl, verl

SEARCH = [{"role": "assistant", "content": "Let me search.", "tool_calls": [call("search", query="北京 人口")]}]
RESULT = [{"role": "tool", "content": "21.9 million"}]
ANSWER = [{"role": "assistant", "content": "<think>ok</think>About 21.9 million."}]
TWO_CALLS = [{"role": "assistant", "content": "", "tool_calls": [call("calc", expr="2+2"), call("calc", expr="3*3")]}]
TWO_RESULTS = [{"role": "tool", "content": "4"}, {"role": "tool", "content": "9"}]
PLAIN = [{"role": "assistant", "content": "42"}]

# (rounds, score, acc): assistant turns and tool calls of each, counted by hand
SEARCHED = ([SEARCH, RESULT, ANSWER], 1.0, True)       # 2 turns, 1 call
CALCULATED = ([TWO_CALLS, TWO_RESULTS, ANSWER], 0.0, False)  # 2 turns, 2 calls
ANSWERED = ([PLAIN], 0.5, False)                         # 1 turn, 0 calls
LONG = ([SEARCH, RESULT, SEARCH, RESULT, ANSWER], 1.0, True)  # 3 turns, 2 calls


def _dump(folder: Path, step: int, samples):
    pairs = [verl_sample(f"Q{step}.{i}", rounds) for i, (rounds, _, _) in enumerate(samples)]
    verl_dump(folder, step, [p[0] for p in pairs], [p[1] for p in pairs], ["gt"] * len(pairs),
              [s for _, s, _ in samples], {"acc": [a for _, _, a in samples], "pred": ["x"] * len(samples)})


def _experiment(root: Path) -> Path:
    exp = root / "exp"
    _dump(exp / "val_data", 0, [ANSWERED, SEARCHED])
    _dump(exp / "rollout_data", 1, [SEARCHED, CALCULATED, ANSWERED])
    _dump(exp / "rollout_data", 2, [LONG, CALCULATED])
    _dump(exp / "val_data", 2, [LONG, LONG])
    return exp


@pytest.mark.slow
def test_experiment_folder_opens_rollout_and_validation_as_splits(tmp_path):
    """summary --json of the experiment folder: per split and step, samples, mean score, assistant
    turns and tool calls per sample as the trajectories held them."""
    exp = _experiment(tmp_path)
    assert detect(exp) is verl
    train = summary_json(exp)
    assert train["format"] == "verl" and train["lines_bad"] == 0
    assert step_rows(train) == {1: (3, pytest.approx(0.5), pytest.approx(5 / 3), pytest.approx(1.0)),
                             2: (2, pytest.approx(0.5), pytest.approx(2.5), pytest.approx(2.0))}
    validation = summary_json(exp, "--split", "validation")
    assert step_rows(validation) == {0: (2, pytest.approx(0.75), pytest.approx(1.5), pytest.approx(0.5)),
                                  2: (2, pytest.approx(1.0), pytest.approx(3.0), pytest.approx(2.0))}
    assert validation["steps"][1]["tool_calls"] == {"search": 4}


def test_load_with_a_split_the_run_lacks_raises_naming_its_splits(tmp_path):
    """``rl_board.load(run, split="nope")`` is an error naming the run's two splits, not an empty table."""
    import rl_board

    with pytest.raises(ValueError, match=r"no split 'nope'; its splits: train, validation"):
        rl_board.load(_experiment(tmp_path), split="nope", cache=False)
    assert len(rl_board.load(tmp_path / "exp", split="validation", cache=False).to_pandas()) == 4


def test_sample_turns_and_record(tmp_path):
    """A sample's record holds its turns: the prompt (decoded without markers) as its system and user
    turns, then assistant, tool and assistant turns with the call's arguments and the reasoning taken out."""
    run = load_run(_experiment(tmp_path), cache_root=False)
    assert run.splits == ("train", "validation")
    canonical, others = run.record_parts(0)
    turns = canonical["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert turns[0]["content"] == "You are a helpful assistant." and turns[1]["content"] == "Q1.0"
    turns = turns[1:]
    assert turns[1]["content"] == "Let me search." and turns[1]["tool_calls"][0]["name"] == "search"
    assert json.loads(turns[1]["tool_calls"][0]["arguments"]) == {"query": "北京 人口"}
    assert turns[2]["content"] == "21.9 million"
    assert turns[3]["reasoning"] == "ok" and turns[3]["content"] == "About 21.9 million."
    assert others["acc"] is True and canonical["reward"] == 1.0


@pytest.mark.slow
def test_the_rollout_folder_alone_opens_with_turns(tmp_path):
    """The dump folder the trainer writes opens by itself as verl (its output holds turn markers)."""
    exp = _experiment(tmp_path)
    assert detect(exp / "rollout_data") is verl
    assert step_rows(summary_json(exp / "rollout_data"))[2] == (2, pytest.approx(0.5), pytest.approx(2.5), pytest.approx(2.0))


def test_single_turn_dump_folder_stays_jsonl(tmp_path):
    """A dump folder of plain single-turn answers is read by the JSONL reader as before."""
    _dump(tmp_path / "plain", 1, [ANSWERED, ANSWERED])
    assert detect(tmp_path / "plain") is jsonl


def test_a_root_of_plain_runs_is_no_experiment(tmp_path):
    """A folder of two dump folders neither of which is named like validation is a root of runs."""
    _dump(tmp_path / "a", 1, [SEARCHED])
    _dump(tmp_path / "b", 1, [SEARCHED])
    assert not verl.matches(tmp_path)


@pytest.mark.slow
def test_bad_lines_are_named_and_the_rest_load(tmp_path):
    """A line without its score and one with a string score are named with file and line; every
    other sample loads."""
    exp = _experiment(tmp_path)
    path = exp / "rollout_data" / "1.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    del first["score"]
    second = json.loads(lines[1])
    second["score"] = "high"
    path.write_text("\n".join([json.dumps(first), json.dumps(second), lines[2]]) + "\n")
    summary = summary_json(exp)
    errors = {(e["file"], e["line"]): e["error"] for e in summary["errors"]}
    assert set(errors) == {("rollout_data/1.jsonl", 1), ("rollout_data/1.jsonl", 2)}
    assert "score" in errors[("rollout_data/1.jsonl", 1)] and "must be a number" in errors[("rollout_data/1.jsonl", 2)]
    assert step_rows(summary)[1] == (1, pytest.approx(0.5), pytest.approx(1.0), pytest.approx(0.0))
    assert step_rows(summary)[2][0] == 2


@pytest.mark.slow
def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/verl.md's multi-turn verl line: a dump folder of it opens as verl, 2 assistant turns, 1 call."""
    block = docs_example("verl", '"output": "Let me search.')
    (tmp_path / "rollout_data").mkdir()
    (tmp_path / "rollout_data" / "3.jsonl").write_text(block.strip() + "\n", encoding="utf-8")
    assert detect(tmp_path / "rollout_data") is verl
    assert step_rows(summary_json(tmp_path / "rollout_data")) == {3: (1, 1.0, 2.0, 1.0)}


@pytest.mark.slow
def test_page_shows_the_turns_of_a_glued_output(tmp_path):
    """The page opens the experiment folder: train split first, sorted by num_tool_calls a 2-call sample
    comes first (step 2: the two-search one) and its turns, tool results and call arguments show as
    text; validation is a split."""
    from page_steps import load, open_area, open_page

    from rl_board.views import keys

    _experiment(tmp_path)
    at = load(open_page(tmp_path, "exp"), area=None)
    assert at.selectbox(key=keys.SPLIT).value == "train"
    open_area(at, keys.BATCH)
    at.selectbox(key=keys.SORT_BY).select("num_tool_calls").run()
    assert not at.exception, at.exception
    assert at.dataframe[0].value["num_tool_calls"].tolist()[:2] == [2.0, 2.0]
    codes = [c.value for c in at.code]
    assert codes.count("Let me search.") == 2 and codes.count('{\n  "query": "北京 人口"\n}') == 2
    assert codes.count("21.9 million") == 2 and "About 21.9 million." in codes
    assert sum("assistant · 1 tool call" in c.value for c in at.caption) == 2
    at.selectbox(key=keys.SPLIT).select("validation").run()
    assert not at.exception, at.exception


@pytest.mark.slow
def test_llama3_outputs_split_with_the_template_beside_the_run(tmp_path):
    """A Llama 3 run (its tokenizer_config.json in the experiment folder): outputs decoded without the
    special tokens split at the ipython/assistant lines; without the template they stay one turn each
    (their calls still read)."""
    from ray_writers import LLAMA3_TEMPLATE, decode_llama3, llama3_agent_response

    exp = tmp_path / "exp"
    outputs = [decode_llama3(llama3_agent_response(r)) for r in ([SEARCH, RESULT, ANSWER], [SEARCH, RESULT, SEARCH, RESULT, ANSWER])]
    for folder, step in (("rollout_data", 1), ("val_data", 0)):
        verl_dump(exp / folder, step, ["user\n\nQ"] * 2, outputs, ["x"] * 2, [1.0, 0.0], {})
    assert step_rows(summary_json(exp)) == {1: (2, 0.5, 1.0, 1.5)}
    (exp / "tokenizer_config.json").write_text(json.dumps({"chat_template": LLAMA3_TEMPLATE}))
    got = summary_json(exp, "--no-cache")
    assert step_rows(got) == {1: (2, 0.5, 2.5, 1.5)}
    assert got["steps"][0]["extras"].get("turns_unsplit") is None


def test_record_of_a_llama3_run_uses_the_template_too(tmp_path):
    """The page's record of a sample (its file opened by descriptor) is split with the run's template,
    as its row was."""
    from ray_writers import LLAMA3_TEMPLATE, decode_llama3, llama3_agent_response

    exp = tmp_path / "exp"
    output = decode_llama3(llama3_agent_response([SEARCH, RESULT, ANSWER]))
    for folder, step in (("rollout_data", 1), ("val_data", 0)):
        verl_dump(exp / folder, step, ["user\n\nQ"], [output], ["x"], [1.0], {})
    (exp / "tokenizer_config.json").write_text(json.dumps({"chat_template": LLAMA3_TEMPLATE}))
    canonical, _ = load_run(exp, cache_root=False).record_parts(0)
    assert [t["role"] for t in canonical["messages"]] == ["user", "assistant", "tool", "assistant"]


def test_a_first_line_longer_than_the_sniff_is_still_verl(tmp_path):
    """A dump whose first line holds a 230 KB judge's rationale (reward_extra_info, merged into the
    line by ``_dump_generations``) is recognised as verl, alone and in its experiment folder."""
    exp = tmp_path / "exp"
    rationale = "The answer cites the census. " * 8000  # 232,000 bytes, far past the 64 KiB sniff
    for folder, step in (("rollout_data", 1), ("val_data", 0)):
        pairs = [verl_sample(f"Q{i}", rounds) for i, (rounds, _, _) in enumerate([SEARCHED, CALCULATED])]
        verl_dump(exp / folder, step, [p[0] for p in pairs], [p[1] for p in pairs], ["gt", "gt"], [1.0, 0.0],
                  {"judge_rationale": [rationale, "short"]})
    first = (exp / "rollout_data" / "1.jsonl").read_bytes().split(b"\n", 1)[0]
    assert len(first) > 1 << 16
    assert detect(exp / "rollout_data") is verl and detect(exp) is verl
    assert summary_json(exp)["format"] == "verl"
