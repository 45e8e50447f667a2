"""A field mapping to start from when nothing loaded: each missing field from the key whose name means it.

``suggest_field_mapping(found)`` reads the keys of a run's first lines (``Run.source_keys``: key
and the kind of its first value) and proposes ``CANONICAL=SOURCE`` pairs by what each key's name
says, never by its position: ``reward`` from a number named like a reward (``reward``, ``score``,
``return``, ``correct``, ``accuracy``…), ``response`` from a text named like a model's output
(``completion``, ``output``, ``generation``…), and so on. A key named like bookkeeping
(``data_source``, ``uid``, ``idx``, ``length``) is never proposed; a field no key's name fits is left
out rather than guessed.
"""

from __future__ import annotations

import re

from ..base import fields as F

#: canonical field -> (the kind its key must hold, the words that name it, best first)
ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    F.STEP: ("number", ("step", "global", "iteration", "iter", "epoch")),
    F.REWARD: ("number", ("reward", "score", "return", "correct", "correctness", "accuracy", "acc",
                          "pass", "success", "solved")),
    "prompt": ("text", ("prompt", "question", "query", "instruction", "problem", "input", "context")),
    # "answer" last: a log's answer is the model's when nothing else names the response, else the reference
    "response": ("text", ("response", "completion", "output", "generation", "generated", "prediction", "pred",
                          "assistant", "reply", "answer")),
    "ground_truth": ("text", ("ground", "truth", "gt", "gts", "answer", "label", "target", "reference", "solution",
                              "expected")),
}
#: words that make a key bookkeeping, whatever else it says (``data_source``, ``prompt_length``, ``uid``)
NOT_A_FIELD = frozenset({"id", "ids", "uid", "uuid", "idx", "index", "source", "len", "length", "lengths", "num",
                         "count", "time", "timestamp", "seed", "rank", "size", "type", "name", "split",
                         "ability", "tokens", "token", "mask", "version", "hash", "path", "file", "lr"})


def _words(key: str) -> list[str]:
    """The words of a key's last part: ``reward_model.ground_truth`` -> ["ground", "truth"];
    ``modelOutput`` -> ["model", "output"]."""
    last = key.rsplit(".", 1)[-1]
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", last)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def _rank(key: str, words: tuple[str, ...]) -> int | None:
    """How well ``key``'s name fits ``words`` (0 best), None when it does not or names bookkeeping."""
    parts = _words(key)
    if not parts or NOT_A_FIELD & set(parts):
        return None
    hits = [words.index(w if w in words else w[:-1]) for w in parts
            if w in words or w.endswith("s") and w[:-1] in words]  # "responses", "scores"
    return min(hits) if hits else None


def suggest_field_mapping(found: list[tuple[str, str]]) -> str:
    """``CANONICAL=SOURCE`` pairs (comma-separated, canonical order) for the fields ``found`` (key, kind
    of its first value) lacks, each from the key whose name fits it best (then the shallower key, then
    the first seen); "" when none fits. A key is proposed once."""
    from .base import merged_aliases

    aliases = merged_aliases()
    present = {key for key, _ in found}
    pairs, used = [], set()
    for canonical, (kind, words) in ROLES.items():
        if canonical in present or any(alias in present for alias in aliases.get(canonical, ())):
            continue  # read without a mapping
        ranked = [(rank, key.count("."), index, key) for index, (key, key_kind) in enumerate(found)
                  if key_kind == kind and key not in used and (rank := _rank(key, words)) is not None]
        if ranked:
            key = min(ranked)[3]
            used.add(key)
            pairs.append(f"{canonical}={key}")
    return ", ".join(pairs)
