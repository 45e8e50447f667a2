"""The 4-gram repetition of samples against sets of tuples, over vocabularies small and large: the
sort of (sample, 4-gram) keys in runs of samples whose keys fit one int64 (derive/samples.py)."""

import math

import numpy as np
import pytest

from rl_board.derive.samples import _distinct_4gram_share


def _by_hand(words: list[list[int]]) -> list[float]:
    out = []
    for ids in words:
        grams = [tuple(ids[k:k + 4]) for k in range(len(ids) - 3)]
        out.append(1 - len(set(grams)) / len(grams) if grams else math.nan)
    return out


@pytest.mark.parametrize("vocabulary", [3, 50, 3_000, 30_000, 46_340, 46_342, 2**40])
def test_share_of_repeated_four_grams(vocabulary):
    rng = np.random.default_rng(vocabulary)
    words = []
    for _ in range(400):
        size = int(rng.integers(0, 30))
        pool = rng.integers(0, vocabulary, max(1, size // 3))  # few distinct words: grams repeat
        words.append([int(x) for x in rng.choice(pool, size)])
    words[7] = [vocabulary - 1] * 9  # the largest id, repeated
    ids = np.array([i for w in words for i in w], np.int64)
    owner = np.array([k for k, w in enumerate(words) for _ in w], np.int64)
    got = _distinct_4gram_share(ids, owner, len(words))
    assert np.array_equal(got, np.array(_by_hand(words)), equal_nan=True)
