"""An agent sample's conversation as a transcript the turn view draws: pure, no Streamlit.

``build_transcript`` turns a sample's canonical turns (``readers.turns``) into blocks:
role and marks as plain text, the content cut to what a browser takes, tool calls as the
tool's name with its arguments pretty-printed (JSON indented when they parse), reasoning
apart, long tool results marked to be folded, each image of the turn (``images.compute_sample_images``)
at its place: the content cut into the texts between its ``[image]`` markers, each turn's faults
(``derive.faults``: kind and why) and what the trainer logged about the turn (its ``meta``: stop reason,
token counts, timing, timeouts) as ``name: value`` pairs. ``reward_parts`` picks a sample's
reward parts from its extras (``component_names``), each with its logged weight. ``build_turn_tokens`` colours the tokens of the trained turns of a
sample that has per-token lists, as the token view colours a response (``colors``). The view
escapes nothing itself: it shows every text with ``st.code`` (never HTML, never Markdown), labels
only with ``text.escape_markdown``, and token HTML only as ``colors`` builds it (every token escaped).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from ..base import fields as F
from ..base.colors import build_legend_html, build_token_text_html, metric_scale
from ..base.text import cut_text
from ..derive.faults import WHY, find_faults, meta_of
from ..readers.turns import IMAGE_TEXT
from .tables import TOKEN_METRICS

FOLD_CHARS = 600  # a tool result longer than this (or than FOLD_LINES lines) is folded
FOLD_LINES = 12
COMPONENT_PREFIXES = ("reward/", "rewards/")  # extras that are parts of the reward (prime-rl, TRL)


WEIGHT_PREFIX = "reward_weight/"  # the extra ``reward_weight/NAME``: the weight logged for ``reward/NAME``


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
    #: the indices (in the sample's image list) of this turn's images, in order, and the content's texts
    #: around them: ``pieces[0]``, image 0, ``pieces[1]``, ...; no images: ``pieces`` is ``(content,)``
    images: tuple[int, ...] = ()
    pieces: tuple[str, ...] = ()
    faults: tuple[str, ...] = ()  # "kind: why" of each fault this turn is named for (plain text)
    logged: tuple[tuple[str, str], ...] = ()  # (name, value) of what the trainer logged about the turn


MAX_LOGGED_CHARS = 200  # a logged value longer than this is cut (with …)


def logged_fields(meta: dict) -> tuple[tuple[str, str], ...]:
    """A turn's ``meta`` as (name, value) text pairs: nested objects one level down as ``a.b``, a
    ``{start, end}`` span as its duration in seconds, null values left out, each value cut to
    ``MAX_LOGGED_CHARS``."""
    out = []
    for key, value in meta.items():
        items = value.items() if isinstance(value, dict) and not _span(value) else [(None, value)]
        for sub, got in items:
            if got is None:
                continue
            name = str(key) if sub is None else f"{key}.{sub}"
            if _span(got):
                text = f"{got['end'] - got['start']:.3g} s"
            elif isinstance(got, str):
                text = got
            else:
                text = json.dumps(got, ensure_ascii=False, default=str)
            out.append((name, text if len(text) <= MAX_LOGGED_CHARS else text[:MAX_LOGGED_CHARS] + "…"))
    return tuple(out)


def _span(value) -> bool:
    return (isinstance(value, dict) and set(value) == {"start", "end"}
            and all(isinstance(value[k], (int, float)) and not isinstance(value[k], bool) for k in value))


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


def content_pieces(content: str, places: list[int]) -> tuple[str, ...]:
    """``content`` cut at each of ``places`` (ascending: where an ``[image]`` marker begins), the marker
    and the newline joining it to the next part left out: one more piece than places. A place past the
    end (the content was cut) puts its image at the end."""
    pieces, start = [], 0
    for at in places:
        at = max(start, min(at, len(content)))
        piece = content[start:at]
        pieces.append(piece[:-1] if piece.endswith("\n") else piece)
        start = at + len(IMAGE_TEXT) if content.startswith(IMAGE_TEXT, at) else at
        start += content.startswith("\n", start)
    pieces.append(content[start:])
    return tuple(pieces)


def build_transcript(messages: list[dict], images: list[dict] | None = None) -> list[TurnBlock]:
    """The blocks of a conversation, in order (see the module's docstring); ``images`` the sample's
    (``images.compute_sample_images``), each put in its turn at its place."""
    blocks = []
    by_turn: dict[int, list[int]] = {}
    for index, image in enumerate(images or []):
        by_turn.setdefault(image["message_index"], []).append(index)
    marks = {}
    for fault in find_faults(messages or []):
        why = f"{fault.kind}: {WHY[fault.kind]}"
        if fault.kind == "tool_error":
            why += f" (the call of assistant turn {fault.assistant_turn})"
        marks.setdefault(fault.message_index, []).append(why)
    for number, turn in enumerate(messages or [], start=1):
        content = turn.get("content") or ""
        shown, cut = cut_text(content)
        own = tuple(by_turn.get(number - 1, ()))
        pieces = content_pieces(shown, [images[k]["at"] or 0 for k in own]) if own else (shown,)
        is_tool = turn.get("role") == "tool"
        calls = tuple(ToolCallBlock(call.get("name") or "(unnamed tool)", pretty_arguments(call.get("arguments")),
                                    call.get("id"))
                      for call in turn.get("tool_calls") or [])
        blocks.append(TurnBlock(
            number=number, role=turn.get("role") or "", label=_label(turn), content=shown, cut=cut,
            chars=len(content), fold=is_tool and (len(content) > FOLD_CHARS or content.count("\n") >= FOLD_LINES),
            reasoning=turn.get("reasoning") or None, tool_calls=calls, trainable=turn.get("trainable"),
            images=own, pieces=pieces, faults=tuple(marks.get(number - 1, ())),
            logged=logged_fields(meta_of(turn))))
    return blocks


def count_turns(messages: list[dict]) -> tuple[int, int]:
    """(assistant turns, tool calls of those turns) of a conversation: what ``derive`` counts as the
    ``num_turns`` and ``num_tool_calls`` extras of an agent format's samples."""
    assistant = [t for t in messages or [] if t.get("role") == "assistant"]
    return len(assistant), sum(len(t.get("tool_calls") or ()) for t in assistant)


#: extras the board or a reader makes, never a part of the reward
NOT_COMPONENTS = (F.NUM_TURNS, F.NUM_TOOL_CALLS, "turns_unsplit", "image_placeholders", "images_dropped", "trained")


def component_names(names) -> list[str]:
    """Which of a run's extra ``names`` are reward components: those named ``reward/NAME`` or ``rewards/NAME``
    (prime-rl, verifiers) when there are any; else every other extra (verl's ``reward_extra_info`` keys,
    TRL's reward-function columns, rLLM's metrics and ``is_correct``) but ``NOT_COMPONENTS``, the weights
    (``reward_weight/NAME``) and the names holding "advantage" (any case: computed from the reward)."""
    names = list(names)
    prefixed = [n for n in names if n.startswith(COMPONENT_PREFIXES)]
    return prefixed or [n for n in names if n not in NOT_COMPONENTS and not n.startswith(WEIGHT_PREFIX)
                        and "advantage" not in n.lower()]


def reward_parts(row) -> list[tuple[str, float, float | None]]:
    """A sample's reward components (``component_names``) with their logged weights, as (name, value,
    weight or None), by name (``row``: a row of ``Run._samples``), NaN left out; a component
    ``reward/NAME``'s weight is its extra ``reward_weight/NAME`` (prime-rl's rubric)."""
    values = {F.extra_name(c): row[c] for c in F.extra_columns(row.index)}
    named = {n: values[n] for n in component_names(values)}
    out = []
    for name, value in sorted(named.items()):
        if value == value:
            weight = values.get(WEIGHT_PREFIX + name.split("/", 1)[1]) if "/" in name else None
            out.append((name, float(value), float(weight) if weight is not None and weight == weight else None))
    return out


def turn_spans(messages: list[dict], n: int) -> list[tuple[int, int]] | None:
    """Each turn's token positions ``[start, stop)`` in the sample's per-token lists of ``n``
    positions: a turn's ``num_tokens`` positions follow those of the turns before it (cut at ``n``).
    None when a turn has no ``num_tokens`` (the format doesn't say where its tokens lie)."""
    spans, start = [], 0
    for turn in messages or []:
        count = turn.get("num_tokens")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return None
        spans.append((min(start, n), min(start + count, n)))
        start += count
    return spans


def turn_metrics(table: pd.DataFrame) -> list[str]:
    """The metrics of ``TOKEN_METRICS`` with a value on some counted position of a token table
    (``tables.compute_token_table``): what a trained turn can be coloured by."""
    counted = table["counted"].to_numpy(dtype=bool)
    return [m for m in TOKEN_METRICS if table.loc[counted, m].notna().any()]


@dataclass(frozen=True)
class TurnTokens:
    """The coloured tokens of a sample's trained turns: turn number (1-based) -> HTML of its tokens,
    and one colour bar for all of them (one scale over the sample's counted positions, so colours
    compare across turns)."""

    html: dict[int, str]
    legend: str


def build_turn_tokens(messages: list[dict], table: pd.DataFrame, metric: str, estimator: str = "k3") -> TurnTokens:
    """The tokens of each trainable turn (``trainable`` true, with positions) coloured by ``metric``:
    ``table`` is the sample's token table (``tables.compute_token_table``, every position kept);
    positions it does not count (the scaffold before a completion) are dimmed. Every token is
    escaped (``colors.build_token_text_html``). No turn when the turns don't say where their tokens lie."""
    values = table[metric].to_numpy(dtype=float)
    counted = table["counted"].to_numpy(dtype=bool)
    scale = metric_scale(metric, values[counted], estimator)
    spans = turn_spans(messages, len(table))
    tokens = table["token"].tolist()
    html = {}
    for number, (turn, span) in enumerate(zip(messages, spans or []), start=1):
        start, stop = span
        if turn.get("trainable") is True and stop > start:
            html[number] = build_token_text_html(tokens[start:stop], values[start:stop], metric, scale,
                                                 dimmed=~counted[start:stop], legend=False)
    return TurnTokens(html, build_legend_html(metric, scale))
