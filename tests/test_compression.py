"""Compressed logs (.gz, .xz, .bz2, .zst) are read as their uncompressed lines, by every reader of text."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import shutil

import numpy as np
import pytest
import zstandard
from conftest import sample, write_lines
from token_writers import NemoSample, train_tokenizer, write_nemo_step
from tokenizers import Tokenizer

from rl_board.analysis.source import RunSource, load_run
from rl_board.base.compression import open_path, read_bytes
from rl_board.readers import detect
from rl_board.store.tracking import list_run_files

CODECS = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress,
          ".zst": lambda data: zstandard.ZstdCompressor().compress(data)}


def _lines(step_count: int = 3, per_step: int = 4) -> list[dict]:
    return [sample(step, step + k / 10, prompt=f"p{step}-{k}", response=f"answer {step} {k} ünïcode",
                   response_tokens=["answer", f" {step}", f" {k}"], logprobs=[-0.5, -1.0, -1.5 - k])
            for step in range(1, step_count + 1) for k in range(per_step)]


def _compress(path, suffix):
    packed = path.with_name(path.name + suffix)
    packed.write_bytes(CODECS[suffix](path.read_bytes()))
    path.unlink()
    return packed


@pytest.mark.parametrize("suffix", list(CODECS))
def test_a_compressed_jsonl_run_reads_like_the_plain_one(tmp_path, suffix):
    """Each codec: a run of two rank files, compressed, has the samples the written lines hold, their
    texts read again from the compressed bytes, and a load note saying compressed files are read whole."""
    lines = _lines()
    for rank in (0, 1):
        plain = write_lines(tmp_path / "run" / f"rollout_data_rank{rank}.jsonl", lines[rank::2])
        _compress(plain, suffix)
    files, _ = list_run_files(tmp_path / "run", detect(tmp_path / "run"))
    assert [p.name for p in files] == [f"rollout_data_rank0.jsonl{suffix}", f"rollout_data_rank1.jsonl{suffix}"]
    run = load_run(tmp_path / "run")
    got = sorted(zip(run.samples["step"], run.samples["reward"]))
    assert got == sorted((line["step"], line["reward"]) for line in lines)
    texts = sorted(run.record_parts(label)[0]["response"] for label in run.samples.index)
    assert texts == sorted(line["response"] for line in lines)
    assert any("compressed" in note and "read whole" in note for note in run.report.notes)
    source_lines = run.source_lines(run.samples.index[:2]).splitlines()
    assert all(json.loads(line)["prompt"].startswith("p") for line in source_lines) and len(source_lines) == 2


def test_a_compressed_file_rewritten_with_more_lines_is_read_again_whole(tmp_path):
    """A .gz that changes (more lines, recompressed) is read again from its start: the samples are the new
    file's, none twice."""
    lines = _lines(step_count=4)
    path = tmp_path / "run" / "r.jsonl.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(b"".join(json.dumps(line).encode() + b"\n" for line in lines[:5])))
    source = RunSource(tmp_path / "run")
    assert len(source.refresh().samples) == 5
    path.write_bytes(gzip.compress(b"".join(json.dumps(line).encode() + b"\n" for line in lines)))
    again = source.refresh()
    assert sorted(again.samples["reward"]) == sorted(line["reward"] for line in lines)


def test_a_broken_archive_costs_only_itself(tmp_path):
    """A truncated .xz is named as unreadable; the plain file beside it loads."""
    write_lines(tmp_path / "run" / "a.jsonl", _lines()[:3])
    packed = lzma.compress(b"".join(json.dumps(line).encode() + b"\n" for line in _lines()))
    (tmp_path / "run" / "b.jsonl.xz").write_bytes(packed[: len(packed) // 2])
    run = load_run(tmp_path / "run")
    assert len(run.samples) == 3
    assert [name for name, _ in run.report.unreadable] == ["b.jsonl.xz"]


@pytest.mark.parametrize("suffix", list(CODECS))
def test_the_stream_reads_seeks_and_iterates_like_the_plain_file(tmp_path, suffix):
    """open_path reads, seeks back and forth and iterates lines as the uncompressed file does."""
    data = b"".join(f"line {i} {'x' * (i % 7)}\n".encode() for i in range(5000))
    plain = tmp_path / "f.txt"
    plain.write_bytes(data)
    packed = _compress(plain, suffix)
    assert read_bytes(packed) == data
    with open_path(packed) as fh:
        fh.seek(40_000)
        assert fh.read(100) == data[40_000:40_100]
        fh.seek(10)
        assert fh.read(20) == data[10:30]
    with open_path(packed) as fh:
        assert list(fh) == data.splitlines(keepends=True)


def test_a_nemo_rl_run_compressed_reads_like_the_plain_one(tmp_path):
    """A reader that reads files whole (NeMo-RL's step files) reads them compressed with the same rows."""
    tok = Tokenizer.from_file(str(train_tokenizer(tmp_path)))
    rng = np.random.default_rng(0)
    for step in (1, 2):
        samples = []
        for reward, text in ((1.0, "The answer is 44."), (0.0, "The answer is 45.")):
            ids = tok.encode(text).ids
            prev = (-np.abs(rng.normal(0, 0.5, len(ids)))).tolist()
            samples.append(NemoSample([text], reward, ids, [1] * len(ids), [reward] * len(ids), prev, prev))
        write_nemo_step(tmp_path / "plain", step, samples)
    shutil.copytree(tmp_path / "plain", tmp_path / "packed")
    for path in (tmp_path / "packed").glob("*.jsonl"):
        _compress(path, ".zst")
    plain, packed = load_run(tmp_path / "plain"), load_run(tmp_path / "packed")
    assert packed.report.reader == "nemo-rl" and len(packed.samples) == 4
    assert packed.samples[["step", "reward"]].values.tolist() == plain.samples[["step", "reward"]].values.tolist()
    assert [packed.record_parts(i)[0].get("token_ids") for i in packed.samples.index] == [
        plain.record_parts(i)[0].get("token_ids") for i in plain.samples.index]


@pytest.mark.slow
@pytest.mark.parametrize("writer", ["write_verl_run", "write_prime_rl_run", "write_prime_rl_tokens_run"])
def test_trainer_layouts_compressed_read_like_the_plain_ones(tmp_path, writer):
    """verl's step files, prime-rl's episode tree (all/ and effective/) and its token exports, every log
    file gzipped in place, load the same samples, splits and records as the plain run."""
    from rl_board import demo

    getattr(demo, writer)(tmp_path / "plain")
    shutil.copytree(tmp_path / "plain", tmp_path / "packed")
    logs = [p for p in (tmp_path / "packed").rglob("*.jsonl") if "metric" not in p.name]
    assert logs
    for path in logs:
        _compress(path, ".gz")
    plain, packed = load_run(tmp_path / "plain"), load_run(tmp_path / "packed")
    assert packed.report.reader == plain.report.reader and packed.splits == plain.splits
    assert packed.files == tuple(name + ".gz" for name in plain.files)
    columns = ["step", "reward", "response_len"]
    assert packed.samples[columns].fillna(-9).values.tolist() == plain.samples[columns].fillna(-9).values.tolist()
    label = packed.samples.index[-1]
    assert packed.record_parts(label)[0] == plain.record_parts(plain.samples.index[-1])[0]


@pytest.mark.slow
@pytest.mark.parametrize("writer", [None, "write_verl_run"])
def test_gzip_keep_leaves_one_run_not_two_copies(tmp_path, writer):
    """``gzip -k`` leaves each log beside its ``.gz`` twin: the run holds each written sample once (the
    plain files are read), and a note names each twin left aside."""
    from rl_board import demo

    run_dir = tmp_path / "run"
    if writer is None:
        lines = _lines()
        write_lines(run_dir / "rollout_data_rank0.jsonl", lines)
    else:
        getattr(demo, writer)(run_dir)
    logs = [p for p in run_dir.rglob("*.jsonl") if "metric" not in p.name]
    expected = sum(len(p.read_text().splitlines()) for p in logs)
    plain = load_run(run_dir, cache_root=False)
    for path in logs:
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
    both = load_run(run_dir, cache_root=False)
    assert len(both.samples) == len(plain.samples) == expected
    assert both.files == plain.files and not any(name.endswith(".gz") for name in both.files)
    twins = [note for note in both.report.notes if ".gz is " in note]
    assert len(twins) == len(logs)
