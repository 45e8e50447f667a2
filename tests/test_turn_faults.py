"""Turn faults: each kind found where it is planted, its look-alikes never flagged."""

from __future__ import annotations

import json

import pytest

from rl_board.derive.faults import KINDS, Fault, fault_bits, find_faults, is_tool_error, kind_bit, kinds_of


def _turn(role, content="", calls=(), call_id=None, meta=None):
    return {"role": role, "content": content, "reasoning": None,
            "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in calls],
            "tool_call_id": call_id, "trainable": None, "meta": None if meta is None else json.dumps(meta)}


def _call(ident, name="search", arguments='{"q": "x"}', content="", meta=None):
    return _turn("assistant", content, [(ident, name, arguments)], meta=meta)


PROMPT = [_turn("system", "You are an agent."), _turn("user", "Find x.")]
ANSWER = _turn("assistant", "The answer is 42. " * 200)  # a long, complete final answer


@pytest.mark.parametrize("content", [
    '{"error": "file not found"}', "Error: no such file", "ERROR 12", "Exception raised in tool",
    "  Traceback (most recent call last):\n  File \"x.py\"", "ran the script\nexit code 2",
    "returncode=1", "Process exited with code 137", "HTTP 404 Not Found", "status code: 500",
    '{"exit_code": 1, "stdout": ""}', '{"status": 503}',
])
def test_tool_error_forms(content):
    """Every failure form the issue lists is a tool error."""
    assert is_tool_error(content, {})


@pytest.mark.parametrize("content", [
    "The error bars overlap; no error was found.", '{"error": null, "result": 3}', "exit code 0",
    "Errors are rare here", "HTTP 200 OK", '{"status": "ok", "errors_fixed": 2}', "",
])
def test_tool_error_lookalikes(content):
    """Ordinary content mentioning errors, a null error and success codes are not tool errors."""
    assert not is_tool_error(content, {})


def test_tool_error_from_trainer_status():
    """A status the trainer recorded (is_error, status) makes a tool error whatever the text."""
    assert is_tool_error("fine", {"is_error": True})
    assert is_tool_error("fine", {"status": "error"})
    assert not is_tool_error("fine", {"status": "success", "is_error": False})


def test_tool_error_names_the_issuing_turn():
    """A failing result names its own message and the assistant turn whose call id it answers."""
    turns = [*PROMPT, _turn("assistant", "", [("a", "ls", "{}"), ("b", "cat", '{"f": 1}')]),
             _turn("tool", "ok", call_id="a"), _turn("tool", "Error: no file", call_id="b"),
             _call("c", "ls", "{}"), _turn("tool", "ok", call_id="c"), ANSWER]
    assert find_faults(turns) == [Fault("tool_error", 4, 0)]


def test_loop_of_three_and_its_lookalikes():
    """Three identical consecutive calls (arguments equal after JSON normalisation) are one loop at the
    first; two in a row, or repeats with another call between, are not."""
    loop = [*PROMPT, _call("a", arguments='{"q": "x", "n": 1}'), _turn("tool", "r"),
            _call("b", arguments='{"n":1,"q":"x"}'), _turn("tool", "r"),
            _call("c", arguments='{ "q" : "x" , "n" : 1 }'), _turn("tool", "r"), ANSWER]
    assert find_faults(loop) == [Fault("tool_loop", 2, 0)]
    two = [*PROMPT, _call("a"), _turn("tool", "r"), _call("b"), _turn("tool", "r"), ANSWER]
    apart = [*PROMPT, _call("a"), _turn("tool", "r"), _call("b"), _turn("tool", "r"), _call("c", "open"),
             _turn("tool", "r"), _call("d"), _turn("tool", "r"), ANSWER]
    assert find_faults(two) == [] and find_faults(apart) == []


def test_malformed_calls():
    """Arguments that are not JSON, a nameless call, a tool not among those recorded and a recorded
    parse failure are malformed; a call without arguments is not."""
    assert find_faults([*PROMPT, _call("a", arguments='{"q": '), _turn("tool", "r"), ANSWER]) == \
        [Fault("malformed_tool_call", 2, 0)]
    assert find_faults([*PROMPT, _call("a", name=None), ANSWER]) == [Fault("malformed_tool_call", 2, 0)]
    tools = [{**PROMPT[0], "meta": json.dumps({"tools": ["search"]})}, PROMPT[1]]
    assert find_faults([*tools, _call("a", "delete"), _turn("tool", "r"), ANSWER]) == \
        [Fault("malformed_tool_call", 2, 0)]
    assert find_faults([*tools, _call("a", "search"), _turn("tool", "r"), ANSWER]) == []
    parsed = _turn("assistant", "<tool_call>oops", meta={"parse_error": "no closing tag"})
    assert find_faults([*PROMPT, ANSWER, _turn("user", "again"), parsed, _turn("user", "?"), ANSWER]) == \
        [Fault("malformed_tool_call", 4, 1)]
    assert find_faults([*PROMPT, _call("a", arguments=None), _turn("tool", "r"), ANSWER]) == []


@pytest.mark.parametrize("meta", [{"finish_reason": "length"}, {"stop_reason": "length"},
                                  {"termination_reason": "MAX_RESPONSE_LENGTH_EXCEEDED"},
                                  {"termination_reason": "max_response_length_exceeded"}, {"is_truncated": True}])
def test_truncated_where_recorded(meta):
    """A stop at the length limit recorded on a turn names that turn."""
    turns = [*PROMPT, _call("a"), _turn("tool", "r"), _turn("assistant", "partial answ", meta=meta)]
    assert find_faults(turns) == [Fault("truncated", 4, 1)]


def test_trajectory_level_truncation_names_the_last_assistant_turn():
    """A trajectory-level record on a last tool message names the last assistant turn; other stops
    (a turn limit, "stop", is_truncated false) are not truncation."""
    turns = [*PROMPT, _call("a"), _turn("tool", "r", meta={"stop_condition": "prompt_too_long"})]
    assert find_faults(turns) == [Fault("truncated", 2, 0)]
    for meta in ({"termination_reason": "MAX_TURNS_EXCEEDED"}, {"finish_reason": "stop"}, {"is_truncated": False}):
        assert find_faults([*PROMPT, {**ANSWER, "meta": json.dumps(meta)}]) == []


@pytest.mark.parametrize("content", ["", "   \n", "<think>I should answer 4.</think>", "<think>still thinking"])
def test_empty_final_answer(content):
    """An empty, blank or think-only last assistant turn is an empty final answer."""
    assert find_faults([*PROMPT, _call("a"), _turn("tool", "r"), _turn("assistant", content)]) == \
        [Fault("empty_final_answer", 4, 1)]


def test_answer_after_think_is_not_empty():
    """Text after a think block, or a last turn that is a tool call, is not an empty answer."""
    assert find_faults([*PROMPT, _turn("assistant", "<think>hm</think>4")]) == []
    assert find_faults([*PROMPT, _call("a")]) == []


def test_bits_round_trip():
    """Fault kinds map to one bit each, and ``any`` tests them all."""
    faults = [Fault("tool_loop", 2, 0), Fault("empty_final_answer", 9, 3)]
    assert fault_bits(faults) == 0b10010
    assert kinds_of(0b10010) == ["tool_loop", "empty_final_answer"]
    assert kind_bit("any") == 2 ** len(KINDS) - 1
    with pytest.raises(ValueError, match="unknown fault kind"):
        kind_bit("bogus")


def _conversations() -> list[list[dict]]:
    """Every conversation of this file's cases, and edge cases of the column-wise path."""
    loop = [*PROMPT, _call("a", arguments='{"q": "x", "n": 1}'), _turn("tool", "r"),
            _call("b", arguments='{"n":1,"q":"x"}'), _turn("tool", "r"), _call("c", arguments='{ "q" : "x" , "n" : 1 }'),
            _turn("tool", "r"), ANSWER]
    tools = [{**PROMPT[0], "meta": json.dumps({"tools": ["search"]})}, PROMPT[1]]
    out = [
        loop, [*PROMPT, ANSWER], [], [_turn("assistant", "")], [_turn("user", "only a question")],
        [*PROMPT, _call("a"), _turn("tool", "r"), _call("b"), _turn("tool", "r"), ANSWER],
        [*PROMPT, _call("a", arguments=None), _turn("tool", "r"), _call("b", arguments=""), _turn("tool", "r"),
         _call("c", arguments=None), _turn("tool", "r"), ANSWER],  # None and "" normalise alike: a loop
        [*PROMPT, _turn("assistant", "", [("a", "s", "{}"), ("b", "s", "{}"), ("c", "s", "{}")]), ANSWER],
        [*tools, _call("a", "delete"), _turn("tool", "r"), ANSWER],
        [*tools, _call("a", "search"), _turn("tool", "r"), ANSWER],
        [{**PROMPT[0], "meta": json.dumps({"tools": [{"type": "function", "function": {"name": "search"}}]})},
         PROMPT[1], _call("a", "delete"), _turn("tool", "r"), ANSWER],
        [*PROMPT, _call("a", name=None), ANSWER], [*PROMPT, _call("a", arguments="{bad"), ANSWER],
        [*PROMPT, _turn("assistant", "x", meta={"parse_error": "bad"}), ANSWER],
        [*PROMPT, _turn("assistant", "x", meta={"finish_reason": "length"}), _turn("user", "go on"), ANSWER],
        [*PROMPT, _call("a"), _turn("tool", "ok", meta={"is_error": True}), ANSWER],
        [*PROMPT, _call("a"), _turn("tool", "ok", meta={"status": 500}), ANSWER],
        [*PROMPT, _call("a"), _turn("tool", "ok", meta={"status": "failed", "timing": {"start": 0, "end": 1}}), ANSWER],
        [*PROMPT, _turn("assistant", "x", meta={"stop_reason": 'a "truncated" one'})],
        [*PROMPT, _turn("assistant", "x", meta={"is_truncated": False, "stop_condition": "completed"})],
        [*PROMPT, _turn("assistant", "x", meta={"is_truncated": True})],
        [*PROMPT, _turn("assistant", "x", meta={"termination_reason": "MAX_TURNS_EXCEEDED", "usage": {"n": 3}})],
        [*PROMPT, _turn("assistant", "<think>a\n"), ],
        [*PROMPT, _turn("assistant", "<think>a</think>\u3000\n")],
        [*PROMPT, _turn("assistant", "\u00a0")],
        [*PROMPT, _call("a"), _turn("tool", "\u00a0Error: x")],
        [*PROMPT, _call("a"), _turn("tool", "\u2003{\"error\": \"boom\"}"), ANSWER],
        [*PROMPT, _call("a"), _turn("ipython", "exit status: 3"), ANSWER],
        [*PROMPT, _call("a"), _turn("function", "RETURNCODE = 0"), ANSWER],
        [*PROMPT, _call("a"), _turn("user", "Error: a user, not a tool"), ANSWER],
        [*PROMPT, _call("a", "search", '{"q": 1}'), _call("b", "search", '{"q": 1}'),
         _turn("assistant", "", [("c", "search", '{"q":1}')]), ANSWER],
    ]
    for content in ('{"error": "file not found"}', "Error: no such file", "ERROR 12", "Exception raised in tool",
                    "  Traceback (most recent call last):\n  File", "exit code 2", "returncode=1", "exited with code 137",
                    "HTTP 404 Not Found", "status code: 500", '{"exit_code": 1}', '{"status": 503}',
                    "The error bars overlap", '{"error": null, "result": 3}', "exit code 0", "Errors are rare",
                    "HTTP 200 OK", '{"status": "ok"}', "", "ErrorCode 5", "Error", '{"status": "failed"}', "[1, 2]"):
        out.append([*PROMPT, _call("a"), _turn("tool", content, call_id="a"), ANSWER])
    return out


def test_block_bits_are_the_faults_found_one_by_one():
    """compute_fault_bits over a block (column by column) gives, for every conversation, the kinds find_faults
    finds in it alone; null for a sample without a conversation."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from rl_board.derive.faults import compute_fault_bits
    from rl_board.readers.canonical import MESSAGES

    conversations = [*_conversations(), None]
    lists = pa.array(conversations, MESSAGES)
    owner = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    has = lists.is_valid().to_numpy(zero_copy_only=False)
    got = compute_fault_bits(pc.list_flatten(lists), owner, len(conversations), has).to_pylist()
    expected = [None if c is None else fault_bits(find_faults(c)) for c in conversations]
    assert got == expected
    assert len({b for b in expected if b}) >= 5  # every kind, alone or together, is among them


def test_recorded_tools_in_every_shape():
    """Tool lists as names, {"name"} or OpenAI's {"function": {"name"}} (or their JSON text) are read; a call
    to a tool not among them is malformed, one among them is not; a list that can't be read records none."""
    from rl_board.readers.turns import tool_names

    openai = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    assert tool_names(openai) == tool_names([{"name": "search"}]) == tool_names('["search"]') == ["search"]
    assert tool_names([{"description": "no name"}]) is None and tool_names([]) is None and tool_names("{") is None
    for tools in (openai, [{"description": "no name"}]):
        recorded = [{**PROMPT[0], "meta": json.dumps({"tools": tools})}, PROMPT[1]]
        assert find_faults([*recorded, _call("a", "search"), _turn("tool", "r"), ANSWER]) == []
    recorded = [{**PROMPT[0], "meta": json.dumps({"tools": openai})}, PROMPT[1]]
    assert find_faults([*recorded, _call("a", "delete"), _turn("tool", "r"), ANSWER]) == \
        [Fault("malformed_tool_call", 2, 0)]
