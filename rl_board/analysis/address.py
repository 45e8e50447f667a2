"""One sample by its address, ``FILE:LINE`` (as ``findings`` and ``search`` name samples), as JSON for a
program (the MCP server's ``sample`` tool): its numbers, its texts, its turns and its per-token numbers,
each cut to a documented bound that the JSON says when it bites."""

from __future__ import annotations

import math

from ..base import fields as F
from ..base.defaults import (
    MAX_SAMPLE_CHARS,
    MAX_SAMPLE_TOKENS,
    MAX_SAMPLE_TURNS,
    SAMPLE_IMAGE_SIDE,
    SAMPLE_IMAGES,
    SAMPLE_TOKENS,
    SAMPLE_TURNS,
)
from ..base.images import thumbnail
from .records import sample_faults
from .run import Run
from .tables import compute_token_table

#: The per-token numbers given, as the page's token table names them.
TOKEN_COLUMNS = ("logp", "ref_logp", "log_ratio", "kl", "entropy", "token_reward", "value", "advantage",
                 "rollout_logp", "mismatch_k3", *F.LOGGED_TOKEN_FIELDS)


class AddressError(ValueError):
    """No sample of the run has this address; the message says what an address is."""


def find_sample(run: Run, address: str):
    """The row label in ``run._samples`` of the sample at ``address`` (``FILE:LINE``, FILE as the run names it,
    or ``FILE:LINE#K`` for the K-th of a line's samples: ``fields.address``, as findings and search give it)."""
    name, line, position = F.parse_address(address) or ("", -1, -1)
    samples = run._samples
    if name in run.files:
        at = (samples[F.FILE] == run.files.index(name)) & (samples[F.LINE] == line)
        if F.POSITION in samples:
            at &= samples[F.POSITION] == position if position >= 0 else samples[F.POSITION] <= 0
        elif position > 0:
            at &= False
        hit = samples.index[at]
        if len(hit):
            return hit[0]
    raise AddressError(f"no sample {address} in {run.path} (FILE:LINE, or FILE:LINE#K for the K-th of a line's "
                       "samples; FILE as the run names it, as findings and search give it)")


def _number(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _text(value, cut: list[str], name: str):
    if not isinstance(value, str):
        return value if value is None else str(value)
    if len(value) > MAX_SAMPLE_CHARS:
        cut.append(name)
        return value[:MAX_SAMPLE_CHARS]
    return value


def build_sample_json(run: Run, label, max_tokens: int = SAMPLE_TOKENS, max_turns: int = SAMPLE_TURNS) -> dict:
    """The sample ``label`` of ``run``: ``address`` (``fields.address``: ``FILE:LINE``, ``#K`` for the K-th of a
    line's samples), ``file``, ``line`` and ``position`` (K, only for such a sample), as a search hit gives
    them, ``step``, ``reward`` and its other numbers (null where
    absent or not finite), ``prompt``/``response``/``ref_response``/``ground_truth``, ``turns`` (its first
    ``max_turns`` turns, at most ``MAX_SAMPLE_TURNS``: role, content, tool calls; [] when it has none),
    ``n_turns`` (all of its turns) and ``turns_left_out`` (those not given), ``faults`` (its turn faults,
    ``derive.faults``: kind, message_index, assistant_turn; [] without), ``tokens`` (the first
    ``max_tokens`` positions, at most ``MAX_SAMPLE_TOKENS``: ``token``, ``counted`` and each per-token number
    the sample has), ``n_tokens`` (all of its positions), ``cut`` (the texts cut at ``MAX_SAMPLE_CHARS``) and
    ``images``: each image of its turns (``turn``, 0-based; ``mime``, ``width``, ``height``, ``bytes``,
    ``url``, ``note`` as ``Run.images`` gives them, and ``attached``: whether ``build_sample_images`` gives it
    as a picture)."""
    row = run._samples.loc[label]
    cut: list[str] = []
    texts = run.with_text(run._samples.loc[[label]]).iloc[0]
    canonical, _ = run.record_parts(label)
    every = canonical.get(F.MESSAGES) or []
    turns = []
    for i, turn in enumerate(every[:max(0, min(max_turns, MAX_SAMPLE_TURNS))]):
        calls = [{"name": str(c.get("name") or ""), "arguments": _text(c.get("arguments"), cut, f"turns[{i}]")}
                 for c in (turn.get("tool_calls") or [])]
        turns.append({"role": str(turn.get("role") or ""), "content": _text(turn.get("content"), cut, f"turns[{i}]"),
                      **({"tool_calls": calls} if calls else {})})
    tokens = compute_token_table(run.sample_tokens(label), drop_pad=False)
    shown = tokens.iloc[:max(0, min(max_tokens, MAX_SAMPLE_TOKENS))]
    columns = {"token": [str(t) for t in shown["token"]], "counted": [bool(c) for c in shown["counted"]]}
    for name in TOKEN_COLUMNS:
        if name in tokens and tokens[name].notna().any():
            columns[name] = [_number(v) for v in shown[name]]
    numbers = {name: _number(row[name]) for name in (F.REWARD, "ref_reward", "response_len", "kl_mean",
                                                     "log_ratio_mean", "entropy_mean") if name in row.index}
    images = [{"turn": im["message_index"], "mime": im["mime"], "width": im["width"], "height": im["height"],
               "bytes": im["size"], "url": im["url"], "note": im["note"], "attached": False}
              for im in run.images_of(canonical)]
    for item in [im for im in images if im["note"] is None][:SAMPLE_IMAGES]:
        item["attached"] = True
    position = int(row[F.POSITION]) if F.POSITION in row.index else -1
    where = {"address": F.address(run.files[int(row[F.FILE])], int(row[F.LINE]), position),
             "file": run.files[int(row[F.FILE])], "line": int(row[F.LINE]),
             **({"position": position} if position >= 0 else {})}
    return {**where, "step": int(row[F.STEP]), **numbers,
            **{name: _text(texts.get(name), cut, name) for name in F.TEXT_FIELDS},
            "turns": turns, "n_turns": len(every), "turns_left_out": len(every) - len(turns),
            "faults": [f.as_json() for f in sample_faults(every, _number(row.get(F.extra_column("images_dropped_at"))))],
            "n_tokens": len(tokens), "tokens": columns, "cut": sorted(set(cut)), "images": images}


def build_sample_images(run: Run, label) -> list[tuple[str, bytes]]:
    """The pictures of a sample's images a program is given, as ("image/png", PNG bytes): the first
    ``SAMPLE_IMAGES`` images that have bytes, in the order of the turns, each at most ``SAMPLE_IMAGE_SIDE``
    pixels a side (``base.images.thumbnail``; one that can't be decoded left out). ``build_sample_json``'s
    ``attached`` says which."""
    shown = [im["data"] for im in run.images(label) if im["data"] is not None][:SAMPLE_IMAGES]
    return [("image/png", png) for png in map(lambda data: thumbnail(data, SAMPLE_IMAGE_SIDE), shown) if png]
