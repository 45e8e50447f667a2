"""A run's location (``rl_board.base.location``): made at the door only, checked against the allowed
folders once per open, and every read below the door keeps to the roots it was opened under."""

from __future__ import annotations

import os
import pickle
import sys

import pytest
from conftest import sample, write_lines

from rl_board.base import access
from rl_board.base.access import OutsideAllowedFolders
from rl_board.base.location import RunLocation, open_location


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """An allowed folder holding one run, and a folder beside it that is not allowed."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    write_lines(allowed / "run" / "r.jsonl", [sample(1, 1.0, response="a"), sample(2, 3.0, response="b")])
    write_lines(outside / "run" / "r.jsonl", [sample(1, 9.0)])
    monkeypatch.setenv("RL_BOARD_ROOTS", str(allowed))
    return allowed, outside


def test_a_path_outside_the_roots_cannot_become_a_location(roots):
    """The door refuses a folder outside, by name, by ``..`` and by a symlink; the class can't be called."""
    allowed, outside = roots
    (allowed / "link").symlink_to(outside / "run")
    for path in (outside / "run", allowed / ".." / "outside" / "run", allowed / "link"):
        with pytest.raises(OutsideAllowedFolders):
            open_location(path)
    with pytest.raises(TypeError):
        RunLocation(outside / "run", None)
    inside = open_location(allowed / "run")
    with pytest.raises(OutsideAllowedFolders):
        inside.within(outside / "run")
    with pytest.raises(OutsideAllowedFolders):
        inside.open(outside / "run" / "r.jsonl")


def test_a_symlink_out_is_neither_listed_nor_opened(roots):
    """An entry of an allowed run folder that points outside the roots is not among its entries or files."""
    allowed, outside = roots
    run = allowed / "run"
    (run / "evil.jsonl").symlink_to(outside / "run" / "r.jsonl")
    location = open_location(run)
    assert sorted(p.name for p in location.entries()) == ["r.jsonl"]
    assert [p.name for p in location.files("*.jsonl")] == ["r.jsonl"]
    with pytest.raises(OutsideAllowedFolders):
        location.open(run / "evil.jsonl")
    assert location.read_range(run / "r.jsonl", 0, 9) == (run / "r.jsonl").read_bytes()[:9]


def test_a_location_keeps_the_roots_it_was_opened_under(roots, monkeypatch):
    """Changing RL_BOARD_ROOTS after the door does not widen what a location reads, and a pickled
    location (a worker's copy) holds the same roots."""
    allowed, outside = roots
    location = open_location(allowed / "run")
    monkeypatch.delenv("RL_BOARD_ROOTS")
    assert not location.contains(outside / "run" / "r.jsonl")
    copy = pickle.loads(pickle.dumps(location))
    assert copy == location and copy.roots == (allowed.resolve(),)
    assert not copy.contains(outside / "run" / "r.jsonl")


def test_a_run_is_checked_against_the_roots_once_per_open(roots, monkeypatch):
    """Loading a run (listing, splits, tokenizer search, reading, a record read again) reads the
    allowed folders once, at the door; before the location, it was read seven times."""
    from rl_board.analysis.source import load_run

    allowed, _ = roots
    calls = []
    real = access.allowed_roots

    def counted():
        calls.append(1)
        return real()

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("rl_board") and getattr(module, "allowed_roots", None) is real:
            monkeypatch.setattr(module, "allowed_roots", counted)
    run = load_run(allowed / "run", cache_root=False)
    assert run.report.lines_ok == 2
    run.record_parts(run.samples.index[0])
    assert len(calls) == 1


def test_the_door_reads_roots_once_when_unrestricted(tmp_path, monkeypatch):
    """Without RL_BOARD_ROOTS every folder is a location, and nothing is filtered out."""
    monkeypatch.delenv("RL_BOARD_ROOTS", raising=False)
    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0)])
    location = open_location(tmp_path)
    assert location.roots is None and location.contains("/")
    assert [p.name for p in location.entries()] == ["r.jsonl"]
    assert os.fspath(location.path) == os.fspath(tmp_path)


def test_the_trainer_metrics_search_keeps_to_the_location(roots):
    """``scalars.discover`` on a location finds a trainer_state.json beside the run, never one that is a
    symlink out of the roots, and never looks above the allowed folder."""
    from rl_board.scalars import discover

    allowed, outside = roots
    state = '{"log_history": [{"step": 1, "loss": 0.5}]}'
    (outside / "trainer_state.json").write_text(state)
    (allowed / "run" / "trainer_state.json").symlink_to(outside / "trainer_state.json")
    location = open_location(allowed / "run")
    assert discover(location) is None
    (allowed / "run" / "trainer_state.json").unlink()
    (allowed / "trainer_state.json").write_text(state)
    assert discover(location) == (allowed / "trainer_state.json").resolve()
    (tmp := outside.parent / "trainer_state.json").write_text(state)  # above the allowed folder
    (allowed / "trainer_state.json").unlink()
    assert discover(location) is None
    tmp.unlink()
