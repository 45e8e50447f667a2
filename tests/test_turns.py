"""The turn model: chat messages made canonical turns, and what derive takes from them."""

import json

import pyarrow as pa

from rl_board.base import fields as F
from rl_board.derive.samples import derive
from rl_board.readers.turns import content_text, sample_rows, tool_call, turn, turns


def test_content_parts_become_text_with_images_marked():
    """Text parts are joined by newlines, an image part is [image], no content is the empty text."""
    parts = [{"type": "text", "text": "Look:"}, {"type": "image_url", "image_url": {"url": "data:..."}},
             {"type": "text", "text": "what is it?"}]
    assert content_text(parts) == "Look:\n[image]\nwhat is it?"
    assert content_text([{"_type": "trackio.image", "file_path": "a.png"}]) == "[image]"
    assert content_text(None) == ""
    assert content_text("é ✓") == "é ✓"


def test_tool_calls_in_every_shape_become_name_and_arguments_text():
    """OpenAI's nested call, a flat call, a call as JSON text and arguments as a dict all give
    {id, name, arguments as text}."""
    nested = {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": 1}'}}
    flat = {"id": "c2", "name": "search", "arguments": '{"q": "a"}'}
    assert tool_call(nested) == {"id": "c1", "name": "calc", "arguments": '{"x": 1}'}
    assert tool_call(json.dumps(flat)) == {"id": "c2", "name": "search", "arguments": '{"q": "a"}'}
    as_dict = tool_call({"type": "function", "function": {"name": "calc", "arguments": {"x": 2}}})
    assert as_dict == {"id": None, "name": "calc", "arguments": '{"x": 2}'}


def test_turn_keeps_reasoning_tool_call_id_and_trainable():
    """reasoning_content or reasoning is the reasoning; tool_call_id and trainable are kept."""
    got = turn({"role": "assistant", "content": None, "reasoning_content": "think", "tool_calls": None}, True)
    assert got == {"role": "assistant", "content": "", "reasoning": "think", "tool_calls": [],
                   "tool_call_id": None, "trainable": True}
    assert turn({"role": "assistant", "content": "a", "reasoning": "r"})["reasoning"] == "r"
    assert turn({"role": "tool", "content": "7", "tool_call_id": "c1"})["tool_call_id"] == "c1"
    assert turns("plain prompt") == [turn({"role": "user", "content": "plain prompt"})]


def _derived(samples):
    return derive(sample_rows(samples)).to_pylist()


def _sample(messages, **extra):
    return {"step": 1, "reward": 1.0, "messages": turns(messages), "line": 1, "offset": 0, **extra}


CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+3?"},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "calc", "arguments": '{"e": "2+3"}'}},
        {"id": "b", "type": "function", "function": {"name": "calc", "arguments": '{"e": "3+2"}'}}]},
    {"role": "tool", "tool_call_id": "a", "content": "5"},
    {"role": "tool", "tool_call_id": "b", "content": "Error: <script>alert(1)</script>"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
    {"role": "assistant", "content": "5"},
]


def test_prompt_and_response_come_from_the_turns():
    """Prompt: the turns before the first assistant turn joined by a blank line; response: the last
    assistant turn's content; 3 assistant turns carry 3 tool calls."""
    row = _derived([_sample(CONVERSATION)])[0]
    assert row["prompt"] == "Be brief.\n\nWhat is 2+3?"
    assert row["response"] == "5"
    assert row["extra:num_turns"] == 3.0 and row["extra:num_tool_calls"] == 3.0
    assert row["tool_names"] == ["calc", "calc", "lookup"]
    assert row["has_messages"] is True


def test_an_empty_final_answer_is_an_empty_response_and_own_texts_win():
    """A last assistant turn with no content gives the empty response; a sample's own prompt stays."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]
    rows = _derived([_sample(messages), {**_sample(messages), "prompt": "mine"}])
    assert rows[0]["response"] == "" and rows[0]["prompt"] == "hi"
    assert rows[1]["prompt"] == "mine"
    assert rows[0]["response_chars"] == 0.0


def test_samples_without_messages_keep_their_own_extra():
    """A sample without messages has no turn counts, and keeps a num_turns extra of its own."""
    plain = {"step": 1, "reward": 0.0, "line": 2, "offset": 1, "extras": {"num_turns": 7.0}}
    rows = _derived([_sample(CONVERSATION), plain])
    assert rows[1]["extra:num_turns"] == 7.0 and rows[1]["extra:num_tool_calls"] is None
    assert rows[1]["has_messages"] is False and rows[0]["extra:num_turns"] == 3.0


def test_rows_without_messages_have_no_turn_extras():
    """A block where no sample has messages gains no extra columns."""
    table = derive(sample_rows([{"step": 0, "reward": 1.0, "line": 1, "offset": 0}]))
    assert F.extra_columns(table.column_names) == []
    assert table["turn_texts"].type == pa.list_(pa.string())
