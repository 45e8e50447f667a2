"""A block's conversations (``messages``) to what a segment keeps of them, column by column (no Python
per sample or turn, but the faults): the prompt and response of a sample that has a conversation and none of
its own, the extras ``num_turns`` and ``num_tool_calls``, the turn columns ``turn_texts`` and ``tool_names``,
and ``fault_kinds``, the kinds of the conversation's faults as bits (``derive.faults``: Python per
conversation, null without one; Python only where a check needs it).

The prompt is the contents of the turns before the first assistant turn joined by a blank line (null
when there are none), the response the content of the last assistant turn (null without one); a turn
without content counts as "". ``num_turns`` counts the assistant turns, ``num_tool_calls`` the tool
calls of all of them. ``turn_texts`` holds every turn's content, then every tool call's arguments
(each "" when it has none), ``tool_names`` the name of each tool call of the assistant turns (""
without one). A sample without messages keeps what its source gave (an extra of the same name
included) and has null turn columns; an empty conversation has none of a prompt or a response, no
turns and empty turn columns.

``images`` counts the image parts of a sample's turns whose writer kept something of them: bytes in
the line, a URL or a path (``readers.turns.image_refs``; a placeholder without any is not counted);
0 without messages.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..base import fields as F
from .faults import compute_fault_bits

TEXTS = pa.list_(pa.string())


def from_messages(rows: pa.Table) -> tuple[pa.Table, dict]:
    """(``rows`` with the prompt, response and the two extras set as the module says; the segment's
    columns ``has_messages``, ``turn_texts`` and ``tool_names``)."""
    count = rows.num_rows
    column = rows[F.MESSAGES]
    if column.null_count == count:
        return rows, {"has_messages": np.zeros(count, bool), "turn_texts": pa.nulls(count, TEXTS),
                      "tool_names": pa.nulls(count, TEXTS), "images": np.zeros(count, np.int32),
                      "fault_kinds": pa.nulls(count, pa.int32())}
    lists = column.combine_chunks()
    has = lists.is_valid().to_numpy(zero_copy_only=False)
    turns = pc.list_flatten(lists)
    owner = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    kinds = compute_fault_bits(turns, owner, count, has)
    position = np.arange(len(owner)) - np.searchsorted(owner, owner)  # a turn's place in its conversation
    assistant = pc.equal(turns.field("role"), "assistant").fill_null(False).to_numpy(zero_copy_only=False)
    content = turns.field("content").fill_null("")
    first, last = _first_and_last(owner[assistant], np.flatnonzero(assistant), count)
    first = np.where(first >= 0, position[np.maximum(first, 0)] if len(position) else 0,
                     np.bincount(owner, minlength=count))  # the first assistant turn's place, else the turn count
    prompts, responses = rows["prompt"].combine_chunks(), rows["response"].combine_chunks()
    need = has & prompts.is_null().to_numpy(zero_copy_only=False) & (first > 0)
    if need.any():
        before = np.flatnonzero(position < first[owner])
        joined = pc.binary_join(_lists(owner[before], content.take(pa.array(before)), count), "\n\n")
        prompts = pc.if_else(pa.array(need), joined, prompts)
    need = has & responses.is_null().to_numpy(zero_copy_only=False) & (last >= 0)
    if need.any():
        responses = pc.if_else(pa.array(need), content.take(pa.array(np.maximum(last, 0))), responses)
    rows = rows.set_column(rows.schema.get_field_index("prompt"), "prompt", prompts)
    rows = rows.set_column(rows.schema.get_field_index("response"), "response", responses)
    calls = turns.field("tool_calls")
    call_turn = pc.list_parent_indices(calls).to_numpy(zero_copy_only=False).astype(np.int64)
    flat_calls = pc.list_flatten(calls)
    call_owner = owner[call_turn]
    in_assistant = assistant[call_turn]
    for name, counted in ((F.NUM_TURNS, owner[assistant]), (F.NUM_TOOL_CALLS, call_owner[in_assistant])):
        derived = pa.array(np.bincount(counted, minlength=count).astype(np.float64), mask=~has)
        extra = F.extra_column(name)
        if extra in rows.column_names:  # the source's own, where the sample has no messages
            rows = rows.set_column(rows.schema.get_field_index(extra), extra,
                                   pc.if_else(pa.array(has), derived, rows[extra].combine_chunks()))
        else:
            rows = rows.append_column(extra, derived)
    # each sample's turns' contents, then its calls' arguments: both in sample order, so a stable sort by
    # (sample, which of the two) puts each sample's texts together, contents first
    texts = pa.concat_arrays([content, flat_calls.field("arguments").fill_null("")])
    key = np.concatenate([owner * 2, call_owner * 2 + 1])
    order = np.argsort(key, kind="stable")
    turn_texts = _lists(key[order] // 2, texts.take(pa.array(order)), count, ~has)
    named = np.flatnonzero(in_assistant)
    tool_names = _lists(call_owner[named], flat_calls.field("name").fill_null("").take(pa.array(named)), count, ~has)
    return rows, {"has_messages": has, "turn_texts": turn_texts, "tool_names": tool_names,
                  "images": _image_counts(turns, owner, count), "fault_kinds": kinds}


def _image_counts(turns: pa.Array, owner: np.ndarray, count: int) -> np.ndarray:
    """Each sample's image parts with bytes, a URL or a path (``source`` not "none"); int32, shape (count,)."""
    refs = turns.field("images")
    if refs.null_count == len(refs):
        return np.zeros(count, np.int32)
    ref_turn = pc.list_parent_indices(refs).to_numpy(zero_copy_only=False).astype(np.int64)
    kept = pc.not_equal(pc.list_flatten(refs).field("source"), "none").fill_null(False).to_numpy(zero_copy_only=False)
    return np.bincount(owner[ref_turn[kept]], minlength=count).astype(np.int32)


def _first_and_last(owners: np.ndarray, places: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``count`` samples, the first and the last of ``places`` (ascending) whose owner
    (``owners``, ascending with them) it is; -1 where it has none."""
    first, last = np.full(count, -1), np.full(count, -1)
    if len(places):
        samples, at = np.unique(owners, return_index=True)
        first[samples] = places[at]
        samples, at = np.unique(owners[::-1], return_index=True)
        last[samples] = places[len(places) - 1 - at]
    return first, last


def _lists(owner: np.ndarray, values: pa.Array, count: int, mask: np.ndarray | None = None) -> pa.Array:
    """A list array of ``count`` rows holding ``values`` (their rows ``owner``, ascending), null where ``mask``."""
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(np.bincount(owner, minlength=count), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=None if mask is None else pa.array(mask))
