"""The turn view: the transcript builder, the trained turns' coloured tokens, and the page opening an
agent run (AppTest)."""

import json
import re

import pandas as pd
import pytest
from agent_writers import v1_chain, v1_episode, v1_trace, write_prime_rl
from conftest import write_lines
from page_steps import load, load_run, open_area, open_page

from rl_board.analysis.transcript import (
    FOLD_CHARS,
    build_transcript,
    build_turn_tokens,
    pretty_arguments,
    reward_parts,
    turn_spans,
)
from rl_board.views import keys

HTML = "<img src=x onerror=alert(1)><b>bold</b>"


def test_transcript_marks_trainable_turns_folds_long_results_and_prints_arguments():
    """Labels say role, trained and the tool call; a long tool result folds, a short one doesn't;
    JSON arguments are indented, other text kept."""
    messages = [
        {"role": "user", "content": "go", "trainable": False, "tool_calls": [], "tool_call_id": None,
         "reasoning": None},
        {"role": "assistant", "content": "", "trainable": True, "reasoning": "hmm", "tool_call_id": None,
         "tool_calls": [{"id": "c", "name": "calc", "arguments": '{"a": [1, 2]}'}]},
        {"role": "tool", "content": "x" * (FOLD_CHARS + 1), "trainable": False, "tool_call_id": "c",
         "tool_calls": [], "reasoning": None},
        {"role": "tool", "content": "short", "trainable": None, "tool_call_id": "d", "tool_calls": [],
         "reasoning": None},
    ]
    blocks = build_transcript(messages)
    assert [b.label for b in blocks] == ["user", "assistant · trained · 1 tool call", "tool · result of call c",
                                         "tool · result of call d"]
    assert [b.fold for b in blocks] == [False, False, True, False]
    assert blocks[1].tool_calls[0].arguments == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert blocks[1].reasoning == "hmm"
    assert pretty_arguments("not json") == "not json"


def test_reward_parts_carry_their_logged_weights():
    """Extras named reward/… or rewards/… are the components, NaN left out; reward/NAME takes its weight from
    the extra reward_weight/NAME; without one, None; with no
    reward/ extras, every extra but the board's own (num_turns…) and the advantage is one (TRL's columns)."""
    row = pd.Series({"reward": 1.0, "extra:reward/b": 0.5, "extra:reward_weight/b": 0.25, "extra:rewards/a": 1.0,
                     "extra:reward/c": float("nan"), "extra:accuracy_reward": 0.0})
    assert reward_parts(row) == [("reward/b", 0.5, 0.25), ("rewards/a", 1.0, None)]  # NaN left out
    trl = pd.Series({"reward": 1.5, "extra:accuracy_reward": 1.0, "extra:format_score": float("nan"),
                     "extra:advantage": 0.3, "extra:num_turns": 2.0, "extra:acc": 1.0})
    assert reward_parts(trl) == [("acc", 1.0, None), ("accuracy_reward", 1.0, None)]


@pytest.mark.slow
def test_page_shows_each_component_with_its_weight(tmp_path):
    """A prime-rl trace of rubric rewards correct (score 1, weight 0.5) and format (score 1, weight 0.25): the
    turns view shows the reward 0.75 and each component as score × weight with its logged weight."""
    nodes = v1_chain([({"role": "user", "content": "q"}, False), ({"role": "assistant", "content": "a"}, True)])
    write_prime_rl(tmp_path / "weighted", 1, "train", "all", [v1_episode("a", 1, [v1_trace(
        nodes, {"correct": {"score": 1.0, "weight": 0.5}, "format": {"score": 1.0, "weight": 0.25}}, {})])])
    at = load_run(tmp_path, "weighted")
    assert not at.exception, at.exception
    assert [(m.label, m.value) for m in at.metric][:3] == [
        ("Reward", "0.75"), ("reward/correct · weight 0\\.5", "0.5"),  # labels are escaped Markdown
        ("reward/format · weight 0\\.25", "0.25")]


def _agent_run(root):
    user = {"role": "user", "content": "Add 2 and 3, then check it."}

    def trace(calls, score):
        nodes = [(user, False)]
        for i in range(calls):
            nodes.append(({"role": "assistant", "tool_calls": [
                {"id": f"c{i}", "name": "calc", "arguments": '{"expr": "2+3"}'}]}, True))
            nodes.append(({"role": "tool", "tool_call_id": f"c{i}", "content": HTML if i == 0 else "5"}, False))
        nodes.append(({"role": "assistant", "content": f"answer after {calls} calls"}, True))
        return v1_trace(v1_chain(nodes), {"correct": {"score": score, "weight": 1.0}}, {})

    out = root / "agent_run"
    write_prime_rl(out, 1, "train", "all", [v1_episode("a", 1, [trace(1, 1.0)]), v1_episode("b", 1, [trace(3, 0.0)]),
                                            v1_episode("c", 1, [trace(2, 1.0)])])
    write_prime_rl(out, 1, "eval", "all", [v1_episode("d", 1, [trace(0, 1.0)])])
    return root


@pytest.mark.slow
def test_page_opens_an_agent_run_sorts_by_tool_calls_and_shows_turns(tmp_path):
    """Load the run, sort by num_tool_calls: the 3-call sample comes first and its turns show, tool
    results as text; the split picker reads the eval split."""
    at = load(open_page(_agent_run(tmp_path), "agent_run"), area=None)
    assert at.selectbox(key=keys.SPLIT).value == "train/all"
    open_area(at, keys.BATCH)
    at.selectbox(key=keys.SORT_BY).select("num_tool_calls").run()
    assert not at.exception, at.exception
    assert at.dataframe[0].value["num_tool_calls"].tolist() == [3.0, 2.0, 1.0]
    codes = [c.value for c in at.code]
    assert "answer after 3 calls" in codes and HTML in codes and codes.count('{\n  "expr": "2+3"\n}') == 3
    assert any("assistant · trained · 1 tool call" in c.value for c in at.caption)
    at.selectbox(key=keys.SPLIT).select("eval/all").run()
    assert not at.exception, at.exception
    assert "answer after 0 calls" in [c.value for c in at.code]


# -- the trained turns' tokens, coloured ---------------------------------------------------------

HOTTEST = "rgb(128, 0, 38)"  # YlOrRd's last colour: the least likely token of a log-prob scale
MIDDLE = "rgb(253, 141, 60)"  # YlOrRd's middle (5th of 9) colour


def test_turn_spans_follow_each_other_and_need_every_count():
    """Each turn's positions follow the turns before it, cut at the lists' length; a turn without a
    count places none."""
    turns = [{"num_tokens": 3}, {"num_tokens": 2}, {"num_tokens": 4}]
    assert turn_spans(turns, 9) == [(0, 3), (3, 5), (5, 9)]
    assert turn_spans(turns, 4) == [(0, 3), (3, 4), (4, 4)]
    assert turn_spans([{"num_tokens": 3}, {"role": "user"}], 9) is None


def test_trained_turns_are_coloured_on_one_scale_and_untrained_tokens_dimmed():
    """Only the trainable turns get tokens; the scaffold before a completion is dimmed; the scale spans
    the sample's trained tokens (-2 .. 0), so -2 is the hottest colour in one turn and -1 the middle one
    in another; tokens are escaped."""
    nan = float("nan")
    table = pd.DataFrame({"token": ["<s>", "hi", "<a>", "x", "y", "<t>", "<a>", "<img src=x>"],
                          "rollout_logp": [nan, nan, nan, -0.5, -2.0, nan, nan, -1.0],
                          "counted": [False, False, False, True, True, False, False, True]})
    messages = [{"role": "user", "trainable": False, "num_tokens": 2},
                {"role": "assistant", "trainable": True, "num_tokens": 3},
                {"role": "tool", "trainable": False, "num_tokens": 1},
                {"role": "assistant", "trainable": True, "num_tokens": 2}]
    got = build_turn_tokens(messages, table, "rollout_logp")
    assert set(got.html) == {2, 4}
    second = got.html[2]
    assert second.count('<span class="rlb-tok') == 3 and second.count("rlb-untrained") == 1
    assert "&lt;a&gt;" in second and "<a>" not in second
    assert f"background:{HOTTEST}" in second  # y = -2.0
    last = got.html[4]
    assert f"background:{MIDDLE}" in last and HOTTEST not in last  # -1.0: the middle of -2 .. 0
    assert "&lt;img" in last and "src=x&gt;" in last and "<img" not in last  # the space is marked for CSS
    assert "-2" in got.legend and "rollout_logp (sequential)" in got.legend
    assert build_turn_tokens([{"role": "assistant", "trainable": True}], table, "rollout_logp").html == {}


def _tokenized_agent_run(root, hostile: str = "<img src=x onerror=alert(1)>"):
    """A prime-rl run whose nodes carry token ids of a tokenizer trained beside it: a tool call, its
    result, and an answer holding markup; all/effective (advantages 0.5 in effective)."""
    from agent_writers import v1_rendered_chain
    from token_writers import train_tokenizer
    from tokenizers import Tokenizer

    out = root / "tok_agent"
    tokenizer = Tokenizer.from_file(str(train_tokenizer(out)))

    def encode(text):
        return tokenizer.encode(text).ids

    turns = [({"role": "user", "content": "What is 5 + 39?"}, False),
             ({"role": "assistant", "tool_calls": [{"id": "c1", "name": "calc", "arguments": '{"e": "5+39"}'}]}, True),
             ({"role": "tool", "tool_call_id": "c1", "content": "44"}, False),
             ({"role": "assistant", "content": f"The answer is 44. {hostile}"}, True)]
    rewards = {"correct": {"score": 1.0, "weight": 1.0}}
    write_prime_rl(out, 1, "train", "all",
                   [v1_episode("a", 1, [v1_trace(v1_rendered_chain(encode, turns), rewards, {})])])
    write_prime_rl(out, 1, "train", "effective", [
        v1_episode("a", 1, [v1_trace(v1_rendered_chain(encode, turns, advantages=0.5), rewards, {})])])
    return out, tokenizer


def _token_bodies(at) -> list[str]:
    return [h.proto.body for h in at.get("html") if "rlb-token-text" in h.proto.body]


@pytest.mark.slow
def test_page_colours_the_trained_turns_tokens_decoded_with_the_runs_tokenizer(tmp_path):
    """The turn view draws the two trained turns' tokens, each decoded with the tokenizer beside the run
    (escaped: the answer's markup is text), the scaffold dimmed, coloured by the sampler's log-prob; the
    effective split offers the advantages; the token view below draws the whole sequence."""
    import html

    out, tokenizer = _tokenized_agent_run(tmp_path)
    episode = json.loads((out / "rollouts/step_1/train/all/traces.jsonl").read_text())
    nodes = episode["traces"][0]["nodes"]
    at = load_run(tmp_path, "tok_agent")
    assert at.selectbox(key=keys.TURN_COLOR_BY).value == "rollout_logp"
    bodies = _token_bodies(at)
    assert len(bodies) == 3  # turn 2, turn 4, then the token view's whole sequence
    for body, node in zip(bodies, (nodes[1], nodes[3])):
        decoded = [html.escape(tokenizer.decode([i], skip_special_tokens=False).replace("Ġ", " ").replace("Ċ", "\n"))
                   for i in node["token_ids"]]
        body = re.sub(r'<span class="rlb-(?:ws|nl|tab)" data-mark="[^"]*">(.*?)</span>', r"\1", body,
                      flags=re.S)  # whitespace marks (CSS) around a space, newline or tab: their text stays
        spans = re.findall(r'<span class="rlb-tok[^"]*"[^>]*>(.*?)</span>', body, flags=re.S)
        assert spans == decoded
        assert body.count("rlb-untrained") == node["mask"].count(False) > 0
    assert "<img" not in bodies[1] and "&lt;" in bodies[1]
    assert sum(len(n["token_ids"]) for n in nodes) == len(re.findall(r'<span class="rlb-tok', bodies[2]))
    at.selectbox(key=keys.SPLIT).select("train/effective").run()
    assert not at.exception, at.exception
    assert set(at.selectbox(key=keys.TURN_COLOR_BY).options) >= {"rollout logp (the sampler's)", "advantage (logged)"}
    at.selectbox(key=keys.TURN_COLOR_BY).select("advantages").run()
    # the fixture's advantages are all >= 0: one sign, so a sequential scale (a diverging one only for both signs)
    assert any("advantages (sequential)" in h.proto.body for h in at.get("html"))


@pytest.mark.slow
def test_a_board_format_run_with_messages_counts_its_turns_and_tool_calls(tmp_path):
    """A line of the board's own JSONL format with `messages` (user, an assistant turn calling one tool,
    the tool's result, the assistant's answer): the turn view says 4 turns · 2 assistant turns · 1 tool
    call, not "–"."""
    write_lines(tmp_path / "msgs" / "r.jsonl", [{"step": 1, "reward": 1.0, "messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "calc", "arguments": "{\"x\": 4}"}]},
        {"role": "tool", "content": "4", "tool_call_id": "c1"},
        {"role": "assistant", "content": "4"}]}])
    at = load_run(tmp_path, "msgs")
    assert not at.exception
    assert any(c.value.startswith("4 turns · 2 assistant turns · 1 tool call. ") for c in at.caption), \
        [c.value for c in at.caption]


# -- faults and what the trainer logged per turn ---------------------------------------------------


def test_transcript_marks_failing_turns_and_shows_what_was_logged():
    """A failing tool result is marked with its kind, why, and the turn that made the call; a turn's
    meta shows as name: value pairs (a span as its seconds, nulls left out, long values cut)."""
    from rl_board.analysis.transcript import MAX_LOGGED_CHARS

    meta = {"finish_reason": "length", "usage": {"completion_tokens": 7, "cost": None},
            "timing": {"generation": {"start": 1.0, "end": 3.5}}, "is_timeout": False, "stop_condition": "x" * 500}
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "ls", "arguments": "{}"}]},
                {"role": "tool", "content": "Traceback (most recent call last):\n  boom", "tool_call_id": "c1"},
                {"role": "assistant", "content": "partial", "meta": json.dumps(meta)}]
    blocks = build_transcript(messages)
    assert [b.faults for b in blocks[:2]] == [(), ()]
    assert len(blocks[2].faults) == 1 and blocks[2].faults[0].startswith("tool_error: ")
    assert blocks[2].faults[0].endswith("(the call of assistant turn 0)")
    assert len(blocks[3].faults) == 1 and blocks[3].faults[0].startswith("truncated: ")
    assert blocks[3].logged == (("finish_reason", "length"), ("usage.completion_tokens", "7"),
                                ("timing.generation", "2.5 s"), ("is_timeout", "false"),
                                ("stop_condition", "x" * MAX_LOGGED_CHARS + "…"))


@pytest.mark.slow
def test_page_marks_the_loop_in_the_turns(tmp_path):
    """The 3-call sample's first call starts a loop of identical calls: the page marks that turn with the fault."""
    at = load(open_page(_agent_run(tmp_path), "agent_run"), area=None)
    open_area(at, keys.BATCH)
    at.selectbox(key=keys.SORT_BY).select("num_tool_calls").run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert [e for e in errors if "tool\\_loop" in e] and all("tool\\_error" not in e for e in errors)


@pytest.mark.slow
def test_batch_and_explore_filter_by_fault(tmp_path):
    """The batch table names each sample's faults, and it and Explore keep only the trajectories with the chosen
    fault: the 3-call sample's loop."""
    at = load(open_page(_agent_run(tmp_path), "agent_run"), area=None)
    open_area(at, keys.BATCH)
    assert at.selectbox(key=keys.BATCH_FAULT).options == ["(all samples)", "(any fault)", "tool_loop"]
    assert at.dataframe[0].value["faults"].tolist() == ["", "", "tool_loop"]  # by reward: 1 and 2 calls (1.0), 3 (0.0)
    at.selectbox(key=keys.BATCH_FAULT).select("tool_loop").run()
    assert not at.exception, at.exception
    assert at.dataframe[0].value["num_tool_calls"].tolist() == [3.0]
    open_area(at, keys.EXPLORE)
    at.selectbox(key=keys.EXPLORE_FAULT).select("any").run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("1 of 3 samples match") for c in at.caption)
