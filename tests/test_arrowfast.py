"""Arrow's JSON reader for flat blocks (readers/jsonlines/arrowfast.py) against the struct path: the same
rows, errors and segment rows for every block, odd ones included, and taken where it should be."""

import json
from pathlib import Path

import numpy as np
import pytest

from rl_board.derive.samples import derive
from rl_board.readers import ReadOptions
from rl_board.readers import jsonlines as J
from rl_board.readers.jsonlines import shape as shape_module
from rl_board.readers.jsonlines.arrowfast import SCHEMA_LINES, read_flat

VERL = {"input": "system\nYou are helpful.\nuser\nWhat is 2 + 3?\nassistant\n", "output": "It is \\boxed{5}.",
        "gts": "5", "score": 1.0, "step": 3, "acc": True, "pred": "5", "format_score": 0.1}


def _verl(**changes) -> dict:
    line = dict(VERL)
    for key, value in changes.items():
        if value is _ABSENT:
            line.pop(key, None)
        else:
            line[key] = value
    return line


_ABSENT = object()


def _block(*lines) -> bytes:
    return b"".join((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n" for x in lines)


# (block, whether Arrow's reader may take it)
BLOCKS = [
    (_block(*[_verl(step=s, score=s / 7) for s in range(50)]), True),
    (_block(_verl(score=1), _verl(score=2.5), _verl(score=-0.0)), True),  # ints beside floats, a negative zero
    (_block(_verl(score=1), _verl(score=2)), True),  # ints only: rounded to floats
    (_block(_verl(score=9007199254740993), _verl(score=-(2**63))), True),  # ints a float can't hold exactly
    (_block(_verl(score=1e308), _verl(score=5e-324), _verl(score=1.7976931348623157e308)), True),
    (_block(_verl(output="caf\u00e9 \U0001f600 \\u00e9"), _verl(output="")), True),
    (b'{"input": "a\\u00e9\\ud83d\\ude00", "output": "b\\n\\t\\"", "score": 1.0, "step": 1}\n', True),
    (_block(_verl(acc=None), _verl(format_score=None), _verl(pred=None), _verl(gts=None)), True),  # nulls
    (_block(_verl(acc=_ABSENT), _verl(format_score=_ABSENT), _verl(output=_ABSENT)), True),  # absent keys
    (_block(_verl(acc=False), _verl(acc=True)), True),
    (_block(_verl(format_score=3), _verl(format_score=2**70)), True),  # an int beyond int64 in an extra
    (_block(_verl(output="x" * 200_000), _verl()), True),  # a very long line
    (_block({"prompt": "p", "response": "r", "reward": 0.5, "step": 1, "ref_reward": 2}), True),
    (_block({"prompt": "p", "response": "r", "score": 0.5, "step": 1}), True),  # an alias alone
    (_block({"prompt": "p", "response": "r", "reward": 0.5, "step": 1, "weird key": 1, "s": "x"}), True),
    # for the struct path: Arrow refuses, or its rows would differ
    (_block(_verl(score=True), _verl()), False),  # a bool in a number field
    (_block(_verl(score="1.0"), _verl()), False),  # a string in a number field
    (_block(_verl(score=None), _verl()), False),  # a missing reward
    (_block(_verl(score=_ABSENT), _verl()), False),
    (_block(_verl(step=1.0), _verl()), False),  # a float step
    (_block(_verl(step=2**62 + 1), _verl()), False),  # a step out of range
    (_block(_verl(step=2**64), _verl()), False),  # beyond int64
    (_block(_verl(step=None), _verl()), False),
    (_block(_verl(step=_ABSENT), _verl()), False),
    (_block(_verl(output=5), _verl()), False),  # a number where a text is wanted
    (_block(_verl(output=["a"]), _verl()), False),
    (_block(_verl(output={"a": 1}), _verl()), False),
    (_block(_verl(acc=[1, 2]), _verl()), False),  # a nested extra
    (_block(_verl(), _verl(acc={"a": [1]})), False),  # on a later line
    (_block(_verl(), _verl(output=["a"])), False),
    (_block(_verl(acc="yes"), _verl(acc=1)), False),  # mixed types
    (_block(_verl(acc=1), _verl(acc=True)), False),
    (_block({"prompt": "p", "response": "r", "reward": 0.5, "score": 0.2, "step": 1}), False),  # alias beside
    (_block({"prompt": "p", "response": "r", "reward": 0.5, "step": 1, "logprobs": [0.1, 0.2]}), False),
    (_block({"prompt": "p", "response": "r", "reward": 0.5, "step": 1, "logprobs": 0.1}), False),
    (_block({"prompt": "p", "response": "r", "reward": 0.5, "step": 1, "response_tokens": ["a"]}), False),
    (_block({"prompt": "p", "response": "r", "reward": 0.5, "step": 1,
             "messages": [{"role": "user", "content": "hi"}]}), False),
    (b'{"input": "a", "score": 1.0, "step": 1, "score": 2.0}\n', False),  # a duplicate key
    (b'{"input": "a", "score": NaN, "step": 1}\n', False),
    (b'{"input": "a", "score": Infinity, "step": 1}\n', False),
    (b'{"input": "a", "score": 1.0, "step": 1, "acc": NaN}\n', False),
    (b'{"input": "a", "score": 1e400, "step": 1}\n', False),
    (b'{"input": "\\ud800", "score": 1.0, "step": 1}\n', False),  # a lone surrogate
    (b'{"input": "\xff\xfe", "score": 1.0, "step": 1}\n', False),  # bytes that are not UTF-8
    (b'{"input": "a\x01", "score": 1.0, "step": 1}\n', False),  # a control character
    (b'\xef\xbb\xbf{"input": "a", "score": 1.0, "step": 1}\n', False),  # a BOM
    (b'{"input": "a", "score": 1.0, "step": 1} {"input": "b", "score": 1.0, "step": 2}\n', False),
    (b'{"input": "a", "score": 1.0, "step": 1}\n\n{"input": "b", "score": 1.0, "step": 2}\n', False),
    (b'{"input": "a", "score": 1.0, "step": 1}\n   \n', False),
    (b'{"input": "a", "score": 1.0, "step": 1}\nnot json\n', False),
    (b'{"input": "a", "score": 1.0, "step": 1}\n[1, 2]\n', False),
    (b'{"input": "a", "score": 1.0, "step": 1,}\n', False),
    (b'{"input": "a", "score": 01, "step": 1}\n', False),
    (b' {"input": "a", "score": 1.0, "step": 1}\n', False),
    # Arrow reads the columns of a block's first SCHEMA_LINES lines only: a key or a wider type met later
    # sends the block to the struct path (Arrow would make a dense column per key: rows x keys values)
    (_block(*[_verl(step=s) for s in range(SCHEMA_LINES)], _verl(late=1)), False),
    (_block(*[_verl(format_score=1) for _ in range(SCHEMA_LINES)], _verl(format_score=0.5)), False),
    (_block(*[_verl(step=s) for s in range(SCHEMA_LINES - 1)], _verl(late=1)), True),  # the last line read
]


@pytest.mark.parametrize("block, taken", BLOCKS)
def test_the_same_rows_by_either_path(block, taken, monkeypatch):
    options = ReadOptions()
    arrow, struct = _by_either_path(block, options, monkeypatch, 7, 100)
    _assert_same(arrow.table, struct.table)
    assert (arrow.errors, arrow.lines, arrow.steps) == (struct.errors, struct.lines, struct.steps)
    _assert_same(derive(arrow.table, options), derive(struct.table, options))
    assert (arrow.slow == 0) == taken or not struct.slow  # a block Arrow took read nothing slowly


@pytest.mark.parametrize("block, taken", BLOCKS)
def test_a_fresh_shape_by_either_path(block, taken, monkeypatch):
    """A process's first block (its shape knows no extras yet): Arrow's reader learns them at once, the
    struct path by refusals; the same rows, and the same keys learned."""
    monkeypatch.setattr(shape_module, "_SHAPES", {})
    monkeypatch.setattr(J, "ARROW_FAST", False)
    struct = J.parse_block(block, 3, 10)
    struct_keys = set(J._shape(()).keys)
    monkeypatch.setattr(shape_module, "_SHAPES", {})
    monkeypatch.setattr(J, "ARROW_FAST", True)
    arrow = J.parse_block(block, 3, 10)
    _assert_same(arrow.table, struct.table)
    assert (arrow.errors, arrow.lines, arrow.steps) == (struct.errors, struct.lines, struct.steps)
    if taken:
        assert arrow.slow == 0 and set(J._shape(()).keys) == struct_keys


@pytest.mark.parametrize("block, taken", BLOCKS)
def test_arrow_takes_flat_blocks_only(block, taken):
    options = ReadOptions()
    J.parse_block(block, 1, 0, options)
    shape = J._shape(options.fields)
    starts, lengths = _lines(block)
    if not taken and (len(starts) != block.count(b"\n") or any(block[s:s + 1] != b"{" for s in starts)):
        return  # parse_block never hands Arrow a block with a blank line or a line not starting an object
    got = read_flat(shape, shape.version, block, starts, lengths, 1, 0)
    assert (got is not None) == taken


SAMPLES = sorted((Path(__file__).resolve().parent.parent / "rollout_samples").rglob("*.jsonl"))


@pytest.mark.slow
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_the_bundled_runs_by_either_path(path, monkeypatch):
    """Every bundled JSON-lines file, whole and in blocks of 5 lines: the same rows by either path."""
    options = ReadOptions()
    lines = path.read_bytes().splitlines(keepends=True)
    for block in [b"".join(lines)] + [b"".join(lines[k:k + 5]) for k in range(0, min(len(lines), 50), 5)]:
        arrow, struct = _by_either_path(block, options, monkeypatch)
        _assert_same(arrow.table, struct.table)
        assert (arrow.errors, arrow.lines, arrow.steps) == (struct.errors, struct.lines, struct.steps)


def test_a_mapped_reward_key(monkeypatch):
    options = ReadOptions(fields=(("reward", "my score"),))
    block = _block(*[{"q": "p", "response": "r", "my score": k, "step": k} for k in range(5)])
    arrow, struct = _by_either_path(block, options, monkeypatch)
    _assert_same(arrow.table, struct.table)
    assert arrow.table["reward"].to_pylist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_rows_by_hand():
    block = _block(_verl(step=4, score=2), _verl(step=5, acc=False, format_score=None))
    J.parse_block(block, 10, 1000)
    parsed = J.parse_block(block, 10, 1000)
    assert parsed.slow == 0
    table = parsed.table
    first = len(json.dumps(_verl(step=4, score=2)))
    assert table["step"].to_pylist() == [4, 5]
    assert table["reward"].to_pylist() == [2.0, 1.0]
    assert table["line"].to_pylist() == [10, 11]
    assert table["offset"].to_pylist() == [1000, 1000 + first + 1]
    assert table["length"].to_pylist()[0] == first
    assert table["prompt"].to_pylist() == [VERL["input"]] * 2
    assert table["ground_truth"].to_pylist() == ["5", "5"]
    assert table["extra:acc"].to_pylist() == [1.0, 0.0]
    assert table["extra:format_score"].to_pylist() == [0.1, None]
    assert "extra:pred" not in table.column_names  # texts are no extras


def _by_either_path(block: bytes, options: ReadOptions, monkeypatch, first_line: int = 1, offset: int = 0):
    """(Arrow's parse, the struct path's parse) of ``block``, the shape having learned the block's keys
    first, as a run's first block teaches them."""
    monkeypatch.setattr(J, "ARROW_FAST", False)
    J.parse_block(block, first_line, offset, options)
    struct = J.parse_block(block, first_line, offset, options)
    monkeypatch.setattr(J, "ARROW_FAST", True)
    return J.parse_block(block, first_line, offset, options), struct


def _assert_same(a, b) -> None:
    """Equal schemas (metadata included) and values, NaN equal to NaN and -0.0 told from 0.0 (``repr``)."""
    assert a.schema.equals(b.schema, check_metadata=True)
    assert repr(a.to_pydict()) == repr(b.to_pydict())


def _lines(block: bytes):
    buffer = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(buffer == 10)
    starts = np.r_[0, ends[:-1] + 1].astype(np.int64)
    return starts, ends - starts
