"""The turn model: chat messages as the trainers write them, made canonical turns.

Agent trainers write a rollout as a list of chat messages, each in one of a few
OpenAI-like shapes. ``turn`` turns any of them into one canonical turn
(``canonical.TURN``)::

    {"role": "system" | "user" | "assistant" | "tool" | ..., "content": str,
     "reasoning": str | None, "tool_calls": [{"id", "name", "arguments"}],
     "tool_call_id": str | None, "trainable": True | False | None}

plus ``"images": [{"at", "part", "source", "url", "data"}]`` when the content holds image parts
(``image_refs``).

plus ``"num_tokens": int`` when the reader knows which of the sample's token positions
the turn holds (prime-rl's nodes: the turn's positions follow those of the turns before it).

- ``content``: a string as it is; a list of content parts becomes its text parts
  joined by newlines, an image part ``[image]`` (any other typed part ``[TYPE]``);
  no content is ``""``; anything else is its JSON text.
- ``images``: each image part of the content, in order: ``at``, where its ``[image]`` begins in
  ``content`` (characters); ``part``, its index in the content's list; ``source``, where its bytes are:
  ``"data"`` (in the line, base64: ``data`` holds that text while a sample is read again, within
  ``keep_image_data``; never in a cold read, never in the canonical rows), ``"url"`` (an http(s) URL in ``url``: shown as text, never fetched), ``"path"`` (a file path in
  ``url``, read later only inside the run's folder and the allowed roots), ``"elsewhere"`` (kept by the
  writer where the board does not read: ``url`` says where) or ``"none"`` (a placeholder:
  the writer did not keep the pixels). Nothing is decoded here: a line of megabytes of base64 costs what
  its text costs.
- ``reasoning``: ``reasoning_content`` (verifiers, vLLM) or ``reasoning`` (rLLM).
- ``tool_calls``: each call as OpenAI writes it (``{"id", "type": "function",
  "function": {"name", "arguments"}}``), flat (``{"id", "name", "arguments"}``), or
  either as JSON text (verifiers v0); arguments that are not text (TRL) become
  their JSON text.
- ``trainable``: what the format says, None when it says nothing.
- ``num_tokens``: kept when the message has a non-negative integer one (a turn the board made).
- ``meta``: what the trainer logged about the turn beside its text, as JSON text of an object: the
  message's entries named in ``META_KEYS`` and its ``num_*_tokens`` counts (null entries left out; a
  message that has a text ``meta``, a turn the board made, keeps it),
  plus what a reader adds for the whole trajectory on its last message (``with_outcome``: how it
  stopped, the tools it offered); None when there are none. ``derive.faults`` reads it.

``sample_rows`` builds canonical rows from per-sample dicts, for the readers of
agent formats (one sample per trajectory, trace or row).
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from contextvars import ContextVar

from ..base import fields as F
from ..base import images
from .canonical import build_rows

#: The keys of a chat message kept in the turn's ``meta`` (besides ``num_*_tokens``).
META_KEYS = frozenset({
    "finish_reason", "stop_reason", "stop_condition", "termination_reason", "is_truncated", "is_error",
    "status", "error", "is_timeout", "timing", "usage", "parse_error", "tool_call_error", "tools",
    "is_completed", "exit_code", "returncode",
})
IMAGE_PARTS = frozenset({"image_url", "image", "input_image", "trackio.image"})


IMAGE_TEXT = "[image]"
#: whether ``image_refs`` keeps a ``data:`` URL's text in its reference: only while one sample is read again
#: (``keep_image_data``), never in a cold read, where it would hold every line's base64 until its rows are built
_KEEP_DATA: ContextVar[bool] = ContextVar("keep_image_data", default=False)


@contextmanager
def keep_image_data():
    """While the block runs, image references keep their ``data:`` URL's text (``data``): for reading one
    sample's images again (``analysis.source_records``)."""
    token = _KEEP_DATA.set(True)
    try:
        yield
    finally:
        _KEEP_DATA.reset(token)


def content_text(content) -> str:
    """A message's content as text (see the module's docstring)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    return _json(content)


def is_image_part(part) -> bool:
    """Whether a content part is an image (``IMAGE_PARTS``)."""
    return isinstance(part, dict) and (part.get("type") or part.get("_type")) in IMAGE_PARTS


def image_refs(content) -> list[dict]:
    """Each image part of a content list as an image reference (see the module's docstring), in order;
    [] for anything else."""
    if not isinstance(content, list):
        return []
    refs, at, keep = [], 0, _KEEP_DATA.get()
    for index, part in enumerate(content):
        if is_image_part(part):
            source, url, data = image_source(part)
            data = data if keep else None
            refs.append({"at": at, "part": index, "source": source, "url": url, "data": data})
            at += len(IMAGE_TEXT) + 1
        else:
            at += len(_part_text(part)) + 1
    return refs


def image_source(part: dict) -> tuple[str, str | None, str | None]:
    """(source, url, data) of one image part: its URL as OpenAI (``image_url``: {"url"} or a string), the
    Responses API (``image_url``: a string), Hugging Face chat templates (``image``, ``url``, ``path``) or
    trackio (``file_path`` under the database's ``media/`` folder) write it, or a base64 ``source`` as Anthropic writes it."""
    if isinstance(part.get("kept_in"), str):  # a reader's mark: the pixels are elsewhere (a W&B artifact)
        return "elsewhere", part["kept_in"], None
    if part.get("_type") == "trackio.image" and isinstance(part.get("file_path"), str):
        return "path", f"media/{part['file_path']}", None  # trackio keeps it under TRACKIO_DIR/media/
    source = part.get("source")
    if isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
        mime = source.get("media_type") if isinstance(source.get("media_type"), str) else ""
        return "data", None, f"data:{mime};base64,{source['data']}"
    for key in ("image_url", "url", "image", "path", "file_path"):
        value = part.get(key)
        if isinstance(value, dict):
            value = value.get("url") if isinstance(value.get("url"), str) else value.get("path")
        if isinstance(value, str) and value:
            if images.is_data_url(value):
                return "data", None, value
            if images.is_web_url(value):
                return "url", value, None
            return "path", value, None
    return "none", None, None


def _part_text(part) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return _json(part)
    kind = part.get("type") or part.get("_type")
    if kind in IMAGE_PARTS:
        return IMAGE_TEXT
    text = part.get("text")
    if isinstance(text, str) and kind in (None, "text", "input_text", "output_text"):
        return text
    return f"[{kind}]" if isinstance(kind, str) else _json(part)


def tool_call(call) -> dict:
    """One tool call as ``{"id", "name", "arguments"}`` (arguments as text)."""
    if isinstance(call, str):
        try:
            call = json.loads(call)
        except ValueError:
            return {"id": None, "name": None, "arguments": call}
    if not isinstance(call, dict):
        return {"id": None, "name": None, "arguments": _json(call)}
    function = call.get("function")
    source = function if isinstance(function, dict) else call
    arguments = source.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        arguments = _json(arguments)
    name = source.get("name")
    ident = call.get("id")
    return {"id": None if ident is None else str(ident), "name": None if name is None else str(name),
            "arguments": arguments}


def turn(message, trainable: bool | None = None) -> dict:
    """One chat message (a dict in any of the shapes above) as a canonical turn; ``trainable`` None
    keeps the message's own ``trainable`` when it has a boolean one."""
    if trainable is None and isinstance(message, dict) and isinstance(message.get("trainable"), bool):
        trainable = message["trainable"]
    if not isinstance(message, dict):
        return {"role": None, "content": content_text(message), "reasoning": None, "tool_calls": [],
                "tool_call_id": None, "trainable": trainable}
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = message.get("reasoning")
    calls = message.get("tool_calls")
    if isinstance(calls, str):  # a whole list as JSON text (ART)
        try:
            calls = json.loads(calls)
        except ValueError:
            calls = [calls]
    call_id = message.get("tool_call_id")
    role = message.get("role")
    out = {
        "role": None if role is None else str(role),
        "content": content_text(message.get("content")),
        "reasoning": None if reasoning is None else content_text(reasoning),
        "tool_calls": [tool_call(c) for c in calls] if isinstance(calls, list) else [],
        "tool_call_id": None if call_id is None else str(call_id),
        "trainable": trainable,
    }
    count = message.get("num_tokens")
    if type(count) is int and count >= 0:
        out["num_tokens"] = count
    refs = image_refs(message.get("content")) or _own_refs(message)
    if refs:
        out["images"] = refs
    meta = {key: value for key, value in message.items() if value is not None and isinstance(key, str)
            and (key in META_KEYS or (key.startswith("num_") and key.endswith("_tokens") and key != "num_tokens"))}
    if isinstance(message.get("meta"), str):  # a turn the board made: its meta kept
        out["meta"] = message["meta"]
    elif meta:
        out["meta"] = _json(meta)
    return out


def _own_refs(message: dict) -> list[dict]:
    """The image references of a message that is a canonical turn already (its content text): kept."""
    refs = message.get("images")
    if isinstance(refs, list) and isinstance(message.get("content"), str) and all(
            isinstance(r, dict) and "source" in r and "at" in r for r in refs):
        return refs
    return []


def tool_names(defs) -> list[str] | None:
    """The tool names of a recorded tool list: names as text, ``{"name"}`` or OpenAI's ``{"type": "function",
    "function": {"name"}}`` (JSON text of the list too); None when there is none or an entry has no name."""
    if isinstance(defs, str):
        try:
            defs = json.loads(defs)
        except ValueError:
            return None
    if not isinstance(defs, list) or not defs:
        return None
    names = []
    for entry in defs:
        if isinstance(entry, dict):
            function = entry.get("function")
            entry = (function if isinstance(function, dict) else entry).get("name")
        if not isinstance(entry, str) or not entry:
            return None
        names.append(entry)
    return names


def with_outcome(messages: list[dict], fields: dict) -> list[dict]:
    """``messages`` (canonical turns) with ``fields`` (what the trainer recorded about the whole
    trajectory: how it stopped, its tools; None values left out) added to the last one's ``meta``."""
    fields = {key: value for key, value in fields.items() if value is not None}
    if not messages or not fields:
        return messages
    last = dict(messages[-1])
    meta = {}
    if last.get("meta"):
        try:
            meta = json.loads(last["meta"])
        except ValueError:
            meta = {}
    last["meta"] = _json({**meta, **fields} if isinstance(meta, dict) else fields)
    return [*messages[:-1], last]


def turns(messages, trainable: bool | None = None) -> list[dict]:
    """A list of chat messages as canonical turns (a single string is one user turn)."""
    if messages is None:
        return []
    if isinstance(messages, str):
        return [turn({"role": "user", "content": messages}, trainable)]
    if not isinstance(messages, list):
        return [turn({"role": None, "content": messages}, trainable)]
    return [turn(m, trainable) for m in messages]


def number(value) -> float | None:
    """A JSON value as an extra's float (booleans as 0/1), None when it is not a number."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return None


def numbers(mapping, prefix: str = "") -> dict[str, float]:
    """The numeric (and boolean) entries of a dict as extras, names prefixed with ``prefix``."""
    if not isinstance(mapping, dict):
        return {}
    out = {}
    for key, value in mapping.items():
        got = number(value)
        if got is not None:
            out[prefix + str(key)] = got
    return out


def sample_rows(samples: list[dict]) -> object:
    """Canonical rows from per-sample dicts: ``step`` (int), ``reward`` (float or None),
    ``messages`` (canonical turns or None), optional ``prompt``/``response``/``ground_truth``
    texts, optional per-token lists (``fields.TOKEN_FIELDS``: numbers or None; ``token_ids``:
    integers; ``loss_mask``: booleans), ``extras`` (name -> float), ``line`` (1-based record
    number in the file) and ``offset`` and optional ``length`` (what ``record`` needs to find the
    sample again)."""
    count = len(samples)
    columns = {
        F.STEP: [s[F.STEP] for s in samples],
        F.REWARD: [s.get(F.REWARD) for s in samples],
        F.LINE: [s["line"] for s in samples],
        "offset": [s["offset"] for s in samples],
        "length": [s.get("length", 0) for s in samples],
        F.MESSAGES: [s.get(F.MESSAGES) for s in samples],
    }
    for name in F.SCALAR_FIELDS:
        columns[name] = [None] * count
    for name in F.TEXT_FIELDS:
        columns[name] = [s.get(name) for s in samples]
    for name in (*F.TOKEN_FIELDS, F.TOKEN_IDS, F.LOSS_MASK):
        if any(s.get(name) is not None for s in samples):
            columns[name] = [s.get(name) for s in samples]
    names = sorted({name for s in samples for name in s.get("extras", {})})
    extras = {name: [s.get("extras", {}).get(name) for s in samples] for name in names}
    return build_rows(columns, extras)


def _json(value) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        return repr(value)
