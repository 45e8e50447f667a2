"""Find samples anywhere in a run: a regular expression over a text field, numeric ranges and a
step range, and the JSON the ``search`` command prints."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..base import fields as F
from ..derive.faults import ANY, kind_bit, kinds_of
from .records import compute_faults, sample_faults  # noqa: F401  (search.sample_faults, as before)
from .regex import RegexScan
from .run import Run

#: What a regular expression can search: a text field, or ``messages`` (any turn's content or tool-call arguments).
SEARCH_FIELDS = (*F.TEXT_FIELDS, F.MESSAGES)
#: a search of a text field reads the records of this many samples at most, holding about this many bytes of lines
#: (at least one sample), between two looks at its time budget
TEXT_FIELD_CHUNK, TEXT_FIELD_CHUNK_BYTES = 8192, 4 << 20


def has_conversations(run: Run) -> bool:
    """Whether a sample of ``run`` has turns (``messages``)."""
    return "has_messages" in run._samples and bool(run._samples["has_messages"].any())


def search_fields(run: Run) -> list[str]:
    """The fields a search of ``run`` offers: the texts, ``messages`` when a sample has turns, then the run's
    text fields (``Run.text_fields``: a judge's rationale), read again from the source when searched."""
    known = list(SEARCH_FIELDS if has_conversations(run) else F.TEXT_FIELDS)
    return known + [name for name in run.text_fields() if name not in known]


@dataclass(frozen=True)
class Query:
    """What to find. ``pattern``: an RE2 regular expression searched in ``text_field`` (one of
    ``SEARCH_FIELDS``, or a text field of the run: ``compute_text_field_search``; pads removed
    when ``pad_token`` is set); ``ranges``: sample column -> (low, high), inclusive, either end None
    for open (a sample without a value is left out); ``steps``: (first, last), inclusive;
    ``truncated``: True keeps only truncated samples, False only those known to have ended;
    ``has_images``: True keeps only samples with an image (``images`` above 0), False only those without;
    ``fault``: only the trajectories with a fault of that kind (``ValueError`` for an unknown kind)."""

    pattern: str | None = None
    text_field: str = "response"
    pad_token: str | None = None
    ranges: dict = field(default_factory=dict)
    steps: tuple[int | None, int | None] = (None, None)
    truncated: bool | None = None
    tag: str | None = None  # only samples carrying this tag (``tags.ANY_TAG``: every tagged sample)
    has_images: bool | None = None
    fault: str | None = None  # only trajectories with a fault of this kind (``derive.faults.KINDS``, or ``any``)


def compute_matches(run: Run, query: Query, tagged=None) -> pd.DataFrame:
    """The rows of ``run._samples`` that match ``query``, in step, file, line order. ``tagged``
    (``tagged.compute_tagged``) is the run's tags; read from its tags file when the query names a tag
    and it is not given (``tags.TagsError`` when that file can't be read). Every column of every
    match is copied (1 s for 1.8M matches of 2M samples here): ``compute_match_mask`` and
    ``compute_first_matches`` give the count and the rows listed without that copy."""
    return run._samples[compute_match_mask(run, query, tagged)]


def compute_match_mask(run: Run, query: Query, tagged=None) -> np.ndarray:
    """Whether each row of ``run._samples`` matches ``query`` (``compute_matches``); bool, shape (samples,).
    A regular expression's search stops at its time budget: ``compute_search`` says where."""
    return compute_search(run, query, tagged)[0]


def compute_search(run: Run, query: Query, tagged=None) -> tuple[np.ndarray, RegexScan | None]:
    """(``compute_match_mask``'s mask, the ``RegexScan`` of the query's regular expression, which says how
    many samples' texts it searched before its time budget ran out; None without a pattern)."""
    samples = run._samples
    keep = np.ones(len(samples), dtype=bool)
    if query.tag:
        if tagged is None:
            from ..store.tags import load_tags
            from .tagged import compute_tagged

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
    if query.has_images is not None:
        counts = samples["images"].to_numpy() if "images" in samples else np.zeros(len(samples))
        keep &= (counts > 0) == query.has_images
    if query.fault:
        keep &= (fault_kinds(samples) & kind_bit(query.fault)) != 0
    scan = None
    if query.pattern:
        if query.text_field in SEARCH_FIELDS:
            scan = run.text_search(query.text_field, query.pattern, query.pad_token)
        else:
            scan = compute_text_field_search(run, query.text_field, query.pattern, query.pad_token)
        keep &= scan.found
    return keep, scan


def compute_text_field_search(run: Run, name: str, pattern: str, pad_token: str | None = None,
                              seconds: float | None = None) -> RegexScan:
    """Which rows of ``run._samples`` have the text field ``name`` (``Run.text_fields``: not kept in the
    segments) matching the RE2 ``pattern``, pads removed: the records read again from the source, a chunk
    of samples at a time (``TEXT_FIELD_CHUNK``, ``TEXT_FIELD_CHUNK_BYTES``) in the samples' order (step, file,
    line), until ``seconds`` (default ``search_seconds()``) are spent (the first chunk is always searched);
    the ``RegexScan`` says how far it got. ``ValueError`` for a pattern RE2 refuses, ``RegexTooLarge`` past ``max_regex_size()``."""
    import time

    import pyarrow as pa

    from ..base.defaults import search_seconds
    from .regex import check_regex
    from .segment_queries import _match

    check_regex(pattern)
    budget = search_seconds() if seconds is None else seconds
    samples = run._samples
    found = np.zeros(len(samples), dtype=bool)
    sizes = samples["length"].to_numpy(np.int64) if "length" in samples else np.ones(len(samples), np.int64)
    ends = np.cumsum(sizes)  # bytes of the records up to and with each sample
    start, at = time.monotonic(), 0
    while at < len(samples):
        if at and time.monotonic() - start >= budget:
            break
        # the fewest samples, at least one and at most TEXT_FIELD_CHUNK, whose lines hold TEXT_FIELD_CHUNK_BYTES
        stop = min(max(at + 1, int(np.searchsorted(ends, ends[at] - sizes[at] + TEXT_FIELD_CHUNK_BYTES))),
                   at + TEXT_FIELD_CHUNK, len(samples))
        texts = run.texts(samples.index[at:stop], name)
        if pad_token:
            texts = [t.replace(pad_token, "") if t is not None else None for t in texts]
        found[at:stop] = _match(pa.array(texts, pa.large_string()), pattern)
        at = stop
    return RegexScan(found, at, samples[F.STEP].to_numpy().astype(np.int64), budget)


def fault_kinds(samples: pd.DataFrame) -> np.ndarray:
    """Each sample's fault kinds as bits (``derive.faults``; 0 without a conversation); int64, shape (samples,)."""
    if "fault_kinds" not in samples:
        return np.zeros(len(samples), np.int64)
    return samples["fault_kinds"].fillna(0).to_numpy(dtype=np.int64)


def fault_choices(samples: pd.DataFrame) -> list[str | None]:
    """What a fault filter offers over ``samples``: None (no filter), ``any`` and each kind some sample has;
    [] when no sample has turns."""
    if "has_messages" not in samples or not samples["has_messages"].any():
        return []
    bits = int(np.bitwise_or.reduce(fault_kinds(samples))) if len(samples) else 0
    return [None, ANY, *kinds_of(bits)]


def filter_faults(samples: pd.DataFrame, kind: str | None) -> pd.DataFrame:
    """The rows of ``samples`` with a fault of ``kind`` (one of ``KINDS`` or ``any``); all of them for None."""
    if kind is None:
        return samples
    return samples[(fault_kinds(samples) & kind_bit(kind)) != 0]


def compute_first_matches(run: Run, keep: np.ndarray, count: int, last_first: bool = False) -> pd.DataFrame:
    """The first ``count`` rows of ``run._samples`` where ``keep`` (``compute_match_mask``) is set, in
    step, file, line order, or with ``last_first`` the last ``count`` of them, last first: the rows of
    ``compute_matches``'s frame (reversed) that a list of ``count`` shows, without copying the others."""
    where = np.flatnonzero(keep)
    return run._samples.iloc[(where[::-1] if last_first else where)[:max(count, 0)]]


def compute_matches_per_step(run: Run, matches: pd.DataFrame | np.ndarray) -> pd.Series:
    """Matches per step, for every step of the run (0 where none matched); ``matches`` is
    ``compute_matches``'s frame or ``compute_match_mask``'s array."""
    if isinstance(matches, np.ndarray):
        matches = run._samples.loc[matches, [F.STEP]]
    return matches.groupby(F.STEP).size().reindex(run.steps.index, fill_value=0).astype(int)


def build_search_json(run: Run, matches: pd.DataFrame, scan: RegexScan | None = None, faults: bool = False) -> dict:
    """The ``search --json`` contract: ``matches``, ``searched`` (how far the regular expression's search
    got: ``RegexScan.as_json``; every sample when there is none), ``per_step`` (every step of the run) and
    ``samples`` (every match in step, file, line order: ``address`` (``FILE:LINE[#K]``, as the ``sample`` tool
    takes and gives it), step, file name, 1-based line or row, ``position``
    where the line holds several samples (``fields.address``), reward and, with ``faults`` in a run
    with conversations, ``faults``: ``compute_faults``'s list, [] for a sample without)."""
    per_step = compute_matches_per_step(run, matches)
    if scan is None:
        steps = run._samples[F.STEP].to_numpy().astype(np.int64)
        scan = RegexScan(np.zeros(0, bool), len(steps), steps, None)
    samples = [{"address": F.address(run.files[int(file)], line, position), "step": int(step),
                "file": run.files[int(file)], "line": int(line),
                **({"position": int(position)} if position >= 0 else {}),
                "reward": float(reward) if math.isfinite(reward) else None}
               for step, file, line, position, reward in zip(
                   matches[F.STEP], matches[F.FILE], matches[F.LINE],
                   matches[F.POSITION] if F.POSITION in matches else [-1] * len(matches), matches[F.REWARD])]
    if faults and has_conversations(run):
        for sample, found in zip(samples, compute_faults(run, matches)):
            sample["faults"] = found
    return {
        "matches": int(len(matches)),
        "searched": scan.as_json(),
        "per_step": [{"step": int(step), "matches": int(count)} for step, count in per_step.items()],
        "samples": samples,
    }


_OPEN, _CLOSE = "\ue000", "\ue001"  # private-use characters: where RE2 found the match, before it is marked
MARK_OPEN, MARK_CLOSE = "«", "»"  # how a printed excerpt marks the match


def parse_steps(text: str) -> tuple[int | None, int | None]:
    """``A:B`` (inclusive; either end may be left out: ``A:``, ``:B``) or one step ``A`` as (first, last).
    Raises ``ValueError`` with the reason."""
    first, sep, last = text.partition(":")
    try:
        low = int(first) if first.strip() else None
        high = (int(last) if last.strip() else None) if sep else low
    except ValueError:
        raise ValueError(f"steps {text!r} are not A:B with whole numbers (e.g. 100:200, 100: or :200)") from None
    if low is not None and high is not None and low > high:
        raise ValueError(f"steps {text!r}: the first is after the last")
    return low, high


def parse_range(text: str) -> tuple[str, float | None, float | None]:
    """``NAME=LOW:HIGH`` (inclusive; either end may be left out) as (name, low, high). Raises ``ValueError``."""
    name, sep, bounds = text.partition("=")
    low, colon, high = bounds.partition(":")
    try:
        values = [float(v) if v.strip() else None for v in (low, high)]
    except ValueError:
        values = None
    if not sep or not name.strip() or not colon or values is None or values == [None, None]:
        raise ValueError(f"filter {text!r} is not NAME=LOW:HIGH with numbers (e.g. reward=0:0.5, "
                         "response_len=512:)")
    return name.strip(), values[0], values[1]


def numeric_columns(run: Run, estimator: str = "k3") -> dict[str, str]:
    """What a numeric filter or a sort may name, -> the column of ``run._samples``: the page's sort
    choices (``reward``, ``KL mean``…, KL by ``estimator``), their column names (``kl_mean``,
    ``response_len``…) and each extra field by its name. Only those the run has values of."""
    from .tables import KL_PREFIX, SORT_KEYS, sort_choices

    out = {}
    for key in sort_choices(run.extras, run._samples):
        column = SORT_KEYS.get(key, F.extra_column(key))
        if column == F.LINE:
            continue
        if column.startswith("kl_"):
            column = column.replace("kl", KL_PREFIX[estimator], 1)
        out[key] = column
        out.setdefault(SORT_KEYS.get(key, key), column)
    return out


def column_for(run: Run, name: str, estimator: str = "k3") -> str:
    """The column a filter or sort ``name`` stands for; ``ValueError`` naming the choices."""
    columns = numeric_columns(run, estimator)
    if name not in columns:
        raise ValueError(f"{name!r} is not a number this run has; use one of: " + ", ".join(columns))
    return columns[name]


def sort_key_for(run: Run, name: str) -> str:
    """The page's sort choice (``tables.sort_samples``) a ``--sort`` name stands for: a choice
    (``KL mean``), its column (``kl_mean``), an extra's name or ``log order``; ``ValueError`` otherwise."""
    from .tables import SORT_KEYS, sort_choices

    choices = sort_choices(run.extras, run._samples)
    by_column = {SORT_KEYS.get(key, key): key for key in choices}
    if name in choices:
        return name
    if name in by_column:
        return by_column[name]
    raise ValueError(f"can't sort by {name!r}; use one of: " + ", ".join(choices))


def printable_line(text: str) -> str:
    """``text`` on one line, control characters shown as escapes (a log's bytes never drive a terminal)."""
    return "".join(ch if ch.isprintable() or ch in (_OPEN, _CLOSE) else repr(ch)[1:-1] for ch in text)


EXCERPT_SCAN_CHARS = 1 << 20  # characters of a text searched for the match its excerpt marks
EXCERPT_SECONDS = 10  # seconds the excerpts of one listing may spend finding their matches; then none is marked


def build_excerpts(texts: list, pattern: str | None, seconds: float = EXCERPT_SECONDS) -> tuple[list[str], int]:
    """Each of ``texts``' excerpt (``build_excerpt``) while ``seconds`` last, from then on its start without
    the match marked (a regular expression slow in RE2 costs the listing at most that); (the excerpts, how
    many were given unmarked for want of time)."""
    import time

    deadline, out, unmarked = time.monotonic() + seconds, [], 0
    for text in texts:
        late = bool(pattern) and bool(text) and time.monotonic() >= deadline
        unmarked += late
        out.append(build_excerpt(text, None if late else pattern))
    return out, unmarked


def build_excerpt(text: str | None, pattern: str | None, width: int = 50) -> str:
    """A one-line excerpt of ``text`` around the first match of the RE2 ``pattern`` within its first
    ``EXCERPT_SCAN_CHARS`` characters, the match between ``MARK_OPEN`` and ``MARK_CLOSE``, ``width``
    characters of context on each side (… where cut); the text's start when there is no pattern or no
    match there; "" for no text."""
    if not text:
        return ""
    marked = text
    if pattern:
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            marked = pc.replace_substring_regex(pa.array([text[:EXCERPT_SCAN_CHARS]]), pattern,
                                                _OPEN + r"\0" + _CLOSE, max_replacements=1)[0].as_py()
            marked += text[EXCERPT_SCAN_CHARS:]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            marked = text
    start = marked.find(_OPEN)
    if start < 0:
        head = printable_line(text[: 2 * width])
        return head + ("…" if len(text) > 2 * width else "")
    end = marked.find(_CLOSE, start)
    before, match, after = marked[:start], marked[start + 1:end], marked[end + 1:]
    left = ("…" + before[-width:]) if len(before) > width else before
    right = (after[:width] + "…") if len(after) > width else after
    return (printable_line(left) + MARK_OPEN + printable_line(match) + MARK_CLOSE + printable_line(right))


def first_matching(texts: list[str], pattern: str | None) -> str:
    """The first of ``texts`` in which the RE2 ``pattern`` matches within its first ``EXCERPT_SCAN_CHARS``
    characters (a turn of a conversation), else the last one ("" for none)."""
    if pattern and texts:
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            hits = pc.match_substring_regex(pa.array([t[:EXCERPT_SCAN_CHARS] for t in texts], pa.string()),
                                            pattern).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            hits = []
        for text, hit in zip(texts, hits):
            if hit:
                return text
    return texts[-1] if texts else ""
