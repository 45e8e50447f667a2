"""The per-sample columns gathered a segment at a time: the frame Arrow's own conversion of the joined
segments gives, with each column holding one value kept as one value."""

import numpy as np
import pandas as pd
import pyarrow as pa
from conftest import sample, write_lines

from rl_board.analysis.source import load_run
from rl_board.store import segments
from rl_board.store.columns import frame, gather, take


def _parts():
    """Three parts as a run's segments differ: a column one part lacks, an integer and a boolean
    column with a null in one part only, a column of one value, one NaN throughout, an empty part."""
    return [
        pa.table({"step": pa.array([1, 1], pa.int64()), "same": [0.5, 0.5], "nan": [np.nan, np.nan],
                  "count": pa.array([3, 4], pa.int32()), "flag": [True, False], "zero": [-0.0, -0.0]}),
        pa.table({"step": pa.array([], pa.int64()), "same": pa.array([], pa.float64()),
                  "nan": pa.array([], pa.float64()), "count": pa.array([], pa.int32()),
                  "flag": pa.array([], pa.bool_()), "zero": pa.array([], pa.float64())}),
        pa.table({"step": pa.array([2, 3, 3], pa.int64()), "same": [0.5, 0.5, 0.5], "nan": [np.nan] * 3,
                  "count": pa.array([5, None, 6], pa.int32()), "flag": pa.array([None, True, True]),
                  "zero": [-0.0, 0.0, -0.0], "extra:late": [None, 2.0, None]}),
    ]


def test_gathered_columns_are_arrows_conversion_of_the_joined_parts():
    """Every column has the dtype and the values ``concat_tables(...).to_pandas()`` gives (an int column
    with a null as float64 NaN, a bool one as object with None, a column a part lacks as NaN there)."""
    expected = pa.concat_tables(_parts(), promote_options="default").to_pandas()
    columns, first = gather(_parts(), first_valid=True)
    got = frame(columns)
    pd.testing.assert_frame_equal(got, expected)
    assert got["count"].dtype == np.float64 and got["count"].tolist()[:3] == [3.0, 4.0, 5.0]
    assert np.isnan(got["count"].iloc[3]) and got["count"].iloc[4] == 6.0
    assert got["flag"].tolist() == [True, False, None, True, True]
    assert first == {"extra:late": 3}  # row 3: the second row of the third part (the second is empty)


def test_a_column_of_one_value_is_not_materialised():
    """A column whose every value has the same bytes is one value broadcast (stride 0), read-only;
    -0.0 and 0.0 are different bytes: that column is an array; each part is let go once copied."""
    parts = _parts()
    columns, _ = gather(parts)
    assert parts == [None, None, None]
    for name in ("same", "nan"):
        assert columns[name].strides == (0,) and not columns[name].flags.writeable
    assert columns["same"].tolist() == [0.5] * 5
    assert columns["zero"].strides == (8,)
    assert [str(v) for v in columns["zero"]] == ["-0.0", "-0.0", "-0.0", "0.0", "-0.0"]
    assert columns["step"].strides == (8,)
    taken = take(columns["same"], np.array([4, 0]))
    assert taken.tolist() == [0.5, 0.5] and taken.strides == (0,)
    assert take(columns["step"], np.array([4, 0])).tolist() == [3, 1]


def _segment(values: dict) -> pa.Table:
    """A segment's rows as a segment file holds them and the snapshot opens them again: its columns of one
    value left out, then made again as slices of the arrays of one value all segments share."""
    return segments.with_one_value_columns(segments._without_one_value_columns(pa.table(values)))


def test_parts_made_of_shared_arrays_of_one_value_are_gathered_as_arrow_converts_them():
    """Columns made again from shared arrays of one value (compared once per array, not per part) gather as
    Arrow's conversion of the joined parts: one value while every part shares it, every row's own value once a
    part made of another shared array (2.0, NaN, nulls) or a part of its own values comes."""
    def parts():
        return [_segment({"line": [1, 2], "same": [1.0, 1.0], "later": [1.0, 1.0], "own": [5.0, 5.0],
                          "gone": pa.array([7, 7], pa.int64())}),
                _segment({"line": [1, 2, 3], "same": [1.0] * 3, "later": [1.0] * 3, "own": [5.0, 5.0, 6.0],
                          "gone": pa.array([7, 7, 7], pa.int64())}),
                _segment({"line": [1], "same": [1.0], "later": [2.0], "own": [5.0],
                          "gone": pa.array([None], pa.int64())}),
                _segment({"line": [1, 2], "same": [1.0, 1.0], "later": [np.nan, np.nan], "own": [5.0, 5.0],
                          "gone": pa.array([7, 7], pa.int64())})]

    made = parts()
    assert all(segments.one_value_source(part["same"]) is not None for part in made)  # shared, as segments hold them
    assert segments.one_value_source(made[1]["own"]) is None
    expected = pa.concat_tables(parts(), promote_options="default").to_pandas()
    columns, _ = gather(made)
    pd.testing.assert_frame_equal(frame(columns), expected)
    assert columns["same"].strides == (0,) and columns["later"].strides == (8,)
    assert columns["later"][:6].tolist() == [1.0] * 5 + [2.0] and np.isnan(columns["later"][6:]).all()
    assert columns["own"].tolist() == [5.0] * 4 + [6.0, 5.0, 5.0, 5.0]
    assert np.isnan(columns["gone"][5]) and columns["gone"].dtype == np.float64


def test_arrays_of_one_value_stop_being_shared_at_their_bound_and_gather_the_same(monkeypatch):
    """Past ``SHARED_VALUES_BYTES`` a segment's column of one value is its own array (no new shared array is
    kept, so a long-lived page server's memory for them stops growing) and gathers to the same values."""
    monkeypatch.setattr(segments, "_SHARED_VALUES", {})
    monkeypatch.setattr(segments, "_shared_bytes", 0)
    monkeypatch.setattr(segments, "SHARED_VALUES_BYTES", 3 * 8 * 4)  # room for three values of 4 float64 rows
    made = [_segment({"line": [1, 2, 3, 4], "v": [float(k)] * 4}) for k in range(6)]
    shared = [segments.one_value_source(part["v"]) is not None for part in made]
    assert shared == [True, True, True, False, False, False]
    assert segments._shared_bytes == 3 * 8 * 4 and len(segments._SHARED_VALUES) == 3
    columns, _ = gather(made)
    assert columns["v"].tolist() == [float(k) for k in range(6) for _ in range(4)]


def test_rank_files_are_ordered_and_unlogged_fields_cost_nothing(tmp_path):
    """Rank files (every step in each) come out by step, file, line as before; a scalar no line logs
    is NaN throughout, kept as one value, and the frame's dtypes are the schema's."""
    write_lines(tmp_path / "data_rank0.jsonl", [sample(2, 0.1), sample(1, 0.2), sample(3, 0.6)])
    write_lines(tmp_path / "data_rank1.jsonl", [sample(1, 0.3), sample(2, 0.4)])
    run = load_run(tmp_path)
    samples = run.samples
    assert samples["step"].tolist() == [1, 1, 2, 2, 3]
    assert samples["reward"].tolist() == [0.2, 0.3, 0.1, 0.4, 0.6]
    assert samples["line"].tolist() == [2, 1, 1, 2, 3]
    assert samples.index.equals(pd.RangeIndex(5))
    assert samples["ref_reward"].isna().all() and samples["ref_reward"].to_numpy().strides == (0,)
    assert samples["reward_gap"].dtype == np.float64 and samples["reward_gap"].isna().all()
    assert samples["position"].tolist() == [-1] * 5 and samples["position"].dtype == np.int64
    public = run.to_pandas()
    assert public.loc["data_rank1.jsonl:2", "reward"] == 0.4
    assert public["ref_reward"].dtype == np.float64
    public.loc["data_rank1.jsonl:2", "ref_reward"] = 0.5  # the notebook's frame is its own, writable
    assert public["ref_reward"].notna().sum() == 1 and samples["ref_reward"].isna().all()


def _sparse_parts():
    """Three parts of 6 rows: ``extra:rare`` at 2 of 18 rows (one in a part that starts NaN, one in a
    part that lacks the column), ``extra:often`` at 9 of 18 (half)."""
    nan = np.nan
    return [
        pa.table({"step": pa.array([1] * 6, pa.int64()), "extra:rare": [nan, nan, nan, nan, 7.5, nan],
                  "extra:often": [1.0, nan, 2.0, nan, 3.0, nan]}),
        pa.table({"step": pa.array([2] * 6, pa.int64()), "extra:often": [nan, 4.0, nan, 5.0, nan, 6.0]}),
        pa.table({"step": pa.array([3] * 6, pa.int64()), "extra:rare": [nan] * 5 + [-1.0],
                  "extra:often": [7.0, nan, 8.0, nan, 9.0, nan]}),
    ]


def test_an_extra_with_few_values_is_kept_sparse_with_the_same_values(monkeypatch):
    """With the sparse floor at 0 rows, an extra with a value in 2 of 18 rows (under a quarter) is pandas'
    sparse array holding 2 values whose dense values are Arrow's own conversion's (NaN elsewhere); one
    with a value in half the rows stays a float64 array; taking rows of the sparse one keeps it sparse."""
    import rl_board.store.columns as columns_module

    monkeypatch.setattr(columns_module, "SPARSE_MIN_ROWS", 0)
    expected = pa.concat_tables(_sparse_parts(), promote_options="default").to_pandas()
    columns, _ = gather(_sparse_parts())
    rare = columns["extra:rare"]
    assert isinstance(rare, pd.arrays.SparseArray) and rare.sp_values.tolist() == [7.5, -1.0]
    np.testing.assert_array_equal(np.asarray(rare, dtype=float), expected["extra:rare"].to_numpy())
    assert np.flatnonzero(~np.isnan(np.asarray(rare, dtype=float))).tolist() == [4, 17]
    assert isinstance(columns["extra:often"], np.ndarray)
    np.testing.assert_array_equal(columns["extra:often"], expected["extra:often"].to_numpy())
    taken = take(rare, np.array([17, 0, 4]))
    assert isinstance(taken, pd.arrays.SparseArray) and np.asarray(taken, dtype=float)[[0, 2]].tolist() == [-1.0, 7.5]


def test_a_short_run_keeps_its_rare_extras_as_arrays():
    """Under SPARSE_MIN_ROWS rows (the default, 16,384) a rare extra stays a float64 array, as before."""
    columns, _ = gather(_sparse_parts())
    assert isinstance(columns["extra:rare"], np.ndarray) and columns["extra:rare"].dtype == np.float64


def _gathered_one_at_a_time(parts):
    from rl_board.store.columns import Gathering

    gathering = Gathering()
    for part in parts:
        gathering.add(part)
    return gathering.result()


def _same_columns(got: dict, expected: dict) -> None:
    """The same names in the same order, each the same dtype, values, bytes and stride (one value broadcast)."""
    assert list(got) == list(expected)
    for name, column in expected.items():
        mine = got[name]
        assert type(mine) is type(column), name
        if isinstance(column, np.ndarray):
            assert mine.dtype == column.dtype and mine.shape == column.shape and mine.strides == column.strides, name
            if column.dtype.kind == "O":
                assert mine.tolist() == column.tolist(), name
            else:
                assert mine.tobytes() == column.tobytes(), name
        else:
            pd.testing.assert_series_equal(mine, column)


def test_parts_gathered_as_they_come_are_what_gather_gives_or_nothing():
    """``Gathering`` (a cold read's segments gathered while the others are read) gives what ``gather`` gives
    the same parts: growing past its first capacity, columns of one value kept broadcast, -0.0 apart from 0.0,
    a float column one part lacks NaN there, a column first met in a later part; and nothing (None) where it
    can't: a null among integers or booleans, which ``gather`` turns into floats and objects."""
    floats = [pa.table({"step": pa.array([k] * (k + 1), pa.int64()), "same": [0.5] * (k + 1),
                        "zero": [-0.0 if k % 2 else 0.0] * (k + 1), "nan": [np.nan] * (k + 1),
                        **({"late": [float(k)] * (k + 1)} if k >= 3 else {}),
                        **({"gap": [1.0] * (k + 1)} if k != 2 else {})}) for k in range(7)]
    expected, _ = gather(list(floats))
    got = _gathered_one_at_a_time(floats)
    assert got is not None
    _same_columns(got, expected)
    assert got["same"].strides == (0,) and np.isnan(got["late"][:6]).all() and got["late"][6] == 3.0
    pd.testing.assert_frame_equal(frame(got), pa.concat_tables(floats, promote_options="default").to_pandas())
    # a null in integers or booleans (``_parts``' third part) changes the dtype ``gather`` gives: not here
    assert _gathered_one_at_a_time(_parts()) is None
    assert _gathered_one_at_a_time(_parts()[:2]) is not None
    _same_columns(_gathered_one_at_a_time(_parts()[:2]), gather(_parts()[:2])[0])


def test_parts_of_shared_one_value_arrays_gather_as_they_come_as_gather_does():
    """Segments as the cache gives them back (their columns of one value made from shared arrays) give the
    same columns one at a time as ``gather`` gives them all at once; an integer column with a null in a later
    part gives nothing (the caller gathers them as before)."""
    def parts():
        return [_segment({"line": [1, 2], "same": [1.0, 1.0], "later": [1.0, 1.0], "own": [5.0, 5.0]}),
                _segment({"line": [1, 2, 3], "same": [1.0] * 3, "later": [1.0] * 3, "own": [5.0, 5.0, 6.0]}),
                _segment({"line": [1], "same": [1.0], "later": [2.0], "own": [5.0]}),
                _segment({"line": [1, 2], "same": [1.0, 1.0], "later": [np.nan, np.nan], "own": [5.0, 5.0]})]

    _same_columns(_gathered_one_at_a_time(parts()), gather(parts())[0])
    with_null = [_segment({"line": [1, 2], "n": pa.array([7, 7], pa.int64())}),
                 _segment({"line": [1], "n": pa.array([None], pa.int64())})]
    assert _gathered_one_at_a_time(with_null) is None


def test_an_extra_gather_might_keep_sparse_is_left_to_gather(monkeypatch):
    """An extra field with a value in under ``SPARSE_SHARE`` of at least ``SPARSE_MIN_ROWS`` rows may be kept
    sparse by ``gather``: gathered as they come, such parts give nothing; one with values in half the rows
    gives ``gather``'s array."""
    import rl_board.store.columns as columns_module

    monkeypatch.setattr(columns_module, "SPARSE_MIN_ROWS", 0)
    assert _gathered_one_at_a_time(_sparse_parts()) is None
    often = [part.drop_columns([c for c in part.column_names if c == "extra:rare"]) for part in _sparse_parts()]
    _same_columns(_gathered_one_at_a_time(often), gather(list(often))[0])
