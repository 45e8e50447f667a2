"""The n-gram finder of findings 1 and 7: the 1-3-grams whose share of the late responses rose, counted
over word ids a block of responses at a time (no Python per n-gram occurrence)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain

import numpy as np
import pandas as pd

from ...base import fields as F
from ...base.colors import display_token
from .common import _mean

MAX_N = 3  # phrases are 1- to 3-grams


PHRASE_MIN_SHARE = Fraction(1, 2)  # of the late responses


PHRASE_SPREAD = 3  # share_L >= this * max(share_E, 1/|E|)


MAX_PHRASES = 5


SAMPLES_PER_PHRASE = 3


@dataclass(frozen=True)
class _WordIds:
    """Responses' words as ids (``Run.word_ids``): ``ids`` int32, shape (words,), the responses'
    words one response after another; ``lengths`` int64, shape (responses,), each one's word count
    (-1: no words); ``vocabulary`` each id's word."""

    ids: np.ndarray
    lengths: np.ndarray
    vocabulary: list[str]

    def without(self, keep: int, early: int) -> _WordIds:
        """These words without responses ``keep``..``early`` - 1: the first ``keep`` of the ``early`` early
        responses (those before a finding's onset), then the late ones."""
        if keep >= early:
            return self
        sizes = np.maximum(self.lengths, 0)
        cut_from, cut_to = int(sizes[:keep].sum()), int(sizes[:early].sum())
        return _WordIds(np.concatenate([self.ids[:cut_from], self.ids[cut_to:]]),
                        np.concatenate([self.lengths[:keep], self.lengths[early:]]), self.vocabulary)

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
            # the candidates' occurrences (found by a table look-up each, or a binary search among few keys):
            # their pairs, and extended by a word
            pairs, longer = [], []
            table = _rank_table(keys, bound)
            for lo, hi in blocks:
                if table is not None:
                    rank = table[key[lo:hi]].astype(np.int64)
                    found = rank >= 0
                else:
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
            # the next n's occurrences (read at the top of the loop; unused after the last n)
            starts = np.concatenate([p[0] for p in longer] or [np.zeros(0, index)])  # noqa: F841
            key = np.concatenate([p[1] for p in longer] or [np.zeros(0, np.int64)])  # noqa: F841
            bound = len(keys) * width
            del longer

    def tokens(self, n: int, gram: int) -> tuple[str, ...]:
        at = int(self._first[n][gram])
        return tuple(self._vocabulary[i] for i in self._ids[at:at + n].tolist())


RANK_TABLE_MAX = 1 << 22  # keys below this bound are looked up in a table (4 bytes a key), not searched for


def _rank_table(keys: np.ndarray, bound: int) -> np.ndarray | None:
    """For ``keys`` (distinct, ascending, each < ``bound``): a table giving each key below ``bound`` its
    rank in ``keys``, -1 for one not there (a look-up per occurrence instead of a binary search); None
    when ``bound`` is over ``RANK_TABLE_MAX``."""
    if bound > RANK_TABLE_MAX:
        return None
    table = np.full(bound, -1, np.int32)
    table[keys] = np.arange(len(keys), dtype=np.int32)
    return table


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
