"""Why a trajectory failed: the faults of one conversation (canonical turns), from what the trainer wrote.

A fault is ``Fault(kind, message_index, assistant_turn)``: ``message_index`` counts the trajectory's
messages as the trainer stores them (prompt messages included) from 0, ``assistant_turn`` its assistant
turns from 0. The kinds (``KINDS``, one bit each in a segment's ``fault_kinds``):

- ``tool_error``: a tool turn whose result reports a failure: the trainer's ``is_error`` true or
  ``status`` "error"/"failed"/a number >= 400 (the turn's ``meta``); a JSON object with a top-level
  ``error`` key that is not null/false/empty, or an ``exit_code``/``returncode``/``return_code`` that is
  not 0, or a ``status``/``status_code`` >= 400; text starting with ``Error``/``ERROR``/``Exception``; a
  Python traceback; a non-zero exit or return code stated in the text (``exit code 2``,
  ``returncode=1``); an HTTP status >= 400 stated as a failure (``HTTP 404``, ``status code: 500``). The
  word "error" elsewhere in a result is not a fault. Its ``assistant_turn`` is the turn that issued the
  call (the call whose id the result names, else the last assistant turn before it).
- ``tool_loop``: 3 or more consecutive tool calls (in the order the assistant turns make them) with the
  same name and the same arguments after JSON normalisation (keys sorted); named at the run's first call.
- ``malformed_tool_call``: a call whose arguments are not valid JSON (no arguments at all is fine),
  whose name is missing, or not among the trajectory's recorded tools (``tools`` in a turn's ``meta``, read by
  ``readers.turns.tool_names``; a list it can't read records none),
  or a turn whose ``meta`` records a parse failure (``parse_error``, ``tool_call_error``).
- ``truncated``: a turn's ``meta`` records that generation stopped at the length limit:
  ``finish_reason``/``stop_reason``/``stop_condition``/``termination_reason`` of "length" or naming a
  length or token limit (``max_response_length_exceeded``, ``max_tokens``, ``prompt_too_long``...;
  not a turn limit), or ``is_truncated`` true; named at the turn that recorded it (a trajectory-level
  record sits on the last message: the last assistant turn). One per trajectory, the first.
- ``empty_final_answer``: the last message is an assistant turn without tool calls whose content, with
  ``<think>…</think>`` blocks removed, is empty or whitespace (its separate reasoning does not count).

``find_faults`` is pure Python over one conversation: the page and the commands run it on the samples they
show. ``compute_fault_bits`` gives the same kinds for a whole block of conversations, column by column
with Python only where a check needs it (the parsing workers run it: ``derive.conversations``).
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

import msgspec
import numpy as np

from ..base import fields as F
from ..readers.turns import tool_names

#: Every fault kind, in bit order (``fields.FAULT_KINDS``, kept in ``base`` so the command line's parser
#: names them without importing this module). A new kind is appended there, with its ``WHY`` here, its check
#: in ``find_faults`` and the same in ``compute_fault_bits`` (a test holds the two equal); the command's
#: ``--fault`` choices, the pickers and the findings follow this tuple.
#: ``images_dropped`` is not found in the turns but by the readers that see both a message's images and the
#: token ids trained on (``readers.placeholders``: the extras ``images_dropped``, ``images_dropped_at``):
#: ``with_image_faults`` adds its bit, ``image_fault`` the fault.
KINDS = F.FAULT_KINDS
ANY = F.ANY_FAULT  # the filter that keeps a trajectory with any fault
LOOP_CALLS = 3  # identical consecutive calls that make a loop
#: What each kind means, one line (the page and ``rl-board search`` say it beside a fault).
WHY = {
    "tool_error": "the tool's result reports a failure",
    "tool_loop": f"the same call (name and arguments) {LOOP_CALLS} or more times in a row",
    "malformed_tool_call": "a tool call that can't be run: arguments not JSON, no name, an unknown tool, "
                           "or a parse failure the trainer recorded",
    "truncated": "generation stopped at the length limit (as the trainer recorded)",
    "empty_final_answer": "the trajectory ends with an empty assistant turn (or only a <think> block)",
    "images_dropped": "the message's images and the image placeholders of the tokens trained on differ in number",
}
DROPPED, DROPPED_AT = "images_dropped", "images_dropped_at"  # the readers' extras (``readers.placeholders``)


def with_image_faults(bits, dropped) -> np.ndarray:
    """``bits`` (each sample's fault kinds, null without turns) with the ``images_dropped`` bit set where the
    readers' ``images_dropped`` extra (``dropped``, float, NaN where unknown) is 1; int32 with nulls kept
    where neither says anything (a numpy masked array)."""
    bits = np.ma.masked_invalid(np.asarray(bits, dtype=float))
    hit = np.asarray(dropped, dtype=float) == 1
    out = np.ma.where(hit, np.ma.filled(bits, 0).astype(np.int64) | (1 << KINDS.index(DROPPED)), bits)
    return np.ma.array(np.ma.filled(out, 0).astype(np.int32), mask=np.ma.getmaskarray(out) & ~hit)


def image_fault(turns: list[dict], message_index) -> Fault | None:
    """The ``images_dropped`` fault a reader found at ``message_index`` (the ``images_dropped_at`` extra): the
    assistant turn it names is the first one after that message (its 0-based index among assistant turns:
    those before the message); None when the index is not a message of ``turns``."""
    try:
        index = int(message_index)
    except (TypeError, ValueError):
        return None
    if not 0 <= index < len(turns):
        return None
    before = sum(1 for t in turns[:index] if t.get("role") == "assistant")
    return Fault(DROPPED, index, before)


def _loads(text: str):
    """``json.loads(text)`` (ValueError when it is not JSON), msgspec's decoder first: 3x faster on what it
    takes; what it refuses (NaN, Infinity) goes to ``json``."""
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeError, RecursionError):  # UnicodeError: a lone surrogate
        return json.loads(text)


class Fault(NamedTuple):
    """One fault of a trajectory: its kind (one of ``KINDS``), the message and the assistant turn it names."""

    kind: str
    message_index: int
    assistant_turn: int

    def as_json(self) -> dict:
        return {"kind": self.kind, "message_index": self.message_index, "assistant_turn": self.assistant_turn}


def meta_of(turn: dict) -> dict:
    """A canonical turn's ``meta`` (JSON text of an object, or a dict) as a dict; {} without one."""
    meta = turn.get("meta")
    if isinstance(meta, str):
        try:
            meta = _loads(meta)
        except (ValueError, RecursionError):
            return {}
    return meta if isinstance(meta, dict) else {}


def find_faults(turns: list[dict]) -> list[Fault]:
    """The faults of one conversation of canonical turns (``readers.turns``), in message order."""
    metas = [meta_of(t) if t.get("meta") is not None else {} for t in turns]
    assistant_of, last_assistant, count = [], -1, -1  # per message: the assistant turn at or before it
    places = []  # message index of each assistant turn
    for i, t in enumerate(turns):
        if t.get("role") == "assistant":
            count += 1
            last_assistant = count
            places.append(i)
        assistant_of.append(last_assistant)
    found = []
    found += _tool_errors(turns, metas, assistant_of)
    found += _loops(turns, assistant_of)
    found += _malformed(turns, metas, assistant_of)
    found += _truncated(turns, metas, assistant_of, places)
    found += _empty_end(turns, assistant_of)
    return sorted(found, key=lambda f: (f.message_index, KINDS.index(f.kind)))


def fault_bits(faults: list[Fault]) -> int:
    """The kinds of ``faults`` as bits (bit i: ``KINDS[i]``)."""
    bits = 0
    for f in faults:
        bits |= 1 << KINDS.index(f.kind)
    return bits


def kind_bit(kind: str) -> int:
    """The bits a filter on ``kind`` (one of ``KINDS`` or ``ANY``) tests; ValueError naming the choices."""
    if kind == ANY:
        return (1 << len(KINDS)) - 1
    if kind not in KINDS:
        raise ValueError(f"unknown fault kind {kind!r}: one of {', '.join((*KINDS, ANY))}")
    return 1 << KINDS.index(kind)


def kinds_of(bits: int) -> list[str]:
    """The kinds whose bit is set in ``bits``, in ``KINDS`` order."""
    return [kind for i, kind in enumerate(KINDS) if bits >> i & 1]


_ERROR_START = re.compile(r"(?:Error|ERROR|Exception)(?![a-z])")
_TRACEBACK = "Traceback (most recent call last):"
_EXIT = re.compile(r"\b(?:exit(?:ed with)?[ _](?:code|status)|return[ _]?code|returncode|exit_code|"
                   r"exited with)\s*[:=]?\s*(-?\d+)", re.I)
_HTTP = re.compile(r"\b(?:HTTP(?:/\d(?:\.\d)?)?(?:\s+(?:status|error))?|status[ _]code)\s*[:=]?\s*([1-5]\d\d)\b", re.I)
_FAILED_STATUS = frozenset({"error", "failed", "failure", "fail", "timeout", "timed_out"})


def is_tool_error(content: str, meta: dict) -> bool:
    """Whether a tool result reports a failure (see the module's docstring)."""
    if meta.get("is_error") is True:
        return True
    status = meta.get("status")
    if isinstance(status, str) and status.strip().lower() in _FAILED_STATUS:
        return True
    if type(status) is int and status >= 400:
        return True
    text = content.lstrip()
    if text.startswith("{"):
        try:
            obj = _loads(text)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            return _json_failure(obj)
    if _ERROR_START.match(text) or _TRACEBACK in text:
        return True
    low = text.lower()  # the two patterns below only where their words are (a plain search is 10x faster)
    code = _EXIT.search(text) if "exit" in low or "return" in low else None
    if code is not None and int(code.group(1)) != 0:
        return True
    http = _HTTP.search(text) if "http" in low or "status" in low else None
    return http is not None and int(http.group(1)) >= 400


def _json_failure(obj: dict) -> bool:
    if obj.get("error") not in (None, False, "", {}, []):
        return True
    for key in ("exit_code", "returncode", "return_code", "exitcode"):
        if type(obj.get(key)) is int and obj[key] != 0:
            return True
    for key in ("status", "status_code"):
        if type(obj.get(key)) is int and obj[key] >= 400:
            return True
    status = obj.get("status")
    return isinstance(status, str) and status.strip().lower() in _FAILED_STATUS


def _tool_errors(turns, metas, assistant_of) -> list[Fault]:
    issuer = {}  # call id -> the assistant turn that made it
    out = []
    for i, t in enumerate(turns):
        if t.get("role") == "assistant":
            for call in t.get("tool_calls") or ():
                if call.get("id"):
                    issuer[call["id"]] = assistant_of[i]
        elif t.get("role") in ("tool", "ipython", "function") and is_tool_error(t.get("content") or "", metas[i]):
            turn = issuer.get(t.get("tool_call_id"), assistant_of[i])
            out.append(Fault("tool_error", i, turn))
    return out


def _normalised(arguments) -> str:
    if arguments is None:
        return ""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return arguments


def _loops(turns, assistant_of) -> list[Fault]:
    calls = [((c.get("name"), _normalised(c.get("arguments"))), i)
             for i, t in enumerate(turns) if t.get("role") == "assistant" for c in t.get("tool_calls") or ()]
    out, k = [], 0
    while k < len(calls):
        end = k
        while end + 1 < len(calls) and calls[end + 1][0] == calls[k][0]:
            end += 1
        if end - k + 1 >= LOOP_CALLS:
            out.append(Fault("tool_loop", calls[k][1], assistant_of[calls[k][1]]))
        k = end + 1
    return out


def _recorded_tools(metas) -> set[str] | None:
    for meta in metas:
        names = tool_names(meta.get("tools"))
        if names:
            return set(names)
    return None


def _malformed(turns, metas, assistant_of) -> list[Fault]:
    tools = _recorded_tools(metas)
    out = []
    for i, t in enumerate(turns):
        if t.get("role") != "assistant":
            continue
        bad = metas[i].get("parse_error") not in (None, False, "") or \
            metas[i].get("tool_call_error") not in (None, False, "")
        for call in t.get("tool_calls") or ():
            name, arguments = call.get("name"), call.get("arguments")
            if not name or (tools is not None and name not in tools):
                bad = True
            elif arguments is not None and arguments.strip():
                try:
                    _loads(arguments)
                except (ValueError, RecursionError):
                    bad = True
        if bad:
            out.append(Fault("malformed_tool_call", i, assistant_of[i]))
    return out


_REASON_KEYS = ("finish_reason", "stop_reason", "stop_condition", "termination_reason")
_LENGTH = re.compile(r"length|max_?tokens|token_limit|too_long|truncat", re.I)


def is_length_stop(meta: dict) -> bool:
    """Whether a turn's ``meta`` records a stop at the length limit (see the module's docstring)."""
    if meta.get("is_truncated") is True:
        return True
    for key in _REASON_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and _LENGTH.search(value):
            return True
    return False


def _truncated(turns, metas, assistant_of, places) -> list[Fault]:
    for i, meta in enumerate(metas):
        if meta and is_length_stop(meta):
            if turns[i].get("role") == "assistant" or not places:
                return [Fault("truncated", i, max(assistant_of[i], 0))]
            last = assistant_of[i] if assistant_of[i] >= 0 else len(places) - 1
            return [Fault("truncated", places[last], last)]
    return []


_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S)


def _empty_end(turns, assistant_of) -> list[Fault]:
    if not turns:
        return []
    last = turns[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return []
    content = last.get("content") or ""
    if _THINK.sub("", content).strip():
        return []
    return [Fault("empty_final_answer", len(turns) - 1, assistant_of[-1])]


_TOOL_ROLES = ("tool", "ipython", "function")
#: Tool results worth ``is_tool_error``'s Python look (RE2; a superset of what it flags): a JSON object or an
#: error word at the start (after what ``str.lstrip`` strips), a traceback, or a word its code patterns need.
_MAYBE_ERROR = (r"^[\s\p{Z}\x{85}\x{0b}\x{1c}-\x{1f}]*(?:\{|Error|ERROR|Exception)|Traceback \(most recent call last\):"
                r"|(?i:exit|return|http|status)")


#: The metas worth decoding (RE2; a superset of those a check reads: a length stop, recorded tools, a parse
#: failure, a tool's error status). Most say only how a turn went (timing, usage, a normal stop).
_MAYBE_META = (r'(?i:length|max_?tokens|token_limit|too_long|parse_error|tool_call_error|is_error)|"tools"|"status"'
               r'|"is_truncated": ?true|(?i:truncat)[^"]*(?:"[,}\]]|\\)')  # a value naming truncation, not a key


def compute_fault_bits(turns, owner: np.ndarray, count: int, has: np.ndarray):
    """Each of ``count`` conversations' fault kinds as bits (``fault_bits(find_faults(...))``, null where
    ``has`` is false), from a block's turns (``turns``: the canonical turns of every conversation in order,
    an Arrow struct array; ``owner``: each turn's conversation, ascending). Python only for what needs it:
    the tool results the patterns may match, the turns with a ``meta``, and one pass over the tool calls."""
    import pyarrow as pa
    import pyarrow.compute as pc

    bits = np.zeros(count, np.int64)
    if not len(turns):
        return pa.array(bits.astype(np.int32), mask=~has)
    roles = turns.field("role")
    content = turns.field("content").fill_null("")
    metas = {}  # turn -> its meta, for the turns that have one
    meta_column = turns.field("meta") if "meta" in [f.name for f in turns.type] else None
    if meta_column is not None and meta_column.null_count < len(meta_column):
        at = np.flatnonzero(pc.match_substring_regex(meta_column, _MAYBE_META).fill_null(False)
                            .to_numpy(zero_copy_only=False))
        for i, text in zip(at.tolist(), meta_column.take(pa.array(at)).to_pylist()):
            metas[i] = meta_of({"meta": text})
    tools = {}  # conversation -> its recorded tools
    for i, meta in metas.items():
        if is_length_stop(meta):
            bits[owner[i]] |= 1 << KINDS.index("truncated")
        recorded = tool_names(meta["tools"]) if "tools" in meta else None
        if recorded and owner[i] not in tools:
            tools[owner[i]] = set(recorded)
    with_meta = np.zeros(len(turns), bool)
    with_meta[list(metas)] = True
    tool = pc.is_in(roles, pa.array(_TOOL_ROLES)).fill_null(False).to_numpy(zero_copy_only=False)
    maybe = tool & (pc.match_substring_regex(content, _MAYBE_ERROR).to_numpy(zero_copy_only=False) | with_meta)
    at = np.flatnonzero(maybe)
    for i, text in zip(at.tolist(), content.take(pa.array(at)).to_pylist()):
        if is_tool_error(text, metas.get(i, {})):
            bits[owner[i]] |= 1 << KINDS.index("tool_error")
    assistant = pc.equal(roles, "assistant").fill_null(False).to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(assistant & with_meta).tolist():
        if metas[i].get("parse_error") not in (None, False, "") or metas[i].get("tool_call_error") not in (None, False, ""):
            bits[owner[i]] |= 1 << KINDS.index("malformed_tool_call")
    _call_bits(turns.field("tool_calls"), owner, assistant, tools, bits)
    last = np.flatnonzero(np.r_[owner[1:] != owner[:-1], True])  # each conversation's last turn
    calls = pc.list_value_length(turns.field("tool_calls")).fill_null(0).to_numpy(zero_copy_only=False)
    text = pc.replace_substring_regex(content.take(pa.array(last)), r"(?s)<think>.*?(?:</think>|$)", "")
    blank = pc.equal(pc.utf8_trim_whitespace(text), "").to_numpy(zero_copy_only=False)
    empty = last[assistant[last] & (calls[last] == 0) & blank]
    bits[owner[empty]] |= 1 << KINDS.index("empty_final_answer")
    return pa.array(bits.astype(np.int32), mask=~has)


def _call_bits(calls, owner: np.ndarray, assistant: np.ndarray, tools: dict, bits: np.ndarray) -> None:
    """The loop and malformed-call bits of the assistant turns' calls (one pass, in order)."""
    import pyarrow.compute as pc

    if calls.null_count == len(calls) or not pc.sum(pc.list_value_length(calls)).as_py():
        return
    call_turn = pc.list_parent_indices(calls).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(calls)
    names, arguments = flat.field("name").to_pylist(), flat.field("arguments").to_pylist()
    loop, malformed = 1 << KINDS.index("tool_loop"), 1 << KINDS.index("malformed_tool_call")
    previous, run, run_owner = None, 0, -1
    for turn, name, raw in zip(call_turn.tolist(), names, arguments):
        if not assistant[turn]:
            continue
        conversation = owner[turn]
        recorded = tools.get(conversation)
        if not name or (recorded is not None and name not in recorded):
            bits[conversation] |= malformed
        elif raw is not None and raw.strip():
            try:
                _loads(raw)
            except (ValueError, RecursionError):
                bits[conversation] |= malformed
        same = conversation == run_owner and previous is not None and previous[0] == name and (
            previous[1] == raw or _normalised(previous[1]) == _normalised(raw))
        run = run + 1 if same else 1
        previous, run_owner = (name, raw), conversation
        if run >= LOOP_CALLS:
            bits[conversation] |= loop
