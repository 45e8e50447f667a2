"""Two runs (or two step ranges of one run) lined up prompt by prompt: each prompt's samples and mean
reward on each side, and ``delta`` = mean B − mean A, regressions first; the ``diff --json`` contract.

How samples are matched (``by``):

- ``prompt``: by the prompt's text with every occurrence of the run's pad token removed and nothing
  else changed (no trimming, no case or whitespace folding): the run's ``prompt_key``, a 64-bit BLAKE2b
  hash of that text (``derive.samples.prompt_key``). So a prompt left-padded differently in two batches
  is one prompt, and the join is on integers, never on texts. A sample without a prompt is in no match.
  When either side wraps its prompts in a chat template (any of the first ``TEMPLATE_PROBE`` distinct
  prompts of its steps is one ``readers.chat_text.user_content`` recognises: verl's ``input`` keeps the
  template, the board's lines the bare question), both sides are matched on the **user content**
  instead: each distinct prompt's user turns (pads removed, the whole text where no template is
  recognised), white space around it removed, hashed the same way (``prompt_match`` says which). Two
  prompts of one side that differ only outside their user turns (their system prompt) are then one.
- ``id``: by the first of ``ID_FIELDS`` that the run logs as a number (an extra field: verl's ``index``
  or ``uid`` from the reward's extra info, prime-rl's and verifiers' ``example_id``); TRL's completions
  name a prompt by its prompt column, so a TRL run is matched by ``prompt``. Ids are compared exactly:
  an id of 2^53 or more (which the stored float64 rounds) is read again from its sample's record.

A prompt's ``samples`` are its samples in the side's step range; its ``reward_mean`` is the mean of
their finite rewards, summed in ascending order of value (so the same rewards in any line order give the
same bytes, and ``delta`` is exactly 0 for a prompt whose rewards did not change). ``pass_rate`` is the
share of rewards equal to 1 when every finite reward of that side (in its range) is 0 or 1, else None.
No Streamlit here: ``views/diff.py`` draws what this returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..base import fields as F
from ..base.defaults import MAX_SHOWN_CHARS
from ..derive.samples import prompt_key
from ..readers.chat_text import user_content
from .run import Run
from .tables import strip_pad

BY = ("prompt", "id")
EXACT_BELOW = 2.0 ** 53  # a float64 holds every integer below this exactly; an id at or above is read again
#: the extra fields that name a prompt, tried in this order (``--by id``)
ID_FIELDS = ("uid", "index", "idx", "example_id", "prompt_id", "problem_id", "id")
#: the columns of a side in the diff table, each ``a_`` or ``b_`` + this
SIDE_COLUMNS = ("samples", "reward_mean", "pass_rate", "sample", "step_mean")
TEMPLATE_PROBE = 32  # distinct prompts of a side looked at to tell whether it wraps them in a chat template
MATCHES = ("text", "user content")  # what ``by="prompt"`` matched on (``PromptDiff.prompt_match``)
#: the mean step distance (``PromptDiff.step_distance``) from which the command and the page call A's and B's
#: samples of a prompt far apart
FAR_STEPS = 10
NO_MATCH_CHARS = 300  # characters of each side's first prompt a diff with no prompt in both shows


@dataclass(frozen=True)
class PromptDiff:
    """The diff of two sides. ``table``: one row per matched prompt with enough samples, indexed by the
    match key (``prompt_key``, or the id), sorted by ``delta`` ascending (None last), ties by prompt text,
    then key; columns ``prompt`` (its text from A, pads removed; by user content, that), ``a_samples``,
    ``a_reward_mean``, ``a_pass_rate``, ``a_sample`` (the label in A's ``_samples`` of the response shown: A's highest
    reward for a regression, its lowest otherwise), the same for ``b_`` (B's lowest for a regression,
    its highest otherwise), ``a_step_mean`` and ``b_step_mean`` (the mean step of the prompt's samples on
    that side), ``delta`` and ``step_distance`` (|B's mean step − A's|). ``matched`` counts every
    prompt in both sides, ``only_a`` and ``only_b`` those in one side, ``too_few`` the matched prompts left
    out of ``table`` for having fewer than ``min_samples`` samples on a side. ``prompt_match``: what
    ``by="prompt"`` matched on (``MATCHES``); ``first_prompts``: when no prompt is in both sides, each
    side's first prompt in its steps (pads removed; None for a side without one), else None."""

    table: pd.DataFrame
    matched: int
    only_a: int
    only_b: int
    too_few: int
    by: str
    key_a: str  # what A's samples are keyed by: "prompt" or the id field's name
    key_b: str
    steps_a: tuple[int | None, int | None]
    steps_b: tuple[int | None, int | None]
    min_samples: int = 1
    binary: tuple[bool, bool] = field(default=(False, False))  # each side's rewards are all 0 or 1
    prompt_match: str = "text"
    first_prompts: tuple[str | None, str | None] | None = None
    #: by user content: each side's user-content key of each of its ``prompt_key``s (``prompt_keys_of``)
    user_keys: tuple[pd.Series, pd.Series] | None = field(default=None, repr=False, compare=False)

    @property
    def step_distance(self) -> float | None:
        """The mean over the table's prompts of their ``step_distance``; None for an empty table."""
        values = self.table["step_distance"].to_numpy(dtype=float)
        return math.fsum(values.tolist()) / len(values) if len(values) else None


def id_field(run: Run) -> str | None:
    """The first of ``ID_FIELDS`` that ``run`` logs as a number for any sample, or None."""
    for name in ID_FIELDS:
        column = F.extra_column(name)
        if column in run._samples and run._samples[column].notna().any():
            return name
    return None


def match_keys(run: Run, by: str) -> tuple[pd.Series, str]:
    """(each sample's match key, NaN/None where it has none; what it is keyed by)."""
    if by == "id":
        name = id_field(run)
        if name is not None:
            return _exact_ids(run, name), name
        if run._reader is not None and getattr(run._reader, "NAME", "") == "parquet":  # TRL
            return run._samples["prompt_key"], "prompt"
        raise ValueError(f"{run.path} logs no prompt id (a number named one of {', '.join(ID_FIELDS)}); "
                         "match by prompt instead (--by prompt)")
    if by != "prompt":
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    return run._samples["prompt_key"], "prompt"


def _templated(run: Run, keys: pd.Series, steps) -> bool:
    """Whether any of the first ``TEMPLATE_PROBE`` distinct prompts of ``run`` in ``steps`` is a chat
    template's (``user_content``)."""
    keep = in_steps(run._samples, steps) & keys.notna().to_numpy()
    first = run._samples.loc[keep, [F.FILE, "seg", "row"]][~keys[keep].duplicated().to_numpy()].iloc[:TEMPLATE_PROBE]
    return any(user_content(strip_pad(t, run.pad_token)) is not None for t in run.text_of(first, "prompt"))


def _user_keys(run: Run, keys: pd.Series) -> tuple[pd.Series, pd.Series]:
    """(each sample's key of its prompt's user content (the module's docstring), that key of each
    distinct ``prompt_key``): every distinct prompt's text read once, from its first sample."""
    have = keys.notna().to_numpy()
    first = ~keys.duplicated().to_numpy() & have
    texts = run.text_of(run._samples.loc[first, [F.FILE, "seg", "row"]], "prompt")
    new = []
    for text in texts:
        text = strip_pad(text, run.pad_token) or ""
        got = user_content(text)
        new.append(prompt_key(got[1] if got is not None else text.strip(), None))
    mapping = pd.Series(new, index=keys[first].to_numpy(), dtype="int64")
    return keys.map(mapping).astype("Int64"), mapping


def _first_prompt(run: Run, keys: pd.Series, steps) -> str | None:
    """The first prompt (in the run's order) of ``run``'s samples in ``steps``, pads removed, cut to
    ``NO_MATCH_CHARS`` characters; None when none has one."""
    at = np.flatnonzero(in_steps(run._samples, steps) & keys.notna().to_numpy())
    if not len(at):
        return None
    text = strip_pad(run.text_of(run._samples.iloc[at[:1]][[F.FILE, "seg", "row"]], "prompt")[0], run.pad_token)
    return None if text is None else text[:NO_MATCH_CHARS] + ("…" if len(text) > NO_MATCH_CHARS else "")


def _exact_ids(run: Run, name: str) -> pd.Series:
    """The samples' ids (extra field ``name``) compared exactly: an extra is stored as a float64, which
    holds every integer below 2^53 but rounds those above (2^53 + 1 reads as 2^53: ten prompts become
    one), so a sample whose stored id is that large has its id read again from its record, as the
    trainer wrote it (a Python int, any size; None when the record can no longer be read). Float64 where
    no id is that large (the stored column itself), else object (floats and exact ints)."""
    ids = run._samples[F.extra_column(name)]
    values = ids.to_numpy(dtype=float, na_value=np.nan)
    inexact = np.flatnonzero(np.abs(values) >= EXACT_BELOW)
    if not len(inexact):
        return ids
    exact = np.array([None if np.isnan(v) else v for v in values.tolist()], dtype=object)
    for at, got in zip(inexact.tolist(), run.records(ids.index[inexact])):
        value = None if got is None else got[1].get(name)
        exact[at] = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return pd.Series(exact, index=ids.index, dtype=object)


def in_steps(samples: pd.DataFrame, steps: tuple[int | None, int | None]) -> np.ndarray:
    """Whether each of ``samples`` is in ``steps`` ((first, last), inclusive, None for open); bool."""
    keep = np.ones(len(samples), dtype=bool)
    first, last = steps
    step = samples[F.STEP].to_numpy()
    if first is not None:
        keep &= step >= first
    if last is not None:
        keep &= step <= last
    return keep


@dataclass(frozen=True)
class _Side:
    stats: pd.DataFrame  # indexed by key: samples, reward_mean, pass_rate, low, high (labels), step_mean
    binary: bool


def _side(run: Run, keys: pd.Series, steps) -> _Side:
    """Per key: samples, the mean of its finite rewards (summed in ascending order), the pass rate, the
    labels of its lowest- and highest-reward samples (the first in the run's order on a tie), and the
    mean step of its samples."""
    samples = run._samples
    keep = in_steps(samples, steps) & keys.notna().to_numpy()
    whole = pd.api.types.is_integer_dtype(keys.dtype)
    if keys.dtype == object:  # exact ids (``_exact_ids``): Python's ints and floats, compared exactly
        key = keys.to_numpy(dtype=object)[keep]
    else:
        key = keys.to_numpy(dtype=np.int64 if whole else float, na_value=0 if whole else np.nan)[keep]
    labels = samples.index.to_numpy()[keep]
    reward = samples[F.REWARD].to_numpy(dtype=float)[keep]
    if "has_reward" in samples:
        reward = np.where(samples["has_reward"].to_numpy(dtype=bool)[keep], reward, np.nan)
    finite = np.isfinite(reward)
    binary = bool(finite.any()) and bool(np.isin(reward[finite], (0.0, 1.0)).all())
    if not len(key):
        return _Side(pd.DataFrame(columns=["samples", "reward_mean", "pass_rate", "low", "high", "step_mean"]),
                     binary)
    codes, uniques = pd.factorize(key, sort=True)
    counts = np.bincount(codes, minlength=len(uniques))
    step_mean = np.bincount(codes, weights=samples[F.STEP].to_numpy(dtype=float)[keep],
                            minlength=len(uniques)) / counts
    # rewarded samples grouped by key, each group's rewards ascending (then in the run's order): the
    # sum is the same whatever order the lines came in
    order = np.lexsort((np.arange(len(codes)), reward, codes))
    order = order[finite[order]]
    code_sorted, reward_sorted = codes[order], reward[order]
    starts = np.r_[0, np.flatnonzero(code_sorted[1:] != code_sorted[:-1]) + 1] if len(order) else np.array([], int)
    with_reward = code_sorted[starts]
    sums = np.add.reduceat(reward_sorted, starts) if len(order) else np.array([])
    ends = np.r_[starts[1:], len(order)] - 1
    rewarded = np.zeros(len(uniques), dtype=np.int64)
    rewarded[with_reward] = ends - starts + 1
    mean = np.full(len(uniques), np.nan)
    mean[with_reward] = sums / rewarded[with_reward]
    # the first lowest and the first highest of each group (in the run's order on a tie)
    low = np.full(len(uniques), -1, dtype=np.int64)
    high = np.full(len(uniques), -1, dtype=np.int64)
    if len(order):
        low[with_reward] = order[starts]
        top = np.lexsort((np.arange(len(codes)), -reward, codes))
        top = top[finite[top]]
        top_starts = np.r_[0, np.flatnonzero(codes[top][1:] != codes[top][:-1]) + 1]
        high[codes[top][top_starts]] = top[top_starts]
    first = np.unique(codes, return_index=True)[1]  # a group without rewards: its first sample
    low, high = np.where(low < 0, first, low), np.where(high < 0, first, high)
    stats = pd.DataFrame({"samples": counts, "reward_mean": mean,
                          "pass_rate": mean if binary else np.full(len(uniques), np.nan),
                          "low": labels[low], "high": labels[high], "step_mean": step_mean},
                         index=pd.Index(uniques, name="key"))
    return _Side(stats, binary)


def compute_diff(a: Run, b: Run, steps_a: tuple[int | None, int | None] = (None, None),
                 steps_b: tuple[int | None, int | None] | None = None, by: str = "prompt",
                 min_samples: int = 1) -> PromptDiff:
    """``b`` against ``a`` prompt by prompt (see the module's docstring): ``steps_a`` and ``steps_b``
    ((first, last), inclusive, None for open; ``steps_b`` None: as ``steps_a``) are the steps each side
    takes; ``by`` is ``prompt`` or ``id``. Raises ``ValueError`` for a run without the id asked for."""
    steps_b = steps_a if steps_b is None else steps_b
    keys_a, key_a = match_keys(a, by)
    keys_b, key_b = match_keys(b, by)
    if key_a != key_b and "prompt" in (key_a, key_b):
        raise ValueError(f"{a.path} is keyed by {key_a!r} and {b.path} by {key_b!r}: they can't be matched "
                         "by id; match them by prompt (--by prompt)")
    match, user_keys = "text", None
    if key_a == key_b == "prompt" and (_templated(a, keys_a, steps_a) or _templated(b, keys_b, steps_b)):
        match = "user content"
        keys_a, map_a = _user_keys(a, keys_a)
        keys_b, map_b = (keys_a, map_a) if b is a else _user_keys(b, keys_b)
        user_keys = (map_a, map_b)
    side_a, side_b = _side(a, keys_a, steps_a), _side(b, keys_b, steps_b)
    both = side_a.stats.index.intersection(side_b.stats.index, sort=False)
    matched = len(both)
    sa, sb = side_a.stats.loc[both], side_b.stats.loc[both]
    enough = (sa["samples"].to_numpy() >= min_samples) & (sb["samples"].to_numpy() >= min_samples)
    sa, sb = sa[enough], sb[enough]
    delta = sb["reward_mean"].to_numpy(dtype=float) - sa["reward_mean"].to_numpy(dtype=float)
    worse = delta < 0
    table = pd.DataFrame({
        "a_samples": sa["samples"].to_numpy(dtype=np.int64), "a_reward_mean": sa["reward_mean"].to_numpy(float),
        "a_pass_rate": sa["pass_rate"].to_numpy(float),
        "a_sample": np.where(worse, sa["high"].to_numpy(), sa["low"].to_numpy()),
        "b_samples": sb["samples"].to_numpy(dtype=np.int64), "b_reward_mean": sb["reward_mean"].to_numpy(float),
        "b_pass_rate": sb["pass_rate"].to_numpy(float),
        "b_sample": np.where(worse, sb["low"].to_numpy(), sb["high"].to_numpy()),
        "a_step_mean": sa["step_mean"].to_numpy(float), "b_step_mean": sb["step_mean"].to_numpy(float),
        "delta": delta,
        "step_distance": np.abs(sb["step_mean"].to_numpy(float) - sa["step_mean"].to_numpy(float)),
    }, index=sa.index)
    # the prompt texts only (not every text field of the samples); ties ordered by each text's rank among
    # them (Python's order of strings: no fixed-width copy whose width is the longest prompt's)
    where = [F.FILE, "seg", "row"]  # what finds a row's segment: no copy of the samples' other columns
    texts = a.text_of(a._samples.loc[table["a_sample"].to_numpy(), where], "prompt") if len(table) else []
    pad = a.pad_token
    if pad:  # tables.strip_pad, without a call for each text (a million of them: 5 s)
        texts = [t.replace(pad, "") if isinstance(t, str) and pad in t else t for t in texts]
    if match == "user content":  # what was matched: the question, not the template around it
        texts = [t if t is None else (got[1] if (got := user_content(t)) is not None else t.strip()) for t in texts]
    rank = _text_rank(texts)
    table.insert(0, "prompt", pd.Series(texts, index=table.index, dtype=object))
    order = np.lexsort((np.arange(len(table)), rank, np.where(np.isnan(delta), np.inf, delta)))
    table = table.iloc[order]
    first_prompts = None if matched else (_first_prompt(a, keys_a, steps_a), _first_prompt(b, keys_b, steps_b))
    return PromptDiff(table, matched, len(side_a.stats) - matched, len(side_b.stats) - matched,
                      matched - int(enough.sum()), by, key_a, key_b, steps_a, steps_b, min_samples,
                      (side_a.binary, side_b.binary), match, first_prompts, user_keys)


def prompt_keys_of(diff: PromptDiff, side: str, key) -> list:
    """The ``prompt_key``s of side ``side`` ("a" or "b") whose samples are the diff's prompt ``key`` (one
    row of its table): ``key`` itself when prompts were matched on their text, else every prompt of that
    side whose user content is ``key``."""
    if diff.user_keys is None:
        return [key]
    mapping = diff.user_keys[0 if side == "a" else 1]
    return mapping.index[mapping.to_numpy() == key].tolist()


def no_match_reason(diff: PromptDiff) -> str | None:
    """Why no prompt is in both sides, for people: what they were matched on and each side's first prompt
    (``first_prompts``), shown literally by the caller; None when some prompt matched."""
    if diff.first_prompts is None:
        return None
    on = {"text": "their text (pads removed)", "user content": "their chat template's user content"}
    if diff.by == "id":
        on = {diff.prompt_match: f"their id ({diff.key_a})"}
    a, b = ("(no prompt)" if p is None else repr(p) for p in diff.first_prompts)
    return (f"No prompt of A is a prompt of B, matched by {on[diff.prompt_match]}. A's first prompt: {a}; "
            f"B's first prompt: {b}.")


def _text_rank(texts: list) -> np.ndarray:
    """Each text's rank among ``texts`` in Python's order of strings (None as ""), equal texts equal: by
    Arrow's sort of their UTF-8 (whose byte order is the code points' order), 9x faster than sorting a
    million Python strings; texts UTF-8 can't hold (a lone surrogate) are ranked by Python's sort."""
    import pyarrow as pa
    import pyarrow.compute as pc

    filled = ["" if t is None else t for t in texts]
    try:
        array = pa.array(filled, pa.large_string())
    except UnicodeEncodeError:
        return pd.factorize(np.array(filled, dtype=object), sort=True)[0]
    return pc.rank(array, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.int64) - 1  # (from 1)


def _number(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _range(steps) -> str | None:
    first, last = steps
    if first is None and last is None:
        return None
    return f"{'' if first is None else first}:{'' if last is None else last}"


def build_diff_json(diff: PromptDiff, a: Run, b: Run, rows: list[int] | None = None, marks=None) -> dict:
    """The ``diff --json`` contract (without ``settings``): ``matched``, ``only_a``, ``only_b``,
    ``too_few``, ``regressions``, ``improvements``, ``unchanged`` (prompts of the table with delta
    below, above and at 0) and ``prompts``: each ``prompt`` (its text's first ``MAX_SHOWN_CHARS``
    characters), ``prompt_chars`` (the text's full length; null without one), ``key`` (the prompt key or id),
    ``a`` and ``b`` ({``samples``, ``reward_mean``, ``pass_rate``, ``shown``: FILE:LINE of the response
    the text output shows, ``step_mean``: the mean step of its samples}), ``delta`` and ``step_distance``
    (|B's ``step_mean`` − A's|), in the table's order; ``step_distance`` (the mean of the prompts'
    over the whole table; null without prompts) and ``no_match`` (``no_match_reason`` with each side's
    first prompt: {``why``, ``a_first_prompt``, ``b_first_prompt``} when no prompt is in both, else null)
    come before ``prompts``. With ``marks`` (``marks.compute_finding_marks``), each prompt also has
    ``b_findings`` (the kinds of B's findings its B samples carry; [] for none) and ``b_findings_checked``
    (the improvements whose shown response was looked at for phrases) comes before ``prompts``. ``rows``: the positions in the table
    of the prompts to list (ascending; None: every one), so a caller printing a few builds only those."""
    whole = diff.table
    delta = whole["delta"].to_numpy(dtype=float)
    counts = {"regressions": int((delta < 0).sum()), "improvements": int((delta > 0).sum()),
              "unchanged": int((delta == 0).sum())}
    table = whole if rows is None else whole.iloc[rows]
    shown = {}
    for name, run in (("a", a), ("b", b)):
        labels = table[f"{name}_sample"].to_numpy()
        rows = run._samples.loc[labels, [F.FILE, F.LINE]] if len(labels) else run._samples.iloc[:0]
        shown[name] = [f"{run.files[int(f)]}:{int(line)}" for f, line in zip(rows[F.FILE], rows[F.LINE])]
    delta = table["delta"].to_numpy(dtype=float)
    # column by column, as Python values (a row at a time, iterrows, costs ~100x more: 61 s for 300,000)
    side = {name: list(zip(table[f"{name}_samples"].tolist(), table[f"{name}_reward_mean"].tolist(),
                           table[f"{name}_pass_rate"].tolist(), shown[name], table[f"{name}_step_mean"].tolist()))
            for name in ("a", "b")}
    keys = table.index.tolist()
    prompts = []
    for i, (prompt, key, value, apart) in enumerate(zip(table["prompt"].tolist(), keys, delta.tolist(),
                                                        table["step_distance"].tolist())):
        prompts.append({
            "prompt": prompt[:MAX_SHOWN_CHARS] if isinstance(prompt, str) else None,
            "prompt_chars": len(prompt) if isinstance(prompt, str) else None,
            "key": int(key) if diff.key_a == "prompt" or type(key) is int else _number(key),
            **{name: {"samples": int(count), "reward_mean": _number(mean), "pass_rate": _number(rate), "shown": at,
                      "step_mean": _number(step)}
               for name in ("a", "b") for count, mean, rate, at, step in (side[name][i],)},
            "delta": _number(value), "step_distance": _number(apart)})
        if marks is not None:
            prompts[-1]["b_findings"] = list(marks.kinds.get(key, ()))
    no_match = None
    if diff.first_prompts is not None:
        no_match = {"why": no_match_reason(diff), "a_first_prompt": diff.first_prompts[0],
                    "b_first_prompt": diff.first_prompts[1]}
    distance = diff.step_distance
    return {"matched": diff.matched, "only_a": diff.only_a, "only_b": diff.only_b, "too_few": diff.too_few,
            **counts, "step_distance": None if distance is None else _number(distance), "no_match": no_match,
            **({} if marks is None else {"b_findings_checked": marks.checked}), "prompts": prompts}


def diff_settings(diff: PromptDiff) -> dict:
    """What the diff was computed with, as its JSON's ``settings`` carry it (beside the read settings)."""
    return {"by": diff.by, "key_a": diff.key_a, "key_b": diff.key_b, "steps_a": _range(diff.steps_a),
            "steps_b": _range(diff.steps_b), "min_samples": diff.min_samples, "prompt_match": diff.prompt_match}


def diff(a, b, *, steps: str | tuple | None = None, steps_b: str | tuple | None = None, by: str = "prompt",
         min_samples: int = 1, **read_options) -> pd.DataFrame:
    """``rl_board.diff(a, b)``: the ``diff`` command's table for a notebook. ``a`` and ``b`` are ``Run``s
    (``rl_board.load``) or run folders, read with ``read_options`` (``rl_board.load``'s: ``pad_token``,
    ``split``…; the same folder twice is read once); ``steps``/``steps_b`` are ``"A:B"`` strings or
    (first, last) tuples. Returns ``PromptDiff.table``: one row per matched prompt, most negative
    ``delta`` first, with ``a_sample`` and ``b_sample`` the ``sample_id`` (``FILE:LINE``, as ``to_pandas()``
    and the command name it) of the response each side shows; its ``attrs`` hold ``matched``, ``only_a``,
    ``only_b``, ``too_few``, ``prompt_match``, ``step_distance`` (the mean over its prompts) and ``no_match``
    (``no_match_reason``: None when some matched)."""
    from .notebook import load
    from .search import parse_steps

    def side(value):
        return value if isinstance(value, Run) else load(value, **read_options)

    def steps_of(value):
        return parse_steps(value) if isinstance(value, str) else tuple(value) if value is not None else (None, None)

    run_a = side(a)
    run_b = run_a if (not isinstance(b, Run) and not isinstance(a, Run) and str(a) == str(b)) else side(b)
    found = compute_diff(run_a, run_b, steps_of(steps), None if steps_b is None else steps_of(steps_b), by,
                         min_samples)
    table = found.table.copy()
    for name, run in (("a_sample", run_a), ("b_sample", run_b)):  # row labels are positions: give the ids
        labels = table[name].to_numpy()
        table[name] = run.sample_ids(run._samples.loc[labels]).to_numpy() if len(labels) else []
    table.attrs.update(matched=found.matched, only_a=found.only_a, only_b=found.only_b, too_few=found.too_few,
                       prompt_match=found.prompt_match, step_distance=found.step_distance,
                       no_match=no_match_reason(found))
    return table


def early_and_late_steps(steps) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """A run's early steps against its late ones, the Diff area's default when run B is the loaded run and
    no steps are typed: the first and last quarter of its logged steps (at least one step each, as the
    findings' windows), as (first, last) ranges; None for a run of one step (nothing to compare)."""
    logged = sorted(int(s) for s in steps)
    if len(logged) < 2:
        return None
    quarter = max(1, len(logged) // 4)
    return (logged[0], logged[quarter - 1]), (logged[-quarter], logged[-1])


def split_diff_table(diff: PromptDiff, marks=None) -> dict[str, pd.DataFrame]:
    """The diff's prompts in the page's three tables: ``regressions`` (most negative delta first),
    ``improvements`` (most positive first) and ``unchanged`` (delta 0, or no delta: a side without
    rewards), each with the columns people read: prompt, A mean, A samples, B mean, B samples, delta,
    steps apart (``step_distance``) (and the pass rates when a side's rewards are 0/1), and with ``marks``
    (``marks.FindingMarks``) the improvements' ``B's findings``, comma-separated; indexed by the match key."""
    table = diff.table
    shown = pd.DataFrame({"prompt": table["prompt"], "A mean": table["a_reward_mean"], "A samples": table["a_samples"],
                          "B mean": table["b_reward_mean"], "B samples": table["b_samples"], "delta": table["delta"],
                          "steps apart": table["step_distance"]}, index=table.index)
    if diff.binary[0]:
        shown.insert(3, "A pass rate", table["a_pass_rate"])
    if diff.binary[1]:
        shown.insert(len(shown.columns) - 2, "B pass rate", table["b_pass_rate"])
    delta = table["delta"].to_numpy(dtype=float)
    improvements = shown[delta > 0].iloc[::-1]
    if marks is not None:
        improvements = improvements.assign(**{"B's findings": [", ".join(marks.kinds.get(k, ()))
                                                               for k in improvements.index]})
    return {"regressions": shown[delta < 0], "improvements": improvements,
            "unchanged": shown[~((delta < 0) | (delta > 0))]}
