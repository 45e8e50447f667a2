"""What an MCP tool returns, bounded: a command's ``--json`` (or the sample's JSON) cut to the tool's
``limit`` and then to ``MAX_ANSWER_CHARS`` characters of JSON, saying in ``left_out`` how many items of
each list it left out.

A per-step list (``summary``'s ``steps``, ``search``'s ``per_step``, each ``metrics`` series) keeps steps
spread evenly over the run, its first and last among them; a ranked list (``diff``'s ``prompts``,
``search``'s ``samples``, a sample's ``turns`` and ``tokens``) keeps its first items. Where the answer is
still longer than ``MAX_ANSWER_CHARS``, the list that takes the most room is halved, again and again
(a sample's texts are cut too, down to ``MIN_TEXT_CHARS``), until it fits or nothing is left to cut.
"""

from __future__ import annotations

import json

MAX_ANSWER_CHARS = 20_000  # characters of JSON a tool returns by default
MIN_TEXT_CHARS = 200  # characters a sample's text keeps however the answer is cut to fit
#: Each tool's ``limit`` by default: the steps (summary, search's per_step), prompts (diff) or points of each
#: series and warnings (metrics) it gives; search's samples and a sample's turns and tokens have their own.
DEFAULT_LIMITS = {"summary": 20, "search": 50, "diff": 20, "metrics": 20, "sample": 50}
MAX_LIMIT = 1_000  # the most a ``limit`` asks for is taken as this
_SPREAD = {("summary", "steps"), ("search", "per_step"), ("metrics", "series")}
_TEXTS = ("prompt", "response", "ref_response", "ground_truth")


def _spread(items: list, count: int) -> list:
    """``count`` of ``items`` spread evenly, the first and the last among them (all when there are fewer)."""
    n = len(items)
    if count >= n:
        return list(items)
    if count <= 1:
        return items[:max(count, 0)]
    return [items[round(i * (n - 1) / (count - 1))] for i in range(count)]


def _lists(tool: str, answer: dict) -> dict[str, int]:
    """The lists of ``answer`` a bound cuts -> their lengths (``metrics``: each series by its name)."""
    out = {}
    if tool == "metrics":
        out = {f"series.{name}": len(points) for name, points in (answer.get("series") or {}).items()}
    keys = {"summary": ("steps",), "search": ("per_step", "samples"), "diff": ("prompts",),
            "sample": ("turns", "tokens"), "metrics": ("warnings",)}[tool]
    for key in keys:
        value = answer.get(key)
        if key == "tokens" and isinstance(value, dict):
            out[key] = max((len(v) for v in value.values()), default=0)
        elif isinstance(value, list):
            out[key] = len(value)
    return out


def _cut(tool: str, answer: dict, counts: dict[str, int], chars: int | None) -> dict:
    """``answer`` with each list of ``counts`` cut to its count and, for a sample, each text to ``chars``."""
    out = dict(answer)
    for key, count in counts.items():
        if key.startswith("series."):
            name = key[len("series."):]
            out["series"] = {**out["series"], name: _spread(answer["series"][name], count)}
        elif key == "tokens":
            out[key] = {name: column[:count] for name, column in answer[key].items()}
        else:
            out[key] = _spread(answer[key], count) if (tool, key) in _SPREAD else answer[key][:count]
    if chars is not None:
        cut = set(out.get("cut") or [])
        for name in _TEXTS:
            if isinstance(out.get(name), str) and len(out[name]) > chars:
                out[name] = out[name][:chars]
                cut.add(name)
        turns = []
        for i, turn in enumerate(out.get("turns") or []):
            if isinstance(turn.get("content"), str) and len(turn["content"]) > chars:
                turn = {**turn, "content": turn["content"][:chars]}
                cut.add(f"turns[{i}]")
            turns.append(turn)
        if "turns" in out:
            out["turns"] = turns
        out["cut"] = sorted(cut)
    return out


def _size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, allow_nan=False))


def bound_answer(tool: str, answer: dict, limit: int | None = None, max_chars: int = MAX_ANSWER_CHARS) -> dict:
    """``answer`` (what ``tool`` computed) with its lists cut to ``limit`` (default ``DEFAULT_LIMITS``; at
    most ``MAX_LIMIT``; for ``search`` and ``sample`` the lists their own arguments cut stay as they are)
    and then, list by list and text by text, to ``max_chars`` characters of JSON; ``left_out`` maps each
    list cut to how many of its items were left out (``{}``: nothing)."""
    limit = max(1, min(DEFAULT_LIMITS[tool] if limit is None else limit, MAX_LIMIT))
    lengths = _lists(tool, answer)
    own = {("search", "samples"), ("sample", "turns"), ("sample", "tokens")}  # cut by the tools' own arguments
    counts = {key: n if (tool, key) in own else min(n, limit) for key, n in lengths.items()}
    chars = None
    while True:
        out = _cut(tool, answer, counts, chars)
        out["left_out"] = {key: lengths[key] - count for key, count in counts.items() if count < lengths[key]}
        if _size(out) <= max_chars:
            return out
        room = {key: _size(out["series"][key[len("series."):]] if key.startswith("series.") else out[key])
                for key, count in counts.items() if count > 1}
        text = max([len(out[name]) for name in _TEXTS if isinstance(out.get(name), str)]
                   + [len(t["content"]) for t in out.get("turns") or [] if isinstance(t.get("content"), str)]
                   + [0]) if tool == "sample" else 0
        if room and (not text or max(room.values()) >= text):
            widest = max(room, key=room.get)
            counts[widest] = counts[widest] // 2
        elif text > MIN_TEXT_CHARS:
            chars = max(MIN_TEXT_CHARS, text // 2)
        else:
            return out  # nothing left to cut: the answer is as small as its bounds make it
