"""A block's per-token lists read a column at a time from their raw JSON, against orjson line by line."""

import json
import math

import msgspec
import numpy as np
import orjson
import pytest
from test_jsonl import _assert_same, _both, _lines

from rl_board.readers import ReadOptions, rawlists
from rl_board.readers.jsonl import parse_block


def _raws(values, spaced=False):
    """Each value as msgspec hands it over: a Raw of its JSON (None: the key is absent)."""
    separators = (", ", ": ") if spaced else (",", ":")
    return [None if v is _ABSENT else msgspec.Raw(json.dumps(v, separators=separators).encode()) for v in values]


_ABSENT = object()


def _column(array):
    return array.to_pylist()


@pytest.mark.parametrize("spaced", [False, True])
def test_number_lists_give_what_orjson_gives(spaced):
    values = [[-0.5, 1, -1e-7, 2.5e10], [], None, _ABSENT, [0.1] * 7, [-0.0, 123456789012345678], [3]]
    got = rawlists.read_column(_raws(values, spaced), "d")[0]
    expected = [None if v is _ABSENT else orjson.loads(json.dumps(v)) for v in values]
    expected = [None if v is None else [float(x) for x in v] for v in expected]
    assert _column(got) == expected


def test_list_lengths_come_from_their_commas_whatever_the_values():
    """Lists of one, two and no values, among them what was once the marker number written between lists."""
    values = [[1.0, -7.25e-301], [-7.25e-301], [], [2.0]]
    raws = _raws(values)
    assert _column(rawlists.read_column(raws, "d")[0]) == values


def test_integer_lists():
    values = [[1, 2, 3], [], None, [9223372036854775807, -7250000000000000301]]
    raws = _raws(values)
    assert _column(rawlists.read_column(raws, "i")[0]) == values


@pytest.mark.parametrize("values", [
    [[1.0, None]],  # a null inside a list
    [[1.0], ["a"]],  # a string among numbers
    [[[1.0, 2.0]]],  # a nested list (simdjson would flatten it)
    [[True, 1.0]],  # a boolean
])
def test_other_number_shapes_are_left_to_the_typed_path(values):
    raws = _raws(values)
    assert rawlists.read_column(raws, "d")[0] is None


def test_white_space_in_an_empty_list():
    """``[ ]`` among lists of numbers is left to the typed path (its one comma-less gap would count as a
    value), and the block still reads as the fallback does."""
    raws = [msgspec.Raw(b"[ ]"), msgspec.Raw(b"[1.0]")]
    assert rawlists.read_column(raws, "d")[0] is None
    base = {"step": 1, "prompt": "p", "response": "r", "reward": 1.0}
    lines = b'{"step": 1, "prompt": "p", "response": "r", "reward": 1.0, "logprobs": [ ]}\n' + _lines([
        {**base, "logprobs": [-1.0, -2.0]}])
    fast, slow, _ = _both(lines, ReadOptions("<eos>", (), "<eos>"))
    _assert_same(fast, slow)


TOKENS = ["▁the", "\n", '"q"', "a\\b", "é", "[", "]", ",", '","', "", " ", "\t", "\\", 'x"y', "\\\"", "😀", "\u0000"]


@pytest.mark.parametrize("ascii_only", [False, True])
@pytest.mark.parametrize("spaced", [False, True])
def test_token_lists_give_what_orjson_gives(spaced, ascii_only):
    """Escaped quotes and backslashes, brackets and commas inside tokens, \\u escapes (which must equal
    the same character written plainly), empty and absent lists."""
    rng = np.random.default_rng(3)
    values = [[TOKENS[i] for i in rng.integers(0, len(TOKENS), size=n)] for n in rng.integers(0, 9, size=60)]
    values += [[], None, _ABSENT, ["é", "\u00e9"]]
    separators = (", ", ": ") if spaced else (",", ":")
    raws = [None if v is _ABSENT else msgspec.Raw(json.dumps(v, separators=separators, ensure_ascii=ascii_only).encode())
            for v in values]
    got = rawlists.read_column(raws, "t")[0]
    assert got is not None
    assert _column(got) == [None if v is _ABSENT else v for v in values]
    assert len(got.flatten().dictionary) == len(set(got.flatten().dictionary.to_pylist()))  # one entry a string


@pytest.mark.parametrize("raw", [b'[1,"a"]', b'["a",1]', b'["a",["b"]]', b'[null]', b'["a" ,"b"]', b'[ "a"]',
                                 b'["\\ud800"]', b'["\xff"]'])
def test_other_token_shapes_are_left_to_the_typed_path(raw):
    raws = [msgspec.Raw(b'["ok"]'), msgspec.Raw(raw)]
    assert rawlists.read_column(raws, "t")[0] is None


def test_values_that_are_not_lists_are_refused():
    raws = [msgspec.Raw(b'"oops"'), msgspec.Raw(b"null"), None, msgspec.Raw(b"[1]"), msgspec.Raw(b"5")]
    _, lists, refused = rawlists.read_column(raws, "d")
    assert lists.tolist() == [False, False, False, True, False]
    assert refused.tolist() == [True, False, False, False, True]


def test_a_block_mixing_every_shape_reads_as_the_fallback_does():
    """One block: lists the bulk path reads, a null inside a list, a nested list, a string in a list,
    tokens with escapes, a non-list value and a broken line; the block path gives the fallback's rows
    and errors, and reads slowly only the lines the typed decode refuses."""
    base = {"step": 1, "prompt": "p", "response": "r", "reward": 1.0, "advantage": 0.25}
    rows = [
        {**base, "response_tokens": ["a", '"', "\\"], "logprobs": [-1.0, -2.0, -3.0], "ref_logprobs": [-1, -2, -3]},
        {**base, "response_tokens": ["b"], "logprobs": [-1.0, None], "ref_logprobs": [-1.5, -1.0]},
        {**base, "response_tokens": ["c"], "logprobs": [[-1.0]], "ref_logprobs": [-1.0]},
        {**base, "response_tokens": ["d", "é"], "logprobs": ["x"], "ref_logprobs": [-1.0]},
        {**base, "response_tokens": [1, 2], "logprobs": [-1.0, -1.0], "ref_logprobs": [-1.0, -1.0]},
        {**base, "response_tokens": ["e"], "logprobs": "oops"},
        b'{"step": 1, "reward": ',
        {**base, "response_tokens": None, "logprobs": [], "ref_logprobs": [-1.0]},
    ]
    fast, slow, parsed = _both(_lines(rows), ReadOptions("<eos>", (), "<eos>"))
    _assert_same(fast, slow)
    assert [line for line, _ in parsed.errors] == [3, 4, 6, 7]  # numbers as tokens are read (as text) by the slow path
    assert parsed.slow == 5  # the nested list, the string, the numbers as tokens, the string value, the broken line
    assert math.isclose(fast["log_ratio_sum"].to_pylist()[1], 0.5)  # -1.0 - -1.5 (the null pair is skipped)


def test_the_generated_grpo_shape_takes_the_bulk_path(tmp_path, monkeypatch):
    """No column of a generated GRPO block falls back to the typed path."""
    from rl_board.demo import write_grpo_run

    write_grpo_run(tmp_path, steps=2, samples_per_step=16, positions=12, ranks=1)
    data = next(tmp_path.glob("*.jsonl")).read_bytes()
    calls = []
    real = rawlists.read_column

    def recorded(raws, kind):
        calls.append((kind, real(raws, kind)[0]))
        return real(raws, kind)

    monkeypatch.setattr(rawlists, "read_column", recorded)
    parsed = parse_block(data)
    assert parsed.slow == 0 and not parsed.errors
    assert {kind for kind, _ in calls} == {"d", "t"}
    assert all(array is not None for _, array in calls)
