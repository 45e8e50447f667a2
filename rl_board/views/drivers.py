"""What drives one step: the token strings that carry its KL, and the n-grams that separate its
best-rewarded responses from its worst. Computed on request: it reads every sample of the step."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..analysis.drivers import compute_ngram_log_odds, compute_token_kl_ranking, response_words, reward_quartiles
from ..analysis.provider import compute_sample_tokens
from ..analysis.run import Run
from . import keys, state
from .sidebar import Settings

SHOWN = 25  # rows of each ranking
TOP_VS_BOTTOM = "top vs bottom of this step"
LATE_VS_EARLY = "late vs early steps"


def render(run: Run, step: int, samples: pd.DataFrame, settings: Settings) -> None:
    """``samples``: the step's samples with their texts."""
    if not st.toggle("What drives this step (reads every sample of the step)", key=keys.SHOW_DRIVERS):
        return
    records = run.records(samples.index)
    tokens = [None if r is None else compute_sample_tokens(r[0], settings.pad_token, settings.eos_token)
              for r in records]
    left, right = st.columns(2)
    with left:
        st.caption(f"Token strings by total KL ({settings.kl_estimator}) over the step's counted positions")
        ranking = compute_token_kl_ranking([t for t in tokens if t is not None and len(t.tokens)],
                                           settings.kl_estimator)
        if ranking.empty:
            st.info("No per-token log-probabilities in this step.")
        else:
            st.dataframe(ranking.head(SHOWN), hide_index=True, key="kl_tokens")
    with right:
        across = st.radio("n-grams of", [TOP_VS_BOTTOM, LATE_VS_EARLY], horizontal=True, key=keys.DRIVERS_NGRAMS)
        if across == LATE_VS_EARLY:
            st.caption("n-grams over-represented in the last quarter of the steps vs the first quarter "
                       "(log-odds with both as prior; z > 2 stands out)")
            odds = state.get_window_ngrams(run)
        else:
            st.caption("n-grams over-represented in the top-reward quarter vs the bottom quarter "
                       "(log-odds with the step as prior; z > 2 stands out)")
            words = [response_words(t, text, settings.pad_token) for t, text in zip(tokens, samples["response"])]
            top, bottom = reward_quartiles(samples["reward"].to_numpy())
            odds = compute_ngram_log_odds([words[i] for i in top], [words[i] for i in bottom], words)
        if odds.empty:
            st.info("Not enough responses with text in this step.")
        else:
            st.dataframe(odds.head(SHOWN), hide_index=True, key="hack_ngrams")
