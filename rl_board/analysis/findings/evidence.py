"""A finding's evidence for people: its samples with the phrases marked on word boundaries, its numbers as
small tables (3 significant digits; the JSON keeps full precision), and the n-grams of the two windows."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import pandas as pd

from ...base import fields as F
from ...base.colors import display_token, visible_token
from ..drivers import compute_ngram_log_odds
from ..run import Run
from .common import Finding, _log_order, compute_windows, compute_words
from .phrases import _phrase_text


@dataclass(frozen=True)
class EvidenceSample:
    """One sample of a finding's evidence: where it is, its step and reward, and its response as
    HTML (escaped) with the finding's phrases marked; ``chars``: the response's characters as running
    text, ``shown``: how many of them ``html`` holds (fewer where ``compute_evidence`` cut it)."""

    label: object
    sample_id: str
    step: int
    reward: float
    html: str = field(repr=False, default="")
    chars: int = 0
    shown: int = 0


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def build_marked_html(words: list[str], phrases, joiner: str) -> str:
    """``words`` as running text (tokens joined as they read, words with spaces), every word inside
    an occurrence of one of ``phrases`` (token tuples) in a ``<mark>``; every word is escaped. An
    occurrence is marked only on word boundaries of the running text: not where a letter, digit or
    "_" of it touches one just outside it (". free" is not marked inside ". freely"). Tokens of which
    none holds whitespace are word-level tokens: each of their edges is a word boundary."""
    shown = [display_token(w) if joiner == "" else w for w in words]
    text = joiner.join(shown)
    words_level = joiner != "" or not any(ch.isspace() for ch in text)
    starts, at = [], 0
    for piece in shown:
        starts.append(at)
        at += len(piece) + len(joiner)
    marked = [False] * len(words)
    for phrase in phrases:
        n = len(phrase)
        for i in range(len(words) - n + 1):
            if tuple(words[i:i + n]) != tuple(phrase):
                continue
            a, b = starts[i], starts[i + n - 1] + len(shown[i + n - 1])
            inside_left = 0 < a < len(text) and _is_word_char(text[a - 1]) and _is_word_char(text[a])
            inside_right = 0 < b < len(text) and _is_word_char(text[b - 1]) and _is_word_char(text[b])
            if words_level or not (inside_left or inside_right):
                marked[i:i + n] = [True] * n
    parts = []
    for text_part, mark in zip(shown, marked):
        escaped = html.escape(text_part)
        parts.append(f"<mark>{escaped}</mark>" if mark else escaped)
    return ('<div class="rlb-finding-text" style="white-space:pre-wrap;font-family:monospace">'
            + joiner.join(parts) + "</div>")


#: How each evidence key reads in the evidence table.
EVIDENCE_NAMES = {"reward_early": "reward, early window", "reward_late": "reward, late window",
                  "length_early": "length, early window", "length_late": "length, late window",
                  "entropy_early": "entropy, early window", "entropy_late": "entropy, late window",
                  "kl_early": "KL, early window", "kl_late": "KL, late window",
                  "repetition_early": "4-gram repetition, early window",
                  "repetition_late": "4-gram repetition, late window",
                  "calls_early": "tool calls per sample, early window",
                  "calls_late": "tool calls per sample, late window",
                  "early": "mean, early window", "late": "mean, late window", "steps": "steps", "max": "largest",
                  "min": "lowest", "component": "reward component", "field": "field", "correlation": "correlation",
                  "share_early": "share garbled, early window", "share_late": "share garbled, late window",
                  "count": "samples named", "checked": "samples checked", "weights_from": "weights"}


def _significant(value) -> str:
    """A number to 3 significant digits; "—" for none."""
    return "—" if value is None else f"{value:.3g}"


def _step_ranges(steps: list[int]) -> str:
    """Steps as runs of consecutive ones: 1–3, 5, 8–9 (and how many)."""
    runs, start = [], None
    for i, step in enumerate(steps):
        if start is None:
            start = step
        if i + 1 == len(steps) or steps[i + 1] != step + 1:
            runs.append(f"{start}" if start == step else f"{start}–{step}")
            start = None
    return f"{', '.join(runs)} ({len(steps)} step{'s' if len(steps) != 1 else ''})"


def compute_evidence_tables(finding: Finding, words_from_tokens: bool) -> list[pd.DataFrame]:
    """A finding's evidence as small tables of text for people: its numbers (to 3 significant digits,
    steps as ranges), then its phrases (phrase | early % | late %) or KL tokens (token | share of the
    late KL %) or reward components' weights (component | weight). Names and tokens from the logs are kept
    as they are (shown as text)."""
    rows = []
    for key, value in finding.evidence.items():
        if key in ("phrases", "tokens", "weights", "components"):
            continue
        if isinstance(value, list):
            shown = _step_ranges(value)
        elif isinstance(value, str):
            shown = value
        else:
            shown = _significant(value)
        rows.append((EVIDENCE_NAMES.get(key, key), shown))
    tables = [pd.DataFrame(rows, columns=["evidence", "value"])]
    joiner = "" if words_from_tokens else " "
    if finding.evidence.get("phrases"):
        tables.append(pd.DataFrame(
            [(_phrase_text(tuple(p["tokens"]), joiner), _significant(p["share_early"] * 100),
              _significant(p["share_late"] * 100)) for p in finding.evidence["phrases"]],
            columns=["phrase", "early %", "late %"]))
    if finding.evidence.get("tokens"):
        tables.append(pd.DataFrame([(visible_token(t["token"]), _significant(t["share"] * 100))
                                    for t in finding.evidence["tokens"]], columns=["token", "share of late KL %"]))
    if finding.evidence.get("weights"):
        tables.append(pd.DataFrame([(name, f"{weight:.6g}") for name, weight in finding.evidence["weights"].items()],
                                   columns=["reward component", "weight"]))
    return tables


def _cut_words(words: list[str], joiner: str, limit: int | None) -> tuple[list[str], int, int]:
    """(the words of ``words`` that fit in ``limit`` characters of running text, the one that crosses it
    cut to fit (all for None), the characters they take, the whole text's characters)."""
    lengths = [len(w) for w in words]  # display_token changes no token's length
    total = sum(lengths) + len(joiner) * max(len(words) - 1, 0)
    if limit is None or total <= limit:
        return words, total, total
    taken = 0
    for i, length in enumerate(lengths):
        gap = len(joiner) if i else 0
        if taken + gap + length > limit:
            part = words[i][:max(limit - taken - gap, 0)]
            return words[:i] + ([part] if part else []), taken + (gap + len(part) if part else 0), total
        taken += gap + length
    return words, taken, total


def compute_evidence(run: Run, finding: Finding, max_chars: int | None = None) -> list[EvidenceSample]:
    """The samples of ``finding`` in its order, each with its response marked (``build_marked_html``);
    with ``max_chars``, only the words that fit in that many characters of running text (a phrase is
    marked where it lies wholly inside them)."""
    labels = [label for label in finding.labels if label in run._samples.index]
    if not labels:
        return []
    frame = run._samples.loc[labels]
    words, from_tokens = compute_words(run, frame)
    out = []
    for label, ws, tok in zip(labels, words, from_tokens):
        row = run._samples.loc[label]
        joiner = "" if tok else " "
        kept, shown, chars = _cut_words(ws, joiner, max_chars)
        out.append(EvidenceSample(label, F.address(run.files[int(row[F.FILE])], int(row[F.LINE]),
                                                   int(row.get(F.POSITION, -1))), int(row[F.STEP]),
                                  float(row[F.REWARD]), build_marked_html(kept, finding.phrases, joiner),
                                  chars, shown))
    return out


def compute_window_ngrams(run: Run) -> pd.DataFrame:
    """The n-gram finder across time: n-grams over-represented in the late window's responses vs the
    early window's (``analysis.compute_ngram_log_odds``, both windows as the prior)."""
    early_steps, late_steps = compute_windows(run)
    samples = run._samples
    early_words, _ = compute_words(run, _log_order(samples[samples[F.STEP].isin(early_steps)]))
    late_words, _ = compute_words(run, _log_order(samples[samples[F.STEP].isin(late_steps)]))
    return compute_ngram_log_odds(late_words, early_words, late_words + early_words)
