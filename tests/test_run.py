"""``analysis.Run`` lists every query it answers in one place, each answered by one of the three parts it
holds (composition: ``SegmentQueries``, ``SourceRecords``, ``PublicTable``), and each part reads the run it
belongs to."""

from __future__ import annotations

import inspect

from conftest import sample, write_lines

from rl_board.analysis.public import PublicTable
from rl_board.analysis.records import SourceRecords
from rl_board.analysis.run import Run, _PartQuery
from rl_board.analysis.segment_queries import SegmentQueries


def _public_methods(kind: type) -> set[str]:
    return {name for name, value in vars(kind).items() if not name.startswith("_") and inspect.isfunction(value)}


def test_run_lists_every_public_method_of_its_parts_and_no_other():
    """The names ``Run``'s class body hands to a part are exactly the parts' public methods, each to the
    part that defines it, with that method's docstring."""
    listed = {name: value for name, value in vars(Run).items() if isinstance(value, _PartQuery)}
    wanted = {name: kind for kind in (SegmentQueries, SourceRecords, PublicTable) for name in _public_methods(kind)}
    assert {name: value.kind for name, value in listed.items()} == wanted
    assert Run.words.__doc__ == SegmentQueries.words.__doc__ and Run.__dict__["record"].__doc__ is not None
    assert not any(issubclass(Run, kind) for kind in wanted.values())  # parts held, not inherited


def test_a_runs_queries_are_answered_by_its_own_parts(tmp_path):
    """On a run of three written lines, each part answers about that run: the sample ids in step, file,
    line order, a record read again from its file (its extra as written), and the words of a response."""
    import rl_board

    write_lines(tmp_path / "run" / "b.jsonl", [sample(2, 0.25, response="red fox", acc=1),
                                               sample(1, -1.5, response="blue", acc=0)])
    write_lines(tmp_path / "run" / "a.jsonl", [sample(1, 0.5, response="green sea turtle", acc=1)])
    run = rl_board.load(tmp_path / "run", cache=False)
    assert list(run.sample_ids()) == ["a.jsonl:1", "b.jsonl:2", "b.jsonl:1"]
    canonical, others = run.record_parts("b.jsonl:1")
    assert (canonical["step"], canonical["reward"], canonical["response"]) == (2, 0.25, "red fox")
    assert run._samples.loc[run.label_of("b.jsonl:1"), "extra:acc"] == 1
    assert [len(words) for words in run.words(run._samples)] == [3, 1, 2]
    other = rl_board.load(tmp_path / "run", cache=False)
    assert run._records.run is run and other._records.run is other and run._public is not other._public
