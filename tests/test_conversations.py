"""``derive.conversations``: a block's conversations to prompts, responses, turn counts and the turn columns,
column by column; checked against the definitions worked out one sample at a time in plain Python."""

from __future__ import annotations

import random

import pyarrow as pa

from rl_board.base import fields as F
from rl_board.derive.conversations import from_messages
from rl_board.readers.canonical import ROWS, build_rows


def _by_hand(conversation, prompt, response, own_turns):
    """The module's definitions for one sample: (prompt, response, num_turns, num_tool_calls, turn_texts,
    tool_names); a sample without a conversation keeps its own and has None for the rest."""
    if conversation is None:
        return prompt, response, own_turns, None, None, None
    roles = [t["role"] for t in conversation]
    first = roles.index("assistant") if "assistant" in roles else len(conversation)
    assistant = [t for t in conversation if t["role"] == "assistant"]
    if prompt is None and first > 0:
        prompt = "\n\n".join(t["content"] or "" for t in conversation[:first])
    if response is None and assistant:
        response = assistant[-1]["content"] or ""
    calls = [c for t in assistant for c in t["tool_calls"] or []]
    texts = [t["content"] or "" for t in conversation] + [c["arguments"] or "" for t in conversation
                                                          for c in t["tool_calls"] or []]
    return prompt, response, float(len(assistant)), float(len(calls)), texts, [c["name"] or "" for c in calls]


def _conversation(rng):
    if rng.random() < 0.2:
        return None
    turns = []
    for _ in range(rng.choice([0, 1, 2, 3, 5])):
        calls = rng.choice([None, [], [{"id": "c", "name": rng.choice(["f", None, ""]),
                                        "arguments": rng.choice(['{"x": 1}', None, ""])}] * rng.randint(1, 2)])
        turns.append({"role": rng.choice(["system", "user", "assistant", "tool", None]),
                      "content": rng.choice(["hi", "", None, "two\nlines", "é 中"]), "reasoning": None,
                      "tool_calls": calls, "tool_call_id": None, "trainable": None})
    return turns


def test_every_sample_is_what_its_conversation_gives_by_hand():
    """300 random samples: conversations of 0-5 turns of any role (none too), contents and tool calls
    missing or empty, some samples without one, some with a prompt, a response or a num_turns of their own."""
    rng = random.Random(5)
    conversations = [_conversation(rng) for _ in range(300)]
    prompts = [rng.choice([None, None, "own prompt"]) for _ in conversations]
    responses = [rng.choice([None, None, "own response"]) for _ in conversations]
    own_turns = [rng.choice([None, 7.0]) for _ in conversations]
    extra = F.extra_column(F.NUM_TURNS)
    nulls = pa.nulls(len(conversations))
    rows = build_rows({name: nulls for name in ROWS.names} | {
        "prompt": pa.array(prompts, pa.string()), "response": pa.array(responses, pa.string()),
        F.MESSAGES: pa.array(conversations, ROWS.field(F.MESSAGES).type)}, {})
    rows = rows.append_column(extra, pa.array(own_turns, pa.float64()))
    got, turned = from_messages(rows)
    expected = [_by_hand(*sample) for sample in zip(conversations, prompts, responses, own_turns)]
    assert got["prompt"].to_pylist() == [e[0] for e in expected]
    assert got["response"].to_pylist() == [e[1] for e in expected]
    assert got[extra].to_pylist() == [e[2] for e in expected]
    assert got[F.extra_column(F.NUM_TOOL_CALLS)].to_pylist() == [e[3] for e in expected]
    assert turned["turn_texts"].to_pylist() == [e[4] for e in expected]
    assert turned["tool_names"].to_pylist() == [e[5] for e in expected]
    assert turned["has_messages"].tolist() == [c is not None for c in conversations]


def test_a_block_without_conversations_is_left_as_it_is():
    """No sample has messages: the rows unchanged, null turn columns, no extras added."""
    nulls = pa.nulls(3)
    rows = build_rows({name: nulls for name in ROWS.names} | {"prompt": pa.array(["p", None, "q"])}, {})
    got, turned = from_messages(rows)
    assert got.equals(rows)
    assert turned["turn_texts"].to_pylist() == [None] * 3 and turned["has_messages"].tolist() == [False] * 3
