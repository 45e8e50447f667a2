"""The JSONL reader's block path (one decode per block) against its line-by-line fallback and by hand."""

import json
import math
import tracemalloc

import numpy as np
import pyarrow as pa
import pytest
from conftest import sample, write_lines

from rl_board.analysis.source import load_run
from rl_board.base import fields as F
from rl_board.derive.samples import derive
from rl_board.readers import ReadOptions
from rl_board.readers.jsonl import parse_block
from rl_board.store import ranges

EOS = "<eos>"


def _lines(rows) -> bytes:
    return b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows)


def _both(data: bytes, options=ReadOptions(EOS, (), EOS)):
    """(block path, fallback) as segment rows, and the block path's ParsedBlock."""
    fast = parse_block(data, options=options)
    slow = parse_block(data, options=options, fast=False)
    assert fast.errors == slow.errors and fast.lines == slow.lines
    return derive(fast.table, options), derive(slow.table, options), fast


def _assert_same(a: pa.Table, b: pa.Table) -> None:
    assert a.column_names == b.column_names
    for name in a.column_names:
        x, y = a[name].to_pylist(), b[name].to_pylist()
        assert len(x) == len(y), name
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float) and math.isnan(u):
                assert math.isnan(v), name
            else:
                assert u == v, name


def _grpo_line(step, reward, tokens, **extra):
    n = len(tokens)
    return {"step": step, "prompt": "What is 2 + 2?", "response": " ".join(tokens), "response_tokens": tokens,
            "logprobs": [-0.5] * n, "ref_logprobs": [-0.25] * n, "entropy": [1.0] * n, "reward": reward, **extra}


def test_lines_with_extras_take_the_block_path_and_match_the_fallback():
    """Lines with a float, an int and a bool extra are all read by the block's struct, and give the
    rows the line-by-line path gives, extras by hand."""
    rows = [_grpo_line(1, 1.0, ["a", "b", EOS, EOS], advantage=0.5, num_turns=2, acc=True),
            _grpo_line(1, 0.0, ["c", EOS, EOS, EOS], advantage=-0.5, num_turns=1, acc=False),
            _grpo_line(2, 1.0, ["a", "a", "a", "a", "a"], advantage=0.0, num_turns=3, acc=True)]
    fast, slow, parsed = _both(_lines(rows))
    assert parsed.slow == 0
    _assert_same(fast, slow)
    assert fast[F.extra_column("advantage")].to_pylist() == [0.5, -0.5, 0.0]
    assert fast[F.extra_column("num_turns")].to_pylist() == [2.0, 1.0, 3.0]
    assert fast[F.extra_column("acc")].to_pylist() == [1.0, 0.0, 1.0]
    assert fast["response_len"].to_pylist() == [3, 2, 5]  # up to and including the first EOS
    assert fast["repeat_4gram"].to_pylist()[2] == pytest.approx(1 - 1 / 2)  # a a a a a: 2 grams, 1 distinct


def test_lines_without_token_lists_match_the_fallback():
    """Response-level lines (verl's aliases, texts only) read the same both ways."""
    rows = [{"input": "q1", "output": "the the the the cat", "score": 1.0, "step": 3, "acc": True,
             "pred": "4", "gts": {"answer": 4}},
            {"input": "q1", "output": "", "score": 0.0, "step": 3, "acc": False, "pred": "", "gts": "4"}]
    fast, slow, parsed = _both(_lines(rows))
    _assert_same(fast, slow)
    assert fast["ground_truth"].to_pylist() == ['{"answer": 4}', "4"]
    assert fast[F.extra_column("acc")].to_pylist() == [1.0, 0.0]
    assert F.extra_column("pred") not in fast.column_names  # a string is not an extra
    assert fast["repeat_4gram"].to_pylist()[0] == pytest.approx(0.0)  # 2 grams, both distinct


def test_nan_and_a_bad_line_mid_block_cost_only_themselves():
    """A line with NaN (Python's json writes it) is read by the fallback with its NaN kept; a broken
    line is one error; the lines around them take the block path and match the fallback."""
    rows = [_grpo_line(1, 1.0, ["a", EOS], advantage=1.0) for _ in range(3)]
    nan_line = json.dumps(_grpo_line(1, 0.5, ["b", EOS], advantage=float("nan"))).encode()
    data = _lines([rows[0], nan_line, rows[1], b'{"step": 1, "reward": ', rows[2]])
    fast, slow, parsed = _both(data)
    _assert_same(fast, slow)
    assert parsed.slow == 2  # the NaN line and the broken one
    assert [line for line, _ in parsed.errors] == [4]
    assert fast[F.LINE].to_pylist() == [1, 2, 3, 5]
    assert math.isnan(fast[F.extra_column("advantage")].to_pylist()[1])


def test_a_key_first_seen_mid_block_is_learned():
    """An extra field that appears only in later lines becomes a column, absent (null) before."""
    rows = [sample(1, 1.0), sample(1, 2.0), sample(2, 3.0, late=7), sample(2, 4.0, late=8.5)]
    fast, slow, parsed = _both(_lines(rows))
    _assert_same(fast, slow)
    assert parsed.slow == 0
    assert fast[F.extra_column("late")].to_pylist() == [None, None, 7.0, 8.5]


def test_null_entries_in_per_token_lists():
    """Lists holding null (NaN written by a trainer that maps NaN to null) keep their other values."""
    rows = [{"step": 1, "reward": 1.0, "logprobs": [-1.0, None, -2.0], "ref_logprobs": [-1.5, -1.0, -1.0]}]
    fast, slow, parsed = _both(_lines(rows))
    _assert_same(fast, slow)
    assert parsed.slow == 0
    # log-ratio over the finite pairs: (-1.0 - -1.5) and (-2.0 - -1.0) -> sum -0.5, mean -0.25
    assert fast["log_ratio_sum"].to_pylist() == [pytest.approx(-0.5)]
    assert fast["log_ratio_mean"].to_pylist() == [pytest.approx(-0.25)]


def test_a_lone_surrogate_and_deep_nesting_cost_one_line_each(tmp_path):
    """A lone surrogate escape is read with U+FFFD in its place; a value nested too deeply to
    read is one rejected line; the rest of the run loads (issue 15, case 9)."""
    deep = b'{"step": 1, "reward": 5.0, "meta": ' + b"[" * 100000 + b"]" * 100000 + b"}"
    write_lines(tmp_path / "r" / "a.jsonl", [
        sample(1, 1.0, response="fine"),
        b'{"step": 1, "reward": 2.0, "response": "bad \\ud800 end"}',
        deep,
        b'{"step": 1, "reward": 3.0, "response": ' + b"[" * 1200 + b"]" * 1200 + b"}",
        sample(2, 4.0)])
    run = load_run(tmp_path / "r", cache_root=False)
    assert run.samples[F.REWARD].tolist() == [1.0, 2.0, 4.0]
    assert [line for _, line, _ in run.report.errors] == [3, 4]
    texts = run.with_text(run.samples)["response"].tolist()
    assert texts[1] == "bad \ufffd end"
    assert run.record_parts(run.samples.index[1])[0]["response"] == "bad \ufffd end"


@pytest.mark.slow
def test_a_line_over_the_limit_is_named_and_skipped_with_bounded_memory(tmp_path, monkeypatch):
    """A line longer than RL_BOARD_MAX_LINE_MB is one error and is never held in memory (issue 15,
    case 11): the read of a 24 MB line with a 1 MB limit and 64 KB chunks peaks far below it."""
    monkeypatch.setenv("RL_BOARD_MAX_LINE_MB", "1")
    monkeypatch.setattr(ranges, "READ_CHUNK", 1 << 16)
    big = b'{"step": 1, "reward": 9.0, "response": "' + b"x" * (24 << 20) + b'"}'
    write_lines(tmp_path / "r" / "a.jsonl", [sample(1, 1.0), big, sample(1, 2.0)])
    tracemalloc.start()
    try:
        run = load_run(tmp_path / "r", cache_root=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.samples[F.REWARD].tolist() == [1.0, 2.0]
    (_, line, reason), = run.report.errors
    assert line == 2 and "24 MB" in reason and "1.0 MB" in reason and "RL_BOARD_MAX_LINE_MB" in reason
    assert peak < 8 << 20


def test_an_unterminated_tail_over_the_limit_is_noted_not_read(tmp_path, monkeypatch):
    """A last line with no newline that is already longer than the limit is named in the notes."""
    monkeypatch.setenv("RL_BOARD_MAX_LINE_MB", "1")
    path = tmp_path / "r" / "a.jsonl"
    write_lines(path, [sample(1, 1.0)])
    with open(path, "ab") as fh:
        fh.write(b'{"step": 1, "reward": 2.0, "response": "' + b"y" * (3 << 20))
    run = load_run(tmp_path / "r", cache_root=False)
    assert run.samples[F.REWARD].tolist() == [1.0]
    assert any("a.jsonl ends in 3.0 MB without a newline" in note for note in run.report.notes)


def test_generated_grpo_run_reads_the_same_both_ways(tmp_path):
    """Every line of the demo's GRPO shape takes the block path and matches the fallback."""
    from rl_board.demo import write_grpo_run

    path, = write_grpo_run(tmp_path, steps=2, samples_per_step=16, ranks=1)
    fast, slow, parsed = _both(path.read_bytes(), ReadOptions("<|endoftext|>", (), "<|endoftext|>"))
    assert parsed.slow == 0 and fast.num_rows == 32
    _assert_same(fast, slow)
    counted = np.array(fast["response_len"].to_pylist())
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert counted.tolist() == [line["response_tokens"].index("<|endoftext|>") + 1 for line in lines]


@pytest.mark.slow
def test_reader_interface_has_no_upward_imports():
    """Every module of the readers (the jsonl and parquet readers among them) imports only readers and
    base (read from the code with ``ast``, wherever the module now lies): they turn bytes into rows."""
    from test_layers import PACKAGE, _imported

    modules = sorted((PACKAGE / "readers").rglob("*.py"))
    assert {p.stem for p in modules} >= {"jsonl", "parquet"}
    for path in modules:
        assert {name.split(".")[0] for name in _imported(path, PACKAGE)} <= {"base", "readers"}, path


def test_threads_learning_keys_at_once_read_the_same_rows():
    """Two threads reading blocks whose lines bring new keys at once (the page's sessions share one
    shape per field mapping) each get the rows the fallback gives."""
    import threading

    blocks = [_lines([sample(1, float(i), **{f"k{t}_{i}": i}) for i in range(40)]) for t in range(8)]
    expected = [derive(parse_block(b, fast=False).table) for b in blocks]
    got = [None] * len(blocks)

    def read(indices):
        for i in indices:
            got[i] = derive(parse_block(blocks[i]).table)

    threads = [threading.Thread(target=read, args=(range(t, len(blocks), 2),)) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for a, b in zip(got, expected):
        _assert_same(a, b)


@pytest.mark.slow
def test_a_run_of_many_distinct_keys_leaves_later_runs_on_the_fast_path():
    """After a block whose lines each carry a key of their own (more keys than a shape keeps), a block of
    another run with extras of its own is still decoded by the block struct: no line of it is read slowly."""
    for block in range(40):  # 8,000 keys in all: the process's shape for this field mapping is full
        parse_block(b"".join(json.dumps({"step": 1, "reward": 0.5, f"req-{block}-{i}": 1.0}).encode() + b"\n"
                             for i in range(200)))
    ordinary = b"".join(json.dumps({"step": s, "reward": 1.0, "acc": 0.5, "len_bonus": 0.1}).encode() + b"\n"
                        for s in range(20))
    got = parse_block(ordinary)
    assert got.slow == 0 and got.table.num_rows == 20
    assert got.table["extra:acc"].to_pylist() == [0.5] * 20
