"""The board's own per-step mean and std (``derive.step_stats``): against ``math.fsum`` on random data, and
a step's bits independent of other steps, other series and where its rows sit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rl_board.analysis.steps import compute_step_stats
from rl_board.derive.step_stats import mean_std, segment_sums, step_starts


def _fsum_mean_std(values: list[float]) -> tuple[int, float, float]:
    """(n, mean, population std) of the non-NaN values by ``math.fsum`` (correctly rounded sums), two-pass."""
    kept = [v for v in values if not math.isnan(v)]
    if not kept:
        return 0, math.nan, math.nan
    mean = math.fsum(kept) / len(kept)
    return len(kept), mean, math.sqrt(math.fsum((v - mean) ** 2 for v in kept) / len(kept))


def _random_steps(rng: np.random.Generator, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes 0..n_steps-1 in step order, with some steps of 0, 1 and many rows; float64 values with NaN
    scattered, a step of all NaN, wide magnitudes)."""
    sizes = rng.integers(0, 300, n_steps)
    sizes[:3] = (0, 1, 2000)
    codes = np.repeat(np.arange(n_steps), sizes)
    values = rng.normal(1e3, 1e2, len(codes)) * rng.choice([1e-6, 1.0, 1e6], len(codes))
    values[rng.random(len(codes)) < 0.1] = np.nan
    values[codes == 4] = np.nan
    return codes, values


def test_mean_and_std_match_fsum_per_step_with_nan_left_out():
    """Each step's count, mean and population std match a math.fsum two-pass computation over that step's
    non-NaN values (relative 1e-12); a step with no row or only NaN has count 0 and NaN mean and std."""
    rng = np.random.default_rng(7)
    codes, values = _random_steps(rng, 60)
    order, starts = step_starts(codes, 60)
    counts, mean, std = mean_std(values[order], starts)
    for step in range(60):
        n, want_mean, want_std = _fsum_mean_std(values[codes == step].tolist())
        assert counts[step] == n
        if n == 0:
            assert math.isnan(mean[step]) and math.isnan(std[step])
            continue
        assert math.isclose(mean[step], want_mean, rel_tol=1e-12)
        assert math.isclose(std[step], want_std, rel_tol=1e-9, abs_tol=1e-12 * abs(want_mean))
    assert counts[0] == 0 and counts[4] == 0 and counts[2] > 1500
    assert all(std[s] == 0.0 for s in range(60) if counts[s] == 1)


def test_a_steps_bits_do_not_change_with_other_steps_or_its_place():
    """A step's mean and std are the same bits when every other step's rows are replaced by others of
    other lengths, and when its rows sit at any offset of the array (0..9 rows before them)."""
    rng = np.random.default_rng(11)
    rows = rng.normal(0.3, 2.0, 1037)
    rows[[5, 600]] = np.nan
    got = set()
    for before in range(10):
        other = rng.normal(5.0, 9.0, before)
        after = rng.normal(-1.0, 1.0, int(rng.integers(0, 50)))
        after[::7] = np.nan
        values = np.concatenate([other, rows, after])
        codes = np.repeat([0, 1, 2], [before, len(rows), len(after)])
        _, mean, std = mean_std(values, step_starts(codes, 3)[1])
        got.add((mean[1].tobytes(), std[1].tobytes()))
    _, alone_mean, alone_std = mean_std(rows, np.zeros(1, np.int64))
    assert got == {(alone_mean[0].tobytes(), alone_std[0].tobytes())}


def test_step_order_is_row_order_within_a_step_and_no_step_is_left_out():
    """Codes out of order are taken stably (a step's rows keep their row order), rows of code -1 are in
    no step, and a code with no row is an empty segment."""
    codes = np.array([2, 0, -1, 2, 0, 2])
    order, starts = step_starts(codes, 4)
    assert order.tolist() == [1, 4, 0, 3, 5] and starts.tolist() == [0, 2, 2, 5]
    order, starts = step_starts(np.array([-1, -1, 0, 0, 2]), 3)
    assert np.arange(5)[order].tolist() == [2, 3, 4] and starts.tolist() == [0, 2, 2]
    sums = segment_sums(np.array([1.0, 2.0, 4.0, 8.0]), np.array([0, 2, 2, 3]))
    assert sums.tolist() == [3.0, 0.0, 4.0, 8.0]


def test_a_series_with_nan_leaves_the_other_series_bits_as_they_were():
    """compute_step_stats gives a series' step numbers the same bits whether or not another series has NaN
    in the same rows (pandas' grouped mean switches its sum for the whole block on one NaN), and each is
    the kernel's number over that step's rows; an extra at few steps (sparse) follows the same definition."""
    rng = np.random.default_rng(3)
    n = 4000
    frame = pd.DataFrame({"step": np.repeat(np.arange(40), n // 40), "reward": rng.normal(0, 1, n),
                          "response_chars": rng.integers(1, 900, n).astype(float),
                          "extra:rare": np.where(np.arange(n) < 300, rng.normal(2, 3, n), np.nan)})
    clean = compute_step_stats(frame)
    frame.loc[[10, 2500], "response_chars"] = np.nan
    dirty = compute_step_stats(frame)
    for column in ("reward_mean", "reward_std", "extra:rare_mean", "extra:rare_std"):
        assert clean[column].to_numpy(float).tobytes() == dirty[column].to_numpy(float).tobytes()
    rows = frame["reward"].to_numpy()[frame["step"].to_numpy() == 25]
    _, mean, std = mean_std(rows, np.zeros(1, np.int64))
    assert dirty.loc[25, "reward_mean"] == mean[0] and dirty.loc[25, "reward_std"] == std[0]
    assert isinstance(dirty["extra:rare_mean"].dtype, pd.SparseDtype)
    assert math.isclose(dirty.loc[2, "extra:rare_mean"], math.fsum(frame["extra:rare"][200:300]) / 100, rel_tol=1e-12)
    assert math.isnan(dirty.loc[3, "extra:rare_mean"])


def test_a_segments_numbers_take_its_rows_in_line_order_and_belong_to_its_rows_only():
    """segment_step_stats takes each step's rows in line order (a line's samples in their order), the bits
    mean_std gives over those rows; read_step_stats refuses them on a table of other rows (a concatenation
    keeps the first table's metadata)."""
    import json

    import pyarrow as pa

    from rl_board.derive.step_stats import STATS_KEY, read_step_stats, segment_step_stats

    table = pa.table({"step": [3, 1, 3, 1, 3], "line": [9, 2, 4, 2, 7], "reward": [0.1, 0.7, 0.2, float("nan"), 0.3],
                      "extra:acc": pa.array([None, 1.0, None, 3.0, None], pa.float64())})
    stats = json.loads(segment_step_stats(table))
    assert stats["steps"] == [1, 3] and stats["samples"] == [2, 3] and stats["rows"] == 5
    _, mean, std = mean_std(np.array([0.2, 0.3, 0.1]), np.zeros(1, np.int64))  # step 3 by line: 4, 7, 9
    assert stats["series"]["reward"] == [[0, 1], [1, 3], [0.7, mean[0]], [0.0, std[0]]]
    assert stats["series"]["extra:acc"] == [[0], [2], [2.0], [1.0]]
    marked = table.replace_schema_metadata({STATS_KEY: segment_step_stats(table)})
    assert read_step_stats(marked) == stats
    assert read_step_stats(pa.concat_tables([marked, table.replace_schema_metadata(None)])) is None


def _segment_table(rng: np.random.Generator, keys: np.ndarray):
    """One segment's rows over steps 0..3 in step and line order: rewards with NaN, tokens and characters,
    log-ratio counts, truncation flags, loss-mask positions, prompt keys (``keys``, some null)."""
    import pyarrow as pa

    n = len(keys)
    reward = rng.integers(0, 2, n).astype(float)
    reward[::11] = np.nan
    return pa.table({
        "step": np.repeat(np.arange(4), n // 4), "line": np.arange(n), "reward": reward,
        "response_len": rng.integers(-1, 50, n).astype(np.int32), "response_chars": rng.integers(1, 300, n).astype(float),
        "lr_pairs": rng.integers(0, 40, n).astype(float), "lr_negative": rng.integers(0, 20, n).astype(float),
        "truncated": np.where(rng.random(n) < 0.3, np.nan, rng.integers(0, 2, n)).astype(float),
        "mask_positions": rng.integers(-1, 60, n).astype(np.int32),
        "prompt_key": pa.array([None if i % 13 == 0 else int(k) for i, k in enumerate(keys)], pa.int64()),
        "has_reward": np.ones(n, bool), "extra:acc": rng.normal(0, 1, n)})


def test_a_segments_diagnostics_and_groups_are_the_parents_bits():
    """compute_step_stats gives every column the same bits whether it computes each step from the rows or
    takes a segment's numbers (segment_step_stats: the diagnostics, the loss mask's sums, the GRPO group
    counts, the series), and the group counts equal a count by hand."""
    import json

    from rl_board.derive.step_stats import segment_step_stats

    rng = np.random.default_rng(5)
    table = _segment_table(rng, rng.integers(0, 12, 400) + (1 << 40))
    stats = json.loads(segment_step_stats(table))
    frame = table.to_pandas()
    alone, taken = compute_step_stats(frame), compute_step_stats(frame, (stats,))
    assert list(alone.columns) == list(taken.columns) and "zero_std_share" in alone and "masked_share" in alone
    assert alone.to_numpy(float).tobytes() == taken.to_numpy(float).tobytes()
    step = frame[(frame["step"] == 2) & frame["prompt_key"].notna()]
    assert taken.loc[2, "prompt_groups"] == step["prompt_key"].nunique()
    assert stats["groups"]["prompt_groups"][2] == step["prompt_key"].nunique()
    # taken from the segment, not computed again: a changed row shows only where the rows are read
    frame.loc[frame["step"] == 1, "lr_negative"] = 0.0
    assert compute_step_stats(frame, (stats,))["neg_log_ratio_share"].tolist() == taken["neg_log_ratio_share"].tolist()
    assert compute_step_stats(frame).loc[1, "neg_log_ratio_share"] == 0.0


def test_a_segment_whose_keys_meet_as_float64_leaves_its_steps_to_the_parent():
    """Two prompt keys that are one float64 (2^60 and 2^60 + 1): the segment gives no numbers, since the
    gathered rows may hold the keys as float64 and count one group where the segment counts two."""
    from rl_board.derive.step_stats import segment_step_stats

    keys = np.full(400, 1 << 60)
    keys[1::2] += 1
    assert segment_step_stats(_segment_table(np.random.default_rng(1), keys)) is None
    assert segment_step_stats(_segment_table(np.random.default_rng(1), keys - (1 << 60))) is not None
