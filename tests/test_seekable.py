"""Random access into compressed logs (issue 38): reading many samples of a compressed file costs one pass
over it, and a run with a cache reads a single sample through an uncompressed copy there. The bytes read
are counted by the kernel (``/proc/self/io``'s ``rchar``), not by the code under test."""

from __future__ import annotations

import gzip
import lzma
import random
from pathlib import Path

import pytest
from conftest import sample, write_lines

from rl_board.analysis.source import load_run
from rl_board.store.seekable import PREFIX

LINES = 240


def _rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


pytestmark = pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes read with /proc/self/io")


def _compressed_run(folder: Path, codec: str) -> tuple[Path, int]:
    """One file of ``LINES`` samples (steps 1-8), each with 400 random token ids and log-probs (text that
    hardly compresses), written as rank0.jsonl.<codec>; returns the folder and the compressed size."""
    rng = random.Random(7)
    lines = [sample(1 + i // 30, float(i % 2), response=" ".join(f"w{rng.randrange(10**6)}" for _ in range(60)),
                    logprobs=[round(-rng.random(), 4) for _ in range(200)],
                    ref_logprobs=[round(-rng.random(), 4) for _ in range(200)]) for i in range(LINES)]
    plain = write_lines(folder / "plain.tmp", lines)
    data = plain.read_bytes()
    plain.unlink()
    if codec == "gz":
        packed = gzip.compress(data)
    elif codec == "xz":
        packed = lzma.compress(data)
    else:
        import zstandard

        packed = zstandard.ZstdCompressor().compress(data)
    target = folder / f"rank0.jsonl.{codec}"
    target.write_bytes(packed)
    return folder, len(packed)


@pytest.mark.slow
@pytest.mark.parametrize("codec", ["gz", "xz", "zst"])
def test_many_samples_of_a_compressed_file_cost_one_pass(tmp_path, codec):
    """Without a cache, ``records`` of every other sample, in reverse order, reads the compressed file about
    once (under 2x its size), where a seek from the start for each would read it ~60 times over."""
    folder, size = _compressed_run(tmp_path / "run", codec)
    run = load_run(folder, cache_root=False)
    labels = list(run.samples.index[::-2])
    before = _rchar()
    got = run.records(labels)
    read = _rchar() - before
    assert all(g is not None for g in got)
    assert [g[0]["reward"] for g in got] == [float(int(run.samples.loc[label, "line"]) - 1) % 2 for label in labels]
    assert read < 2 * size, (read, size)


@pytest.mark.parametrize("codec", ["gz", "zst"])
def test_a_single_sample_of_a_cached_compressed_run_is_read_from_its_copy(tmp_path, codec):
    """With a cache: the first record makes the uncompressed copy in the run's cache folder (one pass);
    then 40 single records read far less than the compressed file each (under 40 x size / 4 in all),
    and each is the line the plain file holds."""
    folder, size = _compressed_run(tmp_path / "run", codec)
    run = load_run(folder)
    first = run.samples.index[0]
    assert run.record_parts(first)[0]["step"] == 1
    copies = list(run.cache[0].glob(f"{PREFIX}*"))
    assert len(copies) == 1
    lines = copies[0].read_bytes().splitlines()
    assert len(lines) == LINES
    labels = list(run.samples.index[::6])
    before = _rchar()
    got = [run.record_parts(label) for label in labels]
    read = _rchar() - before
    assert read < len(labels) * size / 4, (read, size)
    import json

    for label, (canonical, _) in zip(labels, got):
        assert canonical["logprobs"] == json.loads(lines[int(run.samples.loc[label, "line"]) - 1])["logprobs"]


def test_no_copy_beyond_the_cache_cap(tmp_path, monkeypatch):
    """A cap smaller than the uncompressed file: no copy is kept, the record is still read."""
    monkeypatch.setenv("RL_BOARD_CACHE_MAX", "1K")
    folder, _ = _compressed_run(tmp_path / "run", "gz")
    run = load_run(folder)
    assert run.record_parts(run.samples.index[-1])[0]["step"] == 8
    assert not list(run.cache[0].glob(f"{PREFIX}*"))
