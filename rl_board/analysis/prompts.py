"""The same prompt across steps and runs: every response to one prompt, side by side, each with a word
diff against a chosen one, its reward and KL.

A prompt is named by its ``prompt_key`` (``derive.prompt_key``: a hash of its text with pads removed),
so the responses of every step of a run, and of other runs read with the same pad token, are found
without holding any text. No Streamlit here: ``views/prompts.py`` only draws what these return.
"""

from __future__ import annotations

import difflib
import html
import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..base import fields as F
from .tables import KL_PREFIX, strip_pad

MAX_DIFF_WORDS = 2_000  # words of each text compared; the rest is left out, and the diff says so
DISSOLVE_RATIO = 4  # same words between two changes each at least this many times longer join them
MAX_PROMPT_CHOICES = 100  # prompts a search offers
_WORDS = re.compile(r"(\s*)(\S+)")  # each word with the whitespace before it
_COLORS = ("#4C9BE8", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#9C755F")


def compute_prompt_choices(run, pattern: str, pad_token: str | None = None,
                           limit: int = MAX_PROMPT_CHOICES) -> pd.DataFrame:
    """The distinct prompts of ``run`` whose text (pads removed) matches the RE2 ``pattern``, or whose
    prompt key it is (a whole number), most sampled first (then in the run's order), at most ``limit``:
    indexed by ``prompt_key``, columns ``prompt`` (its text), ``samples`` and ``steps`` (how many of each
    it has in the run); ``attrs["note"]`` says where the pattern's search stopped when it ran out of time
    (``RegexScan.note``), else None. Raises ``ValueError`` for a pattern RE2 refuses or one too large."""
    samples = run._samples
    keys = samples["prompt_key"]
    scan = run.text_search("prompt", pattern, pad_token)
    hit = scan.found.copy()
    if re.fullmatch(r"\s*-?\d{1,19}\s*", pattern) and -2**63 <= int(pattern) < 2**63:
        hit |= (keys == int(pattern)).to_numpy()
    found = samples[hit & keys.notna().to_numpy()]
    if found.empty:
        empty = pd.DataFrame(columns=["prompt", "samples", "steps"])
        empty.attrs["note"] = scan.note()
        return empty
    first = found.drop_duplicates("prompt_key")  # each prompt's first sample, in the run's order
    grouped = found.groupby("prompt_key")
    table = pd.DataFrame({"first": first.index, "samples": grouped.size().reindex(first["prompt_key"]).to_numpy(),
                          "steps": grouped[F.STEP].nunique().reindex(first["prompt_key"]).to_numpy()},
                         index=pd.Index(first["prompt_key"].to_numpy(), name="prompt_key"))
    table = table.sort_values("samples", ascending=False, kind="stable").head(limit)
    texts = run.with_text(samples.loc[table["first"]])["prompt"]
    table.insert(0, "prompt", [strip_pad(t, pad_token) for t in texts])
    table = table.drop(columns="first")
    table.attrs["note"] = scan.note()
    return table


def compute_prompt_samples(runs: dict, key, estimator: str = "k3", pad_token: str | None = None,
                           tagged: dict | None = None) -> pd.DataFrame:
    """Every sample whose prompt is ``key`` (a ``prompt_key``, or a list of them) in each of ``runs`` (name -> ``Run``, read
    with the same pad token), in the order of ``runs``, then step, file, line. One row each: ``run``,
    ``label`` (in that run's ``samples``), ``step``, ``source`` (``FILE:LINE``), ``reward``, ``kl`` (the
    per-sample mean by ``estimator``, NaN without log-probabilities), ``response_len`` (counted tokens,
    NaN without tokens), ``response`` (pads removed) and, with ``tagged`` (name -> ``tags.Tagged``),
    ``tags`` (comma-separated, "" for an untagged sample)."""
    parts = []
    kl = f"{KL_PREFIX[estimator]}_mean"
    for name, run in runs.items():
        rows = run._samples[run._samples["prompt_key"].isin(key) if isinstance(key, list)
                            else run._samples["prompt_key"] == key]
        if rows.empty:
            continue
        texts = run.with_text(rows)
        parts.append(pd.DataFrame({
            "run": name, "label": rows.index, "step": rows[F.STEP].to_numpy(), "source": texts["source"].to_numpy(),
            F.REWARD: rows[F.REWARD].to_numpy(dtype=float),
            "kl": rows[kl].to_numpy(dtype=float) if kl in rows else np.full(len(rows), np.nan),
            "response_len": rows["response_len"].where(rows["response_len"] >= 0).to_numpy(dtype=float),
            "response": [strip_pad(t, pad_token) for t in texts["response"]],
        }))
        if tagged is not None:
            book = tagged.get(name)
            on = book.frame["tags"] if book is not None else pd.Series(dtype=object)
            parts[-1]["tags"] = [", ".join(on[label]) if label in on.index else "" for label in rows.index]
    if not parts:
        return pd.DataFrame(columns=["run", "label", "step", "source", F.REWARD, "kl", "response_len", "response",
                                     *(["tags"] if tagged is not None else [])])
    return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class WordDiff:
    """A text compared word by word with a reference. ``ops``: (kind, text) in order, kind "same",
    "removed" (only in the reference) or "added" (only in this text); each word comes with the
    whitespace before it (this text's for "same" and "added", the reference's for "removed"), so the
    "same" and "added" texts joined give this text. Counts are of words (runs of non-whitespace); both
    texts are compared up to their first ``MAX_DIFF_WORDS`` words (``cut`` when either had more)."""

    ops: tuple[tuple[str, str], ...]
    same_words: int
    added_words: int
    removed_words: int
    cut: bool = False
    empty: bool = False  # this text is empty or only whitespace: drawn as EMPTY_RESPONSE, not as the reference struck

    @property
    def similarity(self) -> float:
        """2 × same words ÷ (words of the reference + words of this text); 1 for two texts without words."""
        total = 2 * self.same_words + self.added_words + self.removed_words
        return 1.0 if total == 0 else 2 * self.same_words / total


def _split(text: str, limit: int) -> tuple[list[str], list[str], str, bool]:
    """(each word's leading whitespace, the words, the whitespace after the last, whether cut at ``limit``)."""
    found = _WORDS.findall(text)
    cut = len(found) > limit
    found = found[:limit]
    tail = "" if cut else text[len(text.rstrip()):] if found else text
    return [space for space, _ in found], [word for _, word in found], tail, cut


def _blocks(a: list[str], b: list[str]) -> list[list]:
    """``difflib.SequenceMatcher``'s matching of two word lists (no junk heuristic) as blocks [kind, i1,
    i2, j1, j2], kind "same" or "change" (a run of removed and added words), then cleaned up in the
    manner of diff-match-patch's semantic cleanup: a run of same words at most ``1 / DISSOLVE_RATIO`` as
    long as the change on each side of it (in words, the longer of removed and added) joins them into one
    change, until none does (a lone "the" or "=" matched inside a rewrite is no anchor)."""
    blocks: list[list] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        kind = "same" if tag == "equal" else "change"
        if blocks and blocks[-1][0] == kind == "change":
            blocks[-1][2], blocks[-1][4] = i2, j2
        else:
            blocks.append([kind, i1, i2, j1, j2])
    merged = True
    while merged:
        merged = False
        for k in range(1, len(blocks) - 1):
            left, same, right = blocks[k - 1], blocks[k], blocks[k + 1]
            size = same[2] - same[1]
            if (same[0] == "same" and left[0] == right[0] == "change"
                    and size * DISSOLVE_RATIO <= max(left[2] - left[1], left[4] - left[3])
                    and size * DISSOLVE_RATIO <= max(right[2] - right[1], right[4] - right[3])):
                blocks[k - 1:k + 2] = [["change", left[1], right[2], left[3], right[4]]]
                merged = True
                break
    return blocks


def compute_word_diff(reference: str | None, text: str | None, max_words: int = MAX_DIFF_WORDS) -> WordDiff:
    """``text`` against ``reference`` word by word (whitespace separates words and is never compared; a
    missing text is empty): see ``_blocks``. Each change shows the reference's words removed, then this
    text's added."""
    a_space, a, _, a_cut = _split(reference or "", max_words)
    b_space, b, tail, b_cut = _split(text or "", max_words)
    ops: list[list[str]] = []

    def push(kind: str, part: str) -> None:
        if not part:
            return
        if ops and ops[-1][0] == kind:
            ops[-1][1] += part
        else:
            ops.append([kind, part])

    same = added = removed = 0
    for kind, i1, i2, j1, j2 in _blocks(a, b):
        if kind == "same":
            push("same", "".join(b_space[j] + b[j] for j in range(j1, j2)))
            same += j2 - j1
            continue
        if j2 > j1:  # the space before this text's words stays outside the change
            push("same", b_space[j1])
            push("removed", "".join((a_space[i] if i > i1 else "") + a[i] for i in range(i1, i2)))
        else:  # words removed only: they keep the reference's space before them
            push("removed", "".join(a_space[i] + a[i] for i in range(i1, i2)))
        push("added", "".join((b_space[j] if j > j1 else "") + b[j] for j in range(j1, j2)))
        removed += i2 - i1
        added += j2 - j1
    push("same", tail)
    return WordDiff(tuple((kind, part) for kind, part in ops), same, added, removed, a_cut or b_cut,
                    empty=not (text or "").strip())


EMPTY_RESPONSE = "(empty response)"  # what a diff shows for a side whose response is empty


_OP_HTML = {
    "same": ("span", ""),
    "removed": ("del", "background:rgba(225,87,89,0.35);text-decoration:line-through"),
    "added": ("ins", "background:rgba(89,161,79,0.45);text-decoration:none"),
}


def build_word_diff_html(diff: WordDiff, head: str = "") -> str:
    """The diff as HTML: words only in the reference struck through on red (``<del>``), words only in
    this text on green (``<ins>``), whitespace kept; an empty text as ``(empty response)``; ``head`` a line
    above it. Every text is escaped:
    model output and names from disk are text, never HTML."""
    parts, last = [], None
    if diff.empty:  # nothing was written: the reference struck through would read as a change of words
        parts.append(f'<span class="rlb-empty" style="opacity:0.6;font-style:italic">{EMPTY_RESPONSE}</span>')
    for kind, text in () if diff.empty else diff.ops:
        tag, style = _OP_HTML[kind]
        if last == "removed" and not text[:1].isspace():  # a gap after removed words, drawn only
            style += ";margin-left:0.3em"
        last = kind
        attrs = f' class="rlb-{kind}"' + (f' style="{style}"' if style else "")
        parts.append(f"<{tag}{attrs}>{html.escape(text)}</{tag}>")
    if diff.cut:
        parts.append(f'<span class="rlb-cut" style="opacity:0.6"> … (compared up to the first {MAX_DIFF_WORDS:,} '
                     "words of each text)</span>")
    title = (f'<div class="rlb-diff-head" style="font-size:0.85em;opacity:0.8;margin-bottom:2px">{html.escape(head)}'
             "</div>") if head else ""
    return (f'<div class="rlb-diff-block" style="margin-bottom:10px">{title}<div class="rlb-diff" style="white-space:'
            'pre-wrap;overflow-wrap:anywhere;font-family:monospace;font-size:0.9em;line-height:1.6">'
            + "".join(parts) + "</div></div>")


def describe_prompt_sample(row, estimator: str = "k3") -> str:
    """One line naming a row of ``compute_prompt_samples``: run, step, FILE:LINE, reward, KL, length."""
    parts = [str(row["run"]), f"step {int(row['step'])}", str(row["source"]), f"reward {_number(row[F.REWARD])}"]
    if row["kl"] == row["kl"]:
        parts.append(f"KL {estimator} {_number(row['kl'])}")
    if row["response_len"] == row["response_len"]:
        parts.append(f"len {int(row['response_len'])}")
    if isinstance(row.get("tags"), str) and row["tags"]:
        parts.append(f"tags: {row['tags']}")
    return " · ".join(parts)


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and math.isfinite(value) else "–"


def build_prompt_runs_figure(samples: pd.DataFrame) -> go.Figure:
    """One prompt's reward at each step (``compute_prompt_samples``), one colour per run: each sample a
    marker, the mean per step a line."""
    from .figures import _figure

    traces = []
    for i, (name, rows) in enumerate(samples.groupby("run", sort=False)):
        color = _COLORS[i % len(_COLORS)]
        means = rows.groupby("step")[F.REWARD].mean()
        traces.append(dict(type="scatter", x=rows["step"].to_numpy(), y=rows[F.REWARD].to_numpy(), mode="markers",
                           name=f"{name} (samples)", marker=dict(color=color, opacity=0.45), showlegend=False))
        traces.append(dict(type="scatter", x=means.index.to_numpy(), y=means.to_numpy(), mode="lines+markers",
                           name=str(name), line=dict(color=color)))
    return _figure(traces, "This prompt's reward, per run", height=300, xaxis=dict(title=dict(text="step")),
                   yaxis=dict(title=dict(text="reward")))
