"""What drives a step: the token strings that carry its KL, and the n-grams that separate its
best-rewarded responses from its worst (a reward-hacking finder). Pure functions over samples."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd

from ..derive.metrics import SampleTokens, kl_per_token

MAX_NGRAM = 3


def compute_token_kl_ranking(samples: list[SampleTokens], estimator: str = "k3") -> pd.DataFrame:
    """Token strings over the counted positions of ``samples``, ranked by their total KL
    (``estimator``): columns token, count, total, mean (NaN positions left out)."""
    tokens, kls = [], []
    for sample in samples:
        counted = ~sample.is_pad
        kl = kl_per_token(sample.logprobs, sample.ref_logprobs, estimator)[counted]
        ok = np.isfinite(kl)
        tokens += [t for t, good in zip(np.asarray(sample.tokens, dtype=object)[counted], ok) if good]
        kls.append(kl[ok])
    if not tokens:
        return pd.DataFrame(columns=["token", "count", "total", "mean"])
    frame = pd.DataFrame({"token": tokens, "kl": np.concatenate(kls)})
    grouped = frame.groupby("token", sort=False)["kl"].agg(count="size", total="sum", mean="mean")
    return grouped.sort_values("total", ascending=False, kind="stable").reset_index()


def reward_quartiles(rewards) -> tuple[np.ndarray, np.ndarray]:
    """(positions of the top quarter by reward, of the bottom quarter): ceil(n / 4) samples each,
    ties in the order given; non-finite rewards are in neither."""
    rewards = np.asarray(rewards, dtype=float)
    finite = np.flatnonzero(np.isfinite(rewards))
    k = math.ceil(len(finite) / 4)
    order = finite[np.argsort(-rewards[finite], kind="stable")]
    return order[:k], order[len(order) - k:]


def _ngrams(words: list[str], n: int) -> list[tuple[str, ...]]:
    return list(zip(*(words[i:] for i in range(n))))


def compute_ngram_log_odds(top: list[list[str]], bottom: list[list[str]], everyone: list[list[str]],
                           max_n: int = MAX_NGRAM) -> pd.DataFrame:
    """1- to ``max_n``-grams ranked by how much more often they occur in the ``top`` responses
    than in the ``bottom`` ones: the log-odds ratio with an informative Dirichlet prior (Monroe,
    Colaresi and Quinn, 2008), the prior being each n-gram's count over ``everyone`` (the whole
    step), per n-gram order. Columns: ngram, n, top, bottom (counts), z (delta / its standard
    error; > 0: more frequent among the best-rewarded). Highest z first."""
    rows = []
    for n in range(1, max_n + 1):
        top_counts = Counter(g for words in top for g in _ngrams(words, n))
        bottom_counts = Counter(g for words in bottom for g in _ngrams(words, n))
        prior = Counter(g for words in everyone for g in _ngrams(words, n))
        prior_total, top_total, bottom_total = sum(prior.values()), sum(top_counts.values()), sum(bottom_counts.values())
        for gram in set(top_counts) | set(bottom_counts):
            alpha = prior[gram]
            if not alpha:  # not in the step at all (top/bottom given from elsewhere): no prior to lean on
                continue
            y_top, y_bottom = top_counts[gram], bottom_counts[gram]
            rest_top = top_total + prior_total - y_top - alpha
            rest_bottom = bottom_total + prior_total - y_bottom - alpha
            if rest_top <= 0 or rest_bottom <= 0:  # the only n-gram of its order: no odds to compare
                continue
            delta = math.log((y_top + alpha) / rest_top) - math.log((y_bottom + alpha) / rest_bottom)
            z = delta / math.sqrt(1 / (y_top + alpha) + 1 / (y_bottom + alpha))
            rows.append((" ".join(gram), n, y_top, y_bottom, z))
    frame = pd.DataFrame(rows, columns=["ngram", "n", "top", "bottom", "z"])
    return frame.sort_values(["z", "ngram"], ascending=[False, True], kind="stable").reset_index(drop=True)


def response_words(sample: SampleTokens | None, response: str | None, pad_token: str | None) -> list[str]:
    """What the n-gram finder reads of one response: its counted tokens when it has tokens, else its
    whitespace-separated words with pads removed."""
    if sample is not None and len(sample.tokens):
        return [t for t, pad in zip(sample.tokens, sample.is_pad) if not pad]
    if not isinstance(response, str):
        return []
    return (response.replace(pad_token, "") if pad_token else response).split()
