"""Findings: what went wrong in a run, found without a human looking (issue 16). Pure functions
over a ``Run``; the page, ``rl-board findings`` and the tests all use ``compute_findings``.

Definitions (the README repeats them for users):

- Windows: S = the steps that have samples, ascending; the *early* window is the first
  ceil(S/4) of them, the *late* window the last ceil(S/4); E and L are their samples.
- Words of a response: its counted tokens (``metrics.token_positions``, as the diagnostics count)
  without pad and EOS tokens; a sample without ``response_tokens`` uses its whitespace-separated
  words with pads removed. An n-gram is *in* a response when it occurs at least once in its words.
- Means ignore NaN; std is the population std.

The six checks, in this order (thresholds below as named constants):

1. ``reward_with_spreading_phrases``: the reward rose (mean L - mean E >= std E, and > 0) and a
   1-3-gram spread: share_L >= 1/2 and share_L >= 3 * max(share_E, 1/|E|), share_X = responses of X
   containing it / |X|; dropped when the L responses containing it have a mean reward <= that of
   the L responses without it (kept when every L response contains it). Top 5 by
   share_L / max(share_E, 1/|E|), then share_L, then the token lists ascending.
2. ``length_growth_with_reward``: the reward rose and mean length L / mean length E >= 1.5; length
   is ``response_len`` (counted positions), or characters without pads when no sample of the run
   has a per-token list.
3. ``entropy_collapse``: mean ``entropy_mean`` over L <= 1/2 * the same over E.
4. ``training_inference_mismatch``: steps whose ``mismatch_kl_mean`` > 1e-3.
5. ``dead_groups``: a step is GRPO-shaped when at least half its samples are in prompt groups of >= 2
   samples, dead when at least half of those groups have all rewards equal; raised when dead steps
   are at least 10 % of the GRPO-shaped steps.
6. ``empty_responses``: steps in which at least 5 % of the samples have no words.

Issue 33 adds seven (same windows and words):

7. ``component_with_spreading_phrases``: for each *reward component*, a numeric field of the samples
   other than ``reward`` and ``ref_reward`` whose name contains "reward" or "score" (any case) and that
   has two distinct values over E and L together: the component rose (as the reward does in 1) and a
   1-3-gram spread with it (as in 1, with share_L >= 1/10, and dropped when the L responses containing
   it have a mean component <= that of the others). Samples as in 1, highest component first.
8. ``kl_runaway``: mean ``kl_mean`` (k3, the samples' mean per token) over L >= 0.5.
9. ``repetition_with_reward``: the reward rose and mean ``repeat_4gram`` (what the summary's
   ``repeat_4gram_share`` averages) over L >= 0.1 and >= 2 * the same over E.
10. ``critic_cannot_fit``: steps whose ``explained_variance`` < 0 are >= 1/4 of the steps that have one.
11. ``tool_use_collapse``: on runs with turns, mean ``num_tool_calls`` of the samples with turns over L
    <= 0.5 * the same over E, and the E mean >= 0.5.
12. ``tool_call_loops``: a sample loops when one tool call (name and arguments) appears >= 3 times
    in its assistant turns; steps where >= 10 % of the samples loop.
13. ``reward_tracks_field``: a numeric field that is not a reward component, with a Pearson correlation
    >= 0.8 with the reward over all samples having both, and mean L >= 1.5 * mean E, mean E > 0.
14. Onset (1, 2, 7, 8, 9, 13): the first step s such that the mean of the step means of the series the
    finding rests on over s and the 4 steps after it (fewer at the end) is above the midpoint of its E
    and L means (its means over the samples of E and of L, the finding's early and late numbers; NaN
    step means ignored); None when no step is.

Findings are ranked by ``RANKING`` (how much they should worry a practitioner), then, within a kind,
by their size; ``SEVERITY`` gives each kind's level.
"""

from __future__ import annotations

import html
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import chain

import numpy as np
import pandas as pd

from ..base import fields as F
from ..base.colors import display_token, visible_token
from .drivers import compute_ngram_log_odds
from .run import Run

KINDS = ("reward_with_spreading_phrases", "length_growth_with_reward", "entropy_collapse",
         "training_inference_mismatch", "dead_groups", "empty_responses", "component_with_spreading_phrases",
         "kl_runaway", "repetition_with_reward", "critic_cannot_fit", "tool_use_collapse", "tool_call_loops",
         "reward_tracks_field")
#: The order findings are listed in: hacks of the reward first (total, one component, repetition, a
#: feature the reward pays for), then the policy running away from the reference, then what wastes
#: or misleads training, then what concerns only some samples or agents.
RANKING = ("reward_with_spreading_phrases", "component_with_spreading_phrases", "repetition_with_reward",
           "reward_tracks_field", "kl_runaway", "length_growth_with_reward", "critic_cannot_fit",
           "entropy_collapse", "training_inference_mismatch", "tool_use_collapse", "tool_call_loops",
           "dead_groups", "empty_responses")
SEVERITY = {**dict.fromkeys(RANKING[:5], "high"), **dict.fromkeys(RANKING[5:9], "medium"),
            **dict.fromkeys(RANKING[9:], "low")}
#: The kinds that carry an ``onset_step`` (definition 14).
ONSET_KINDS = ("reward_with_spreading_phrases", "length_growth_with_reward", "component_with_spreading_phrases",
               "kl_runaway", "repetition_with_reward", "reward_tracks_field")
WINDOW_FRACTION = 4  # each window holds ceil(S / 4) of the S steps with samples
MAX_N = 3  # phrases are 1- to 3-grams
PHRASE_MIN_SHARE = Fraction(1, 2)  # of the late responses
PHRASE_SPREAD = 3  # share_L >= this * max(share_E, 1/|E|)
MAX_PHRASES = 5
SAMPLES_PER_PHRASE = 3
LENGTH_GROWTH = 1.5  # mean length L / mean length E
ENTROPY_FRACTION = 0.5  # mean entropy L <= this * mean entropy E
MISMATCH_KL_MAX = 1e-3  # a step's mean mismatch KL above this is flagged
MISMATCH_SAMPLES = 3
GROUPED_SHARE = Fraction(1, 2)  # of a step's samples in groups of >= 2: GRPO-shaped
DEAD_GROUP_SHARE = Fraction(1, 2)  # of those groups with all rewards equal: a dead step
DEAD_STEP_SHARE = Fraction(1, 10)  # of the GRPO-shaped steps dead: raised
EMPTY_SHARE = Fraction(1, 20)  # of a step's samples with no words
EMPTY_SAMPLES = 3
# a hack of one component is often spread over several keywords, none of which reaches half of the
# late responses (a real TRL keyword hack: each of its four keywords stays below it)
COMPONENT_PHRASE_MIN_SHARE = Fraction(1, 10)  # of the late responses
COMPONENT_MARKERS = ("reward", "score")  # a numeric field whose name has one of these is a reward component
KL_RUNAWAY = 0.5  # k3 per token over L (0.5 at a log-ratio of about 0.86 nat): far from the reference
KL_TOKENS = 5  # tokens named in a KL finding's evidence
KL_SAMPLES = 3
REPETITION_MIN = 0.1  # mean 4-gram repetition over L: a tenth of a response's 4-grams repeat
REPETITION_GROWTH = 2  # ... and twice what it was over E (natural text repeats a little)
REPETITION_SAMPLES = 3
# of the steps with an explained variance: below 0 the values predict returns worse than their mean does,
# which a learning critic does now and then, but not on a quarter of the steps
CRITIC_NEGATIVE_SHARE = Fraction(1, 4)
TOOL_USE_FRACTION = 0.5  # mean tool calls L <= this * mean tool calls E: the agent stopped using its tools
TOOL_USE_MIN = 0.5  # mean tool calls per sample over E: below it the agent hardly used tools to begin with
LOOP_REPEATS = 3  # the same call (name and arguments) this often in one sample: it is not reading the results
LOOP_STEP_SHARE = Fraction(1, 10)  # of a step's samples looping
LOOP_SAMPLES = 3
TRACK_CORRELATION = 0.8  # Pearson correlation of a field with the reward: the reward follows the field closely
TRACK_GROWTH = 1.5  # mean of the field over L / over E: and the policy is producing more of it
ONSET_STEPS = 5  # steps averaged from each candidate onset: one noisy step does not make an onset

#: Every character ``str.split()`` splits on (Python's whitespace), as an RE2 class: a text that is
#: only these has no words. (``derive`` splits the words with pyarrow, on the same characters.)
_BLANK = r"^[\x{9}-\x{d}\x{1c}-\x{1f}\x{85}\p{Z}]*$"


@dataclass(frozen=True)
class Finding:
    """One finding. ``to_json(full=True)`` is the contract of ``findings --json``; ``message`` is one line for
    people; ``labels`` are the ``samples`` as rows of ``Run.samples``; ``focus_step`` the step the
    evidence centres on; ``phrases`` the phrases' tokens (findings 1 and 7); ``onset_step`` when it
    began (definition 14, kinds of ``ONSET_KINDS``); ``amount`` how much, in words; ``size`` orders the
    findings of one kind (larger first)."""

    kind: str
    first_step: int
    last_step: int
    evidence: dict
    samples: tuple[str, ...]
    message: str = ""
    labels: tuple = ()
    focus_step: int | None = None
    phrases: tuple[tuple[str, ...], ...] = ()
    onset_step: int | None = None
    amount: str = ""  # made of numbers and our words only: no text from the logs (the page shows it as Markdown)
    size: float = 0.0

    @property
    def severity(self) -> str:
        """How much it should worry a practitioner: "high", "medium" or "low" (``SEVERITY``)."""
        return SEVERITY[self.kind]

    @property
    def detail(self) -> str:
        """How much and since when, in words: the second half of the finding's line."""
        since = f"since step {self.onset_step}" if self.onset_step is not None else ""
        return "; ".join(part for part in (self.amount, since) if part)

    def to_json(self, full: bool = False) -> dict:
        """The finding's five fields of issue 16; with ``full`` (what ``findings --json`` prints) also
        its ``severity`` and, for the kinds of ``ONSET_KINDS``, its ``onset_step``."""
        out = {"kind": self.kind, "first_step": self.first_step, "last_step": self.last_step,
               "evidence": self.evidence, "samples": list(self.samples)}
        if full:
            out["severity"] = self.severity
            if self.kind in ONSET_KINDS:
                out["onset_step"] = self.onset_step
        return out


@dataclass(frozen=True)
class Check:
    """Whether one check could run on this run, and why not (``note``)."""

    kind: str
    ran: bool
    note: str = ""


@dataclass(frozen=True)
class Findings:
    """What ``compute_findings`` found, ranked (``RANKING``, then size), and which checks ran."""

    findings: tuple[Finding, ...]
    checks: tuple[Check, ...]
    words_from_tokens: bool = False  # some words came from token lists (phrases join without spaces)

    def to_json(self, full: bool = False) -> list[dict]:
        return [f.to_json(full) for f in self.findings]


# --- windows and words ---------------------------------------------------------------------------


def compute_windows(run: Run) -> tuple[list[int], list[int]]:
    """(the early window's steps, the late window's), each the first / last ceil(S/4) of the S
    steps with samples, ascending; both empty for a run without samples."""
    steps = sorted(int(s) for s in pd.unique(run.samples[F.STEP]))
    k = math.ceil(len(steps) / WINDOW_FRACTION)
    return steps[:k], steps[len(steps) - k:]


def compute_words(run: Run, frame: pd.DataFrame) -> tuple[list[list[str]], list[bool]]:
    """(each response's words, whether they came from its tokens) for ``frame`` (rows of
    ``run.samples``, in their order), from the run's segments (``Run.words``): no file is read. A
    sample with neither tokens nor a response has no words."""
    words = [w if w is not None else [] for w in run.words(frame)]
    return words, frame["has_tokens"].to_numpy(dtype=bool).tolist()


def compute_empty(run: Run) -> np.ndarray:
    """Whether each sample of ``run.samples`` has no words; bool, shape (samples,). Counts the words
    in the segments (``Run.word_counts``): no text or file is read."""
    return run.word_counts() <= 0


@dataclass(frozen=True)
class _WordIds:
    """Responses' words as ids (``Run.word_ids``): ``ids`` int32, shape (words,), the responses'
    words one response after another; ``lengths`` int64, shape (responses,), each one's word count
    (-1: no words); ``vocabulary`` each id's word."""

    ids: np.ndarray
    lengths: np.ndarray
    vocabulary: list[str]

    @classmethod
    def from_lists(cls, responses: list[list[str]]) -> _WordIds:
        flat = list(chain.from_iterable(responses))
        vocabulary = {word: i for i, word in enumerate(dict.fromkeys(flat))}
        return cls(np.fromiter(map(vocabulary.__getitem__, flat), np.int32, len(flat)),
                   np.fromiter(map(len, responses), np.int64, len(responses)), list(vocabulary))


GRAM_BLOCK = 1 << 18  # occurrences sorted at a time (whole responses): bounds the sorts' memory


class _Grams:
    """The 1- to ``MAX_N``-grams of responses (``_WordIds``) that could spread: those in at least
    ``need`` of the responses from ``late_from`` on (the *candidates*). Every shorter gram inside a
    candidate is one too, so only candidates are extended by a word. For each n, ``counts[n]`` is
    (the late responses containing each gram, the earlier ones), by gram id; ``pairs[n]`` is (gram
    id, response) of every candidate in each response containing it, once, sorted by gram then
    response; ``tokens(n, gram)`` gives a candidate's words.

    Occurrences are counted in blocks of whole responses (``GRAM_BLOCK``), so besides the words
    only each n's occurrences (position, int64 key) and the candidates' pairs are held at once."""

    def __init__(self, words: _WordIds, late_from: int, need: int):
        ids, vocabulary = words.ids, words.vocabulary
        sizes = np.maximum(words.lengths, 0)
        owner = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
        self._ids, self._vocabulary = ids, vocabulary
        count, width = max(len(sizes), 1), max(len(vocabulary), 1)
        self.pairs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.counts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._first: dict[int, np.ndarray] = {}  # n -> where one occurrence of each candidate starts in ``ids``
        index = np.int32 if len(ids) < 2 ** 31 else np.int64  # positions, gram ids
        # each occurrence of an n-gram: where it starts (ascending) and its key (its candidate
        # prefix's rank * width + its last word; for n = 1 the word)
        starts, key, bound = np.arange(len(ids), dtype=index), ids, width  # key < bound
        for n in range(1, MAX_N + 1):
            who = owner[starts]
            blocks = _blocks(who)
            # the grams' keys and how many late / earlier responses contain them, block by block
            parts = [_count_grams(key[lo:hi], who[lo:hi], bound, count, late_from) for lo, hi in blocks]
            grams, where = np.unique(np.concatenate([p[0] for p in parts] or [np.zeros(0, np.int64)]),
                                     return_inverse=True)
            late_counts, early_counts = (
                np.bincount(where, np.concatenate([p[i] for p in parts] or [np.zeros(0)]), len(grams))
                .astype(np.int64) for i in (1, 2))
            self.counts[n] = late_counts, early_counts
            del parts, where
            candidate = late_counts >= need
            chosen, keys = np.flatnonzero(candidate).astype(index), grams[candidate]
            self._first[n] = np.full(len(grams), -1, dtype=np.int64)
            # the candidates' occurrences (few keys: a binary search each): their pairs, and extended by a word
            pairs, longer = [], []
            for lo, hi in blocks:
                rank = np.searchsorted(keys, key[lo:hi])
                found = rank < len(keys)
                found[found] = keys[rank[found]] == key[lo:hi][found]
                at, rank = starts[lo:hi][found], rank[found]
                gram_of, owner_of = _distinct_pairs(rank, who[lo:hi][found], max(len(keys), 1), count)
                pairs.append((chosen[gram_of], owner_of))
                self._first[n][chosen[rank]] = at
                ok = at + n < len(ids)
                at, rank = at[ok], rank[ok]
                ok = owner[at + n] == owner[at]
                at = at[ok]
                longer.append((at, rank[ok] * width + ids[at + n]))
            gram_of = np.concatenate([p[0] for p in pairs] or [np.zeros(0, index)])
            owner_of = np.concatenate([p[1] for p in pairs] or [np.zeros(0, np.int32)])
            order = np.argsort(gram_of, kind="stable")  # blocks hold ascending responses: by gram, then response
            self.pairs[n] = gram_of[order], owner_of[order]
            del pairs, gram_of, owner_of, order, who, starts, key
            starts = np.concatenate([p[0] for p in longer] or [np.zeros(0, index)])
            key = np.concatenate([p[1] for p in longer] or [np.zeros(0, np.int64)])
            bound = len(keys) * width
            del longer

    def tokens(self, n: int, gram: int) -> tuple[str, ...]:
        at = int(self._first[n][gram])
        return tuple(self._vocabulary[i] for i in self._ids[at:at + n].tolist())


def _blocks(owner: np.ndarray) -> list[tuple[int, int]]:
    """``owner`` (ascending) cut into (start, end) ranges of about ``GRAM_BLOCK``, at changes of owner."""
    cuts = np.arange(GRAM_BLOCK, len(owner), GRAM_BLOCK)
    cuts = np.unique(np.r_[0, np.searchsorted(owner, owner[cuts]), len(owner)])
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))


def _count_grams(key, owner, bound, count, late_from) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct ``key`` values, ascending; how many distinct owners >= ``late_from`` each has;
    how many owners below it), for one block of occurrences."""
    gram_key, owner_of = _distinct_pairs(key, owner, bound, count)
    new = np.ones(len(gram_key), bool)
    np.not_equal(gram_key[1:], gram_key[:-1], out=new[1:])
    gram_of = np.cumsum(new) - 1
    late = owner_of >= late_from
    size = int(new.sum())
    return gram_key[new], np.bincount(gram_of[late], minlength=size), np.bincount(gram_of[~late], minlength=size)


def _distinct_pairs(key: np.ndarray, owner: np.ndarray, bound: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (``key``, ``owner``) pairs, sorted by key then owner (int64, int32), for
    ``key`` < ``bound`` and ``owner`` < ``count``: one sort of one int64 per pair when it fits."""
    if bound * count < 2 ** 63:
        pair = key.astype(np.int64)
        pair *= count
        pair += owner
        pair.sort()
        new = np.ones(len(pair), bool)
        np.not_equal(pair[1:], pair[:-1], out=new[1:])
        key, owner = np.divmod(pair[new], count)
        return key, owner.astype(np.int32)
    order = np.lexsort((owner, key))
    key, owner = key[order].astype(np.int64), owner[order]
    new = np.r_[True, (key[1:] != key[:-1]) | (owner[1:] != owner[:-1])] if len(key) else np.zeros(0, bool)
    return key[new], owner[new]


# --- the checks ----------------------------------------------------------------------------------


def _mean(values) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else math.nan


def _std(values) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.std()) if len(values) else math.nan


def _json_number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _ids(run: Run, frame: pd.DataFrame) -> tuple[str, ...]:
    return tuple(f"{run.files[int(f)]}:{int(line)}" for f, line in zip(frame[F.FILE], frame[F.LINE]))


def _log_order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values([F.STEP, F.FILE, F.LINE], kind="stable")


def _reward_rose(early: pd.DataFrame, late: pd.DataFrame) -> tuple[bool, float, float]:
    r_early, r_late = _mean(early[F.REWARD]), _mean(late[F.REWARD])
    rise = r_late - r_early
    return bool(rise > 0 and rise >= _std(early[F.REWARD])), r_early, r_late


def compute_phrases(early_words: list[list[str]], late_words: list[list[str]], late_rewards
                    ) -> list[tuple[tuple[str, ...], Fraction, Fraction]]:
    """The spreading phrases of definition 1, best first, at most ``MAX_PHRASES``: (tokens,
    share_E, share_L) as exact fractions."""
    words = _WordIds.from_lists(early_words + late_words)
    return [phrase[:3] for phrase in _find_phrases(words, len(early_words), late_rewards)]


def _find_phrases(words: _WordIds, n_early: int, late_rewards, min_share: Fraction = PHRASE_MIN_SHARE
                  ) -> list[tuple]:
    """``compute_phrases`` of ``words``, responses 0.. early and ``n_early``.. late, each phrase with
    the late responses containing it (indexes, ascending); ``late_rewards`` the values a phrase must pay
    in (the reward, or a component) and ``min_share`` the least share_L."""
    n_late = len(words.lengths) - n_early
    if not n_early or not n_late:
        return []
    need = math.ceil(min_share * n_late)  # share_L >= min_share as a whole count
    grams = _Grams(words, n_early, need)
    spread = Fraction(PHRASE_SPREAD)
    rewards = np.asarray(late_rewards, dtype=float)
    floor = Fraction(1, n_early)
    kept = []
    for n in range(1, MAX_N + 1):
        gram, owner = grams.pairs[n]
        late_counts, early_counts = grams.counts[n]
        # share_L >= PHRASE_SPREAD * max(share_E, 1/|E|), in whole counts (exact)
        spreads = (late_counts * n_early * spread.denominator
                   >= spread.numerator * np.maximum(early_counts, 1) * n_late)
        for g in np.flatnonzero((late_counts >= need) & spreads):
            count = int(late_counts[g])
            share_late, share_early = Fraction(count, n_late), Fraction(int(early_counts[g]), n_early)
            lo, hi = np.searchsorted(gram, [g, g + 1])
            rows = owner[lo:hi][owner[lo:hi] >= n_early] - n_early
            if count < n_late:
                has = np.zeros(n_late, bool)
                has[rows] = True
                if _mean(rewards[has]) <= _mean(rewards[~has]):  # a NaN mean compares False: kept
                    continue
            kept.append(((n, int(g)), share_early, share_late, share_late / max(share_early, floor), rows))
    kept.sort(key=lambda k: (-k[3], -k[2]))
    if len(kept) > MAX_PHRASES:  # the tokens break ties: only those tied with the last one shown need them
        last = (kept[MAX_PHRASES - 1][3], kept[MAX_PHRASES - 1][2])
        kept = [k for k in kept if (k[3], k[2]) >= last]
    kept = [(grams.tokens(*gram), *rest) for gram, *rest in kept]
    kept.sort(key=lambda k: (-k[3], -k[2], list(k[0])))
    return [(gram, early, late, rows) for gram, early, late, _, rows in kept[:MAX_PHRASES]]


def _phrase_text(tokens: tuple[str, ...], joiner: str) -> str:
    return joiner.join(display_token(t) for t in tokens) if joiner == "" else joiner.join(tokens)


def _percent(share) -> str:
    return f"{float(share) * 100:.0f} %"


def _phrase_samples(late: pd.DataFrame, phrases, values: pd.Series) -> list:
    """Per phrase in turn, up to ``SAMPLES_PER_PHRASE`` late samples containing it, highest ``values``
    first (NaN last), then file and line; repeats dropped."""
    chosen = []
    for _, _, _, rows in phrases:
        having = late.iloc[rows]
        having = having.assign(_r=values[having.index].astype(float)).sort_values(
            ["_r", F.FILE, F.LINE], ascending=[False, True, True], na_position="last", kind="stable")
        chosen += list(having.index[:SAMPLES_PER_PHRASE])
    return list(dict.fromkeys(chosen))


def _rise(early: float, late: float, std: float) -> str:
    """A rise in words: its size, and in early stds when there is one."""
    return f"+{late - early:.3g}" + (f" ({(late - early) / std:.3g} early std)" if std > 0 else "")


def _spreading_phrases(run, early, late, rose, r_early, r_late, words, from_tokens):
    phrases = _find_phrases(words, len(early), late[F.REWARD].to_numpy(dtype=float)) if rose else []
    if not phrases:
        return None
    labels = _phrase_samples(late, phrases, run.samples[F.REWARD])
    joiner = "" if from_tokens else " "
    top, early_share, late_share, _ = phrases[0]
    more = f" (and {len(phrases) - 1} more phrase{'s' if len(phrases) > 2 else ''})" if len(phrases) > 1 else ""
    message = (f"reward rose from {r_early:.3g} to {r_late:.3g} while \"{_phrase_text(top, joiner)}\" spread from "
               f"{_percent(early_share)} to {_percent(late_share)} of responses{more} — possible reward hacking")
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    return Finding(
        "reward_with_spreading_phrases", steps[0], steps[-1],
        {"reward_early": _json_number(r_early), "reward_late": _json_number(r_late),
         "phrases": [{"tokens": list(g), "share_early": float(e), "share_late": float(lt)}
                     for g, e, lt, _ in phrases]},
        _ids(run, run.samples.loc[labels]), message, tuple(labels), steps[-1], tuple(p[0] for p in phrases),
        compute_onset(run, run.samples[F.REWARD], r_early, r_late),
        "reward " + _rise(r_early, r_late, _std(early[F.REWARD])))


def _lengths(run: Run) -> tuple[pd.Series, str] | None:
    """Each sample's length as ``response_len_mean`` counts it, and its unit; None without any."""
    samples = run.samples
    tokens = samples["response_len"].astype(float)
    if (tokens >= 0).any():
        return tokens.where(tokens >= 0), "tokens"
    chars = samples["response_chars"].astype(float)
    return (chars, "characters") if chars.notna().any() else None


def _length_growth(run, early, late, rose, r_early, r_late):
    lengths = _lengths(run)
    if not rose or lengths is None:
        return None
    values, unit = lengths
    l_early, l_late = _mean(values[early.index]), _mean(values[late.index])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.float64(l_late) / np.float64(l_early)
    if not ratio >= LENGTH_GROWTH:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    message = (f"responses grew {ratio:.2g}× longer ({l_early:.3g} → {l_late:.3g} {unit}) while reward rose from "
               f"{r_early:.3g} to {r_late:.3g} — the policy may be lengthening answers for reward")
    return Finding("length_growth_with_reward", steps[0], steps[-1],
                   {"length_early": _json_number(l_early), "length_late": _json_number(l_late)}, (), message,
                   focus_step=steps[-1], onset_step=compute_onset(run, values, l_early, l_late),
                   amount=f"{ratio:.3g}× longer", size=float(ratio))


def _entropy_collapse(run, early, late):
    e_early, e_late = _mean(early["entropy_mean"]), _mean(late["entropy_mean"])
    if not e_late <= ENTROPY_FRACTION * e_early:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    message = (f"entropy fell from {e_early:.3g} to {e_late:.3g} per token between the first and last quarter "
               "of the steps — the policy is collapsing onto few tokens (less exploration)")
    return Finding("entropy_collapse", steps[0], steps[-1],
                   {"entropy_early": _json_number(e_early), "entropy_late": _json_number(e_late)}, (), message,
                   focus_step=steps[-1], amount=f"{(1 - e_late / e_early) * 100:.3g} % lower" if e_early else "")


def _mismatch(run):
    if "mismatch_kl_mean" not in run.steps:
        return None
    per_step = run.steps["mismatch_kl_mean"].astype(float)
    flagged = per_step[per_step > MISMATCH_KL_MAX]  # NaN is not above it
    if flagged.empty:
        return None
    top = float(flagged.max())
    focus = int(flagged.index[flagged.to_numpy() == top][0])
    samples = run.samples[(run.samples[F.STEP] == focus) & run.samples["mismatch_kl"].notna()]
    ordered = samples.sort_values(["mismatch_kl", F.FILE, F.LINE], ascending=[False, True, True], kind="stable")
    labels = tuple(ordered.index[:MISMATCH_SAMPLES])
    steps = [int(s) for s in flagged.index]
    message = (f"sampler and trainer disagree: mismatch KL above {MISMATCH_KL_MAX:g} at {len(steps)} "
               f"step{'s' if len(steps) != 1 else ''} (largest {top:.3g} at step {focus}) — check the inference "
               "engine's precision and weight sync, or correct for it (importance sampling)")
    known = int(per_step.notna().sum())
    return Finding("training_inference_mismatch", steps[0], steps[-1], {"steps": steps, "max": top},
                   _ids(run, run.samples.loc[list(labels)]), message, labels, focus,
                   amount=_share_of_steps(len(steps), known, "steps"))


def compute_dead_steps(samples: pd.DataFrame) -> tuple[list[int], list[int]]:
    """(the GRPO-shaped steps, the dead ones) of definition 5, ascending."""
    rewarded = samples["has_reward"].astype(bool) if "has_reward" in samples else True
    have = samples[samples["prompt_key"].notna() & rewarded]  # a sample without a reward is in no group
    sizes = samples.groupby(F.STEP, sort=True).size()
    if have.empty:
        return [], []
    grouped = have.groupby([F.STEP, "prompt_key"], sort=False)[F.REWARD]
    groups = pd.DataFrame({"size": grouped.size(), "distinct": grouped.nunique(dropna=False)})
    groups = groups[groups["size"] >= 2]
    shaped, dead = [], []
    for step, per_step in groups.groupby(level=0, sort=True):
        if Fraction(int(per_step["size"].sum()), int(sizes[step])) < GROUPED_SHARE:
            continue
        shaped.append(int(step))
        if Fraction(int((per_step["distinct"] == 1).sum()), len(per_step)) >= DEAD_GROUP_SHARE:
            dead.append(int(step))
    return shaped, dead


def _dead_groups(run):
    shaped, dead = compute_dead_steps(run.samples)
    if not dead or Fraction(len(dead), len(shaped)) < DEAD_STEP_SHARE:
        return None
    message = (f"{len(dead)} of {len(shaped)} GRPO-shaped steps have at least half of their prompt groups with all "
               "rewards equal — those groups give no learning signal (too easy or too hard)")
    return Finding("dead_groups", dead[0], dead[-1], {"steps": dead}, (), message, focus_step=dead[0],
                   amount=_share_of_steps(len(dead), len(shaped), "GRPO-shaped steps"))


def _empty_responses(run, empty: np.ndarray):
    samples = run.samples
    per_step = pd.DataFrame({"empty": empty, F.STEP: samples[F.STEP].to_numpy()}).groupby(F.STEP, sort=True)["empty"]
    counts, sizes = per_step.sum(), per_step.size()
    steps = [int(s) for s in counts.index if Fraction(int(counts[s]), int(sizes[s])) >= EMPTY_SHARE]
    if not steps:
        return None
    hits = _log_order(samples[empty & samples[F.STEP].isin(steps).to_numpy()])
    labels = tuple(hits.index[:EMPTY_SAMPLES])
    message = (f"{len(steps)} step{'s' if len(steps) != 1 else ''} with at least {_percent(EMPTY_SHARE)} empty "
               f"responses (no words besides pad and EOS), first at step {steps[0]}")
    return Finding("empty_responses", steps[0], steps[-1], {"steps": steps}, _ids(run, samples.loc[list(labels)]),
                   message, labels, steps[0], amount=_share_of_steps(len(steps), len(sizes), "steps"))


def _share_of_steps(count: int, total: int, what: str) -> str:
    return f"{count} of {total} {what} ({count / total * 100:.3g} %)" if total else ""


# --- issue 33's checks ---------------------------------------------------------------------------


def compute_onset(run: Run, values: pd.Series, early_mean: float, late_mean: float) -> int | None:
    """Definition 14: the first step s (of the steps with samples) whose ``ONSET_STEPS`` step means of
    ``values`` (one per row of ``run.samples``) from s on average above (``early_mean`` +
    ``late_mean``) / 2; step means and their average ignore NaN. None when no step is."""
    middle = (early_mean + late_mean) / 2
    if not math.isfinite(middle):
        return None
    means = values.astype(float).groupby(run.samples[F.STEP], sort=True).mean()
    steps, series = means.index.tolist(), means.to_numpy(dtype=float)
    for i, step in enumerate(steps):
        if _mean(series[i:i + ONSET_STEPS]) > middle:  # a NaN average is not above it
            return int(step)
    return None


def compute_reward_components(samples: pd.DataFrame, rows: pd.Index) -> list[tuple[str, str]]:
    """The reward components of definition 7 as (name, column of ``samples``): the numeric fields other
    than ``reward`` and ``ref_reward`` whose name contains one of ``COMPONENT_MARKERS`` (any case),
    with at least two distinct values over ``rows`` (E and L)."""
    return [(name, column) for name, column in _numeric_fields(samples)
            if name != "ref_reward" and any(m in name.lower() for m in COMPONENT_MARKERS)
            and samples.loc[rows, column].dropna().nunique() >= 2]


def _numeric_fields(samples: pd.DataFrame) -> list[tuple[str, str]]:
    """The samples' numeric fields besides ``reward`` with any value, as (name, column): the canonical
    scalars, then the extras, in column order."""
    named = [(name, name) for name in F.SCALAR_FIELDS if name in samples]
    named += [(F.extra_name(c), c) for c in F.extra_columns(samples.columns)]
    return [(name, column) for name, column in named if samples[column].notna().any()]


def _component_phrases(run, early, late, words, from_tokens) -> list[Finding]:
    out = []
    both = early.index.append(late.index)
    for name, column in compute_reward_components(run.samples, both):
        values = run.samples[column].astype(float)
        c_early, c_late, c_std = _mean(values[early.index]), _mean(values[late.index]), _std(values[early.index])
        rise = c_late - c_early
        if not (rise > 0 and rise >= c_std):
            continue
        phrases = _find_phrases(words(), len(early), values[late.index].to_numpy(), COMPONENT_PHRASE_MIN_SHARE)
        if not phrases:
            continue
        labels = _phrase_samples(late, phrases, values)
        joiner = "" if from_tokens else " "
        top, early_share, late_share, _ = phrases[0]
        more = f" (and {len(phrases) - 1} more phrase{'s' if len(phrases) > 2 else ''})" if len(phrases) > 1 else ""
        message = (f"reward component {name} rose from {c_early:.3g} to {c_late:.3g} while "
                   f"\"{_phrase_text(top, joiner)}\" spread from {_percent(early_share)} to {_percent(late_share)} "
                   f"of responses{more} — possible hacking of that component")
        steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
        out.append(Finding(
            "component_with_spreading_phrases", steps[0], steps[-1],
            {"component": name, "early": _json_number(c_early), "late": _json_number(c_late),
             "phrases": [{"tokens": list(g), "share_early": float(e), "share_late": float(lt)}
                         for g, e, lt, _ in phrases]},
            _ids(run, run.samples.loc[labels]), message, tuple(labels), steps[-1], tuple(p[0] for p in phrases),
            compute_onset(run, values, c_early, c_late), "component " + _rise(c_early, c_late, c_std),
            rise / c_std if c_std > 0 else math.inf))
    return out


def _top_samples(run: Run, frame: pd.DataFrame, column: str, count: int) -> tuple:
    """The ``count`` rows of ``frame`` with the highest ``column`` (NaN left out), then file and line."""
    have = frame[frame[column].notna()]
    return tuple(have.sort_values([column, F.FILE, F.LINE], ascending=[False, True, True], kind="stable")
                 .index[:count])


def compute_kl_tokens(run: Run, frame: pd.DataFrame) -> list[tuple[str, float]]:
    """The ``KL_TOKENS`` token strings carrying most of the summed per-token k3 of ``frame``'s samples
    (their counted positions, NaN left out), with their share of that sum, largest first, then by
    token. Reads those samples' token lists again from their source (a sample that can't be read is
    left out)."""
    from ..base.access import RootError
    from ..derive.metrics import kl_per_token
    from ..readers import SourceChanged

    totals: dict[str, float] = {}
    for label in frame.index[frame["kl_sum"].notna().to_numpy()]:
        try:
            tokens = run.sample_tokens(label)
        except (OSError, ValueError, SourceChanged, RootError):
            continue
        kl = kl_per_token(tokens.logprobs, tokens.ref_logprobs, "k3")
        keep = ~tokens.is_pad & ~np.isnan(kl)
        for token, value in zip(np.asarray(tokens.tokens, dtype=object)[keep].tolist(), kl[keep].tolist()):
            totals[token] = totals.get(token, 0.0) + value
    whole = math.fsum(totals.values())
    if not whole > 0:
        return []
    best = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:KL_TOKENS]
    return [(token, value / whole) for token, value in best]


def _kl_runaway(run, early, late):
    k_early, k_late = _mean(early["kl_mean"]), _mean(late["kl_mean"])
    if not k_late >= KL_RUNAWAY:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    tokens = compute_kl_tokens(run, late)
    labels = _top_samples(run, late, "kl_mean", KL_SAMPLES)
    message = (f"KL to the reference reached {k_late:.3g} per token over the last quarter of the steps (from "
               f"{k_early:.3g}) — the policy is running away from its reference (raise the KL penalty or check it)")
    return Finding("kl_runaway", steps[0], steps[-1],
                   {"kl_early": _json_number(k_early), "kl_late": _json_number(k_late),
                    "tokens": [{"token": t, "share": share} for t, share in tokens]},
                   _ids(run, run.samples.loc[list(labels)]), message, labels, steps[-1],
                   onset_step=compute_onset(run, run.samples["kl_mean"], k_early, k_late),
                   amount=f"KL {k_late:.3g} per token"
                   + (f", {k_late / k_early:.3g}× the early" if k_early > 0 else ""), size=k_late)


def _repetition(run, early, late, rose, r_early, r_late):
    p_early, p_late = _mean(early["repeat_4gram"]), _mean(late["repeat_4gram"])
    if not (rose and p_late >= REPETITION_MIN and p_late >= REPETITION_GROWTH * p_early):
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    labels = _top_samples(run, late, "repeat_4gram", REPETITION_SAMPLES)
    message = (f"4-gram repetition grew from {p_early:.3g} to {p_late:.3g} (share of a response's 4-grams that "
               f"repeat) while reward rose from {r_early:.3g} to {r_late:.3g} — the policy may be repeating itself "
               "for reward")
    return Finding("repetition_with_reward", steps[0], steps[-1],
                   {"repetition_early": _json_number(p_early), "repetition_late": _json_number(p_late)},
                   _ids(run, run.samples.loc[list(labels)]), message, labels, steps[-1],
                   onset_step=compute_onset(run, run.samples["repeat_4gram"], p_early, p_late),
                   amount=f"repetition {p_late / p_early:.3g}× the early" if p_early > 0 else "", size=p_late)


def _critic(run):
    if "explained_variance" not in run.steps:
        return None
    per_step = run.steps["explained_variance"].astype(float).dropna()
    below = per_step[per_step < 0]
    if below.empty or Fraction(len(below), len(per_step)) < CRITIC_NEGATIVE_SHARE:
        return None
    steps = [int(s) for s in below.index]
    low = float(below.min())
    focus = int(below.index[below.to_numpy() == low][0])
    message = (f"the critic explains less than nothing at {len(steps)} of {len(per_step)} steps (explained "
               f"variance below 0, lowest {low:.3g} at step {focus}) — its values predict returns worse than "
               "their mean; check the value head's learning rate and warm-up")
    return Finding("critic_cannot_fit", steps[0], steps[-1], {"steps": steps, "min": low}, (), message,
                   focus_step=focus, amount=_share_of_steps(len(steps), len(per_step), "steps"),
                   size=len(steps) / len(per_step))


def _agent_rows(samples: pd.DataFrame) -> pd.Series:
    return samples["has_messages"].astype(bool) if "has_messages" in samples else pd.Series(False, samples.index)


def _tool_use_collapse(run, early, late):
    column = F.extra_column(F.NUM_TOOL_CALLS)
    if column not in run.samples:
        return None
    agents = _agent_rows(run.samples)
    c_early = _mean(early.loc[agents[early.index].to_numpy(), column])
    c_late = _mean(late.loc[agents[late.index].to_numpy(), column])
    if not (c_early >= TOOL_USE_MIN and c_late <= TOOL_USE_FRACTION * c_early):
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    message = (f"tool calls per sample fell from {c_early:.3g} to {c_late:.3g} between the first and last quarter "
               "of the steps — the agent stopped using its tools")
    return Finding("tool_use_collapse", steps[0], steps[-1],
                   {"calls_early": _json_number(c_early), "calls_late": _json_number(c_late)}, (), message,
                   focus_step=steps[-1], amount=f"{(1 - c_late / c_early) * 100:.3g} % fewer calls",
                   size=1 - c_late / c_early)


def compute_loops(run: Run) -> np.ndarray:
    """Whether each sample of ``run.samples`` loops (definition 12); bool, shape (samples,)."""
    samples = run.samples
    loops = np.zeros(len(samples), bool)
    agents = np.flatnonzero(_agent_rows(samples).to_numpy())
    if not len(agents):
        return loops
    calls = run.tool_call_lists(samples.iloc[agents])
    for place, made in zip(agents.tolist(), calls):
        if len(made) >= LOOP_REPEATS:
            loops[place] = max(Counter(made).values()) >= LOOP_REPEATS
    return loops


def _tool_call_loops(run):
    samples = run.samples
    loops = compute_loops(run)
    if not loops.any():
        return None
    per_step = pd.DataFrame({"loops": loops, F.STEP: samples[F.STEP].to_numpy()}).groupby(F.STEP, sort=True)["loops"]
    counts, sizes = per_step.sum(), per_step.size()
    steps = [int(s) for s in counts.index if Fraction(int(counts[s]), int(sizes[s])) >= LOOP_STEP_SHARE]
    if not steps:
        return None
    hits = _log_order(samples[loops & samples[F.STEP].isin(steps).to_numpy()])
    labels = tuple(hits.index[:LOOP_SAMPLES])
    message = (f"{len(steps)} step{'s' if len(steps) != 1 else ''} where at least {_percent(LOOP_STEP_SHARE)} of the "
               f"samples make one tool call (same name and arguments) {LOOP_REPEATS} times or more, first at step "
               f"{steps[0]} — the agent is looping instead of reading the results")
    return Finding("tool_call_loops", steps[0], steps[-1], {"steps": steps}, _ids(run, samples.loc[list(labels)]),
                   message, labels, steps[0], amount=_share_of_steps(len(steps), len(sizes), "steps"),
                   size=len(steps) / len(sizes))


def compute_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of ``x`` and ``y`` over the places where both are finite; NaN with fewer than
    2 such places or a constant side."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 2:
        return math.nan
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt(float((dx * dx).sum()) * float((dy * dy).sum()))
    return float((dx * dy).sum()) / denominator if denominator > 0 else math.nan


def _tracked_fields(run, early, late) -> list[Finding]:
    samples = run.samples
    components = {name for name, _ in compute_reward_components(samples, early.index.append(late.index))}
    reward = samples[F.REWARD].to_numpy(dtype=float)
    out = []
    for name, column in _numeric_fields(samples):
        if name in components:
            continue
        values = samples[column].astype(float)
        f_early, f_late = _mean(values[early.index]), _mean(values[late.index])
        if not (f_early > 0 and f_late >= TRACK_GROWTH * f_early):
            continue
        correlation = compute_correlation(values.to_numpy(), reward)
        if not correlation >= TRACK_CORRELATION:
            continue
        steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
        message = (f"reward follows {name} (correlation {correlation:.3g}), which grew from {f_early:.3g} to "
                   f"{f_late:.3g} — the reward may be paying for that feature rather than the task")
        out.append(Finding("reward_tracks_field", steps[0], steps[-1],
                           {"field": name, "correlation": correlation, "early": f_early, "late": f_late}, (),
                           message, focus_step=steps[-1], onset_step=compute_onset(run, values, f_early, f_late),
                           amount=f"correlation {correlation:.3g}; {f_late / f_early:.3g}× the early mean",
                           size=correlation))
    return out


def _checks(run: Run, windows_ok: bool) -> tuple[Check, ...]:
    samples = run.samples
    responses = bool(samples["response_chars"].notna().any() or (samples["response_len"] >= 0).any())
    few = "" if windows_ok else "needs at least 2 steps with samples"
    agents = bool(_agent_rows(samples).any())
    reasons = {
        "reward_with_spreading_phrases": few or ("" if responses else "no responses logged"),
        "length_growth_with_reward": few or ("" if _lengths(run) is not None else "no response lengths logged"),
        "entropy_collapse": few or ("" if samples["entropy_mean"].notna().any() else "no entropy logged"),
        "training_inference_mismatch": "" if samples["mismatch_kl"].notna().any()
        else "no sampler log-probs beside the trainer's (rollout_logprobs and logprobs)",
        "dead_groups": "" if samples["prompt_key"].notna().any() else "no prompts logged",
        "empty_responses": "" if responses else "no responses logged",
        "component_with_spreading_phrases": few or ("" if responses else "no responses logged") or (
            "" if any(n != "ref_reward" and any(m in n.lower() for m in COMPONENT_MARKERS)
                      for n, _ in _numeric_fields(samples)) else "no reward components logged"),
        "kl_runaway": "" if samples["kl_mean"].notna().any() else "no log-probs with reference log-probs",
        "repetition_with_reward": few or ("" if responses else "no responses logged"),
        "critic_cannot_fit": "" if "explained_variance" in run.steps and run.steps["explained_variance"].notna().any()
        else "no values with token rewards logged",
        "tool_use_collapse": few or ("" if agents else "no turns logged"),
        "tool_call_loops": "" if agents else "no turns logged",
        "reward_tracks_field": few or ("" if _numeric_fields(samples) else "no other numeric fields logged"),
    }
    return tuple(Check(kind, not reasons[kind], reasons[kind]) for kind in RANKING)


FINDINGS_FILE = "findings.json"  # in the run's cache folder: the findings of its current snapshot
FINDINGS_VERSION = 2  # bump when a definition changes: kept findings of an older one are not used


def get_findings(run: Run) -> Findings:
    """``compute_findings`` of ``run``, kept in its cache folder for the snapshot it was computed on
    (the manifest's version), so re-opening an unchanged run does not check it again."""
    if run.cache is None:
        return compute_findings(run)
    folder, stamp = run.cache
    path = folder / FINDINGS_FILE
    try:
        kept = json.loads(path.read_text())
        if kept["version"] == FINDINGS_VERSION and tuple(kept["stamp"]) == tuple(stamp) \
                and kept["samples"] == len(run.samples):
            return _findings_from_json(kept["findings"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = compute_findings(run)
    try:
        tmp = path.with_name(f".tmp-{os.getpid()}-{FINDINGS_FILE}")
        tmp.write_text(json.dumps({"version": FINDINGS_VERSION, "stamp": list(stamp), "samples": len(run.samples),
                                   "findings": _findings_to_json(found)}))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):  # a cache that can't be written only means checking again next time
        pass
    return found


def _findings_to_json(found: Findings) -> dict:
    return {"findings": [{"kind": f.kind, "first_step": f.first_step, "last_step": f.last_step,
                          "evidence": f.evidence, "samples": list(f.samples), "message": f.message,
                          "labels": [int(label) for label in f.labels], "focus_step": f.focus_step,
                          "phrases": [list(p) for p in f.phrases], "onset_step": f.onset_step,
                          "amount": f.amount} for f in found.findings],
            "checks": [[c.kind, c.ran, c.note] for c in found.checks],
            "words_from_tokens": found.words_from_tokens}


def _findings_from_json(raw: dict) -> Findings:
    findings = tuple(Finding(f["kind"], f["first_step"], f["last_step"], f["evidence"], tuple(f["samples"]),
                             f["message"], tuple(f["labels"]), f["focus_step"], tuple(map(tuple, f["phrases"])),
                             f["onset_step"], f["amount"])
                     for f in raw["findings"])
    return Findings(findings, tuple(Check(kind, ran, note) for kind, ran, note in raw["checks"]),
                    raw["words_from_tokens"])


def compute_findings(run: Run) -> Findings:
    """Every finding of the thirteen checks on ``run``, ranked (``rank_findings``; see the module's
    definitions). Reads the words of the early and late windows' samples (when the reward or a reward
    component rose) from the run's segments; only a raised ``kl_runaway`` reads log lines again (the
    late window's token lists, for the tokens carrying the KL)."""
    samples = run.samples
    if samples.empty:
        return Findings((), tuple(Check(kind, False, "no samples") for kind in KINDS))
    early_steps, late_steps = compute_windows(run)
    early = _log_order(samples[samples[F.STEP].isin(early_steps)])
    late = _log_order(samples[samples[F.STEP].isin(late_steps)])
    rose, r_early, r_late = _reward_rose(early, late)
    both = pd.concat([early, late])  # responses 0.. early, len(early).. late
    from_tokens = bool(both["has_tokens"].to_numpy(dtype=bool).any())
    kept: list[_WordIds] = []

    def words() -> _WordIds:  # read once, only when a check needs them
        if not kept:
            kept.append(_WordIds(*run.word_ids(both)))
        return kept[0]

    found = [
        _spreading_phrases(run, early, late, rose, r_early, r_late, words() if rose else None, from_tokens),
        _length_growth(run, early, late, rose, r_early, r_late),
        _entropy_collapse(run, early, late),
        _mismatch(run),
        _dead_groups(run),
        _empty_responses(run, compute_empty(run)),
        *_component_phrases(run, early, late, words, from_tokens),
        _kl_runaway(run, early, late),
        _repetition(run, early, late, rose, r_early, r_late),
        _critic(run),
        _tool_use_collapse(run, early, late),
        _tool_call_loops(run),
        *_tracked_fields(run, early, late),
    ]
    return Findings(rank_findings([f for f in found if f is not None]),
                    _checks(run, len(early_steps) + len(late_steps) > 0 and early_steps != late_steps),
                    from_tokens and bool(kept))


def rank_findings(findings: list[Finding]) -> tuple[Finding, ...]:
    """``findings`` by ``RANKING``, then, within a kind, larger ``size`` first (stable)."""
    return tuple(sorted(findings, key=lambda f: (RANKING.index(f.kind), -f.size)))


# --- evidence and the n-gram finder's windows ----------------------------------------------------


@dataclass(frozen=True)
class EvidenceSample:
    """One sample of a finding's evidence: where it is, its step and reward, and its response as
    HTML (escaped) with the finding's phrases marked."""

    label: object
    sample_id: str
    step: int
    reward: float
    html: str = field(repr=False, default="")


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
                  "min": "lowest", "component": "reward component", "field": "field", "correlation": "correlation"}


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
    late KL %). Names and tokens from the logs are kept as they are (shown as text)."""
    rows = []
    for key, value in finding.evidence.items():
        if key in ("phrases", "tokens"):
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
    return tables


def compute_evidence(run: Run, finding: Finding) -> list[EvidenceSample]:
    """The samples of ``finding`` in its order, each with its response marked (``build_marked_html``)."""
    labels = [label for label in finding.labels if label in run.samples.index]
    if not labels:
        return []
    frame = run.samples.loc[labels]
    words, from_tokens = compute_words(run, frame)
    out = []
    for label, ws, tok in zip(labels, words, from_tokens):
        row = run.samples.loc[label]
        out.append(EvidenceSample(label, f"{run.files[int(row[F.FILE])]}:{int(row[F.LINE])}", int(row[F.STEP]),
                                  float(row[F.REWARD]), build_marked_html(ws, finding.phrases, "" if tok else " ")))
    return out


def compute_window_ngrams(run: Run) -> pd.DataFrame:
    """The n-gram finder across time: n-grams over-represented in the late window's responses vs the
    early window's (``analysis.compute_ngram_log_odds``, both windows as the prior)."""
    early_steps, late_steps = compute_windows(run)
    samples = run.samples
    early_words, _ = compute_words(run, _log_order(samples[samples[F.STEP].isin(early_steps)]))
    late_words, _ = compute_words(run, _log_order(samples[samples[F.STEP].isin(late_steps)]))
    return compute_ngram_log_odds(late_words, early_words, late_words + early_words)
