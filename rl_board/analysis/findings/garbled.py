"""Garbled output (15, issue 38): responses turned to token soup (pieces of several writing systems,
U+FFFD, control characters), as a precision bug in an inference engine makes them.

The characters of a response are those of its words (``compute_words``' words: whitespace never
counts). A character is *bad* when it is U+FFFD or of Unicode category Cc (control) or Co (private
use). A *letter* is a character of category L* or M*; its *script* is the first word of its Unicode
name (``unicodedata.name``: LATIN, CYRILLIC, CJK, HIRAGANA, ARABIC...), after a leading FULLWIDTH or
HALFWIDTH; COMBINING marks, MODIFIER letters and unnamed characters have none. A script is *rare* when
its letters are under ``RARE_SCRIPT_SHARE`` of the first quarter's letters (none is rare when the first
quarter has no letters). A response is garbled when its bad characters plus its letters of rare scripts
are at least ``GARBLED_SHARE`` of its non-whitespace characters (and it has one).

Computed a stored chunk of words at a time (``Run.word_chunks``): each chunk's distinct words as one UTF-32
array, each distinct code point of the run classified once, summed per response through the chunk's word
indices; no response becomes a Python string, and memory is one chunk's, not the run's."""

from __future__ import annotations

import unicodedata
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from ...base import fields as F
from .common import Finding, _ids, _log_order, _percent, compute_onset

GARBLED_SHARE = Fraction(3, 10)  # of a response's non-whitespace characters bad or of a rare script


RARE_SCRIPT_SHARE = Fraction(1, 20)  # of the first quarter's letters: a script under this is rare


STEP_SHARE = Fraction(1, 20)  # of a step's samples garbled: the step is raised


EARLY_MAX = Fraction(1, 100)  # ... while under this share of the early window's samples (before the onset) are


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


class _Characters:
    """Each code point's class, worked out once per run (``_classify``), and the scripts met so far."""

    def __init__(self):
        self.scripts: dict[str, int] = {}
        self._known: dict[int, int] = {}

    def of_words(self, dictionary) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """For the words of ``dictionary`` (a ``pa.StringArray``): (their non-whitespace characters, their bad
        characters, then their letters by script as (word, script, count) triples); int64 arrays."""
        n_words = len(dictionary)
        empty = np.zeros(0, dtype=np.int64)
        if not n_words:
            return empty, empty, empty, empty, empty
        text = "".join(dictionary.to_pylist())
        points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        distinct, inverse = np.unique(points, return_inverse=True)
        new = [p for p in distinct.tolist() if p not in self._known]
        if new:
            self._known.update(zip(new, _classify(np.array(new, dtype=np.uint32), self.scripts).tolist()))
        classes = np.array([self._known[p] for p in distinct.tolist()], dtype=np.int64)[inverse]
        owner = np.repeat(np.arange(n_words), pc.utf8_length(dictionary).to_numpy(zero_copy_only=False))
        nonspace = np.bincount(owner[classes != _SPACE], minlength=n_words)
        bad = np.bincount(owner[classes == _BAD], minlength=n_words)
        lettered = classes >= 3
        width = max(len(self.scripts), 1)
        pairs, counts = np.unique(owner[lettered] * width + (classes[lettered] - 3), return_counts=True)
        pair_word, pair_script = np.divmod(pairs, width)
        return nonspace, bad, pair_word, pair_script, counts


def compute_garbled(chunks, early: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """(whether each response is garbled: bool, shape (responses,); the early window's letters by
    script). ``chunks`` is a callable giving, each time it is called, the responses' words a chunk at
    a time as ``Run.word_chunks`` yields them; ``early`` (bool, shape (responses,)) marks those of the
    early window. Two passes, a chunk in memory at a time: the early window's letters by script (so
    which scripts are rare), then each response holding a word with a bad or rare-script character
    (only those can be garbled: on 2M responses of a healthy run, none is) summed word by word."""
    characters = _Characters()
    early_letters: dict[int, int] = {}
    for places, lengths, indices, dictionary in chunks():
        _, _, pair_word, pair_script, counts = characters.of_words(dictionary)
        sizes = np.maximum(lengths, 0)
        in_early = np.repeat(early[places], sizes)
        if not in_early.any() or not len(pair_word):
            continue
        uses = np.bincount(indices[in_early], minlength=len(dictionary))
        letters = np.bincount(pair_script, weights=counts * uses[pair_word]).astype(np.int64)  # exact: < 2**53
        for script in np.flatnonzero(letters).tolist():
            early_letters[script] = early_letters.get(script, 0) + int(letters[script])
    total = sum(early_letters.values())
    rare = np.array([total > 0 and early_letters.get(i, 0) * RARE_SCRIPT_SHARE.denominator
                     < RARE_SCRIPT_SHARE.numerator * total for i in range(len(characters.scripts))] or [False])
    garbled = np.zeros(len(early), dtype=bool)
    for places, lengths, indices, dictionary in chunks():
        nonspace, bad, pair_word, pair_script, counts = characters.of_words(dictionary)
        if not len(nonspace):
            continue
        bad = bad + np.bincount(pair_word, weights=counts * rare[pair_script], minlength=len(dictionary)).astype(np.int64)
        sizes = np.maximum(lengths, 0)
        starts = np.cumsum(sizes) - sizes
        # a response without a bad word has no bad character, and 0 >= 3/10 of its characters only when it has none
        suspects = np.unique(np.searchsorted(starts + sizes, np.flatnonzero((bad > 0)[indices]), side="right"))
        if len(suspects):
            own = sizes[suspects]
            at = np.repeat(starts[suspects] - (np.cumsum(own) - own), own) + np.arange(int(own.sum()))
            their = np.cumsum(own) - own  # each suspect's words, one suspect after another
            per_bad = _sum_rows(bad[indices[at]], their, own)
            per_all = _sum_rows(nonspace[indices[at]], their, own)
            garbled[places[suspects]] = (per_all > 0) & (
                per_bad * GARBLED_SHARE.denominator >= GARBLED_SHARE.numerator * per_all)
    by_name = {name: early_letters.get(i, 0) for name, i in characters.scripts.items()}
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
    # in log order, only what the check reads (a sorted copy of every column would be the run's size again)
    samples = _log_order(run._samples[[F.STEP, F.FILE, F.LINE, "seg", "row"]])
    if samples.empty or not early_steps:
        return None
    step = samples[F.STEP].to_numpy()
    early = np.isin(step, early_steps)
    late = np.isin(step, late_steps)
    garbled, _ = compute_garbled(lambda: run.word_chunks(samples), early)
    indicator = pd.Series(garbled.astype(float), index=samples.index).reindex(run._samples.index)
    onset = compute_onset(run, indicator)
    if onset is not None:  # the early window: the first quarter's steps before the onset (scripts: the whole quarter)
        early &= step < onset
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
    message = (f"{len(steps)} step{'s' if len(steps) != 1 else ''} with at least {_percent(STEP_SHARE)} garbled "
               f"responses (U+FFFD, control characters or writing systems the early responses hardly use), first "
               f"at step {steps[0]}; {_percent(share_late)} of the late responses against {_percent(share_early)} "
               "early — check the inference engine's precision and weight sync")
    return Finding("garbled_output", steps[0], steps[-1],
                   {"share_early": share_early, "share_late": share_late, "steps": steps},
                   _ids(run, run._samples.loc[list(labels)]), message, labels, steps[0],
                   onset_step=onset,
                   amount=f"{_percent(share_late)} of late responses garbled", size=share_late)
