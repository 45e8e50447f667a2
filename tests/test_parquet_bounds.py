"""Parquet comes under the expansion bound of compressed files (``RL_BOARD_MAX_RATIO``,
``RL_BOARD_MAX_EXPANDED_GB``): a file is read a row group at a time, each checked from its metadata (and its
dictionary-encoded strings from their lengths) before it is made whole. Real Parquet files, written by pyarrow
as TRL's and ART's writers do (``pq.write_table``); the TRL, ART and field-mapped readers all read through it."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import command

from rl_board.analysis.source import load_run

MIB = 1 << 20


def _bomb(path, rows: int = 8, value_mib: int = 16, normal: int = 4):
    """A TRL completions file of two row groups: ``normal`` ordinary rows, then ``rows`` rows whose completion
    is one ``value_mib`` MiB string, dictionary-encoded (stored once, compressed to a few KB): a small file
    that expands to rows x value_mib MiB."""
    first = pa.table({"step": pa.array([1] * normal, pa.int64()), "prompt": ["p"] * normal,
                      "completion": [f"answer {i}" for i in range(normal)], "reward": [0.5] * normal})
    big = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["x" * (value_mib * MIB)]))
    second = pa.table({"step": pa.array([2] * rows, pa.int64()), "prompt": ["p"] * rows,
                       "completion": big, "reward": [1.0] * rows})
    with pq.ParquetWriter(path, first.schema, compression="zstd", use_dictionary=True) as writer:
        writer.write_table(first)
        writer.write_table(second.cast(first.schema))
    return path


def test_a_string_bomb_stops_at_its_row_group_with_a_note(tmp_path):
    """A small TRL file whose second row group is 8 rows of a 16 MiB completion (128 MiB once read, past the
    64 MiB floor): the 4 rows of the first group load, the 8 don't, and summary names the file and the bound
    in one note; exit 0."""
    run = tmp_path / "run"
    run.mkdir()
    path = _bomb(run / "completions_00001.parquet")
    assert path.stat().st_size < MIB  # small on disk
    loaded = load_run(run, cache_root=False)
    assert loaded.report.lines_ok == 4
    proc = command("summary", str(run), "--no-cache", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["lines_ok"] == 4
    notes = [line for line in proc.stderr.splitlines() if "expands past 64 MB" in line]
    assert len(notes) == 1 and notes[0].startswith("note: completions_00001.parquet: expands past") and "RL_BOARD_MAX_RATIO" in notes[0]
    assert "its first 1 of 2 row groups, 4 rows, are read" in notes[0]


def test_many_rows_are_refused_from_the_metadata_before_they_are_read(tmp_path, monkeypatch):
    """A file of one row group of 2,000,000 constant rows (run-length encoded: a few KB) under a 10 MiB bound
    (RL_BOARD_MAX_EXPANDED_GB=10/1024): the row group would take at least 2,000,000 x 16 bytes, so it is not read;
    the file is named unreadable with the bound, and the other file of the run loads."""
    monkeypatch.setenv("RL_BOARD_MAX_EXPANDED_GB", str(10 / 1024))
    run = tmp_path / "run"
    run.mkdir()
    n = 2_000_000
    pq.write_table(pa.table({"step": pa.repeat(pa.scalar(3, pa.int64()), n), "reward": pa.repeat(pa.scalar(1.0), n)}),
                   run / "completions_00003.parquet", compression="zstd")
    pq.write_table(pa.table({"step": [1, 1], "completion": ["a", "b"], "reward": [0.0, 1.0]}),
                   run / "completions_00001.parquet")
    loaded = load_run(run, cache_root=False)
    assert loaded.report.lines_ok == 2
    (name, why), = loaded.report.unreadable
    assert name == "completions_00003.parquet" and "expands past 10 MB" in why and "RL_BOARD_MAX_EXPANDED_GB" in why


def test_an_art_file_and_a_field_mapped_file_are_bounded_too(tmp_path):
    """ART's trajectories parquet and a table read with a field mapping (--field response=answer) go through
    the same bound: the bomb's row group is not read, with one note naming the file."""
    art = tmp_path / "model" / "trajectories" / "train"  # ART's layout: the model folder is the run
    art.mkdir(parents=True)
    rows = 6
    big = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["y" * (16 * MIB)]))
    table = pa.table({"reward": [1.0] * rows, "messages": [[{"role": "user", "content": "hi"}]] * rows,
                      "tools_json": big})
    pq.write_table(table, art / "0001.parquet", use_dictionary=True, compression="zstd")
    got = load_run(tmp_path / "model", cache_root=False)
    assert got.report.reader == "art" and got.report.lines_ok == 0
    assert [name for name, why in got.report.unreadable if "expands past 64 MB" in why] == [
        "trajectories/train/0001.parquet"]

    mapped = tmp_path / "mapped"
    mapped.mkdir()
    answers = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array(["z" * (16 * MIB)]))
    pq.write_table(pa.table({"step": [1] * rows, "answer": answers, "reward": [0.0] * rows}),
                   mapped / "table.parquet", use_dictionary=True, compression="zstd")
    proc = command("summary", str(mapped), "--no-cache", "--field", "response=answer")
    assert proc.returncode == 1  # no line loaded
    assert "table.parquet" in proc.stderr and "expands past 64 MB" in proc.stderr
