"""An agent sample's conversation as a transcript the turn view draws: pure, no Streamlit.

``build_transcript`` turns a sample's canonical turns (``readers.turns``) into blocks:
role and marks as plain text, the content cut to what a browser takes, tool calls as the
tool's name with its arguments pretty-printed (JSON indented when they parse), reasoning
apart, and long tool results marked to be folded. ``reward_components`` picks a sample's
reward parts from its extras. The view escapes nothing itself: it shows every text with
``st.code`` (never HTML, never Markdown) and labels only with ``text.escape_markdown``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import fields as F
from .text import cut_text

FOLD_CHARS = 600  # a tool result longer than this (or than FOLD_LINES lines) is folded
FOLD_LINES = 12
COMPONENT_PREFIXES = ("reward/", "rewards/")  # extras that are parts of the reward (prime-rl, TRL)


@dataclass(frozen=True)
class ToolCallBlock:
    name: str
    arguments: str  # pretty-printed when JSON
    call_id: str | None


@dataclass(frozen=True)
class TurnBlock:
    """One turn as the view draws it."""

    number: int  # 1-based position in the conversation
    role: str
    label: str  # "assistant · trained", "tool · result of call c1"… (plain text)
    content: str  # cut to text.MAX_TEXT_CHARS
    cut: bool  # the content was cut
    chars: int  # characters of the whole content
    fold: bool  # a long tool result: folded until opened
    reasoning: str | None
    tool_calls: tuple[ToolCallBlock, ...]
    trainable: bool | None


def pretty_arguments(arguments: str | None) -> str:
    """Tool-call arguments indented when they are JSON, else as written ("" for none)."""
    if not arguments:
        return ""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments


def _label(turn: dict) -> str:
    role = turn.get("role") or "(no role)"
    parts = [role]
    if turn.get("trainable") is True:
        parts.append("trained")
    elif turn.get("trainable") is False and role == "assistant":
        parts.append("not trained")
    if turn.get("tool_call_id"):
        parts.append(f"result of call {turn['tool_call_id']}")
    calls = turn.get("tool_calls") or []
    if calls:
        parts.append(f"{len(calls)} tool call" + ("s" if len(calls) != 1 else ""))
    return " · ".join(parts)


def build_transcript(messages: list[dict]) -> list[TurnBlock]:
    """The blocks of a conversation, in order (see the module's docstring)."""
    blocks = []
    for number, turn in enumerate(messages or [], start=1):
        content = turn.get("content") or ""
        shown, cut = cut_text(content)
        is_tool = turn.get("role") == "tool"
        calls = tuple(ToolCallBlock(call.get("name") or "(unnamed tool)", pretty_arguments(call.get("arguments")),
                                    call.get("id"))
                      for call in turn.get("tool_calls") or [])
        blocks.append(TurnBlock(
            number=number, role=turn.get("role") or "", label=_label(turn), content=shown, cut=cut,
            chars=len(content), fold=is_tool and (len(content) > FOLD_CHARS or content.count("\n") >= FOLD_LINES),
            reasoning=turn.get("reasoning") or None, tool_calls=calls, trainable=turn.get("trainable")))
    return blocks


def reward_components(row) -> dict[str, float]:
    """A sample's reward parts: its extras named ``reward/NAME`` or ``rewards/NAME`` (``row``: a row of
    ``Run.samples``), NaN left out, by name."""
    out = {}
    for column in F.extra_columns(row.index):
        name = F.extra_name(column)
        value = row[column]
        if name.startswith(COMPONENT_PREFIXES) and value == value:
            out[name] = float(value)
    return dict(sorted(out.items()))
