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
  whose name is missing, or not among the trajectory's recorded tools (``tools`` in a turn's ``meta``),
  or a turn whose ``meta`` records a parse failure (``parse_error``, ``tool_call_error``).
- ``truncated``: a turn's ``meta`` records that generation stopped at the length limit:
  ``finish_reason``/``stop_reason``/``stop_condition``/``termination_reason`` of "length" or naming a
  length or token limit (``max_response_length_exceeded``, ``max_tokens``, ``prompt_too_long``...;
  not a turn limit), or ``is_truncated`` true; named at the turn that recorded it (a trajectory-level
  record sits on the last message: the last assistant turn). One per trajectory, the first.
- ``empty_final_answer``: the last message is an assistant turn without tool calls whose content, with
  ``<think>…</think>`` blocks removed, is empty or whitespace (its separate reasoning does not count).

``find_faults`` is pure Python over one conversation: the parsing workers run it on each conversation of
a block (``derive.conversations``), the page and the commands on the samples they show.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

#: Every fault kind, in bit order (bit i of ``fault_kinds`` is ``KINDS[i]``). A new kind is appended.
KINDS = ("tool_error", "tool_loop", "malformed_tool_call", "truncated", "empty_final_answer")
ANY = "any"  # the filter that keeps a trajectory with any fault
LOOP_CALLS = 3  # identical consecutive calls that make a loop
#: What each kind means, one line (the page and ``rl-board search`` say it beside a fault).
WHY = {
    "tool_error": "the tool's result reports a failure",
    "tool_loop": f"the same call (name and arguments) {LOOP_CALLS} or more times in a row",
    "malformed_tool_call": "a tool call that can't be run: arguments not JSON, no name, an unknown tool, "
                           "or a parse failure the trainer recorded",
    "truncated": "generation stopped at the length limit (as the trainer recorded)",
    "empty_final_answer": "the trajectory ends with an empty assistant turn (or only a <think> block)",
}
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
            meta = json.loads(meta)
        except ValueError:
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
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
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
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return _json_failure(obj)
    if _ERROR_START.match(text) or _TRACEBACK.search(text):
        return True
    code = _EXIT.search(text)
    if code is not None and int(code.group(1)) != 0:
        return True
    http = _HTTP.search(text)
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
        tools = meta.get("tools")
        if isinstance(tools, list) and tools:
            return {str(t) for t in tools}
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
                    json.loads(arguments)
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
    return any(isinstance(meta.get(key), str) and _LENGTH.search(meta[key]) for key in _REASON_KEYS)


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
