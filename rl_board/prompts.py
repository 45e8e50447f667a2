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

from . import fields as F
from .tables import KL_PREFIX, strip_pad

MAX_DIFF_TOKENS = 3_000  # words and runs of spaces of each text compared; the rest is left out, said so
MAX_PROMPT_CHOICES = 100  # prompts a search offers
_TOKENS = re.compile(r"\s+|\S+")  # a text as words and the runs of whitespace between them
_COLORS = ("#4C9BE8", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#9C755F")


def compute_prompt_choices(run, pattern: str, pad_token: str | None = None,
                           limit: int = MAX_PROMPT_CHOICES) -> pd.DataFrame:
    """The distinct prompts of ``run`` whose text (pads removed) matches the RE2 ``pattern``, or whose
    prompt key it is (a whole number), most sampled first (then in the run's order), at most ``limit``:
    indexed by ``prompt_key``, columns ``prompt`` (its text), ``samples`` and ``steps`` (how many of each
    it has in the run). Raises ``ValueError`` for a pattern RE2 refuses."""
    samples = run.samples
    keys = samples["prompt_key"]
    hit = run.text_matches("prompt", pattern, pad_token)
    if re.fullmatch(r"\s*-?\d{1,19}\s*", pattern) and -2**63 <= int(pattern) < 2**63:
        hit |= (keys == int(pattern)).to_numpy()
    found = samples[hit & keys.notna().to_numpy()]
    if found.empty:
        return pd.DataFrame(columns=["prompt", "samples", "steps"])
    first = found.drop_duplicates("prompt_key")  # each prompt's first sample, in the run's order
    grouped = found.groupby("prompt_key")
    table = pd.DataFrame({"first": first.index, "samples": grouped.size().reindex(first["prompt_key"]).to_numpy(),
                          "steps": grouped[F.STEP].nunique().reindex(first["prompt_key"]).to_numpy()},
                         index=pd.Index(first["prompt_key"].to_numpy(), name="prompt_key"))
    table = table.sort_values("samples", ascending=False, kind="stable").head(limit)
    texts = run.with_text(samples.loc[table["first"]])["prompt"]
    table.insert(0, "prompt", [strip_pad(t, pad_token) for t in texts])
    return table.drop(columns="first")


def compute_prompt_samples(runs: dict, key, estimator: str = "k3", pad_token: str | None = None,
                           tagged: dict | None = None) -> pd.DataFrame:
    """Every sample whose prompt is ``key`` (a ``prompt_key``) in each of ``runs`` (name -> ``Run``, read
    with the same pad token), in the order of ``runs``, then step, file, line. One row each: ``run``,
    ``label`` (in that run's ``samples``), ``step``, ``source`` (``FILE:LINE``), ``reward``, ``kl`` (the
    per-sample mean by ``estimator``, NaN without log-probabilities), ``response_len`` (counted tokens,
    NaN without tokens), ``response`` (pads removed) and, with ``tagged`` (name -> ``tags.Tagged``),
    ``tags`` (comma-separated, None for an untagged sample)."""
    parts = []
    kl = f"{KL_PREFIX[estimator]}_mean"
    for name, run in runs.items():
        rows = run.samples[run.samples["prompt_key"] == key]
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
            parts[-1]["tags"] = [", ".join(on[label]) or None if label in on.index else None for label in rows.index]
    if not parts:
        return pd.DataFrame(columns=["run", "label", "step", "source", F.REWARD, "kl", "response_len", "response",
                                     *(["tags"] if tagged is not None else [])])
    return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class WordDiff:
    """A text compared word by word with a reference. ``ops``: (kind, text) in order, kind "same",
    "removed" (only in the reference) or "added" (only in this text); the "same" and "added" texts
    joined give this text, the "same" and "removed" ones the reference (both cut at ``MAX_DIFF_TOKENS``
    when ``cut``). Counts are of words (runs of non-whitespace)."""

    ops: tuple[tuple[str, str], ...]
    same_words: int
    added_words: int
    removed_words: int
    cut: bool = False

    @property
    def similarity(self) -> float:
        """2 × same words ÷ (words of the reference + words of this text); 1 for two texts without words."""
        total = 2 * self.same_words + self.added_words + self.removed_words
        return 1.0 if total == 0 else 2 * self.same_words / total


def _words(tokens) -> int:
    return sum(1 for t in tokens if not t.isspace())


def compute_word_diff(reference: str | None, text: str | None, max_tokens: int = MAX_DIFF_TOKENS) -> WordDiff:
    """``text`` against ``reference`` word by word (a missing text is empty): the longest matching runs of
    words and whitespace (``difflib.SequenceMatcher``, no junk heuristic), each replaced run as the
    reference's words removed, then this text's added."""
    a, b = _TOKENS.findall(reference or ""), _TOKENS.findall(text or "")
    cut = len(a) > max_tokens or len(b) > max_tokens
    a, b = a[:max_tokens], b[:max_tokens]
    ops: list[list[str]] = []

    def push(kind: str, tokens) -> None:
        if not tokens:
            return
        if ops and ops[-1][0] == kind:
            ops[-1][1] += "".join(tokens)
        else:
            ops.append([kind, "".join(tokens)])

    same = added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            push("same", b[j1:j2])
            same += _words(b[j1:j2])
        else:
            push("removed", a[i1:i2])
            push("added", b[j1:j2])
            removed += _words(a[i1:i2])
            added += _words(b[j1:j2])
    return WordDiff(tuple((kind, text) for kind, text in ops), same, added, removed, cut)


_OP_HTML = {
    "same": ("span", ""),
    "removed": ("del", "background:rgba(225,87,89,0.35);text-decoration:line-through"),
    "added": ("ins", "background:rgba(89,161,79,0.45);text-decoration:none"),
}


def build_word_diff_html(diff: WordDiff, head: str = "") -> str:
    """The diff as HTML: words only in the reference struck through on red (``<del>``), words only in
    this text on green (``<ins>``), whitespace kept; ``head`` a line above it. Every text is escaped:
    model output and names from disk are text, never HTML."""
    parts = []
    for kind, text in diff.ops:
        tag, style = _OP_HTML[kind]
        attrs = f' class="rlb-{kind}"' + (f' style="{style}"' if style else "")
        parts.append(f"<{tag}{attrs}>{html.escape(text)}</{tag}>")
    if diff.cut:
        parts.append(f'<span class="rlb-cut" style="opacity:0.6"> … (compared up to {MAX_DIFF_TOKENS:,} words and '
                     "spaces of each text)</span>")
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
    if isinstance(row.get("tags"), str):
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
