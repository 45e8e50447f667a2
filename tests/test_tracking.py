"""File tracking: listing a run folder is linear in its files."""

from pathlib import PurePath

from rl_board.readers import reader_for
from rl_board.store.tracking import list_run_files


def test_listing_4000_files_compares_paths_linearly(tmp_path, monkeypatch):
    """Listing a folder of 4,000 run files and 10 others makes no more path comparisons than files
    (a list searched per file made 8 million)."""
    run = tmp_path / "run"
    run.mkdir()
    for i in range(4000):
        (run / f"{i}.jsonl").write_bytes(b'{"step": 0, "reward": 1}\n')
    for i in range(10):
        (run / f"notes{i}.txt").write_bytes(b"x")
    calls = [0]
    original = PurePath.__eq__

    def counted(self, other):
        calls[0] += 1
        return original(self, other)

    monkeypatch.setattr(PurePath, "__eq__", counted)
    kept, ignored = list_run_files(run, reader_for("jsonl"))
    assert len(kept) == 4000 and kept[0].name == "0.jsonl" and kept[-1].name == "3999.jsonl"
    assert ignored == [f"notes{i}.txt" for i in range(10)]
    assert calls[0] <= 4010


def test_a_file_added_after_a_listing_is_listed(tmp_path):
    """A refresh lists a file added since the last one, even when the folder's listing was reused before."""
    import os

    from rl_board.analysis.source import RunSource

    run = tmp_path / "run"
    run.mkdir()
    (run / "0.jsonl").write_bytes(b'{"step": 0, "reward": 1}\n')
    old = 1_000_000_000  # 2001: long settled
    os.utime(run / "0.jsonl", (old, old))
    os.utime(run, (old, old))
    source = RunSource(run, cache_root=False)
    assert source.refresh().report.files == ("0.jsonl",)
    assert source.refresh().report.files == ("0.jsonl",)  # the folder as listed: its listing is reused
    (run / "1.jsonl").write_bytes(b'{"step": 1, "reward": 0}\n')
    run_now = source.refresh()
    assert run_now.report.files == ("0.jsonl", "1.jsonl")
    assert run_now.samples["reward"].tolist() == [1.0, 0.0]


def test_a_link_retargeted_outside_the_allowed_folders_is_dropped_on_refresh(tmp_path, monkeypatch):
    """With allowed folders set, a run file that is a link to a link is listed while it leads inside them,
    and no longer once the inner link is pointed outside (the run folder itself unchanged)."""
    import os

    from rl_board.analysis.source import RunSource

    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    run = allowed / "run"
    run.mkdir(parents=True)
    outside.mkdir()
    (run / "0.jsonl").write_bytes(b'{"step": 0, "reward": 1}\n')
    (allowed / "real.jsonl").write_bytes(b'{"step": 1, "reward": 1}\n')
    (outside / "secret.jsonl").write_bytes(b'{"step": 1, "reward": 9}\n')
    (allowed / "hop.jsonl").symlink_to(allowed / "real.jsonl")
    (run / "1.jsonl").symlink_to(allowed / "hop.jsonl")
    old = 1_000_000_000
    os.utime(run, (old, old))
    monkeypatch.setenv("RL_BOARD_ROOTS", str(allowed))
    source = RunSource(run, cache_root=False)
    assert source.refresh().report.files == ("0.jsonl", "1.jsonl")
    (allowed / "hop.jsonl").unlink()
    (allowed / "hop.jsonl").symlink_to(outside / "secret.jsonl")
    os.utime(run, (old, old))
    got = source.refresh()
    assert got.report.files == ("0.jsonl",)
    assert 9.0 not in got.samples["reward"].tolist()


def test_a_read_file_that_changes_and_cant_be_read_is_named_not_a_traceback(tmp_path):
    """A file read before that grows and loses its read permission is named as unreadable on refresh;
    the other files stay loaded."""
    import os

    import pytest

    from rl_board.analysis.source import RunSource

    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    run = tmp_path / "run"
    run.mkdir()
    (run / "a.jsonl").write_bytes(b'{"step": 0, "reward": 1}\n')
    (run / "b.jsonl").write_bytes(b'{"step": 1, "reward": 0}\n')
    source = RunSource(run, cache_root=False)
    assert source.refresh().report.lines_ok == 2
    with open(run / "b.jsonl", "ab") as fh:
        fh.write(b'{"step": 2, "reward": 0}\n')
    (run / "b.jsonl").chmod(0)
    try:
        got = source.refresh()
    finally:
        (run / "b.jsonl").chmod(0o644)
    assert got.report.files == ("a.jsonl",) and [name for name, _ in got.report.unreadable] == ["b.jsonl"]
