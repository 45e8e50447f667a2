"""Find samples anywhere in a run: a regular expression over a text field, numeric ranges and a
step range, and the JSON the ``search`` command prints."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..base import fields as F
from .run import Run


#: What a regular expression can search: a text field, or ``messages`` (any turn's content or tool-call arguments).
SEARCH_FIELDS = (*F.TEXT_FIELDS, F.MESSAGES)


def search_fields(run: Run) -> list[str]:
    """The fields a search of ``run`` offers: the texts, and ``messages`` when a sample has turns."""
    has = "has_messages" in run.samples and bool(run.samples["has_messages"].any())
    return list(SEARCH_FIELDS if has else F.TEXT_FIELDS)


@dataclass(frozen=True)
class Query:
    """What to find. ``pattern``: an RE2 regular expression searched in ``text_field`` (one of
    ``SEARCH_FIELDS``; pads removed
    when ``pad_token`` is set); ``ranges``: sample column -> (low, high), inclusive, either end None
    for open (a sample without a value is left out); ``steps``: (first, last), inclusive;
    ``truncated``: True keeps only truncated samples, False only those known to have ended."""

    pattern: str | None = None
    text_field: str = "response"
    pad_token: str | None = None
    ranges: dict = field(default_factory=dict)
    steps: tuple[int | None, int | None] = (None, None)
    truncated: bool | None = None
    tag: str | None = None  # only samples carrying this tag (``tags.ANY_TAG``: every tagged sample)


def compute_matches(run: Run, query: Query, tagged=None) -> pd.DataFrame:
    """The rows of ``run.samples`` that match ``query``, in step, file, line order. ``tagged``
    (``tags.compute_tagged``) is the run's tags; read from its tags file when the query names a tag
    and it is not given (``tags.TagsError`` when that file can't be read)."""
    samples = run.samples
    keep = np.ones(len(samples), dtype=bool)
    if query.tag:
        if tagged is None:
            from ..store.tags import compute_tagged, load_tags

            tagged = compute_tagged(run, load_tags(run.path))
        keep &= samples.index.isin(tagged.labels_with(query.tag))
    first, last = query.steps
    if first is not None:
        keep &= samples[F.STEP].to_numpy() >= first
    if last is not None:
        keep &= samples[F.STEP].to_numpy() <= last
    for column, (low, high) in query.ranges.items():
        values = samples[column].to_numpy(dtype=float) if column in samples else np.full(len(samples), np.nan)
        if low is not None:
            keep &= values >= low
        if high is not None:
            keep &= values <= high
    if query.truncated is not None:
        flags = samples["truncated"].to_numpy(dtype=float) if "truncated" in samples else np.full(len(samples), np.nan)
        keep &= flags == (1.0 if query.truncated else 0.0)
    if query.pattern:
        keep &= run.text_matches(query.text_field, query.pattern, query.pad_token)
    return samples[keep]


def compute_matches_per_step(run: Run, matches: pd.DataFrame) -> pd.Series:
    """Matches per step, for every step of the run (0 where none matched)."""
    return matches.groupby(F.STEP).size().reindex(run.steps.index, fill_value=0).astype(int)


def build_search_json(run: Run, matches: pd.DataFrame) -> dict:
    """The ``search --json`` contract: ``matches``, ``per_step`` (every step of the run) and
    ``samples`` (every match in step, file, line order: file name, 1-based line or row, reward)."""
    per_step = compute_matches_per_step(run, matches)
    return {
        "matches": int(len(matches)),
        "per_step": [{"step": int(step), "matches": int(count)} for step, count in per_step.items()],
        "samples": [{"step": int(step), "file": run.files[int(file)], "line": int(line),
                     "reward": float(reward) if math.isfinite(reward) else None}
                    for step, file, line, reward in zip(matches[F.STEP], matches[F.FILE], matches[F.LINE],
                                                       matches[F.REWARD])],
    }
