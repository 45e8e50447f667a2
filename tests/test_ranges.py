"""The byte-range task's own kernels against their plain library equivalents."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rl_board.store.ranges import _step_ranks


@pytest.mark.parametrize("shape", ["sorted", "shuffled", "one step", "empty"])
def test_step_ranks_are_cumcount(shape):
    """Each row's place among its step's rows is pandas' ``groupby().cumcount()``; the distinct steps,
    their counts and each row's step are ``np.unique``'s."""
    rng = np.random.default_rng(5)
    steps = {"sorted": np.sort(rng.integers(-3, 40, 5_000)), "shuffled": rng.integers(0, 7, 5_000),
             "one step": np.full(9, 4), "empty": np.zeros(0, np.int64)}[shape]
    distinct, counts, which, rank = _step_ranks(steps)
    assert rank.tolist() == pd.Series(steps, dtype="int64").groupby(steps).cumcount().tolist()
    unique, inverse, tally = np.unique(steps, return_inverse=True, return_counts=True)
    assert distinct.tolist() == unique.tolist()
    assert counts.tolist() == tally.tolist()
    assert which.tolist() == inverse.tolist()
