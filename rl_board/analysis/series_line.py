"""A series in one line: where it started and ended and how far it went (first → last, min, max).

What ``rl-board summary`` and ``rl-board metrics`` print above their tables. Imports only the
standard library: a summary printed again from its memo imports no pandas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Recap:
    """One series: its first and last finite values with their steps, its least and greatest (the
    earliest step on a tie), and how many steps had a finite value."""

    first_step: int
    first: float
    last_step: int
    last: float
    min_step: int
    min: float
    max_step: int
    max: float
    steps: int


def compute_recap(points) -> Recap | None:
    """The recap of ``points`` ((step, value) pairs in step order; None, NaN and infinities are left
    out); None when no value is finite."""
    kept = [(int(step), float(value)) for step, value in points
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)]
    if not kept:
        return None
    low = min(kept, key=lambda p: (p[1], p[0]))
    high = max(kept, key=lambda p: (p[1], -p[0]))
    return Recap(kept[0][0], kept[0][1], kept[-1][0], kept[-1][1], low[0], low[1], high[0], high[1], len(kept))
