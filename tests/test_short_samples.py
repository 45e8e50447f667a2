"""The hot path of runs of many short samples (issue 43): the 4-gram repetition, the presence masks of a
block's keys, and the samples table's order when a run's files are, or are not, already in step order."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pandas as pd
import pytest

from rl_board.analysis.source import RunSource
from rl_board.derive.samples import _distinct_4gram_share
from rl_board.readers.jsonlines.shape import _is_set


def _by_hand(ids: list[int], owner: list[int], count: int) -> list[float]:
    """1 - distinct/total over each sample's 4-grams, with Python sets."""
    out = []
    for sample in range(count):
        mine = [i for i, o in zip(ids, owner) if o == sample]
        grams = [tuple(mine[k:k + 4]) for k in range(len(mine) - 3)]
        out.append(1 - len(set(grams)) / len(grams) if grams else float("nan"))
    return out


def test_4gram_share_matches_sets_for_small_and_large_vocabularies():
    rng = np.random.default_rng(0)
    owner = np.sort(rng.integers(0, 40, 600))
    for high in (3, 10**9):  # the exact-integer key, and the lexsort for a vocabulary too large for it
        ids = rng.integers(0, high, 600)
        got = _distinct_4gram_share(ids, owner, 42)
        np.testing.assert_allclose(got, _by_hand(ids.tolist(), owner.tolist(), 42), equal_nan=True)
    assert _distinct_4gram_share(np.array([1, 2, 1, 2, 1, 2]), np.zeros(6, np.int64), 1)[0] == 1 - 2 / 3


def test_is_set_fast_paths_agree_with_each_value():
    unset = msgspec.UNSET
    for values in ([unset] * 5, ["a", 1.5, None, 0, ""], [unset, "a", unset, None], []):
        assert _is_set(values).tolist() == [v is not unset for v in values]


def _write(folder, name, steps):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"input": "q", "output": f"a {s}", "gts": "1", "score": s / 10,
                                                   "step": s}) + "\n" for s in steps))


def test_samples_ordered_by_step_file_line_whether_or_not_the_files_are(tmp_path):
    ordered, shuffled = tmp_path / "ordered", tmp_path / "shuffled"
    _write(ordered, "1.jsonl", [1, 1, 1])
    _write(ordered, "2.jsonl", [2, 2])
    _write(shuffled, "1.jsonl", [3, 1, 3])
    _write(shuffled, "2.jsonl", [2, 1])
    for folder, steps, lines in ((ordered, [1, 1, 1, 2, 2], [1, 2, 3, 1, 2]),
                                 (shuffled, [1, 1, 2, 3, 3], [2, 2, 1, 1, 3])):
        samples = RunSource(folder, cache_root=False).refresh().samples
        assert samples["step"].tolist() == steps
        assert samples["line"].tolist() == lines
        assert isinstance(samples.index, pd.RangeIndex) and samples.index.tolist() == list(range(5))


def test_the_refusals_the_shape_learns_from_read_as_this_msgspec_words_them():
    """The fast path learns a file's extra keys from msgspec's refusal ("unknown field `K` - at `$[i]`")
    and finds a bad line from "at `$[i]`" / "(byte N)": the installed msgspec (pyproject allows >= 0.19)
    must still word them so, or every line of a run with extras would take the slow path unnoticed."""
    from rl_board.readers.jsonlines import shape

    struct = msgspec.defstruct("Probe", [("step", int)], forbid_unknown_fields=True)
    decoder = msgspec.json.Decoder(struct)
    with pytest.raises(msgspec.ValidationError) as refused:
        decoder.decode_lines(b'{"step": 1}\n{"step": 2, "my key": 3}\n')
    found = shape._UNKNOWN.search(str(refused.value))
    assert found is not None and (found[1], found[2]) == ("my key", "1")
    with pytest.raises(msgspec.DecodeError) as broken:
        decoder.decode_lines(b'{"step": 1}\n{"step": 1 x}\n')
    assert shape._AT_BYTE.search(str(broken.value))[1] == "23"  # the x: 12 bytes of line 0, then 11
    with pytest.raises(msgspec.ValidationError) as typed:
        decoder.decode_lines(b'{"step": 1}\n{"step": "x"}\n')
    assert shape._AT_LINE.search(str(typed.value))[1] == "1"
