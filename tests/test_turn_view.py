"""The turn view: the transcript builder, and the page opening an agent run (AppTest)."""

import pandas as pd
from streamlit.testing.v1 import AppTest

from agent_writers import v1_chain, v1_episode, v1_trace, write_prime_rl
from conftest import REPO
from rl_board.transcript import FOLD_CHARS, build_transcript, pretty_arguments, reward_components
from rl_board.views import keys

APP = str(REPO / "app.py")
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


def test_reward_components_are_the_reward_extras():
    """Extras named reward/… or rewards/… are the components, NaN left out."""
    row = pd.Series({"reward": 1.0, "extra:reward/b": 0.5, "extra:rewards/a": 1.0, "extra:reward/c": float("nan"),
                     "extra:other": 3.0})
    assert reward_components(row) == {"reward/b": 0.5, "rewards/a": 1.0}


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


def test_page_opens_an_agent_run_sorts_by_tool_calls_and_shows_turns(tmp_path):
    """Load the run, sort by num_tool_calls: the 3-call sample comes first and its turns show, tool
    results as text; the split picker reads the eval split."""
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(_agent_run(tmp_path))).run()
    at.sidebar.selectbox(key=keys.RUN).select("agent_run").run()
    at.sidebar.button(key=keys.LOAD).click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key=keys.SPLIT).value == "train/all"
    at.session_state[keys.AREA] = keys.BATCH
    at.run()
    at.selectbox(key=keys.SORT_BY).select("num_tool_calls").run()
    assert not at.exception, at.exception
    assert at.dataframe[0].value["num_tool_calls"].tolist() == [3.0, 2.0, 1.0]
    codes = [c.value for c in at.code]
    assert "answer after 3 calls" in codes and HTML in codes and codes.count('{\n  "expr": "2+3"\n}') == 3
    assert any("assistant · trained · 1 tool call" in c.value for c in at.caption)
    at.selectbox(key=keys.SPLIT).select("eval/all").run()
    assert not at.exception, at.exception
    assert "answer after 0 calls" in [c.value for c in at.code]
