"""The slow path of the JSON-lines parser: one line at a time (orjson, then ujson, which also words the
error), for a line the block's struct refuses (NaN and Infinity, which Python's json writes, a value
of another type, broken JSON, a key no struct can name). It gives the same row as the fast path, or
the reason the line is rejected; used by the readers that read lines one by one too."""

from __future__ import annotations

import json

import orjson
import ujson

from ..base import KeyResolver
from ..record_rows import canonical_row as _canonical
from ..record_rows import json_type as _json_type


def _slow_row(raw: bytes, resolver: KeyResolver, reward_required: bool = True) -> dict | str:
    """One line's canonical values (scalars, texts, lists, tokens, ``extras``), or why it is rejected."""
    obj = parse_line(raw)
    if isinstance(obj, str):
        return obj
    try:
        return _canonical(obj, resolver, reward_required=reward_required)
    except RecursionError:
        return "a value is nested too deeply"


def parse_line(raw: bytes) -> dict | str:
    """One line as a dict, or the reason it is not a JSON object. Text that is not valid Unicode
    (a lone surrogate escape) has the offending characters replaced by U+FFFD."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 (byte {exc.start + 1} of the line)"
        try:  # NaN, Infinity and 1e400 are JSON to Python's json and ujson, not to orjson
            obj = ujson.loads(text)
        except (ValueError, RecursionError):
            return _json_error(text)
        try:
            obj = _valid_unicode(obj)
        except RecursionError:
            return "a value is nested too deeply"
    if not isinstance(obj, dict):
        return f"line is a JSON {_json_type(obj)}, not an object"
    return obj


def not_json(raw: bytes) -> bool:
    """Whether ``raw`` is JSON to neither orjson nor ujson: a line ``parse_line`` rejects, told without
    wording why (for a rejected line past those listed, a junk line costs a microsecond, not twelve)."""
    try:
        orjson.loads(raw)
        return False
    except orjson.JSONDecodeError:
        pass
    try:
        ujson.loads(raw)
        return False
    except (ValueError, RecursionError):
        return True


def _valid_unicode(value):
    """``value`` with every string (keys too) made valid Unicode."""
    if type(value) is str:
        return _clean(value)
    if type(value) is list:
        return [_valid_unicode(v) for v in value]
    if type(value) is dict:
        return {_clean(k): _valid_unicode(v) for k, v in value.items()}
    return value


def _clean(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at column {exc.colno}"
    except RecursionError:
        return "invalid JSON: a value is nested too deeply to read"
    except ValueError as exc:  # e.g. an integer too large
        return f"invalid JSON: {exc}"
    return "invalid JSON"
