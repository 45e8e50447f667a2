"""Search across a run and GRPO groups: the CLI contracts against Python's re and hand counts."""

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import command, sample, write_lines

PAD = "<pad>"


def _cli(*args):
    proc = command(*map(str, args))
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def run(tmp_path):
    write_lines(tmp_path / "rank1.jsonl", [
        sample(2, 0.5, prompt="P", response="!!!" + PAD * 2, ref_response="fine"),
        sample(1, 1.0, prompt="Q", response="The Answer is 4", ground_truth="4"),
        "{not json",
    ])
    write_lines(tmp_path / "rank0.jsonl", [
        sample(1, float("nan"), prompt="R", response="answer: 5", ref_response="ANSWER"),
        sample(2, -1.0, prompt="S", response=PAD),
        sample(3, 2.0, prompt="T"),
    ])
    return tmp_path


def _expected(run_dir, pattern, field="response", pad=None):
    """Matches by Python's re.search over the texts as written, pads removed: (step, file, line)."""
    rows = []
    for path in sorted(run_dir.glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            text = obj.get(field)
            if isinstance(text, str) and re.search(pattern, text.replace(pad, "") if pad else text):
                rows.append((obj["step"], path.name, number))
    order = {name: i for i, name in enumerate(sorted(p.name for p in run_dir.glob("*.jsonl")))}
    return sorted(rows, key=lambda r: (r[0], order[r[1]], r[2]))


@pytest.mark.parametrize("pattern, field, pad", [
    ("(?i)answer", "response", None),
    (r"^\W*$", "response", PAD),  # empty or punctuation-only responses, pads removed
    (r"^\W*$", "response", None),
    ("ANSWER", "ref_response", None),
    ("4", "ground_truth", None),
    ("^[PS]$", "prompt", None),
])
@pytest.mark.slow
def test_search_matches_python_re(run, pattern, field, pad):
    """Every match, in step, file, line order, equals re.search over the same texts; per_step lists
    every step; rewards are JSON numbers or null."""
    args = ["search", run, "--regex", pattern, "--in", field, "--json", "--no-cache"]
    code, out, _ = _cli(*args, *(["--pad-token", pad] if pad else []))
    assert code == 0
    got = json.loads(out)
    expected = _expected(run, pattern, field, pad)
    assert [(s["step"], s["file"], s["line"]) for s in got["samples"]] == expected
    assert got["matches"] == len(expected)
    assert [p["step"] for p in got["per_step"]] == [1, 2, 3]
    assert [p["matches"] for p in got["per_step"]] == [sum(1 for e in expected if e[0] == s) for s in (1, 2, 3)]


@pytest.mark.slow
def test_search_rewards_and_exit_codes(run, tmp_path):
    """A NaN reward is null; a bad pattern or path exits 2; a run with no loaded line exits 1."""
    got = json.loads(_cli("search", run, "--regex", "answer: 5", "--json", "--no-cache")[1])
    assert got["samples"] == [{"address": "rank0.jsonl:1", "step": 1, "file": "rank0.jsonl", "line": 1, "reward": None}]
    assert _cli("search", run, "--regex", "(", "--json")[0] == 2
    assert _cli("search", tmp_path / "nope", "--regex", "x", "--json")[0] == 2
    write_lines(tmp_path / "bad" / "r.jsonl", ["nope"])
    assert _cli("search", tmp_path / "bad", "--regex", "x", "--json", "--no-cache")[0] == 1


@pytest.mark.slow
def test_search_in_parquet_gives_one_based_rows(tmp_path):
    """For a TRL table, line is the 1-based row in its file."""
    pq.write_table(pa.table({"step": pa.array([7, 7, 7], pa.int64()), "completion": ["no", "yes!", "yes"],
                             "r": [1.0, 2.0, 3.0]}), tmp_path / "completions_00007.parquet")
    got = json.loads(_cli("search", tmp_path, "--regex", "^yes", "--json", "--no-cache")[1])
    assert [(s["line"], s["reward"]) for s in got["samples"]] == [(2, 2.0), (3, 3.0)]


@pytest.mark.slow
def test_grpo_groups_in_the_summary(tmp_path):
    """Same prompt text (pads removed with --pad-token) = one group; zero-std groups have >= 2 samples
    with equal rewards; samples without a prompt are in none."""
    write_lines(tmp_path / "r.jsonl", [
        sample(1, 1.0, prompt=PAD + "a"), sample(1, 1.0, prompt="a"),
        sample(1, 0.0, prompt="b"), sample(1, 1.0, prompt="b"),
        sample(1, 5.0, prompt="c"), sample(1, 3.0),
        sample(2, 0.0, prompt="d"), sample(2, 0.0, prompt="d"), sample(2, 0.0, prompt="d" + PAD),
    ])
    with_pad = {s["step"]: s for s in json.loads(_cli("summary", tmp_path, "--json", "--no-cache",
                                                       "--pad-token", PAD)[1])["steps"]}
    assert (with_pad[1]["prompt_groups"], with_pad[1]["zero_std_groups"]) == (3, 1)  # a, b, c; a is zero-std
    assert (with_pad[2]["prompt_groups"], with_pad[2]["zero_std_groups"]) == (1, 1)
    plain = {s["step"]: s for s in json.loads(_cli("summary", tmp_path, "--json", "--no-cache")[1])["steps"]}
    assert (plain[1]["prompt_groups"], plain[1]["zero_std_groups"]) == (4, 0)  # "<pad>a" differs from "a"
    assert (plain[2]["prompt_groups"], plain[2]["zero_std_groups"]) == (2, 1)


def _text_run(folder):
    """Ten samples over five steps with hand-picked rewards, lengths and texts."""
    lines = []
    for i in range(10):
        step = i // 2 + 1
        text = f"step {step} sample {i}: " + ("the source is here" if i % 3 == 0 else "nothing to see")
        words = text.split(" ")
        lines.append(sample(step, float(i % 4), response=text, prompt="q", response_tokens=words,
                            logprobs=[-0.5] * len(words), ref_logprobs=[-0.5 - i / 10] * len(words)))
    write_lines(folder / "r.jsonl", lines)
    return lines


@pytest.mark.slow
def test_search_prints_the_match_marked_and_how_many_it_shows(tmp_path):
    """The text output says "showing N of M" (M by Python's re) and prints each shown sample's text with its
    match between « and »."""
    lines = _text_run(tmp_path)
    expected = [line for line in lines if re.search("sou?rce", line["response"])]
    code, out, _ = _cli("search", tmp_path, "--regex", "sou?rce", "--limit", "2")
    assert code == 0
    assert f"{len(expected)} matches" in out and f"showing 2 of {len(expected)}" in out
    marked = [line.strip() for line in out.splitlines() if "«" in line]
    assert marked == [f"{line['response'].split('source')[0]}«source» is here" for line in expected[:2]]


@pytest.mark.slow
def test_search_steps_ranges_and_sort_filter_like_the_page(tmp_path):
    """--steps 2:4, --range reward=1: and --sort reward keep and order exactly the samples picked by hand."""
    lines = _text_run(tmp_path)
    picked = [(line["step"], line["reward"]) for line in lines if 2 <= line["step"] <= 4 and line["reward"] >= 1]
    picked.sort(key=lambda p: -p[1])  # highest reward first; ties stay in log order
    code, out, _ = _cli("search", tmp_path, "--steps", "2:4", "--range", "reward=1:", "--sort", "reward", "--json")
    assert code == 0
    got = json.loads(out)
    assert got["matches"] == len(picked)
    assert [(s["step"], s["reward"]) for s in got["samples"]] == picked
    code, out, _ = _cli("search", tmp_path, "--range", "response_len=:4", "--json")
    assert json.loads(out)["matches"] == sum(1 for line in lines if len(line["response"].split(" ")) <= 4)


@pytest.mark.parametrize("args, reason", [
    (["--steps", "4:2"], "the first is after the last"),
    (["--steps", "a:b"], "not A:B"),
    (["--range", "reward"], "NAME=LOW:HIGH"),
    (["--range", "nope=1:2"], "'nope' is not a number this run has"),
    (["--regex", "x", "--sort", "nope"], "can't sort by 'nope'"),
])
@pytest.mark.slow
def test_search_bad_filters_say_why(tmp_path, args, reason):
    """A bad step range, filter or sort exits 2 with the reason on stderr."""
    _text_run(tmp_path)
    code, out, err = _cli("search", tmp_path, *args)
    assert code == 2 and reason in err and "Traceback" not in err


@pytest.mark.parametrize("count, last_first", [(2, False), (2, True), (10, True), (0, False)])
def test_the_matches_listed_are_those_of_every_match(run, count, last_first):
    """The Explore area lists ``compute_first_matches`` (no copy of the rows it does not list): the rows of
    ``compute_matches``'s frame, in log order or last first, and the same count per step."""
    from rl_board.analysis.search import (
        Query,
        compute_first_matches,
        compute_match_mask,
        compute_matches,
        compute_matches_per_step,
    )
    from rl_board.analysis.source import RunSource

    loaded = RunSource(run, PAD, cache_root=False).refresh()
    query = Query("(?i)answer|!", "response", PAD)
    keep = compute_match_mask(loaded, query)
    matches = compute_matches(loaded, query)
    assert int(keep.sum()) == len(matches) == 3  # "The Answer is 4", "answer: 5", "!!!"
    expected = (matches.iloc[::-1] if last_first else matches).head(count)
    got = compute_first_matches(loaded, keep, count, last_first=last_first)
    assert got.index.tolist() == expected.index.tolist() and got.equals(expected)
    assert compute_matches_per_step(loaded, keep).tolist() == compute_matches_per_step(loaded, matches).tolist() \
        == [2, 1, 0]


@pytest.mark.parametrize("pattern, size", [("x{1000}y", 1_001), ("(ab){3}c", 7), ("(?s)(.{100}){10}z", 1_001),
                                           (r"\d{4}-\d{2}", 7), ("(?i)x{10,20}", 20), ("x{5,}", 6),
                                           (r"\p{Greek}{2}", 2), ("[]a]{3}", 3), ("(?P<n>ab){2}", 4),
                                           ("(?:a|b){5}", 10), (r"\Qa.b\E{2}", 4), ("(a(b){2}){3}", 9)])
def test_regex_size_counts_each_atom_once_per_repetition(pattern, size):
    """A pattern's size is its characters, classes, escapes and dots, each once per copy a counted
    repetition makes (counted here by hand)."""
    from rl_board.analysis.regex import regex_size

    assert regex_size(pattern) == size


def test_a_pattern_too_large_is_refused_in_one_line_before_any_text_is_read(tmp_path, monkeypatch):
    """``x{1000}y`` (size 1,001) is refused with one line naming its size, the limit and the setting; raised
    to 2,000 the same search runs and finds the one response that holds 1,000 x then y."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(1, 1.0, response="x" * 1000 + "y"),
                                               sample(1, 0.0, response="x" * 999 + "y")])
    code, out, err = _cli("search", tmp_path / "run", "--regex", "x{1000}y", "--json")
    assert code == 2 and out == ""
    assert [line for line in err.splitlines() if line.startswith("error:")] == err.strip().splitlines()
    assert "size 1,001" in err and "more than 400 (RL_BOARD_MAX_REGEX_SIZE)" in err
    monkeypatch.setenv("RL_BOARD_MAX_REGEX_SIZE", "2000")
    code, out, err = _cli("search", tmp_path / "run", "--regex", "x{1000}y", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert found["matches"] == 1 and found["samples"][0]["line"] == 1 and found["searched"]["complete"]


def test_a_search_out_of_time_says_where_it_stopped(tmp_path, monkeypatch):
    """With a time budget spent at once, the search covers only its first chunk: the fewest samples, in
    step order, whose texts reach ``PROBE_BYTES``; ``searched`` says how many, the last step searched whole
    and the step it stopped in, the matches are those of the samples searched (counted here with re), and
    one note line says so."""
    from rl_board.analysis.segment_queries import PROBE_BYTES

    size = PROBE_BYTES // 3 + 1  # bytes of each response: the first chunk holds three samples
    texts = {(step, i): ("needle " if (step + i) % 2 else "hay ") + "z" * size for step in (1, 2, 3) for i in range(2)}
    write_lines(tmp_path / "run" / "r.jsonl", [sample(step, 0.0, response=texts[step, i])
                                               for step in (3, 2, 1) for i in range(2)])  # the file's order is not steps'
    in_order = [texts[key] for key in sorted(texts)]  # step order: the order a search goes in
    first = next(k for k in range(1, 7) if sum(map(len, in_order[:k])) >= PROBE_BYTES)
    monkeypatch.setenv("RL_BOARD_SEARCH_SECONDS", "1e-9")
    code, out, err = _cli("search", tmp_path / "run", "--regex", "^needle", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert first == 3 and found["searched"] == {"complete": False, "samples": 3, "of": 6, "through_step": 1,
                                                "stopped_at_step": 2, "budget_seconds": 1e-9}
    assert found["matches"] == sum(bool(re.match("needle", t)) for t in in_order[:first])
    notes = [line for line in err.splitlines() if line.startswith("note: the regular expression")]
    assert len(notes) == 1 and "3 of 6 samples searched, steps up to 1 and part of step 2" in notes[0]
    monkeypatch.delenv("RL_BOARD_SEARCH_SECONDS")
    code, out, err = _cli("search", tmp_path / "run", "--regex", "^needle", "--json")
    whole = json.loads(out)
    assert whole["searched"] == {"complete": True, "samples": 6, "of": 6, "through_step": 3, "stopped_at_step": None,
                                 "budget_seconds": 30.0}
    assert whole["matches"] == sum(bool(re.match("needle", t)) for t in in_order) and "note:" not in err


def test_small_chunks_find_what_one_pass_finds(tmp_path, monkeypatch):
    """Searched a few samples at a time (files interleaved by step, one written in reverse step order, so a
    chunk's rows of a file are not consecutive), a run's response and prompt matches are Python re's over
    the texts as written."""
    from rl_board import load
    from rl_board.analysis import segment_queries

    lines = {name: [sample(step, 0.0, prompt=f"p{step}{name}{i}", response=f"{name} {step} {i} " + "ab" * (i * 7))
                    for step in range(1, 9) for i in range(5)] for name in ("a", "b", "c")}
    lines["c"].reverse()
    for name, written in lines.items():
        write_lines(tmp_path / "run" / f"{name}.jsonl", written)
    monkeypatch.setattr(segment_queries, "PROBE_BYTES", 40)
    monkeypatch.setattr(segment_queries, "CHUNK_SECONDS", 1e-9)  # each later chunk: one sample
    run = load(tmp_path / "run")
    for field, pattern in (("response", r"(ab){20}"), ("response", r"^b [2-5] "), ("prompt", r"[ac]3")):
        scan = run.text_search(field, pattern)
        got = sorted((run.files[int(f)], int(line)) for f, line in
                     zip(run.samples.loc[scan.found, "file"], run.samples.loc[scan.found, "line"]))
        expected = sorted((f"{name}.jsonl", n + 1) for name, written in lines.items()
                          for n, line in enumerate(written) if re.search(pattern, line[field]))
        assert scan.complete and got == expected and expected


def test_the_search_bounds_set_to_inf_are_capped_not_a_traceback(monkeypatch):
    """``inf`` for the regex size, the search's time and an MCP call's time is taken as the documented caps
    (100,000; a day; a day); a value that is not a positive number is the default."""
    from rl_board.base import defaults as D

    for name in ("RL_BOARD_MAX_REGEX_SIZE", "RL_BOARD_SEARCH_SECONDS", "RL_BOARD_MCP_SECONDS"):
        monkeypatch.setenv(name, "inf")
    assert (D.max_regex_size(), D.search_seconds(), D.mcp_seconds()) == (100_000, 86_400, 86_400)
    for name in ("RL_BOARD_MAX_REGEX_SIZE", "RL_BOARD_SEARCH_SECONDS", "RL_BOARD_MCP_SECONDS"):
        monkeypatch.setenv(name, "-3")
    assert (D.max_regex_size(), D.search_seconds(), D.mcp_seconds()) == (400, 30, 60)


def test_excerpts_are_bounded_in_time_and_in_the_text_they_search():
    """With no time left every excerpt is its text's start, unmarked, and counted; a match past the first
    ``EXCERPT_SCAN_CHARS`` characters is not looked for (the start is shown), one inside them is marked."""
    from rl_board.analysis.search import EXCERPT_SCAN_CHARS, build_excerpts

    texts = ["hay needle hay", "y" * EXCERPT_SCAN_CHARS + " needle", None]
    late, unmarked = build_excerpts(texts, "needle", seconds=0)
    assert late == ["hay needle hay", "y" * 100 + "…", ""] and unmarked == 2
    marked, unmarked = build_excerpts(texts, "needle")
    assert marked == ["hay «needle» hay", "y" * 100 + "…", ""] and unmarked == 0
