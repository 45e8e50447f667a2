"""The notebook API: ``rl_board.load(...)`` -> a ``Run`` whose public frame holds the sample's fields and
metrics by a stable ``sample_id``; a short repr, a hash, ``to_arrow``, the mapping in the command
line's direction, a mapping that finds nothing said aloud, ``rl_board.__version__``; and the session that
docs/python.md shows, run as a doctest."""

from __future__ import annotations

import doctest
import json
import re
import shutil
import tomllib
import warnings

import pyarrow as pa
import pytest
from conftest import REPO, command, sample, write_lines

BOOKKEEPING = ("seg", "row", "offset", "length", "ret_m2", "res_sum", "ev_n", "lr_pairs", "file", "line",
               "prompt_key", "has_tokens")


def _run(tmp_path, **options):
    import rl_board

    return rl_board.load(tmp_path / "run", cache=False, **options)


def test_the_public_frame_holds_fields_and_metrics_by_sample_id(tmp_path):
    """``to_pandas()`` is indexed by FILE:LINE, holds the logged fields and extras (values as written)
    and none of the bookkeeping columns the page's table keeps."""
    write_lines(tmp_path / "run" / "b.jsonl", [sample(2, 0.25, acc=1), sample(1, -1.5, acc=0)])
    write_lines(tmp_path / "run" / "a.jsonl", [sample(1, 0.5, acc=1)])
    run = _run(tmp_path)
    frame = run.to_pandas()
    assert frame.index.name == "sample_id"
    assert list(frame.index) == ["a.jsonl:1", "b.jsonl:2", "b.jsonl:1"]  # step, file, line order
    assert frame.loc["b.jsonl:1", "reward"] == 0.25 and frame.loc["b.jsonl:2", "step"] == 1
    assert frame["extra:acc"].tolist() == [1, 0, 1]
    assert not set(BOOKKEEPING) & set(frame.columns)
    assert set(BOOKKEEPING) - {"file", "line"} <= set(run._samples.columns)  # the page's table keeps them


def test_a_sample_id_stays_while_row_labels_shift_on_refresh(tmp_path):
    """A line appended to an earlier step moves the later samples' row labels; their sample ids and
    values stay, and a sample id opens the same record before and after."""
    from rl_board.analysis.source import RunSource

    write_lines(tmp_path / "run" / "a.jsonl", [sample(1, 0.1), sample(2, 0.2, response="two")])
    source = RunSource(tmp_path / "run", cache_root=False)
    before = source.refresh()
    with (tmp_path / "run" / "a.jsonl").open("a") as fh:
        fh.write(json.dumps(sample(1, 0.3)) + "\n")
    after = source.refresh()
    assert before.label_of("a.jsonl:2") != after.label_of("a.jsonl:2")  # the label is a position
    assert before.to_pandas().loc["a.jsonl:2", "reward"] == after.to_pandas().loc["a.jsonl:2", "reward"] == 0.2
    assert after.record("a.jsonl:2")["response"] == "two"
    with pytest.raises(KeyError, match="no sample 'a.jsonl:9'"):
        after.record("a.jsonl:9")


def test_record_is_one_dict_of_the_board_fields_then_the_others(tmp_path):
    """``run.record(sample_id)`` is one dict: the board's fields under its names (reward read from the mapped
    key, as the run's table reads it), then the line's other keys as written."""
    line = {"step": 3, "reward": -1.0, "my_score": 0.75, "prompt": "p", "response": "r", "note": "hi",
            "nested": {"a": [1, 2]}}
    write_lines(tmp_path / "run" / "r.jsonl", [sample(3, 0.5, response="first"), line])
    plain = _run(tmp_path)
    assert plain.record("r.jsonl:1") == {"step": 3, "reward": 0.5, "response": "first"}
    record = plain.record("r.jsonl:2")
    assert isinstance(record, dict) and record["reward"] == -1.0 and record["my_score"] == 0.75
    assert record["note"] == "hi" and record["nested"] == {"a": [1, 2]}
    mapped = _run(tmp_path, fields={"reward": "my_score"}).record("r.jsonl:2")
    assert mapped == {"step": 3, "reward": 0.75, "prompt": "p", "response": "r", "note": "hi",
                      "nested": {"a": [1, 2]}}


def test_samples_is_private_and_its_old_name_warns(tmp_path):
    """``run.samples`` still gives the page's table but warns, naming ``to_pandas()``; the notebook's calls
    (``to_pandas``, ``record``, ``token_table``, ``findings``, ``rl_board.diff``) never read it, so they run
    with that warning made an error."""
    import rl_board

    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 0.5, response="a b", response_tokens=["a", " b"]),
                                              sample(2, 0.25, response="c", response_tokens=["c"])])
    run = _run(tmp_path)
    with pytest.warns(DeprecationWarning, match=r"to_pandas\(\)"):
        table = run.samples
    assert table is run._samples and list(table["reward"]) == [0.5, 0.25]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        ids = list(run.to_pandas(text=True).index)
        assert ids == ["r.jsonl:1", "r.jsonl:2"] and run.record(ids[1])["response"] == "c"
        assert run.token_table(ids[0])["token"].tolist() == ["a", " b"]
        assert run.findings()["findings"] == [] and len(rl_board.diff(run, run)) == 0  # no prompts to match


def test_texts_takes_sample_ids(tmp_path):
    """``run.texts(sample_ids, field)`` reads a text field of the samples those ids name, in their order;
    an id the run lacks is a KeyError naming it."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 0.5, judge_rationale="first verdict"),
                                              sample(2, 0.25, judge_rationale="second verdict")])
    run = _run(tmp_path)
    assert run.texts(["r.jsonl:2", "r.jsonl:1"], "judge_rationale") == ["second verdict", "first verdict"]
    with pytest.raises(KeyError, match="r.jsonl:7"):
        run.texts(["r.jsonl:7"], "judge_rationale")


@pytest.mark.slow
def test_the_commands_never_read_the_old_samples_name(tmp_path):
    """The commands that read a run (summary, search, findings, tags, diff, report) run with the warning of
    ``run.samples`` made an error and exit 0: the package reads ``_samples`` only (a guard for code merged
    later)."""
    ppo = str(REPO / "rollout_samples" / "ppo_demo")
    agent = str(REPO / "rollout_samples" / "prime_rl_agent_demo")
    runs = (("summary", ppo, "--json"), ("search", ppo, "--regex", "sum", "--json"), ("findings", agent, "--json"),
            ("tags", ppo, "--json"), ("diff", ppo, ppo, "--steps", "1:15", "--steps-b", "16:30", "--json"),
            ("report", ppo, "-o", str(tmp_path / "r.html")))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="run.samples is private", category=DeprecationWarning)
        for argv in runs:
            done = command(*argv, "--no-cache")
            assert done.returncode == 0, (argv, done.stderr)


def test_to_arrow_is_the_public_frame_with_its_sample_id():
    """``to_arrow()`` has ``sample_id`` first, then the public columns, row for row as ``to_pandas()``."""
    import rl_board

    run = rl_board.load(REPO / "rollout_samples" / "verl_grpo_demo", cache=False)
    table, frame = run.to_arrow(), run.to_pandas()
    assert isinstance(table, pa.Table)
    assert table.column_names == ["sample_id", *frame.columns]
    assert table.column("sample_id").to_pylist() == list(frame.index)
    assert table.column("reward").to_pylist() == frame["reward"].tolist()


def test_repr_is_short_and_a_run_hashes():
    """The repr is one short line naming the folder, the format and the counts; a run hashes and compares
    by identity (a dict key), so two reads of one folder are two runs."""
    import rl_board

    path = REPO / "rollout_samples" / "ppo_demo"
    run, again = rl_board.load(path, cache=False), rl_board.load(path, cache=False)
    text = repr(run)
    assert len(text) < 300 and "\n" not in text
    lines = sum(len(p.read_text().splitlines()) for p in path.glob("*.jsonl"))
    assert text == f"<Run {str(path)!r} (jsonl): {lines} samples, steps 1–30, 4 files>"
    assert {run: 1, again: 2}[run] == 1 and run == run and run != again


def test_the_mapping_reads_in_the_command_lines_direction_and_the_old_keyword_warns(tmp_path):
    """``fields={field: source}`` (and the CLI's ``"reward=my_score"`` strings) read the field from that key,
    silently; the old ``rename={source: field}`` does the same with a DeprecationWarning naming ``fields=``;
    both at once is a TypeError."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 0.0, my_score=0.75, answer="7")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _run(tmp_path, fields={"reward": "my_score"}).to_pandas()["reward"].tolist() == [0.75]
        assert _run(tmp_path, fields=["reward=my_score"]).to_pandas()["reward"].tolist() == [0.75]
        run = _run(tmp_path, fields="reward=my_score,ground_truth=answer")
    assert run.to_pandas()["reward"].tolist() == [0.75]
    assert run.options.fields == (("reward", "my_score"), ("ground_truth", "answer"))
    with pytest.warns(DeprecationWarning, match=r"fields=\{'reward': 'my_score'\}"):
        assert _run(tmp_path, rename={"my_score": "reward"}).to_pandas()["reward"].tolist() == [0.75]
    with pytest.raises(TypeError):
        _run(tmp_path, rename={"my_score": "reward"}, fields={"reward": "my_score"})


def test_a_mapping_that_finds_nothing_is_an_error_or_a_warning(tmp_path):
    """A mapped key no line holds: nothing loaded is a FieldMappingError naming the key and the keys
    there; samples loaded anyway (an optional field) is a warning."""
    from rl_board.readers import FieldMappingError

    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 0.5, answer="4")])
    with pytest.raises(FieldMappingError, match=r"reward \(key 'my_scor'\).*Keys there: answer, reward, step"):
        _run(tmp_path, fields={"reward": "my_scor"})
    with pytest.warns(UserWarning, match=r"ground_truth \(key 'gold'\)"):
        run = _run(tmp_path, fields={"ground_truth": "gold"})
    assert len(run.to_pandas()) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(tmp_path, fields={"ground_truth": "answer"})  # found: silent


@pytest.mark.parametrize(("name", "per_step"), [("ppo_demo", None), ("prime_rl_agent_demo", None),
                                              ("trl_grpo_demo", 3)])
def test_findings_is_what_the_findings_command_prints(name, per_step):
    """``run.findings()`` equals the JSON ``rl-board findings --json`` prints for the same run read the same
    way (a PPO run, an agent run with a split, a GRPO run cut to 3 samples a step); its findings name their
    samples by the ids ``to_pandas()`` indexes."""
    import rl_board

    path = REPO / "rollout_samples" / name
    run = rl_board.load(path, cache=False, max_samples_per_step=per_step)
    argv = ("findings", str(path), "--json", "--no-cache") + (("--max-samples-per-step", str(per_step))
                                                            if per_step else ())
    printed = command(*argv)
    assert printed.returncode == 0, printed.stderr
    found = run.findings()
    assert found == json.loads(printed.stdout)
    assert found["findings"] and found["settings"]["max_samples_per_step"] == per_step
    ids = set(run.to_pandas().index)
    assert {sample for f in found["findings"] for sample in f["samples"]} <= ids


def test_version_is_the_projects():
    """``rl_board.__version__`` is the version pyproject.toml names (installed or from the checkout)."""
    import rl_board

    with open(REPO / "pyproject.toml", "rb") as fh:
        assert rl_board.__version__ == tomllib.load(fh)["project"]["version"]


@pytest.mark.slow
def test_the_notebook_session_in_the_docs_runs(tmp_path, monkeypatch):
    """Every ``pycon`` block of docs/python.md runs as a doctest against a copy of the bundled runs,
    each output as shown."""
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```pycon\n(.*?)```", text, re.S)
    assert blocks, "docs/python.md shows no notebook session"
    shutil.copytree(REPO / "rollout_samples", tmp_path / "rollout_samples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", str(tmp_path / "cache"))
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    globs: dict = {}
    for number, block in enumerate(blocks):  # one session: each block goes on with the names before it
        test = parser.get_doctest(block, globs, f"docs/python.md block {number + 1}", "docs/python.md", 0)
        runner.run(test, clear_globs=False)
        globs = test.globs
    result = runner.summarize(verbose=False)
    assert result.attempted and not result.failed
    line = json.loads((REPO / "rollout_samples/ppo_demo/rollout_data_rank1.jsonl").read_text().splitlines()[4])
    assert [line["step"], round(line["reward"], 4)] == [2, 0.1545]  # the sample the page names is that line
