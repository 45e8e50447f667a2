"""The struct path's retries (readers/jsonlines/shape.py, ``_BlockDecode``): a block decoded again after its
shape learned a key, at most ``_MAX_RELEARNS`` times; refused lines set aside, one at a time past
``_MAX_RETRIES``; the rows the same as the slow path's in every case."""

import json

import numpy as np
import pyarrow as pa

from rl_board.readers import jsonlines as J
from rl_board.readers.jsonlines import shape as S


def _split(block: bytes):
    """(starts, ends, lines) of a block's lines, as ``parse_block`` cuts them (no blank lines here)."""
    buffer = np.frombuffer(block, np.uint8)
    ends = np.flatnonzero(buffer == 10)
    starts = np.r_[0, ends[:-1] + 1].astype(np.int64)
    return starts, ends, np.arange(len(ends))


def _same_rows(block: bytes, monkeypatch) -> pa.Table:
    """The block's rows by the struct path (a fresh shape, Arrow's reader off), checked against the slow
    path's (every line alone): the independent route."""
    monkeypatch.setattr(S, "_SHAPES", {})
    monkeypatch.setattr(J, "ARROW_FAST", False)
    struct, slow = J.parse_block(block), J.parse_block(block, fast=False)
    assert struct.table.to_pylist() == slow.table.to_pylist()
    assert struct.errors == slow.errors
    return struct.table


def test_a_new_key_on_every_line_is_learned_at_most_max_relearns_times(monkeypatch):
    """40 lines, each with a key of its own: the first ``_MAX_RELEARNS`` (32) teach the fresh shape their
    key (one decode again each), the 8 after are refused and read by the slow path, with their key."""
    lines = [{"prompt": "p", "response": "r", "reward": i / 4, "step": 1, f"own_{i}": i} for i in range(40)]
    block = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    shape = S._Shape(())
    objs, fast, slow, version = shape.decode(block, *_split(block))
    assert S._MAX_RELEARNS == 32
    assert fast == list(range(32)) and slow == list(range(32, 40)) and len(objs) == 32
    assert [f"own_{i}" for i in range(32)] == [k for k in version.keys if k.startswith("own_")]
    table = _same_rows(block, monkeypatch)
    assert table["reward"].to_pylist() == [i / 4 for i in range(40)]
    assert [table[f"extra:own_{i}"][i].as_py() for i in range(40)] == [float(i) for i in range(40)]


def test_past_max_retries_the_lines_left_are_decoded_one_at_a_time(monkeypatch):
    """20 lines whose reward is a string among 40: each of the first 17 is a span's refusal (then the
    spans around it decoded again), and past ``_MAX_RETRIES`` (16) the lines left go one at a time and
    count no more; every bad line, and only those, is read by the slow path, which rejects it."""
    lines = [{"prompt": "p", "response": "r", "reward": "bad" if i % 2 == 0 else 0.5, "step": 3} for i in range(40)]
    block = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    shape = S._Shape(())
    starts, ends, indices = _split(block)
    decode = S._BlockDecode(shape, block, starts, ends, indices, shape.version.decoder)
    assert decode.run() and not decode.relearned
    assert S._MAX_RETRIES == 16 and decode.refusals == 17
    objs, fast, slow = decode.result()
    assert fast == list(range(1, 40, 2)) and slow == list(range(0, 40, 2)) and len(objs) == 20
    table = _same_rows(block, monkeypatch)
    assert table["line"].to_pylist() == list(range(2, 41, 2))  # line numbers start at 1
    assert [line for line, _ in J.parse_block(block).errors] == list(range(1, 41, 2))


def test_a_key_learned_stops_the_decode_and_leaves_it_void():
    """A refusal naming a new key ends that decode (``run`` is False, nothing kept is used) and teaches
    the shape the key; decoding again with the new version takes every line."""
    block = b'{"prompt": "p", "response": "r", "reward": 1.0, "step": 1}\n' \
            b'{"prompt": "p", "response": "r", "reward": 2.0, "step": 1, "fresh": 7}\n'
    shape = S._Shape(())
    starts, ends, indices = _split(block)
    first = S._BlockDecode(shape, block, starts, ends, indices, shape.version.decoder)
    assert not first.run() and first.relearned and "fresh" in shape.keys
    again = S._BlockDecode(shape, block, starts, ends, indices, shape.version.decoder)
    assert again.run() and again.result()[1:] == ([0, 1], [])
    refused = S._BlockDecode(S._Shape(()), block, starts, ends, indices, S._Shape(()).version.decoder,
                             may_learn=False)
    assert refused.run() and refused.result()[1:] == ([0], [1])
