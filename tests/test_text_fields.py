"""Text fields (issue 48 item 4): a string field no reader maps (a judge's ``judge_rationale``) is read as text,
never cut: whole and byte-equal in ``to_pandas(text=True)``, searchable with ``search --in FIELD``, and shown whole
and literally on the page. The verl run is made by verl's ``_dump_generations`` (``ray_writers.verl_dump``)."""

import json
from pathlib import Path

import pytest
from conftest import command, sample, write_lines
from ray_writers import verl_dump

from rl_board.analysis.source import load_run

HTML = "# Verdict\n**FAIL**: <b>bold</b> <script>alert(1)</script> [link](http://x) VERDICT: FAIL"


def _rationale(i: int, size: int, verdict: str) -> str:
    """A rationale of at least ``size`` UTF-8 bytes, its verdict at the very end (past any cut of the text)."""
    unit = f"Step {i}: the answer \"x\" is checked\tagainst 北京 and é.\n"
    body = unit * (size // len(unit.encode()) + 1)
    return f"{body}VERDICT: {verdict}"


# (step, [(score, rationale)]): the 230 KB rationale on line 1, others over 100 KB elsewhere, short ones between
STEPS = [(1, [(1.0, _rationale(1, 230_000, "FAIL")), (0.5, _rationale(2, 120_000, "PASS")), (0.0, HTML)]),
         (2, [(1.0, _rationale(4, 150_000, "FAIL")), (0.5, "short. VERDICT: PASS"),
              (0.0, _rationale(6, 101_000, "FAIL"))])]


def _verl_run(root: Path) -> Path:
    exp = root / "exp"
    for step, rows in STEPS:
        verl_dump(exp / "rollout_data", step, [f"q{step}.{i}" for i in range(len(rows))],
                  [f"a{step}.{i}" for i in range(len(rows))], ["gt"] * len(rows), [s for s, _ in rows],
                  {"acc": [s > 0.5 for s, _ in rows], "judge_rationale": [r for _, r in rows]})
    # a validation dump beside it makes the folder a verl experiment (rollout_data: the train split)
    verl_dump(exp / "val_data", 0, ["v"], ["w"], ["gt"], [1.0], {"acc": [True], "judge_rationale": ["ok"]})
    return exp


def _expected() -> dict:
    """sample id -> rationale, from what was written: verl names its files STEP.jsonl, one line per sample."""
    return {f"rollout_data/{step}.jsonl:{line}": r
            for step, rows in STEPS for line, (_, r) in enumerate(rows, start=1)}


def test_the_first_rationale_is_230_kb_and_three_more_pass_100_kb():
    """The fixture holds what the issue asks: 230 KB on line 1, 100+ KB rationales elsewhere."""
    sizes = [len(r.encode()) for _, rows in STEPS for _, r in rows]
    assert sizes[0] >= 230_000 and sum(s > 100_000 for s in sizes[1:]) == 3


def test_every_rationale_is_byte_equal_in_to_pandas(tmp_path):
    """to_pandas(text=True) has a judge_rationale column whose every value is the rationale verl wrote, byte for
    byte (the 230 KB one too); without text the column is not read."""
    run = load_run(_verl_run(tmp_path), cache_root=False)
    assert run.text_fields() == ["judge_rationale"]
    frame = run.to_pandas(text=True)
    got = {sample_id: value.encode() for sample_id, value in frame["judge_rationale"].items()}
    assert got == {sample_id: r.encode() for sample_id, r in _expected().items()}
    assert "judge_rationale" not in run.to_pandas().columns


def test_search_in_the_rationale_finds_the_verdicts_past_100_kb(tmp_path):
    """search --in judge_rationale --regex finds exactly the FAIL verdicts, which the long rationales hold after
    their first 100 KB; the excerpt shows the match."""
    exp = _verl_run(tmp_path)
    proc = command("search", str(exp), "--in", "judge_rationale", "--regex", "VERDICT: FAIL$", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    fails = {sid for sid, r in _expected().items() if r.endswith("FAIL")}
    assert fails == {"rollout_data/1.jsonl:1", "rollout_data/1.jsonl:3", "rollout_data/2.jsonl:1",
                     "rollout_data/2.jsonl:3"}
    assert got["matches"] == 4 and got["searched"]["complete"]
    assert {f"{s['file']}:{s['line']}" for s in got["samples"]} == fails
    text = command("search", str(exp), "--in", "judge_rationale", "--regex", "(?i)verdict: pass")
    assert text.returncode == 0 and "2 matches" in text.stdout and "«VERDICT: PASS»" in text.stdout


def test_search_of_a_field_no_sample_has_says_so(tmp_path):
    """A name that is no text field of the run finds nothing and a note lists the run's text fields."""
    proc = command("search", str(_verl_run(tmp_path)), "--in", "judge_rationel", "--regex", "FAIL", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["matches"] == 0
    assert 'text field "judge_rationel"' in proc.stderr and '"judge_rationale"' in proc.stderr


def test_the_boards_own_lines_keep_their_text_fields(tmp_path):
    """Lines of the board's own JSONL with a critique string from line 2 on: a text field, read whole, searched,
    None for the sample without it."""
    long = "c" * 150_000 + " needle"
    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 0.0, response="b"),
                                               {**sample(1, 1.0, response="a"), "critique": long},
                                               {**sample(2, 0.5, response="c"), "critique": "fine"}])
    run = load_run(tmp_path / "run", cache_root=False)
    assert run.text_fields() == ["critique"]
    frame = run.to_pandas(text=True)
    assert frame["critique"].tolist() == [None, long, "fine"]
    from rl_board.analysis.search import Query, compute_search

    keep, scan = compute_search(run, Query("needle$", "critique"))
    assert keep.tolist() == [False, True, False] and scan.complete


def _box_height(at, value: str) -> int | None:
    """The pixel height of the box holding the code block that shows ``value`` (None: a box of its content's
    height); ``LookupError`` when no code block shows it whole."""
    def walk(node, parent):
        for child in getattr(node, "children", {}).values():
            if getattr(child, "type", None) == "code" and child.value == value:
                height = parent.proto.height_config
                return height.pixel_height if height.HasField("pixel_height") else None
            found = walk(child, child)
            if found != "none":
                return found
        return "none"

    got = walk(at._tree, None)
    if got == "none":
        raise LookupError("no code block shows the text whole")
    return got


@pytest.mark.slow
def test_the_page_shows_a_rationale_whole_and_literally(tmp_path):
    """The sample view shows the Markdown/HTML rationale as its own characters (a code block, nothing rendered)
    and the 230 KB one whole, each in a scrolling box."""
    from page_steps import load_run as open_run

    from rl_board.views import keys

    _verl_run(tmp_path)
    at = open_run(tmp_path, "exp")
    at.slider(key=keys.STEP).set_value(1).run()
    at.selectbox(key=keys.SAMPLE).select_index(2).run()  # sorted by score, highest first: the 0.0 one
    assert not at.exception
    assert HTML in [c.value for c in at.code]
    assert not any("<script>" in m.value for m in at.markdown)
    assert _box_height(at, HTML) is None  # short: as it is
    at.selectbox(key=keys.SAMPLE).select_index(0).run()
    assert STEPS[0][1][0][1] in [c.value for c in at.code]
    assert _box_height(at, STEPS[0][1][0][1]) == 400  # long: whole, in a box of 400 pixels that scrolls


@pytest.mark.slow
def test_the_sample_view_shows_a_critique_whole_and_literally(tmp_path):
    """A sample of the board's own lines (no turns): its Markdown/HTML critique is shown as its own characters,
    and a 150 KB one whole (the prompt and response views would cut it)."""
    from page_steps import load_run as open_run

    from rl_board.base.text import MAX_TEXT_CHARS
    from rl_board.views import keys

    long = "x" * 150_000 + " end"
    assert len(long) > MAX_TEXT_CHARS
    write_lines(tmp_path / "run" / "r.jsonl", [{**sample(1, 1.0, prompt="p", response="a"), "critique": HTML},
                                               {**sample(1, 0.0, prompt="p", response="b"), "critique": long}])
    at = open_run(tmp_path, "run")
    assert not at.exception
    assert HTML in [c.value for c in at.code]
    assert not any("<script>" in m.value for m in at.markdown)
    at.selectbox(key=keys.SAMPLE).select_index(1).run()
    assert long in [c.value for c in at.code] and _box_height(at, long) == 400


def test_a_string_column_of_trl_completions_is_a_text_field(tmp_path):
    """TRL's completions parquet (the bundled demo) with a judge_rationale column added: each value whole in
    to_pandas(text=True), the 120 KB ones searched to their end."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq
    from conftest import REPO

    from rl_board.analysis.search import Query, compute_search

    run_dir = tmp_path / "trl"
    shutil.copytree(REPO / "rollout_samples" / "trl_grpo_demo", run_dir)
    written = {}
    for path in sorted(run_dir.glob("completions_*.parquet")):
        table = pq.read_table(path)
        values = [("r" * 120_000 if row == 0 else "short") + f" <{path.name}:{row + 1}>" for row in range(table.num_rows)]
        written.update({f"{path.name}:{row + 1}": v for row, v in enumerate(values)})
        pq.write_table(table.append_column("judge_rationale", pa.array(values)), path)
    run = load_run(run_dir, cache_root=False)
    frame = run.to_pandas(text=True)
    assert frame["judge_rationale"].to_dict() == written
    keep, _ = compute_search(run, Query(r"^r+ <", "judge_rationale"))
    assert sorted(run.sample_ids(run.samples[keep])) == sorted(k for k, v in written.items() if v.startswith("rrr"))


@pytest.mark.slow
def test_the_mcp_search_tool_takes_a_text_field(tmp_path):
    """The MCP search tool's text_field names judge_rationale: the FAIL verdicts, as the command finds them."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed (requirements-dev.txt pins it)")
    from test_mcp import _session

    exp = _verl_run(tmp_path)
    _, (result,) = _session([("search", {"run": str(exp), "regex": "VERDICT: FAIL$", "text_field": "judge_rationale"})],
                            roots=tmp_path)
    assert not result.is_error, result.content
    assert result.structured_content["matches"] == 4
    assert {f"{s['file']}:{s['line']}" for s in result.structured_content["samples"]} == {
        sid for sid, r in _expected().items() if r.endswith("FAIL")}


@pytest.mark.slow
def test_the_pages_search_offers_and_searches_the_rationale(tmp_path):
    """The Explore area offers judge_rationale among its fields and lists exactly the samples whose rationale
    ends in a FAIL verdict (prompts q1.0, q1.2, q2.0, q2.2, by construction)."""
    from page_steps import load_run as open_run

    from rl_board.views import keys

    _verl_run(tmp_path)
    at = open_run(tmp_path, "exp", keys.EXPLORE)
    assert "judge_rationale" in at.selectbox(key=keys.EXPLORE_FIELD).options
    at.selectbox(key=keys.EXPLORE_FIELD).select("judge_rationale").run()
    at.text_input(key=keys.EXPLORE_REGEX).input("VERDICT: FAIL$").run()
    assert not at.exception
    expected = [f"q{step}.{i}" for step, rows in STEPS for i, (_, r) in enumerate(rows) if r.endswith("FAIL")]
    assert sorted(at.dataframe[0].value["prompt"]) == expected == ["q1.0", "q1.2", "q2.0", "q2.2"]


def test_a_spent_budget_stops_after_the_first_chunk_and_says_where(tmp_path, monkeypatch):
    """With no time to spend and chunks of 2 samples, a text field's search reads the first chunk only (step 1's
    lines 1 and 2, the 230 KB FAIL one found) and says it searched 2 of 6 samples, through no whole step."""
    from rl_board.analysis import search

    monkeypatch.setattr(search, "TEXT_FIELD_CHUNK", 2)
    run = load_run(_verl_run(tmp_path), cache_root=False)
    scan = search.compute_text_field_search(run, "judge_rationale", "VERDICT: FAIL$", seconds=0)
    assert scan.searched == 2 and not scan.complete and scan.through_step is None and scan.stopped_at_step == 1
    assert run.sample_ids(run.samples[scan.found]).tolist() == ["rollout_data/1.jsonl:1"]
