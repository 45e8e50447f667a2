"""Garbled output (15, issue 38): responses turned to token soup (pieces of several writing systems,
U+FFFD, control characters), as a precision bug in an inference engine makes them.

The characters of a response are those of its words (``compute_words``' words: whitespace never
counts). A character is *bad* when it is U+FFFD or of Unicode category Cc (control) or Co (private
use). A *letter* is a character of category L* or M*; its *script* is the first word of its Unicode
name (``unicodedata.name``: LATIN, CYRILLIC, CJK, HIRAGANA, ARABIC...), after a leading FULLWIDTH or
HALFWIDTH; COMBINING marks, MODIFIER letters and unnamed characters have none. A script is *rare* when
its letters are under ``RARE_SCRIPT_SHARE`` of the early window's letters (none is rare when the early
window has no letters). A response is garbled when its bad characters plus its letters of rare scripts
are at least ``GARBLED_SHARE`` of its non-whitespace characters (and it has one).

Computed over the distinct words once (their characters as one UTF-32 array, each distinct code point
classified once) and summed per response through word ids: no response becomes a Python string."""

from __future__ import annotations

import unicodedata
from fractions import Fraction

import numpy as np
import pandas as pd

from ...base import fields as F
from .common import Finding, _ids, _log_order, _percent, compute_onset

GARBLED_SHARE = Fraction(3, 10)  # of a response's non-whitespace characters bad or of a rare script


RARE_SCRIPT_SHARE = Fraction(1, 20)  # of the early window's letters: a script under this is rare


STEP_SHARE = Fraction(1, 20)  # of a step's samples garbled: the step is raised


EARLY_MAX = Fraction(1, 100)  # ... while under this share of the early window's samples are


GARBLED_SAMPLES = 3


_SKIPPED_PREFIXES = ("FULLWIDTH", "HALFWIDTH")
_NO_SCRIPT = ("COMBINING", "MODIFIER")

_SPACE, _OTHER, _BAD = 0, 1, 2  # classes of a character; a script's class is 3 and up


def compute_script(char: str) -> str | None:
    """The script of a letter (category L* or M*) as defined in the module; None for other characters."""
    if unicodedata.category(char)[0] not in "LM":
        return None
    words = unicodedata.name(char, "").split()
    while words and words[0] in _SKIPPED_PREFIXES:
        words = words[1:]
    if not words or words[0] in _NO_SCRIPT:
        return None
    return words[0]


def _classify(points: np.ndarray, scripts: dict[str, int]) -> np.ndarray:
    """Each code point's class (``_SPACE``, ``_OTHER``, ``_BAD`` or 3 + its script's number in
    ``scripts``, which grows with the scripts met)."""
    out = np.empty(len(points), dtype=np.int64)
    for i, point in enumerate(points.tolist()):
        char = chr(point)
        if char.isspace():
            out[i] = _SPACE
        elif point == 0xFFFD or unicodedata.category(char) in ("Cc", "Co"):
            out[i] = _BAD
        else:
            script = compute_script(char)
            out[i] = _OTHER if script is None else 3 + scripts.setdefault(script, len(scripts))
    return out


def compute_garbled(ids: np.ndarray, lengths: np.ndarray, vocabulary: list[str],
                    early: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """(whether each response is garbled: bool, shape (responses,); the early window's letters by
    script). ``ids``, ``lengths`` and ``vocabulary`` are ``Run.word_ids`` of the responses; ``early``
    (bool, shape (responses,)) marks those of the early window. Only a response holding a word with a
    bad or rare-script character can be garbled: the others' characters are never summed (on 2M
    responses of a healthy run, none is)."""
    sizes = np.maximum(lengths, 0)
    n_words = len(vocabulary)
    scripts: dict[str, int] = {}
    if n_words:
        text = "".join(vocabulary)
        points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        word_lengths = np.fromiter((len(w) for w in vocabulary), dtype=np.int64, count=n_words)
        distinct, inverse = np.unique(points, return_inverse=True)
        classes = _classify(distinct, scripts)[inverse]
        owner = np.repeat(np.arange(n_words), word_lengths)
    else:
        classes = owner = np.zeros(0, dtype=np.int64)
    nonspace = np.bincount(owner[classes != _SPACE], minlength=n_words)
    # letters of each script per word, as (word, script) pairs with their counts
    lettered = classes >= 3
    pairs, counts = np.unique(owner[lettered] * max(len(scripts), 1) + (classes[lettered] - 3), return_counts=True)
    pair_word, pair_script = np.divmod(pairs, max(len(scripts), 1))
    starts = np.cumsum(sizes) - sizes
    in_early = np.repeat(early, sizes)
    early_uses = np.bincount(ids[in_early], minlength=n_words)
    early_letters = np.bincount(pair_script, weights=counts * early_uses[pair_word], minlength=len(scripts))
    total = float(early_letters.sum())
    rare = np.zeros(len(scripts), dtype=bool) if total <= 0 else (
        early_letters * RARE_SCRIPT_SHARE.denominator < RARE_SCRIPT_SHARE.numerator * total)
    bad = np.bincount(owner[classes == _BAD], minlength=n_words)
    bad = bad + np.bincount(pair_word, weights=counts * rare[pair_script], minlength=n_words).astype(np.int64)
    garbled = np.zeros(len(sizes), dtype=bool)
    # a response without a bad word has no bad character, and 0 >= 3/10 of its characters only when it has none
    suspects = np.unique(np.searchsorted(starts + sizes, np.flatnonzero((bad > 0)[ids]), side="right"))
    if len(suspects):
        own = sizes[suspects]
        at = np.repeat(starts[suspects] - (np.cumsum(own) - own), own) + np.arange(int(own.sum()))
        their = np.cumsum(own) - own  # each suspect's words, one suspect after another
        per_bad = _sum_rows(bad[ids[at]], their, own)
        per_all = _sum_rows(nonspace[ids[at]], their, own)
        garbled[suspects] = (per_all > 0) & (per_bad * GARBLED_SHARE.denominator >= GARBLED_SHARE.numerator * per_all)
    by_name = {name: int(early_letters[i]) for name, i in scripts.items()}
    return garbled, by_name


def _sum_rows(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each row's sum of ``values`` (a row's values from its start, ``sizes`` of them); int64. Only the
    rows that have values are summed: ``np.add.reduceat`` over their starts."""
    out = np.zeros(len(sizes), dtype=np.int64)
    filled = np.flatnonzero(sizes > 0)
    if len(filled):
        out[filled] = np.add.reduceat(values, starts[filled], dtype=np.int64)
    return out


def _garbled_output(run, early_steps: list[int], late_steps: list[int]):
    samples = _log_order(run.samples)
    if samples.empty or not early_steps:
        return None
    ids, lengths, vocabulary = run.word_ids(samples)
    step = samples[F.STEP].to_numpy()
    early = np.isin(step, early_steps)
    late = np.isin(step, late_steps)
    garbled, _ = compute_garbled(ids, lengths, vocabulary, early)
    n_early = int(early.sum())
    if Fraction(int(garbled[early].sum()), n_early) >= EARLY_MAX:
        return None
    per_step = pd.DataFrame({"garbled": garbled, F.STEP: step}).groupby(F.STEP, sort=True)["garbled"]
    hits, sizes = per_step.sum(), per_step.size()
    steps = [int(s) for s in hits.index if Fraction(int(hits[s]), int(sizes[s])) >= STEP_SHARE]
    if not steps:
        return None
    share_early = float(garbled[early].mean())
    share_late = float(garbled[late].mean())
    picked = samples[garbled & np.isin(step, steps)]
    labels = tuple(picked.index[:GARBLED_SAMPLES])
    indicator = pd.Series(garbled.astype(float), index=samples.index).reindex(run.samples.index)
    message = (f"{len(steps)} step{'s' if len(steps) != 1 else ''} with at least {_percent(STEP_SHARE)} garbled "
               f"responses (U+FFFD, control characters or writing systems the early responses hardly use), first "
               f"at step {steps[0]}; {_percent(share_late)} of the late responses against {_percent(share_early)} "
               "early — check the inference engine's precision and weight sync")
    return Finding("garbled_output", steps[0], steps[-1],
                   {"share_early": share_early, "share_late": share_late, "steps": steps},
                   _ids(run, run.samples.loc[list(labels)]), message, labels, steps[0],
                   onset_step=compute_onset(run, indicator, share_early, share_late),
                   amount=f"{_percent(share_late)} of late responses garbled", size=share_late)
