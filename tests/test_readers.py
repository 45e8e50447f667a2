"""Readers: format detection, aliases, field mapping, extras, TRL parquet, and their bad inputs."""

import json
import math
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import command, write_lines

from rl_board.analysis.source import RunSource, load_run
from rl_board.analysis.summary import build_summary
from rl_board.readers import FieldMappingError, detect, jsonl, parquet, parse_field_mapping

NAN = float("nan")


def _summary(*args):
    proc = command("summary", *map(str, args))
    return proc.returncode, proc.stdout, proc.stderr


def _verl_line(step, score, **extra):
    return {"input": f"q{step}", "output": f"a{step}", "gts": "7", "score": score, "step": step, **extra}


def test_detect_picks_the_format_by_the_files_present(tmp_path):
    """A folder of .jsonl is read as JSONL, a folder of .parquet as parquet, an empty one as JSONL."""
    write_lines(tmp_path / "a" / "1.jsonl", [_verl_line(1, 1.0)])
    pq.write_table(pa.table({"step": [1], "completion": ["x"], "r": [1.0]}), tmp_path / "b.parquet")
    (tmp_path / "c").mkdir()
    assert detect(tmp_path / "a") is jsonl
    assert detect(tmp_path) is parquet
    assert detect(tmp_path / "c") is jsonl


def test_verl_aliases_and_extras(tmp_path):
    """input/output/score/gts feed prompt/response/reward/ground_truth; acc (bool) and num_turns are
    extras; pred (a string) is not; a non-string gts is shown as JSON text."""
    write_lines(tmp_path / "1.jsonl", [
        _verl_line(1, 1.0, acc=True, pred="7", num_turns=2),
        _verl_line(1, 0.0, acc=False, pred="8"),
        {**_verl_line(1, 0.5), "gts": {"answer": 7}, "acc": None},
    ])
    run = load_run(tmp_path, cache_root=False)
    assert run.report.reader == "jsonl" and run.report.lines_bad == 0
    assert sorted(run.extras) == ["acc", "num_turns"]
    texts = run.with_text(run.samples)
    assert texts["prompt"].tolist() == ["q1"] * 3 and texts["response"].tolist() == ["a1"] * 3
    assert texts["ground_truth"].tolist() == ["7", "7", '{"answer": 7}']
    assert run.samples["reward"].tolist() == [1.0, 0.0, 0.5]
    assert run.samples["extra:acc"].tolist()[:2] == [1.0, 0.0] and math.isnan(run.samples["extra:acc"][2])
    canonical, others = run.record_parts(0)
    assert canonical["response"] == "a1" and others == {"acc": True, "pred": "7", "num_turns": 2}
    step = build_summary(run)["steps"][0]
    assert step["extras"] == {"acc": 0.5, "num_turns": 2.0}  # (1 + 0) / 2 samples that have acc; 2 / 1


def test_canonical_key_wins_over_its_alias(tmp_path):
    """With both reward and score, reward is the reward and score becomes an extra."""
    write_lines(tmp_path / "r.jsonl", [{"step": 1, "reward": 2.0, "score": 9.0, "response": "r", "output": "o"}])
    run = load_run(tmp_path, cache_root=False)
    assert run.samples["reward"].tolist() == [2.0] and run.samples["extra:score"].tolist() == [9.0]
    assert run.with_text(run.samples)["response"].tolist() == ["r"]


def test_line_with_neither_reward_nor_score_is_named(tmp_path):
    """A line without reward or score is rejected with that reason; the others load."""
    write_lines(tmp_path / "3.jsonl", [_verl_line(3, 1.0), {"step": 3, "output": "x"}])
    run = load_run(tmp_path, cache_root=False)
    assert run.report.lines_ok == 1
    assert run.report.errors == (("3.jsonl", 2, "missing 'reward' or 'score'"),)


def test_field_mapping_reads_the_users_keys(tmp_path):
    """reward=my_score and response=answer read those keys; a mapped key is not an extra; a line
    without the mapped key is rejected naming it."""
    write_lines(tmp_path / "r.jsonl", [
        {"step": 1, "my_score": 0.25, "answer": "yes", "reward": 5.0, "tries": 3},
        {"step": 1, "answer": "no", "reward": 1.0},
    ])
    fields = parse_field_mapping(["reward=my_score", "response=answer"])
    run = load_run(tmp_path, cache_root=False, fields=fields)
    assert run.samples["reward"].tolist() == [0.25]
    assert run.with_text(run.samples)["response"].tolist() == ["yes"]
    assert run.extras == ["tries"]  # my_score is the reward; the canonical name "reward" is never an extra
    assert run.report.errors == (("r.jsonl", 2, "missing 'reward' (mapped from 'my_score')"),)


@pytest.mark.parametrize("text, reason", [
    ("reward", "not CANONICAL=SOURCE"),
    ("rewards=x", "not a field the board knows"),
    ("reward=a,reward=b", "mapped twice"),
])
def test_bad_field_mappings_say_why(text, reason):
    """A malformed, unknown or doubled mapping raises an error naming the problem."""
    with pytest.raises(FieldMappingError, match=reason):
        parse_field_mapping(text)


def test_new_token_lists_count_toward_positions(tmp_path):
    """rollout_logprobs (or rollout_log_probs) and entropy count in n, the shortest numeric list."""
    write_lines(tmp_path / "r.jsonl", [
        {"step": 1, "reward": 1.0, "logprobs": [-1.0] * 5, "ref_logprobs": [-1.0] * 5, "entropy": [0.5] * 4},
        {"step": 1, "reward": 1.0, "logprobs": [-1.0] * 5, "rollout_log_probs": [-1.0] * 3},
    ])
    run = load_run(tmp_path, cache_root=False)
    assert run.samples["response_len"].tolist() == [4, 3]
    tokens = run.sample_tokens(1)
    assert tokens.rollout_logprobs.tolist() == [-1.0] * 3 and len(tokens.tokens) == 3


def _trl_table(step, **columns):
    n = len(next(iter(columns.values())))
    return pa.table({"step": pa.array([step] * n, pa.int64()), **columns})


def test_trl_parquet_reward_is_the_nan_ignoring_sum_of_reward_functions(tmp_path):
    """reward = acc + fmt with NaN ignored (0 when both are NaN); every numeric or boolean column
    but step is an extra; mode (a string) is shown with the sample; rows are 1-based lines."""
    pq.write_table(_trl_table(
        10, prompt=["p1", "p2", "p3"], completion=["c1", "c2", "c3"],
        acc=pa.array([1.0, NAN, NAN]), fmt=pa.array([0.5, 0.25, NAN]), advantage=[0.1, -0.2, 0.1],
        flag=[True, False, True], mode=["train"] * 3), tmp_path / "completions_00010.parquet")
    run = load_run(tmp_path, cache_root=False)
    assert run.report.reader == "parquet" and run.report.lines_ok == 3
    assert run.samples["reward"].tolist() == [1.5, 0.25, 0.0]
    assert sorted(run.extras) == ["acc", "advantage", "flag", "fmt"]
    assert run.samples["extra:flag"].tolist() == [1.0, 0.0, 1.0]
    assert run.samples["line"].tolist() == [1, 2, 3]
    assert run.with_text(run.samples)["response"].tolist() == ["c1", "c2", "c3"]
    canonical, others = run.record_parts(1)
    assert canonical["response"] == "c2" and others["mode"] == "train"
    step = build_summary(run)["steps"][0]
    assert step["reward_mean"] == pytest.approx((1.5 + 0.25 + 0.0) / 3)
    assert step["extras"]["acc"] == 1.0 and step["extras"]["fmt"] == pytest.approx(0.375)
    assert step["extras"]["flag"] == pytest.approx(2 / 3)


def test_trl_parquet_reward_column_is_used_as_is(tmp_path):
    """A reward column wins over summing; the other numeric columns stay extras."""
    pq.write_table(_trl_table(1, completion=["a", "b"], reward=[2.0, 4.0], r1=[9.0, 9.0]), tmp_path / "x.parquet")
    run = load_run(tmp_path, cache_root=False)
    assert run.samples["reward"].tolist() == [2.0, 4.0] and run.extras == ["r1"]


@pytest.mark.slow
def test_parquet_bad_inputs_are_named_and_the_rest_load(tmp_path):
    """A corrupt file and a file without step are named with the reason; a row without a step is a
    rejected line; the good file loads."""
    pq.write_table(_trl_table(1, completion=["a"], r=[1.0]), tmp_path / "good.parquet")
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet")
    pq.write_table(pa.table({"completion": ["a"], "r": [1.0]}), tmp_path / "nostep.parquet")
    pq.write_table(pa.table({"step": pa.array([2, None], pa.int64()), "r": [1.0, 2.0]}), tmp_path / "nulls.parquet")
    run = load_run(tmp_path, cache_root=False)
    unreadable = dict(run.report.unreadable)
    assert set(unreadable) == {"corrupt.parquet", "nostep.parquet"}
    assert "not a readable parquet file" in unreadable["corrupt.parquet"]
    assert unreadable["nostep.parquet"] == "no 'step' column"
    assert run.report.errors == (("nulls.parquet", 2, "missing 'step'"),)
    assert sorted(run.samples["step"].tolist()) == [1, 2]
    code, out, _ = _summary(tmp_path, "--json", "--no-cache")
    got = json.loads(out)
    assert code == 0 and (got["files"], got["lines_ok"], got["lines_bad"]) == (4, 2, 1)
    assert {e["file"] for e in got["files_unreadable"]} == {"corrupt.parquet", "nostep.parquet"}


def test_parquet_refresh_reads_new_and_changed_files_and_caches(tmp_path):
    """A new file is picked up, a rewritten file is read again, and a restart takes both from the cache."""
    pq.write_table(_trl_table(1, completion=["a"], r=[1.0]), tmp_path / "completions_00001.parquet")
    source = RunSource(tmp_path)
    assert source.refresh().samples["reward"].tolist() == [1.0]
    pq.write_table(_trl_table(2, completion=["b"], r=[2.0]), tmp_path / "completions_00002.parquet")
    assert source.refresh().samples["reward"].tolist() == [1.0, 2.0]
    assert source.last_status == {"completions_00001.parquet": "unchanged", "completions_00002.parquet": "parsed"}
    path = tmp_path / "completions_00001.parquet"
    pq.write_table(_trl_table(1, completion=["a", "c"], r=[1.0, 3.0]), path)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert source.refresh().samples["reward"].tolist() == [1.0, 3.0, 2.0]
    again = RunSource(tmp_path)
    assert again.refresh().samples["reward"].tolist() == [1.0, 3.0, 2.0]
    assert set(again.last_status.values()) == {"cached"}


def test_verl_refresh_picks_up_the_next_steps_file(tmp_path):
    """verl writes one file per step: a refresh reads the new one, in natural order (2 before 10)."""
    write_lines(tmp_path / "2.jsonl", [_verl_line(2, 1.0)])
    source = RunSource(tmp_path)
    source.refresh()
    write_lines(tmp_path / "10.jsonl", [_verl_line(10, 0.0)])
    run = source.refresh()
    assert run.files == ("2.jsonl", "10.jsonl") and run.samples["step"].tolist() == [2, 10]


@pytest.mark.slow
def test_summary_cli_on_verl_folder_with_field_mapping(tmp_path):
    """The CLI detects verl lines, reports extras per step, and takes --field."""
    write_lines(tmp_path / "1.jsonl", [_verl_line(1, 1.0, acc=True, bonus=0.5), _verl_line(1, 0.0, acc=False)])
    write_lines(tmp_path / "2.jsonl", [_verl_line(2, 1.0, acc=True)])
    code, out, _ = _summary(tmp_path, "--json", "--no-cache")
    steps = json.loads(out)["steps"]
    assert code == 0 and [s["extras"] for s in steps] == [{"acc": 0.5, "bonus": 0.5}, {"acc": 1.0}]  # a step lists
    # only the extras some sample of it has (no bonus at step 2)
    assert [s["reward_mean"] for s in steps] == [0.5, 1.0]
    code, out, _ = _summary(tmp_path, "--json", "--no-cache", "--field", "reward=bonus")
    got = json.loads(out)
    assert code == 0 and got["lines_ok"] == 1 and got["steps"][0]["reward_mean"] == 0.5
    assert "score" in got["steps"][0]["extras"]  # no longer the reward, so an extra
    assert _summary(tmp_path, "--json", "--field", "nonsense")[0] == 2


@pytest.mark.parametrize("steps", [
    pa.array([1.0, float("inf"), 3.0]),
    pa.array([1.0, 1e300, 3.0]),
    pa.array([1, 2**64 - 1, 3], pa.uint64()),
])
@pytest.mark.slow
def test_parquet_step_out_of_range_costs_its_row_only(tmp_path, steps):
    """A step of inf, 1e300 or 2**64-1 rejects that row (named, line 2); the other rows and files load,
    in the page's loader and in the CLI (exit 0)."""
    pq.write_table(pa.table({"step": steps, "reward": [1.0, 2.0, 3.0]}), tmp_path / "odd.parquet")
    pq.write_table(pa.table({"step": [5], "reward": [5.0]}), tmp_path / "fine.parquet")
    run = load_run(tmp_path, cache_root=False)
    assert sorted(run.samples["reward"].tolist()) == [1.0, 3.0, 5.0]
    assert [(f, line) for f, line, _ in run.report.errors] == [("odd.parquet", 2)]
    code, out, _ = _summary(tmp_path, "--json", "--no-cache")
    assert code == 0 and json.loads(out)["lines_ok"] == 3


def test_a_zero_byte_parquet_is_named_unreadable_not_counted(tmp_path):
    """An empty .parquet beside a good one: named among the unreadable files, not among those read."""
    pq.write_table(pa.table({"step": [1], "reward": [1.0]}), tmp_path / "good.parquet")
    (tmp_path / "empty.parquet").write_bytes(b"")
    run = load_run(tmp_path, cache_root=False)
    assert run.report.files == ("good.parquet",)
    assert [name for name, _ in run.report.unreadable] == ["empty.parquet"]


def test_nested_field_paths_in_the_mapping(tmp_path):
    """step=run.work.step and reward=traces.0.rewards.correct.score read nested values of JSON lines;
    parquet struct fields by meta.step; a line without the path is rejected with the mapped name."""
    lines = [{"run": {"work": {"step": 3}}, "traces": [{"rewards": {"correct": {"score": 0.5}}}], "n": 1},
             {"run": {"work": {"step": 4}}, "traces": [{"rewards": {"correct": {"score": 1.0}}}], "n": 2},
             {"run": {}, "traces": []}]
    write_lines(tmp_path / "j" / "traces.jsonl", lines)
    fields = parse_field_mapping(["step=run.work.step", "reward=traces.0.rewards.correct.score"])
    run = load_run(tmp_path / "j", cache_root=False, fields=fields)
    assert run.samples["step"].tolist() == [3, 4] and run.samples["reward"].tolist() == [0.5, 1.0]
    assert run.samples["extra:n"].tolist() == [1.0, 2.0]
    assert run.report.errors == (("traces.jsonl", 3, "missing 'step' (mapped from 'run.work.step')"),)
    assert run.record_parts(1)[0] == {"step": 4, "reward": 1.0}
    pq.write_table(pa.table({"meta": [{"step": 1, "r": {"s": 0.25}}], "completion": ["a"]}),
                   tmp_path / "p.parquet")
    table_run = load_run(tmp_path, cache_root=False, fields=parse_field_mapping(["step=meta.step", "reward=meta.r.s"]))
    assert table_run.samples["step"].tolist() == [1] and table_run.samples["reward"].tolist() == [0.25]
