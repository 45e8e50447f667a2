"""Reading runs from real files: merging ranks, bad lines, partial lines, folders."""

import json
import subprocess
import sys

import pytest
from conftest import REPO, sample, write_lines

from rl_board.analysis.source import load_run
from rl_board.store.loader import RootError, list_runs


def test_ranks_merge_by_step_in_file_then_line_order(tmp_path):
    """Lines of all rank files are merged by step; within a step, file order then line order."""
    write_lines(tmp_path / "data_rank0.jsonl", [sample(2, 0.1), sample(1, 0.2)])
    write_lines(tmp_path / "data_rank1.jsonl", [sample(1, 0.3), sample(2, 0.4)])
    write_lines(tmp_path / "data_rank10.jsonl", [sample(1, 0.5)])
    run = load_run(tmp_path, cache_root=False)
    assert run.samples["step"].tolist() == [1, 1, 1, 2, 2]
    assert run.samples["reward"].tolist() == [0.2, 0.3, 0.5, 0.1, 0.4]
    assert run.report.files == ("data_rank0.jsonl", "data_rank1.jsonl", "data_rank10.jsonl")
    assert run.steps.loc[1, "reward_mean"] == pytest.approx((0.2 + 0.3 + 0.5) / 3)


BAD_LINES = [
    (b'{"step": 1, "reward": ', "invalid JSON"),
    (b'[1, 2, 3]', "not an object"),
    (b'"just a string"', "not an object"),
    (b'{"reward": 1.0}', "missing 'step'"),
    (b'{"step": "3", "reward": 1.0}', "'step' must be an integer"),
    (b'{"step": 1.5, "reward": 1.0}', "'step' must be an integer"),
    (b'{"step": true, "reward": 1.0}', "'step' must be an integer"),
    (b'{"step": 1}', "missing 'reward'"),
    (b'{"step": 1, "reward": "high"}', "'reward' must be a number"),
    (b'{"step": 1, "reward": null}', "missing 'reward'"),
    (b'{"step": 1, "reward": 1, "logprobs": "oops"}', "'logprobs' must be a list"),
    (b'{"step": 1, "reward": 1, "prompt": "\xff\xfe"}', "not UTF-8"),
]


@pytest.mark.slow
@pytest.mark.parametrize("bad, reason", BAD_LINES, ids=[r for _, r in BAD_LINES])
def test_a_bad_line_is_reported_and_the_rest_load(tmp_path, bad, reason):
    """Each kind of bad line is rejected with file:line and a reason; the good lines around it load."""
    write_lines(tmp_path / "r0.jsonl", [sample(1, 1.0), bad, sample(2, 2.0)])
    run = load_run(tmp_path, cache_root=False)
    assert run.samples["reward"].tolist() == [1.0, 2.0]
    assert run.report.lines_ok == 2 and run.report.lines_bad == 1
    (file, line, why), = run.report.errors
    assert (file, line) == ("r0.jsonl", 2)
    assert reason in why


def test_nan_and_infinity_load(tmp_path):
    """NaN and Infinity are JSON to Python; they load and means skip NaN."""
    write_lines(tmp_path / "r.jsonl", ['{"step": 1, "reward": NaN}', '{"step": 1, "reward": 3.0}',
                                       '{"step": 2, "reward": Infinity, "ref_reward": -Infinity}'])
    run = load_run(tmp_path, cache_root=False)
    assert run.report.lines_ok == 3 and run.report.lines_bad == 0
    assert run.steps.loc[1, "reward_mean"] == 3.0
    assert run.steps.loc[2, "reward_mean"] == float("inf")


def test_integral_float_step_and_optional_wrong_types(tmp_path):
    """step 3.0 is the integer 3; an optional field of the wrong type becomes empty, the line stays."""
    write_lines(tmp_path / "r.jsonl", ['{"step": 3.0, "reward": 1, "ref_reward": "n/a", "ground_truth": 42}'])
    run = load_run(tmp_path, cache_root=False)
    row = run.with_text(run.samples).iloc[0]
    assert row["step"] == 3 and row["ground_truth"] == "42"
    assert row["ref_reward"] != row["ref_reward"]  # NaN


def test_null_lists_and_extra_keys_load(tmp_path):
    """null token lists (GRPO has no values) and unknown keys are fine."""
    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0, values=None, logprobs=[-1.0], ref_logprobs=[-1.5],
                                              extra={"nested": [1, 2]})])
    run = load_run(tmp_path, cache_root=False)
    assert run.report.lines_ok == 1
    assert run.samples.iloc[0]["log_ratio_sum"] == pytest.approx(0.5)


def test_last_line_without_newline_waits(tmp_path):
    """A last line still being written is neither loaded nor an error."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"step": 1, "reward": 1}\n{"step": 2, "rew')
    run = load_run(tmp_path, cache_root=False)
    assert run.report.lines_ok == 1 and run.report.lines_bad == 0
    assert run.report.pending == ("r.jsonl",)


def test_empty_files_blank_lines_and_other_files(tmp_path):
    """Empty files and blank lines are skipped; files that are not .jsonl are listed as ignored."""
    (tmp_path / "empty.jsonl").write_bytes(b"")
    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), "", "   ", sample(1, 2.0)])
    (tmp_path / "notes.txt").write_text("hello")
    run = load_run(tmp_path, cache_root=False)
    assert run.samples["reward"].tolist() == [1.0, 2.0]
    assert run.samples["line"].tolist() == [1, 4]
    assert run.report.lines_bad == 0 and run.report.ignored_files == ("notes.txt",)


def test_every_line_bad_loads_nothing_and_says_why(tmp_path):
    """A run with no usable line loads zero samples and lists every rejected line."""
    write_lines(tmp_path / "r.jsonl", ["nope", "{}"])
    run = load_run(tmp_path, cache_root=False)
    assert run.report.lines_ok == 0 and run.report.lines_bad == 2 and len(run.steps) == 0


def test_max_samples_per_step_is_first_n_in_file_line_order(tmp_path):
    """Max samples keeps the first N of each step in file then line order, skipping the rest unparsed."""
    write_lines(tmp_path / "a.jsonl", [sample(1, 1.0), sample(1, 2.0), sample(2, 3.0), sample(1, 4.0)])
    write_lines(tmp_path / "b.jsonl", [sample(2, 5.0), sample(2, 6.0), "{broken but skipped, \"step\": 2}"])
    run = load_run(tmp_path, max_per_step=2, cache_root=False)
    assert run.samples["reward"].tolist() == [1.0, 2.0, 3.0, 5.0]
    assert run.report.skipped == 3 and run.report.lines_bad == 0
    full = load_run(tmp_path, cache_root=False)  # the same choice from a full parse
    assert full.samples.groupby("step").head(2)["reward"].tolist() == [1.0, 2.0, 3.0, 5.0]


def test_max_samples_per_step_skips_every_broken_line_of_a_full_step(tmp_path):
    """A broken line naming a full step is skipped, not bad, past the first 100 rejected lines too."""
    step_1 = ['{broken, "step": 1}'] * 150 + ['junk "step": 1'] * 100  # step 1 full: all 250 skipped
    step_2 = ['{broken, "step": 2}'] * 120 + ["nope"] * 30  # step 2 holds one sample; "nope" names none
    step_3 = ['{"step": 3, broken'] * 50 + [sample(3, 4.0), sample(3, 5.0)] + ['{"step": 3, broken'] * 50
    write_lines(tmp_path / "a.jsonl", [sample(1, 1.0), sample(1, 2.0), *step_1, sample(2, 3.0), *step_2,
                                       *step_3, sample(3, 6.0)])
    run = load_run(tmp_path, max_per_step=2, cache_root=False)
    assert run.samples["reward"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert run.report.skipped == 250 + 50 + 1  # step 1's broken lines; step 3's once full, and its third sample
    assert run.report.lines_bad == 120 + 30 + 50  # step 2's, the stepless, step 3's before it was full
    full = load_run(tmp_path, cache_root=False)  # every rejected line is bad without the quota
    assert full.report.lines_bad == 250 + 150 + 100 and full.report.skipped == 0


def test_roots_with_clear_messages(tmp_path):
    """A missing root, a root that is a file, and an empty root each get a message naming the layout."""
    with pytest.raises(RootError, match="not found"):
        list_runs(tmp_path / "missing")
    (tmp_path / "file.jsonl").write_text("")
    with pytest.raises(RootError, match="is a file"):
        list_runs(tmp_path / "file.jsonl")
    empty = tmp_path / "empty"
    (empty / "not_a_run").mkdir(parents=True)
    with pytest.raises(RootError, match="ROOT/RUN_NAME"):
        list_runs(empty)


def test_runs_are_subfolders_with_jsonl(tmp_path):
    """Runs are the subfolders holding .jsonl files; files directly in the root form run '.'."""
    write_lines(tmp_path / "run_b" / "x.jsonl", [sample(1, 1)])
    write_lines(tmp_path / "run_a" / "x.jsonl", [sample(1, 1)])
    (tmp_path / "no_logs").mkdir()
    assert list_runs(tmp_path) == ["run_a", "run_b"]
    write_lines(tmp_path / "top.jsonl", [sample(1, 1)])
    assert list_runs(tmp_path) == [".", "run_a", "run_b"]


def test_openrlhf_style_padding_and_step_start(tmp_path):
    """OpenRLHF keeps pads (== eos) in every list and starts at step 1; pads leave the aggregates."""
    pad = "<|endoftext|>"
    write_lines(tmp_path / "r.jsonl", [sample(1, 0.5, response="hi" + pad * 2, response_tokens=["hi", pad, pad],
                                              logprobs=[-1.0, -0.5, 0.0], ref_logprobs=[-1.5, -9.0, 0.0],
                                              values=[0.1, 0.2, 0.0], token_rewards=[0.0, 0.5, 0.0])])
    run = load_run(tmp_path, pad_token=pad, cache_root=False)
    row = run.samples.iloc[0]
    assert row["response_len"] == 1 and row["log_ratio_sum"] == pytest.approx(0.5)
    assert row["response_chars"] == 2  # pads leave the character count too
    assert run.sample_tokens(0).is_pad.tolist() == [False, True, True]


@pytest.mark.slow
def test_demo_samples_are_what_the_generator_writes(tmp_path):
    """The shipped rollout_samples/ are exactly what `python -m rl_board generate` writes."""
    subprocess.run([sys.executable, "-m", "rl_board", "generate", str(tmp_path)], check=True, cwd=REPO)
    shipped = sorted(p.relative_to(REPO / "rollout_samples") for p in (REPO / "rollout_samples").rglob("*")
                     if p.is_file())
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")
                     if p.is_file() and p.name != ".rl-board-generated.json")  # generate's list of what it wrote
    assert shipped == written
    assert any(p.suffix == ".parquet" for p in shipped) and any(p.parent.name == "verl_grpo_demo" for p in shipped)
    for name in shipped:
        assert (tmp_path / name).read_bytes() == (REPO / "rollout_samples" / name).read_bytes(), name
    ppo = load_run(REPO / "rollout_samples" / "ppo_demo", cache_root=False)
    assert len(ppo.report.files) == 4 and ppo.report.lines_bad == 0
    texts = ppo.with_text(ppo.samples)
    assert texts["response"].str.contains("<img").any()
    assert texts["prompt"].str.contains("计算").any()


def test_take_reads_rows_across_chunks():
    """Texts for a few rows come from the right chunks of a many-chunk column."""
    import numpy as np
    import pyarrow as pa

    from rl_board.analysis.segment_queries import take_rows as _take

    column = pa.chunked_array([["a", "b"], ["c"], [], ["d", "e", "f"]])
    assert _take(column, np.array([5, 0, 2, 3])) == ["f", "a", "c", "d"]


def test_an_unreadable_file_is_reported_and_the_rest_load(tmp_path, monkeypatch):
    """A file that can't be opened is named in a note; the other files load."""
    import builtins

    write_lines(tmp_path / "rank0.jsonl", [sample(1, 1.0)])
    write_lines(tmp_path / "rank1.jsonl", [sample(1, 2.0)])
    real_open = builtins.open

    def guarded_open(path, *args, **kwargs):
        if str(path).endswith("rank1.jsonl"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    run = load_run(tmp_path, cache_root=False)
    assert run.samples["reward"].tolist() == [1.0]
    assert run.report.files == ("rank0.jsonl",)
    assert any("rank1.jsonl (Permission denied)" in note for note in run.report.notes)


def test_exports_hold_the_source_lines_and_run_and_step(tmp_path):
    """The JSONL export is the samples' log lines byte for byte (NaN, spacing and key order kept);
    the CSV export starts with run and step columns."""
    from rl_board.analysis.tables import build_batch_table, build_export_csv

    raw = [b'{"step": 2, "reward": NaN,   "response": "caf\\u00e9"}', b'{"reward":1,"step":1,"response":"x"}',
           b'{"step": 2, "reward": 0.5, "response": "<b>"}']
    (tmp_path / "r.jsonl").write_bytes(b"\n".join(raw) + b"\n")
    run = load_run(tmp_path, cache_root=False)
    step2 = run.step_samples(2)
    assert run.source_lines(step2.index) == raw[0] + b"\n" + raw[2] + b"\n"
    csv = build_export_csv(build_batch_table(step2), step2, "myrun").decode().splitlines()
    assert csv[0].startswith("run,step,response,reward") and csv[1].startswith("myrun,2,café,")


def test_the_snapshot_reads_only_the_loaders_public_surface():
    """``take_snapshot`` reads nothing private of the loader (no ``loader._name``), read from its code."""
    import ast

    from conftest import REPO

    tree = ast.parse((REPO / "rl_board" / "store" / "snapshot.py").read_text(encoding="utf-8"))
    private = [f"line {node.lineno}: loader.{node.attr}" for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
               and node.value.id == "loader" and node.attr.startswith("_")]
    assert private == []


def test_rows_are_in_order_only_by_step_then_file_then_line():
    """The order check: ties on step compare file, ties on both compare line; a NaN is out of order."""
    import numpy as np

    from rl_board.store.snapshot import _ordered

    def ordered(step, file, line):
        return _ordered(*(np.asarray(v) for v in (step, file, line)))

    assert ordered([0, 0, 1, 1], [0, 1, 0, 0], [5, 0, 3, 3])  # a later file may start at any line
    assert ordered([0, 1], [1, 0], [9, 0])  # a later step may come from an earlier file
    assert not ordered([1, 0], [0, 1], [0, 0])
    assert not ordered([0, 0], [1, 0], [0, 5])
    assert not ordered([0, 0], [0, 0], [5, 4])
    assert not ordered([0, 0], [0.0, np.nan], [0, 1])
    assert ordered([], [], []) and ordered([3], [0], [0])


def test_each_sample_says_its_file_segment_row_and_line(tmp_path, monkeypatch):
    """``file``, ``seg``, ``row`` and ``line`` of every sample, worked out by hand: a file read in two
    refreshes holds two segments, the second's rows counted from 0 and its lines going on from the
    first's; the three columns come right after the first segment's columns, before an extra field
    only a later file has."""
    from rl_board.analysis.source import RunSource
    from rl_board.store import batches

    monkeypatch.setattr(batches, "BATCH_MIN_FILES", 10**9)  # each file its own segments
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_lines(a, [sample(1, 0.1, early=1), sample(1, 0.2, early=1), sample(1, 0.3, early=1)])
    write_lines(b, [sample(2, 1.1, late=2), sample(2, 1.2, late=2)])
    source = RunSource(tmp_path, cache_root=False)
    source.refresh()
    with open(a, "a") as fh:
        fh.write('{"step": 1, "reward": 0.4, "early": 1}\n{"step": 1, "reward": 0.5, "early": 1}\n')
    samples = source.refresh()._samples
    assert samples["reward"].tolist() == [0.1, 0.2, 0.3, 0.4, 0.5, 1.1, 1.2]
    assert samples["file"].tolist() == [0, 0, 0, 0, 0, 1, 1]
    assert samples["seg"].tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert samples["row"].tolist() == [0, 1, 2, 0, 1, 0, 1]
    assert samples["line"].tolist() == [1, 2, 3, 4, 5, 1, 2]
    names = list(samples.columns)
    assert names[names.index("extra:early") + 1:names.index("extra:late") + 1] == ["file", "seg", "row", "extra:late"]


def test_the_order_check_told_the_runs_of_one_file_compares_files_only_where_runs_meet():
    """Given where each run of one file's rows ends, the order check answers as Python's comparison of
    (step, file, line) tuples does, on 2,000 random small runs (files equal inside a run; steps, files
    and lines often tied or out of order across them; empty runs among them)."""
    import random

    import numpy as np

    from rl_board.store.snapshot import _ordered

    rng = random.Random(52)
    answers = set()
    for _ in range(2000):
        counts = [rng.choice([0, 1, 1, 2, 3]) for _ in range(rng.randint(1, 5))]
        step, file, line = [], [], []
        for count in counts:
            f = rng.randint(0, 2)
            first = rng.randint(1, 3)
            for i in range(count):
                step.append(rng.choice([1, 1, 2]))
                file.append(f)
                line.append(first + i * rng.choice([0, 1, 1, -1]))
        keys = list(zip(step, file, line))
        expected = all(a <= b for a, b in zip(keys, keys[1:]))
        got = _ordered(*(np.asarray(v, np.int64) for v in (step, file, line)), np.cumsum(counts))
        assert got == expected, (counts, keys)
        answers.add(expected)
    assert answers == {True, False}


@pytest.mark.parametrize("looped", [True, False])
def test_line_and_row_of_every_sample_whether_made_in_place_or_at_once(tmp_path, monkeypatch, looped):
    """Each sample's ``line`` is its line in its file and its ``row`` its place in the segment that holds it,
    for files cut into many ranges (segments) and small files sharing one segment, whether the snapshot makes
    them a run of rows at a time (in place) or for all the runs at once (past ``_PLACES_LOOPED`` runs)."""
    from rl_board.analysis.source import RunSource
    from rl_board.store import batches, ranges, snapshot

    monkeypatch.setattr(ranges, "RANGE_BYTES", 1500)
    monkeypatch.setattr(ranges, "MIN_RANGE_BYTES", 0)
    monkeypatch.setattr(batches, "BATCH_MIN_FILES", 3)
    monkeypatch.setattr(batches, "SMALL_FILE_BYTES", 2000)  # the rank files are read in ranges, not batched
    monkeypatch.setattr(snapshot, "_PLACES_LOOPED", 1 << 14 if looped else 0)
    for rank in range(2):
        write_lines(tmp_path / f"rank{rank}.jsonl", [sample(i // 40, float(i), prompt=f"r{rank}-{i}") for i in range(120)])
    for k in range(5):  # small files, batched into one segment
        write_lines(tmp_path / f"small{k}.jsonl", [sample(9, 1.0, prompt=f"s{k}-{i}") for i in range(3)])
    run = RunSource(tmp_path, cache_root=False).refresh()
    samples = run._samples
    prompts = run.with_text(samples)["prompt"].tolist()  # read from each segment at its row
    files = list(run.report.files)
    # the line each prompt was written on, read back from the files themselves
    where = {json.loads(text)["prompt"]: (name, n) for name in files
             for n, text in enumerate((tmp_path / name).read_text().splitlines(), 1)}
    assert [(files[f], line) for f, line in zip(samples["file"], samples["line"])] == [where[p] for p in prompts]
    # rows: each segment's rows counted from 0 in line order (a shared segment: across its files, in order)
    counted = samples.sort_values(["file", "line"]).groupby(["file", "seg"]).cumcount().sort_index()
    shared = samples["file"].map(lambda f: files[f].startswith("small")).to_numpy()
    assert samples["row"].to_numpy()[~shared].tolist() == counted.to_numpy()[~shared].tolist()
    assert sorted(samples.loc[shared, "row"].tolist()) == list(range(15))
    assert samples.loc[~shared, "seg"].max() >= 3  # the rank files were cut into several segments
