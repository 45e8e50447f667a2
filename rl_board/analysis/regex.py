"""The regular expressions a search runs (pyarrow.compute's RE2): how large a pattern is, the limit on it,
and what a search that ran out of time says.

RE2 is linear in the text but not in the pattern: a counted repetition is compiled as that many copies
(``x{1000}y`` is a program of a thousand steps), and past some hundreds of them RE2's DFA runs out of its
memory and falls back to a step-by-step match that costs the program's size at every byte (``x{1000}y``
over 120 MB: 272 s). So a pattern's size is checked before any text is read (``check_regex``), and a
search reads a run's texts in chunks under a time budget (``SegmentQueries.text_search``), saying where
it stopped (``RegexScan``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..base.defaults import MAX_REGEX_SIZE_ENV, SEARCH_SECONDS_ENV, max_regex_size

_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")


def regex_size(pattern: str) -> int:
    """The size of the RE2 ``pattern``: each atom it matches (a character, a class ``[...]``, an escape such
    as ``\\d`` or ``\\pL``, a ``.``) counted once for every copy a counted repetition makes of it, the way RE2
    compiles ``x{n}`` and ``x{n,m}`` (``x{n,}`` counts n + 1). ``x{1000}y`` is 1,001, ``(ab){3}c`` 7,
    ``(?s)(.{100}){10}z`` 1,001; ``*``, ``+``, ``?``, anchors, groups and flags add nothing. An estimate of
    the compiled program's size for patterns RE2 accepts; a pattern it refuses is refused by RE2 later."""
    frames: list[list[int]] = [[]]  # the atoms' sizes of each open group, outermost first
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if pattern.startswith("\\Q", i):  # a literal run up to \E: each character an atom
                end = pattern.find("\\E", i + 2)
                end = n if end < 0 else end
                frames[-1].extend([1] * (end - i - 2))
                i = end + 2
                continue
            if i + 1 < n and pattern[i + 1] in "pPx" and i + 2 < n and pattern[i + 2] == "{":
                close = pattern.find("}", i + 3)
                i = n if close < 0 else close + 1
            else:
                i += 2 + (i + 1 < n and pattern[i + 1] in "pP")  # \pL: one more character
            frames[-1].append(1)
            continue
        if ch == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":  # a leading ] is a member
                j += 1
            while j < n and pattern[j] != "]":
                if pattern[j] == "\\":
                    j += 1
                elif pattern.startswith("[:", j):  # [:alpha:]
                    close = pattern.find(":]", j + 2)
                    j = j if close < 0 else close + 1
                j += 1
            frames[-1].append(1)
            i = j + 1
            continue
        if ch == "(":
            frames.append([])
            i += 1
            if pattern.startswith("?", i):  # (?:, (?i:, (?P<name>, or (?i) (flags, no group)
                close = pattern.find(")", i)
                mark = pattern.find(">" if pattern.startswith(("?P<", "?<"), i) else ":", i)
                if mark < 0 or (close >= 0 and close < mark):
                    frames.pop()
                    i = n if close < 0 else close + 1
                else:
                    i = mark + 1
            continue
        if ch == ")":
            inner = frames.pop() if len(frames) > 1 else []
            frames[-1].append(sum(inner))
            i += 1
            continue
        if ch == "{":
            repeat = _REPEAT.match(pattern, i)
            if repeat and frames[-1]:
                low, comma, high = int(repeat[1]), repeat[2], repeat[3]
                copies = low if not comma else (int(high) if high else low + 1)
                frames[-1][-1] *= max(copies, 1)
                i = repeat.end()
                if i < n and pattern[i] == "?":  # non-greedy
                    i += 1
                continue
        if ch in "|*+?^$":
            i += 1
            continue
        frames[-1].append(1)  # a character or a .
        i += 1
    while len(frames) > 1:
        inner = frames.pop()
        frames[-1].append(sum(inner))
    return sum(frames[0])


class RegexTooLarge(ValueError):
    """A pattern larger than the limit; the message gives its size, the limit and the setting."""


def check_regex(pattern: str) -> None:
    """``RegexTooLarge`` when ``pattern`` is larger (``regex_size``) than ``max_regex_size()``."""
    size, limit = regex_size(pattern), max_regex_size()
    if size > limit:
        raise RegexTooLarge(f"the regular expression {pattern[:80]!r}{'…' if len(pattern) > 80 else ''} is too "
                            f"large to search: size {size:,} (each character, class or . counted once per "
                            f"repetition), more than {limit:,} ({MAX_REGEX_SIZE_ENV}); RE2 would take minutes "
                            "over a large run")


@dataclass(frozen=True)
class RegexScan:
    """A regular expression searched over a run's texts in step order. ``found``: bool, shape (samples,),
    the rows matched; ``searched``: how many of the run's samples (the first ones, in step, file, line order)
    had their text searched, all of them unless the time budget ran out; ``steps``: each sample's step,
    int64, shape (samples,); ``budget``: the seconds it had (None: no regular expression was searched)."""

    found: np.ndarray
    searched: int
    steps: np.ndarray
    budget: float | None

    @property
    def complete(self) -> bool:
        return self.searched >= len(self.steps)

    @property
    def through_step(self) -> int | None:
        """The last step all of whose samples were searched (None: not even the first)."""
        if self.complete:
            return int(self.steps[-1]) if len(self.steps) else None
        stopped = self.steps[self.searched]
        done = self.steps[:self.searched]
        before = done[done < stopped]
        return int(before[-1]) if len(before) else None

    @property
    def stopped_at_step(self) -> int | None:
        """The step whose samples were being searched when the budget ran out (None: it did not)."""
        return None if self.complete else int(self.steps[self.searched])

    def as_json(self) -> dict:
        """The ``searched`` object of the ``search --json`` contract."""
        return {"complete": self.complete, "samples": int(self.searched), "of": int(len(self.steps)),
                "through_step": self.through_step, "stopped_at_step": self.stopped_at_step,
                "budget_seconds": self.budget}

    def note(self) -> str | None:
        """One line saying where the search stopped; None when it searched everything."""
        if self.complete:
            return None
        through = self.through_step
        return (f"the regular expression's search stopped at its time budget of {self.budget:g} s "
                f"({SEARCH_SECONDS_ENV}): {self.searched:,} of {len(self.steps):,} samples searched, "
                + (f"steps up to {through} and part of step {self.stopped_at_step}" if through is not None
                   else f"part of step {self.stopped_at_step}")
                + "; the matches are counted in those")
