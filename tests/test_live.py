"""Following a run that is still being written."""

import pytest
from conftest import sample, write_lines

from rl_board.analysis.source import RunSource


def test_refresh_reads_exactly_the_new_complete_lines(tmp_path):
    """Appended lines appear once; a half-written line waits until its newline arrives."""
    path = write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), sample(1, 2.0)])
    source = RunSource(tmp_path, cache_root=False)
    assert source.refresh().samples["reward"].tolist() == [1.0, 2.0]
    with open(path, "a") as fh:
        fh.write('{"step": 2, "reward": 3.0}\n{"step": 2, "rew')
    run = source.refresh()
    assert run.samples["reward"].tolist() == [1.0, 2.0, 3.0]
    assert run.report.pending == ("r.jsonl",) and run.report.lines_bad == 0
    assert source.last_status == {"r.jsonl": "appended"}
    with open(path, "a") as fh:
        fh.write('ard": 4.0}\n')
    run = source.refresh()
    assert run.samples["reward"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert run.samples["line"].tolist() == [1, 2, 3, 4]
    assert run.report.pending == ()
    before = source.latest
    assert source.refresh() is before  # nothing new: the same snapshot, nothing re-read or rebuilt
    assert source.last_status == {"r.jsonl": "unchanged"}


def test_refresh_picks_up_new_files_and_steps(tmp_path):
    """A rank file that appears later is read; the step grid grows."""
    write_lines(tmp_path / "rank0.jsonl", [sample(1, 1.0)])
    source = RunSource(tmp_path)
    assert source.refresh().steps.index.tolist() == [1]
    write_lines(tmp_path / "rank1.jsonl", [sample(2, 5.0)])
    run = source.refresh()
    assert run.steps.index.tolist() == [1, 2] and run.report.files == ("rank0.jsonl", "rank1.jsonl")


def test_a_file_that_shrank_is_read_again(tmp_path):
    """A file rewritten shorter (a restarted trainer) is read from the start, its old rows dropped."""
    path = write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), sample(1, 2.0), sample(2, 3.0)])
    source = RunSource(tmp_path)
    source.refresh()
    write_lines(path, [sample(1, 9.0)])
    run = source.refresh()
    assert run.samples["reward"].tolist() == [9.0]
    assert source.last_status == {"r.jsonl": "parsed"}


def test_cached_run_follows_appends_across_restarts(tmp_path):
    """With the cache on, an app restart after appends shows old and new lines, each once."""
    path = write_lines(tmp_path / "r.jsonl", [sample(1, 1.0)])
    RunSource(tmp_path).refresh()
    with open(path, "a") as fh:
        fh.write('{"step": 1, "reward": 2.0}\n')
    source = RunSource(tmp_path)
    source.refresh()
    with open(path, "a") as fh:
        fh.write('{"step": 1, "reward": 3.0}\n')
    assert source.refresh().samples["reward"].tolist() == [1.0, 2.0, 3.0]
    assert RunSource(tmp_path).refresh().samples["reward"].tolist() == [1.0, 2.0, 3.0]


@pytest.mark.slow
def test_many_refreshes_are_merged_into_few_segments(tmp_path):
    """Each refresh that finds lines adds a segment; past a few, the small ones are merged, data intact."""
    path = write_lines(tmp_path / "r.jsonl", [sample(1, 0.0)])
    source = RunSource(tmp_path)
    source.refresh()
    for i in range(1, 20):
        with open(path, "a") as fh:
            fh.write(f'{{"step": {i + 1}, "reward": {float(i)}}}\n')
        run = source.refresh()
    assert run.samples["reward"].tolist() == [float(i) for i in range(20)]
    assert run.samples["line"].tolist() == list(range(1, 21))
    assert len(source._files["r.jsonl"].segments) <= 9
    reopened = RunSource(tmp_path).refresh()
    assert reopened.samples["line"].tolist() == list(range(1, 21))
    assert reopened.samples["reward"].tolist() == [float(i) for i in range(20)]


def test_max_samples_counts_again_after_a_file_is_replaced(tmp_path):
    """With max samples per step, a rewritten file is read with fresh counts, not the old file's."""
    path = write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), sample(1, 2.0)])
    source = RunSource(tmp_path, max_per_step=2)
    source.refresh()
    write_lines(path, [sample(1, 5.0)])
    assert source.refresh().samples["reward"].tolist() == [5.0]
