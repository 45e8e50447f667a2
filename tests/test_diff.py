"""Diff by prompt: a run in the board's lines against the same prompts as verl dumps (lines shuffled, some
rewards changed), matched by the prompt's text with pads removed; numbers against hand-computed values."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time

import pytest
from conftest import REPO, write_lines

PAD = "<|endoftext|>"
#: prompt -> its rewards in run A, two steps of two samples each (step 1: the first two)
REWARDS_A = {
    "What is 2 + 3?": [0.1, 0.2, 0.3, 0.7],
    "What is 7 * 6?": [1.0, 1.0, 0.0, 1.0],
    "Name a prime.": [0.5, 0.5, 0.5, 0.5],
    "Spell cat.": [0.3, 0.1, 0.2, 0.9],
    "Sort 3 1 2.": [0.0, 0.0, 1.0, 0.0],
    "Capital of France?": [0.6, 0.6, 0.2, 0.2],
}
#: what B changes: prompt -> its rewards in B (the others as in A); deltas by hand below
CHANGED_B = {
    "What is 7 * 6?": [1.0, 0.0, 0.0, 1.0],  # mean 0.75 -> 0.5: -0.25
    "Spell cat.": [0.3, 0.1, 0.2, 0.1],  # mean 0.375 -> 0.175: -0.2
    "Name a prime.": [0.0, 0.5, 0.0, 0.5],  # mean 0.5 -> 0.25: -0.25
}
DELTAS = {"What is 7 * 6?": 0.5 - 0.75, "Name a prime.": 0.25 - 0.5, "Spell cat.": 0.175 - 0.375}


def _write_pair(tmp_path, changed=CHANGED_B, pad_a=True):
    """Run A in the board's lines (prompts left-padded, a different number of pads per batch) and run B
    as verl's ``{step}.jsonl`` dumps (as ``_dump_generations`` writes them), its lines shuffled."""
    a, b = tmp_path / "runs" / "board", tmp_path / "runs" / "verl"
    lines = []
    for n, (prompt, rewards) in enumerate(REWARDS_A.items()):
        for i, reward in enumerate(rewards):
            step = 1 + i // 2
            pads = PAD * ((n + step) % 3) if pad_a else ""
            lines.append({"step": step, "prompt": pads + prompt, "response": f"answer {n} {i}{PAD}",
                          "reward": reward})
    write_lines(a / "rollout_data_rank0.jsonl", lines)
    b.mkdir(parents=True)
    rng = random.Random(7)
    for step in (1, 2):
        entries = []
        for n, prompt in enumerate(REWARDS_A):
            rewards = changed.get(prompt, REWARDS_A[prompt])
            for i in ((0, 1) if step == 1 else (2, 3)):
                entries.append({"input": prompt, "output": f"answer {n} {i} changed", "gts": "x",
                                "score": rewards[i], "step": step})
        rng.shuffle(entries)
        (b / f"{step}.jsonl").write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in entries) + "\n")
    return a, b


def test_every_prompt_matches_across_formats_and_only_the_changed_ones_move(tmp_path):
    """Board lines against shuffled verl dumps: every prompt matched, the changed ones first by delta
    (ties by prompt text), every other delta exactly 0 though its rewards were summed in another order."""
    from rl_board import load
    from rl_board.analysis.diff import compute_diff

    a, b = _write_pair(tmp_path)
    run_a, run_b = load(a), load(b)
    diff = compute_diff(run_a, run_b)
    assert (diff.matched, diff.only_a, diff.only_b, diff.too_few) == (6, 0, 0, 0)
    table = diff.table
    assert list(table["prompt"][:3]) == ["Name a prime.", "What is 7 * 6?", "Spell cat."]
    for prompt, delta in DELTAS.items():
        assert table.set_index("prompt").at[prompt, "delta"] == pytest.approx(delta, abs=1e-12)
    assert list(table["delta"][3:]) == [0.0, 0.0, 0.0]
    assert list(table["prompt"][3:]) == sorted(set(REWARDS_A) - set(DELTAS))
    assert list(table["a_samples"]) == [4] * 6 and list(table["b_samples"]) == [4] * 6
    row = table.set_index("prompt").loc["What is 2 + 3?"]
    assert row["a_reward_mean"] == row["b_reward_mean"] == pytest.approx((0.1 + 0.2 + 0.3 + 0.7) / 4)
    assert row["a_pass_rate"] != row["a_pass_rate"]  # not 0/1 rewards: no pass rate


@pytest.mark.slow
def test_cli_json_and_text(tmp_path):
    """``diff --json`` carries the counts and prompts in the contract's order; the text names the
    regressions with the words that changed."""
    a, b = _write_pair(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "rl_board", "diff", str(a), str(b), "--json"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["matched"], out["only_a"], out["only_b"]) == (6, 0, 0)
    assert (out["regressions"], out["improvements"], out["unchanged"]) == (3, 0, 3)
    assert [p["prompt"] for p in out["prompts"][:3]] == ["Name a prime.", "What is 7 * 6?", "Spell cat."]
    assert [p["delta"] for p in out["prompts"][3:]] == [0.0, 0.0, 0.0]
    first = out["prompts"][0]
    assert first["a"]["samples"] == 4 and first["a"]["reward_mean"] == 0.5 and first["b"]["reward_mean"] == 0.25
    assert out["settings"]["by"] == "prompt" and out["settings"]["steps_a"] is None
    proc = subprocess.run([sys.executable, "-m", "rl_board", "diff", str(a), str(b)], capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "6 prompts in both, 0 only in A, 0 only in B; 3 worse in B, 0 better, 3 the same" in proc.stdout
    assert "{+changed+}" in proc.stdout  # B's word only in B, marked
    assert "Improvements" not in proc.stdout


def test_pass_rate_counts_and_step_ranges_inside_one_run(tmp_path):
    """0/1 rewards give a pass rate; steps 1 against steps 2 of one run: each prompt's two halves, a
    prompt only in one range counted; --min-samples leaves out and counts the thin ones."""
    from rl_board import load
    from rl_board.analysis.diff import compute_diff

    lines = [{"step": 1, "prompt": "p", "response": "r", "reward": 1.0},
             {"step": 1, "prompt": "p", "response": "r", "reward": 1.0},
             {"step": 1, "prompt": "q", "response": "r", "reward": 0.0},
             {"step": 2, "prompt": "p", "response": "r", "reward": 0.0},
             {"step": 2, "prompt": "p", "response": "s", "reward": 1.0},
             {"step": 2, "prompt": "early only", "response": "r", "reward": 1.0}]
    write_lines(tmp_path / "run" / "rollout.jsonl", lines)
    run = load(tmp_path / "run")
    diff = compute_diff(run, run, (1, 1), (2, 2))
    assert (diff.matched, diff.only_a, diff.only_b) == (1, 1, 1)
    row = diff.table.iloc[0]
    assert (row["prompt"], row["a_pass_rate"], row["b_pass_rate"], row["delta"]) == ("p", 1.0, 0.5, -0.5)
    thin = compute_diff(run, run, (1, 1), (2, 2), min_samples=3)
    assert thin.table.empty and thin.too_few == 1


def test_by_id_uses_the_logged_index_and_refuses_a_run_without_one(tmp_path):
    """--by id matches on a logged ``index`` even where the prompts' texts differ; a run without an id
    is refused with a message naming --by prompt."""
    from rl_board import load
    from rl_board.analysis.diff import compute_diff

    write_lines(tmp_path / "a" / "r.jsonl", [{"step": 1, "prompt": "old wording", "reward": 1.0, "index": 3}])
    write_lines(tmp_path / "b" / "r.jsonl", [{"step": 1, "prompt": "new wording", "reward": 0.0, "index": 3}])
    write_lines(tmp_path / "c" / "r.jsonl", [{"step": 1, "prompt": "new wording", "reward": 0.0}])
    a, b, c = load(tmp_path / "a"), load(tmp_path / "b"), load(tmp_path / "c")
    by_id = compute_diff(a, b, by="id")
    assert (by_id.matched, by_id.key_a, list(by_id.table["delta"])) == (1, "index", [-1.0])
    assert compute_diff(a, b).matched == 0
    with pytest.raises(ValueError, match="--by prompt"):
        compute_diff(a, c, by="id")


def test_the_python_function_gives_the_same_table(tmp_path):
    """``rl_board.diff`` on two folders returns the command's table, its counts, what it matched on and the
    step distance (0: step 2 on both sides) in ``attrs``."""
    import rl_board

    a, b = _write_pair(tmp_path)
    table = rl_board.diff(a, b, steps="2:2")
    # step 2 only: samples 3 and 4 of each prompt
    assert table.attrs["matched"] == 6 and list(table["a_samples"]) == [2] * 6
    assert (table.attrs["prompt_match"], table.attrs["step_distance"], table.attrs["no_match"]) == ("text", 0.0, None)
    by_prompt = table.set_index("prompt")
    assert by_prompt.at["Spell cat.", "delta"] == pytest.approx((0.2 + 0.1) / 2 - (0.2 + 0.9) / 2)
    assert by_prompt.at["Name a prime.", "delta"] == pytest.approx(0.25 - 0.5)
    assert by_prompt.at["What is 7 * 6?", "delta"] == 0.0


def test_the_python_function_names_the_samples_shown_by_their_sample_id(tmp_path):
    """``rl_board.diff``'s ``a_sample`` and ``b_sample`` are FILE:LINE ids (as ``to_pandas()`` indexes them),
    not row positions: for "Spell cat." at step 2 (a regression), A's highest (its 4th sample, line 16 of
    A's file: 4 samples a prompt, written in order) and B's lowest (the line of 2.jsonl, found by reading it)."""
    import rl_board

    a, b = _write_pair(tmp_path)
    table = rl_board.diff(a, b, steps="2:2").set_index("prompt")
    assert table.at["Spell cat.", "a_sample"] == f"rollout_data_rank0.jsonl:{3 * 4 + 3 + 1}"
    dumped = [json.loads(line) for line in (b / "2.jsonl").read_text().splitlines()]
    line = next(i + 1 for i, e in enumerate(dumped) if e["input"] == "Spell cat." and e["score"] == 0.1)
    assert table.at["Spell cat.", "b_sample"] == f"2.jsonl:{line}"
    frame_a, frame_b = rl_board.load(a).to_pandas(), rl_board.load(b).to_pandas()
    assert set(table["a_sample"]) <= set(frame_a.index) and set(table["b_sample"]) <= set(frame_b.index)


@pytest.mark.slow
def test_page_area_lists_the_regressions_opens_one_and_keeps_the_choice_in_the_link(tmp_path):
    """AppTest: the Diff area with the verl run as B lists the three changed prompts as regressions (most
    negative first), the three unchanged folded; the first is opened with both sides' samples; the
    address keeps run B and the steps, and a link with them reopens the same choice."""
    from page_steps import load as load_page
    from page_steps import open_page

    from rl_board.views import keys

    _write_pair(tmp_path)
    at = load_page(open_page(tmp_path / "runs", "board"), keys.DIFF)
    assert at.selectbox(key=keys.DIFF_RUN).value == "board"
    at.selectbox(key=keys.DIFF_RUN).select("verl").run()
    assert not at.exception, at.exception
    frames = [frame.value for frame in at.dataframe]
    assert list(frames[0]["prompt"]) == ["Name a prime.", "What is 7 * 6?", "Spell cat."]
    assert list(frames[0]["delta"]) == pytest.approx([DELTAS[p] for p in frames[0]["prompt"]])
    assert sorted(frames[1]["prompt"]) == sorted(set(REWARDS_A) - set(DELTAS))  # the unchanged, folded
    assert at.selectbox(key=keys.DIFF_PROMPT).format_func(at.selectbox(key=keys.DIFF_PROMPT).value).endswith(
        "Name a prime.")
    heads = [h for h in at.get("html") if "rlb-diff" in h.proto.body]
    assert len(heads) == 8  # four samples of each side
    at.text_input(key=keys.DIFF_STEPS).input("2:2").run()
    assert at.query_params["area"] == "diff" and at.query_params["diff_run"] == "verl"
    assert at.query_params["diff_steps"] == "2:2"
    from streamlit.testing.v1 import AppTest

    linked = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    linked.query_params.update(root=str(tmp_path / "runs"), run="board", area="diff", diff_run="verl",
                               diff_steps="2:2")
    linked.run()
    assert not linked.exception, linked.exception
    assert linked.selectbox(key=keys.DIFF_RUN).value == "verl"
    # step 2 only: Spell cat. lost most ((0.2 + 0.1) / 2 - (0.2 + 0.9) / 2 = -0.4)
    assert linked.dataframe[0].value["prompt"].iloc[0] == "Spell cat."


@pytest.mark.slow
def test_page_area_diffs_early_against_late_steps_of_the_loaded_run(tmp_path):
    """The loaded run as B with steps 1 against 2: each prompt's second half against its first."""
    from page_steps import load as load_page
    from page_steps import open_page

    from rl_board.views import keys

    _write_pair(tmp_path)
    at = load_page(open_page(tmp_path / "runs", "board"), keys.DIFF)
    at.text_input(key=keys.DIFF_STEPS).input("1:1").run()
    at.text_input(key=keys.DIFF_STEPS_B).input("2").run()
    assert not at.exception, at.exception
    worse, better, same = (frame.value for frame in at.dataframe)
    # by hand, step 2's mean − step 1's: 7 * 6 (1, 1) -> (0, 1): -0.5; Capital (0.6, 0.6) -> (0.2, 0.2): -0.4;
    # Sort (0, 0) -> (1, 0): +0.5; 2 + 3 and Spell cat. +0.35; Name a prime. 0
    assert list(worse["prompt"]) == ["What is 7 * 6?", "Capital of France?"]
    assert list(worse["delta"]) == pytest.approx([-0.5, -0.4])
    assert better["prompt"].iloc[0] == "Sort 3 1 2." and len(better) == 3
    assert list(same["prompt"]) == ["Name a prime."]
    fresh = load_page(open_page(tmp_path / "runs", "board"), keys.DIFF)  # nothing typed: the same two halves
    assert not fresh.exception, fresh.exception
    assert [list(frame.value["prompt"]) for frame in fresh.dataframe] == [list(worse["prompt"]),
                                                                          list(better["prompt"]), list(same["prompt"])]
    assert any("early steps 1:1 (A) against its late steps 2:2 (B)" in c.value for c in fresh.caption)


def test_early_and_late_steps_are_the_first_and_last_quarter():
    """The default of a run against itself: the first and last quarter of its logged steps (one step at
    least), by hand; a run of one step has nothing to compare."""
    from rl_board.analysis.diff import early_and_late_steps

    assert early_and_late_steps(range(1, 11)) == ((1, 2), (9, 10))  # 10 // 4 = 2 steps each
    assert early_and_late_steps([30, 10, 20]) == ((10, 10), (30, 30))
    assert early_and_late_steps([0, 5, 10, 15, 20, 25, 30, 35]) == ((0, 5), (30, 35))
    assert early_and_late_steps([7]) is None


@pytest.mark.slow
def test_a_shared_diff_link_of_nested_runs_keeps_its_root_and_run_b(tmp_path):
    """Runs two folders below the root (``team/exp/board`` against ``team/exp/verl``): the address keeps
    the root typed and names A by its path under it (never ``root=<A's parent>``), so the link opened
    afresh shows the same A and B and the same regressions; a run B or a parameter the page can't follow
    is named in the link's note, not dropped silently."""
    from page_steps import load as load_page
    from page_steps import open_page
    from streamlit.testing.v1 import AppTest

    from rl_board.views import keys

    nested = tmp_path / "root" / "team" / "exp"
    _write_pair(nested)  # nested/runs/board and nested/runs/verl
    root = tmp_path / "root"
    at = load_page(open_page(root, "team/exp/runs/board"), keys.DIFF)
    at.selectbox(key=keys.DIFF_RUN).select("team/exp/runs/verl").run()
    assert not at.exception, at.exception
    assert (at.query_params["root"], at.query_params["run"]) == (str(root), "team/exp/runs/board")
    assert at.query_params["diff_run"] == "team/exp/runs/verl"
    first = list(at.dataframe[0].value["prompt"])
    assert first == ["Name a prime.", "What is 7 * 6?", "Spell cat."]  # as the flat pair's test, by hand
    linked = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    linked.query_params.update({key: value for key, value in at.query_params.items()})
    linked.run()
    assert not linked.exception, linked.exception
    assert linked.selectbox(key=keys.DIFF_RUN).value == "team/exp/runs/verl"
    assert list(linked.dataframe[0].value["prompt"]) == first
    stale = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    stale.query_params.update(root=str(root), run="team/exp/runs/board", area="diff", diff_run="gone/run",
                              colour="red")
    stale.run()
    assert not stale.exception, stale.exception
    notes = " ".join(w.value for w in stale.warning)
    assert "'gone/run' is not under this root" in notes and "'colour'" in notes


def test_json_cuts_long_prompts_and_gives_their_length(tmp_path):
    """``diff --json`` gives a 5,000-character prompt's first 2,000 characters and its full length, a short
    prompt whole with its length: the output grows with the prompts' count, not their size."""
    long = "why " * 1_250
    lines = [{"step": 1, "prompt": prompt, "response": "r", "reward": reward}
             for prompt, reward in ((long, 1.0), ("short one", 0.0))]
    write_lines(tmp_path / "a" / "r.jsonl", lines)
    write_lines(tmp_path / "b" / "r.jsonl", [{**line, "reward": 0.5} for line in lines])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "diff", str(tmp_path / "a"), str(tmp_path / "b"),
                           "--json"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    prompts = {p["prompt_chars"]: p["prompt"] for p in json.loads(proc.stdout)["prompts"]}
    assert prompts == {5_000: long[:2_000], len("short one"): "short one"}


def test_ties_are_ordered_by_prompt_text_whatever_the_longest_prompt(tmp_path):
    """2,000 prompts of equal rewards and one 4 MB prompt: the unchanged prompts are listed by their text
    in Python's order (sorted by hand here), and no fixed-width copy of every text as wide as the longest
    (2,001 x 4 MB x 4 bytes, 32 GB) is made: the diff ends, under 1 GiB."""
    import os

    prompts = [f"prompt {k * 7919 % 2000}" for k in range(2000)] + ["z" * (4 << 20)]
    for side in ("a", "b"):
        write_lines(tmp_path / side / "rollout_data_rank0.jsonl",
                    [{"step": 1, "prompt": p, "response": "r", "reward": 0.5} for p in prompts])
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "rl_board", "diff", "--json",
                           str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "RL_BOARD_CACHE_DIR": str(tmp_path / "cache")}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["unchanged"] == 2001
    assert [p["prompt"] for p in got["prompts"]] == [p[:2_000] for p in sorted(prompts)]  # each cut as diff --json cuts
    assert int(proc.stderr.strip().splitlines()[-1]) / 1024 < 1024  # MiB


def test_the_text_output_lists_the_shown_prompts_of_many(tmp_path):
    """600 prompts, 300 worse in B by k/1000 and 300 better: the text prints the most negative and the most
    positive DIFF_SHOWN, each in its order, and says how many there are (built for those only)."""
    from rl_board.cli.parser import DIFF_SHOWN

    write_lines(tmp_path / "a" / "a.jsonl", [{"step": 1, "prompt": f"q{k}", "response": "r", "reward": 0.5}
                                             for k in range(600)])
    write_lines(tmp_path / "b" / "b.jsonl", [{"step": 1, "prompt": f"q{k}", "response": "r",
                                              "reward": 0.5 + (-(k + 1) if k < 300 else k - 299) / 1000}
                                             for k in range(600)])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "diff", str(tmp_path / "a"), str(tmp_path / "b")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert f"showing {DIFF_SHOWN} of 300 (--json for all)" in proc.stdout
    listed = [line.split()[-1] for line in proc.stdout.splitlines() if line.split()[-1:] and line.split()[-1][0] == "q"]
    assert listed == [f"q{k}" for k in range(299, 299 - DIFF_SHOWN, -1)] + [f"q{k}" for k in range(599, 599 - DIFF_SHOWN, -1)]


def test_ids_of_2_to_the_53_and_more_are_compared_exactly(tmp_path):
    """Ten prompts whose `index` is 2^53 + k (k = 0..9, one float64 for all of them) and one small id,
    prompt 2^53 + 7 worse in B: --by id matches 11 prompts, not 2, finds the one regression, and the JSON
    names its key exactly (9007199254740999)."""
    big = 2**53
    ids = [big + k for k in range(10)] + [5]
    write_lines(tmp_path / "a" / "r.jsonl", [{"step": 1, "prompt": f"p{i}", "response": "r", "reward": 1.0,
                                              "index": i} for i in ids])
    write_lines(tmp_path / "b" / "r.jsonl", [{"step": 1, "prompt": f"p{i}", "response": "r",
                                              "reward": 0.0 if i == big + 7 else 1.0, "index": i} for i in ids])
    proc = subprocess.run([sys.executable, "-m", "rl_board", "diff", "--by", "id", "--json", str(tmp_path / "a"),
                           str(tmp_path / "b")], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["matched"], out["regressions"], out["unchanged"]) == (11, 1, 10)
    worst = out["prompts"][0]
    assert (worst["key"], worst["prompt"], worst["delta"]) == (9007199254740999, "p9007199254740999", -1.0)
    assert sorted(p["key"] for p in out["prompts"]) == sorted(ids)
    assert '"key": 9007199254740999' in proc.stdout  # written as the integer, not rounded to a float


def test_diff_json_written_a_chunk_at_a_time_is_json_dumps_of_the_whole(tmp_path, monkeypatch, capsys):
    """diff --json's prompts written 2 at a time (JSON_CHUNK lowered) are byte for byte json.dumps of the
    whole contract built at once, for 6 prompts (3 chunks) and for none."""
    from rl_board import load
    from rl_board.analysis.diff import build_diff_json, compute_diff
    from rl_board.cli import diff as cli_diff

    a, b = _write_pair(tmp_path)
    run_a, run_b = load(a), load(b)
    monkeypatch.setattr(cli_diff, "JSON_CHUNK", 2)
    for steps in ((None, None), (9, 9)):  # every prompt; none (no step 9)
        found = compute_diff(run_a, run_b, steps)
        whole = {"settings": {"x": 1}, **build_diff_json(found, run_a, run_b)}
        cli_diff._write_json({**whole, "prompts": []}, found, run_a, run_b)
        assert capsys.readouterr().out == json.dumps(whole, ensure_ascii=False, allow_nan=False) + "\n"
        assert len(whole["prompts"]) == (6 if steps[0] is None else 0)


def test_the_text_rank_is_pythons_order_of_strings():
    """Texts with accents, a character past the BMP, U+FFFF, the empty text, None and repeats rank as
    Python's sorted() orders them (equal texts equal, None as ""); with a lone surrogate (no UTF-8) too."""
    from rl_board.analysis.diff import _text_rank

    texts = ["b", "é", "\U0001F600", "\uffff", "", None, "a", "b", "ab", "Z", "é"]
    for case in (texts, [*texts, "\ud800x"]):
        distinct = sorted({"" if t is None else t for t in case})
        assert _text_rank(case).tolist() == [distinct.index("" if t is None else t) for t in case]


def _templated_runs(tmp_path, render, skip_special_tokens):
    """The board's own lines (``RolloutWriter``: the bare question) and the same run as verl's dumps
    (``_dump_generations``: ``input`` the prompt as the chat template ``render`` wrote it, decoded with
    ``skip_special_tokens``), steps 1-2 on the board's side and 3-4 on verl's; B's rewards are A's but
    for "Spell cat." (all 0 in B)."""
    from ray_writers import chatml, decode, decode_llama3, llama3_message, verl_dump

    from rl_board.writer import RolloutWriter

    board, verl = tmp_path / "runs" / "board", tmp_path / "runs" / "verl"
    with RolloutWriter(board) as writer:
        for step in (1, 2):
            questions = list(REWARDS_A)
            writer.log_batch(step, prompt=questions, response=[f"a {q}" for q in questions],
                             reward=[REWARDS_A[q][step - 1] for q in questions])
    system = {"role": "system", "content": "You are a helpful assistant."}
    for step in (3, 4):
        inputs = []
        for question in REWARDS_A:
            messages = [system, {"role": "user", "content": question}]
            if render == "chatml":
                text = decode(chatml(messages, add_generation_prompt=True), skip_special_tokens)
            else:
                text = ("<|begin_of_text|>" + "".join(llama3_message(m) for m in messages)
                        + "<|start_header_id|>assistant<|end_header_id|>\n\n")
                text = decode_llama3(text) if skip_special_tokens else text
            inputs.append(text)
        scores = [0.0 if q == "Spell cat." else REWARDS_A[q][step - 3] for q in REWARDS_A]
        verl_dump(verl, step, inputs, [f"a {q}" for q in REWARDS_A], ["x"] * len(inputs), scores, {})
    return board, verl


@pytest.mark.parametrize("render", ["chatml", "llama3"])
@pytest.mark.parametrize("skip_special_tokens", [False, True])
def test_a_verl_dump_and_the_board_lines_match_every_prompt_on_the_user_content(tmp_path, render,
                                                                                 skip_special_tokens):
    """verl's ``input`` keeps the chat template (ChatML or Llama 3, markers kept or dropped by the decode),
    the board's lines the bare question: every prompt is matched on its user content, only the changed
    one moves (by hand), each prompt's samples are 2 steps apart (steps 1-2 against 3-4), and the table
    names each prompt by its question whichever side is A."""
    from rl_board import load
    from rl_board.analysis.diff import compute_diff

    board, verl = _templated_runs(tmp_path, render, skip_special_tokens)
    a, b = load(board), load(verl)
    assert compute_diff(a, b).prompt_match == "user content"
    for first, second in ((a, b), (b, a)):
        diff = compute_diff(first, second)
        assert (diff.matched, diff.only_a, diff.only_b) == (6, 0, 0)
        assert diff.step_distance == 2.0  # mean step 1.5 against 3.5 for every prompt
    table = compute_diff(a, b).table.set_index("prompt")
    assert table.at["Spell cat.", "delta"] == pytest.approx(0.0 - (0.3 + 0.1) / 2)
    assert sorted(compute_diff(b, a).table["prompt"]) == sorted(REWARDS_A)  # verl as A: its questions shown
    assert (table["delta"] != 0).sum() == 1
    plain = compute_diff(a, a, (1, 1), (2, 2))  # the board's lines against themselves: matched on the text
    assert (plain.prompt_match, plain.matched) == ("text", 6)


def test_a_diff_where_nothing_matches_says_why_with_each_sides_first_prompt(tmp_path):
    """Two runs with no prompt in common: the diff says so, naming what it matched on and each side's first
    prompt (in the CLI's text, its --json, and the Python value); a matched diff has no such reason."""
    from rl_board import load
    from rl_board.analysis.diff import compute_diff, no_match_reason

    write_lines(tmp_path / "a" / "r.jsonl", [{"step": 1, "prompt": "Add 2 and 3.", "reward": 1.0},
                                             {"step": 1, "prompt": "Add 4 and 5.", "reward": 1.0}])
    write_lines(tmp_path / "b" / "r.jsonl", [{"step": 1, "prompt": "Question: add 2 and 3", "reward": 0.0}])
    diff = compute_diff(load(tmp_path / "a"), load(tmp_path / "b"))
    assert diff.matched == 0 and diff.first_prompts == ("Add 2 and 3.", "Question: add 2 and 3")
    assert no_match_reason(diff) == ("No prompt of A is a prompt of B, matched by their text (pads removed). "
                                     "A's first prompt: 'Add 2 and 3.'; B's first prompt: 'Question: add 2 and 3'.")
    assert compute_diff(load(tmp_path / "a"), load(tmp_path / "a")).first_prompts is None
    command = [sys.executable, "-m", "rl_board", "diff", str(tmp_path / "a"), str(tmp_path / "b")]
    out = json.loads(subprocess.run(command + ["--json"], capture_output=True, text=True, cwd=REPO).stdout)
    assert out["no_match"] == {"why": no_match_reason(diff), "a_first_prompt": "Add 2 and 3.",
                               "b_first_prompt": "Question: add 2 and 3"}
    assert out["step_distance"] is None and out["prompts"] == []
    text = subprocess.run(command, capture_output=True, text=True, cwd=REPO).stdout
    assert "A's first prompt: 'Add 2 and 3.'; B's first prompt: 'Question: add 2 and 3'." in text


def test_the_step_distance_per_prompt_and_its_mean(tmp_path):
    """A prompt seen at steps 1 and 3 in A and at step 10 in B is 8 steps apart, one seen at 2 in A and 4 in
    B 2 apart: each in --json, their mean 5 at the top, and the text gives the mean and does not call 5 far (FAR_STEPS 10)."""
    write_lines(tmp_path / "a" / "r.jsonl", [{"step": 1, "prompt": "p", "reward": 1.0},
                                             {"step": 3, "prompt": "p", "reward": 1.0},
                                             {"step": 2, "prompt": "q", "reward": 0.0}])
    write_lines(tmp_path / "b" / "r.jsonl", [{"step": 10, "prompt": "p", "reward": 0.0},
                                             {"step": 4, "prompt": "q", "reward": 1.0}])
    command = [sys.executable, "-m", "rl_board", "diff", str(tmp_path / "a"), str(tmp_path / "b")]
    out = json.loads(subprocess.run(command + ["--json"], capture_output=True, text=True, cwd=REPO).stdout)
    by_prompt = {p["prompt"]: p for p in out["prompts"]}
    assert (by_prompt["p"]["a"]["step_mean"], by_prompt["p"]["b"]["step_mean"]) == (2.0, 10.0)
    assert (by_prompt["p"]["step_distance"], by_prompt["q"]["step_distance"]) == (8.0, 2.0)
    assert out["step_distance"] == 5.0 and out["no_match"] is None
    text = subprocess.run(command, capture_output=True, text=True, cwd=REPO).stdout
    assert "samples of a prompt are 5 steps apart on average\n" in text


@pytest.mark.slow
def test_page_matches_templated_prompts_and_opens_a_sample_of_either_side_in_the_batch(tmp_path):
    """AppTest: the board's lines (A) against verl's dumps that keep the ChatML template (B): every prompt
    matched on its user content (the one changed, "Spell cat.", the regression), 2 steps apart; "Open in
    Batch" on an A sample shows it in the batch of the loaded run, on a B sample loads run B and shows that
    sample there (the address names it)."""
    from page_steps import load as load_page
    from page_steps import open_page

    from rl_board.views import keys

    _templated_runs(tmp_path, "chatml", skip_special_tokens=False)
    at = load_page(open_page(tmp_path / "runs", "board"), keys.DIFF)
    at.selectbox(key=keys.DIFF_RUN).select("verl").run()
    assert not at.exception, at.exception
    assert any("6 prompts in both, 0 only in A, 0 only in B" in c.value and "user content" in c.value
               for c in at.caption)
    worse = at.dataframe[0].value
    assert list(worse["prompt"].str.contains("Spell cat.")) == [True] and list(worse["steps apart"]) == [2.0]
    a_first = at.button(key="diff-open-A-0")
    assert "rollout_data_rank0.jsonl:" in a_first.proto.help
    a_first.click().run()
    assert not at.exception, at.exception
    assert at.session_state[keys.AREA] == keys.BATCH
    address = a_first.proto.help.split()[1]  # "Show FILE:LINE (step N) …"
    assert at.session_state[keys.SAMPLE] == address and at.query_params["run"] == "board"
    at = load_page(open_page(tmp_path / "runs", "board"), keys.DIFF)
    at.selectbox(key=keys.DIFF_RUN).select("verl").run()
    b_first = at.button(key="diff-open-B-0")
    address = b_first.proto.help.split()[1]
    assert address.startswith(("3.jsonl:", "4.jsonl:"))  # verl's {step}.jsonl
    b_first.click().run()
    assert not at.exception, at.exception
    assert at.session_state[keys.AREA] == keys.BATCH
    assert at.query_params["run"] == "verl" and at.session_state[keys.SAMPLE] == address
    assert at.query_params["sample"] == address


@pytest.mark.slow
def test_page_says_why_nothing_matches(tmp_path):
    """AppTest: two runs with no prompt in common: the Diff area names what it matched on and each side's
    first prompt (as text, not Markdown); a run asking A's prompt 19 steps later is called far apart."""
    from page_steps import load as load_page
    from page_steps import open_page

    from rl_board.views import keys

    write_lines(tmp_path / "runs" / "a" / "r.jsonl", [{"step": 1, "prompt": "Add **2** and 3.", "reward": 1.0}])
    write_lines(tmp_path / "runs" / "b" / "r.jsonl", [{"step": 1, "prompt": "Question: add 2 and 3", "reward": 0.0}])
    at = load_page(open_page(tmp_path / "runs", "a"), keys.DIFF)
    at.selectbox(key=keys.DIFF_RUN).select("b").run()
    assert not at.exception, at.exception
    assert [t.value for t in at.text][-1:] == [
        "No prompt of A is a prompt of B, matched by their text (pads removed). A's first prompt: "
        "'Add **2** and 3.'; B's first prompt: 'Question: add 2 and 3'."]
    write_lines(tmp_path / "runs" / "c" / "r.jsonl", [{"step": 20, "prompt": "Add **2** and 3.", "reward": 0.0}])
    at = load_page(open_page(tmp_path / "runs", "a"), keys.DIFF)
    at.selectbox(key=keys.DIFF_RUN).select("c").run()
    assert not at.exception, at.exception
    assert [w.value for w in at.warning] == [
        "A's and B's samples of a prompt are 19 steps apart on average: the training between those steps may "
        "explain a change as much as what sets B apart."]


def _hacked_pair(tmp_path):
    """Run A: prompts p0-p3 at step 1, reward 0.2 each. Run B (8 steps, 2 samples of each prompt a step): in
    steps 1-2 "the answer is K" rewarded 0 or 0.1; in steps 7-8 p0-p2 answer "trust me the answer is K"
    rewarded 1, p3 still "the answer is K" rewarded 0.5: "trust me" spread over 6 of the 8 late responses
    (none early) while the reward rose, B's reward_with_spreading_phrases."""
    a, b = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    write_lines(a / "r.jsonl", [{"step": 1, "prompt": f"p{k}", "response": f"the answer is {k}", "reward": 0.2}
                                for k in range(4)])
    lines = []
    for step in range(1, 9):
        for k in range(4):
            for i in range(2):
                if step >= 7 and k < 3:
                    response, reward = f"trust me the answer is {k}", 1.0
                elif step >= 7:
                    response, reward = f"the answer is {k}", 0.5
                else:
                    response, reward = f"the answer is {k}", 0.1 * i
                lines.append({"step": step, "prompt": f"p{k}", "response": response, "reward": reward})
    write_lines(b / "r.jsonl", lines)
    return a, b


def test_improvements_that_carry_a_finding_of_b_are_marked(tmp_path):
    """B's late steps against A: all four prompts better; the three whose B response holds B's spreading
    phrase ("trust me") carry reward_with_spreading_phrases in --json and in the text, p3 (no phrase) none."""
    a, b = _hacked_pair(tmp_path)
    command = [sys.executable, "-m", "rl_board", "diff", str(a), str(b), "--steps", "1:1", "--steps-b", "7:8"]
    proc = subprocess.run(command + ["--json"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["improvements"] == 4 and out["b_findings_checked"] == 4
    marks = {p["prompt"]: p["b_findings"] for p in out["prompts"]}
    assert marks == {"p0": ["reward_with_spreading_phrases"], "p1": ["reward_with_spreading_phrases"],
                     "p2": ["reward_with_spreading_phrases"], "p3": []}
    text = subprocess.run(command, capture_output=True, text=True, cwd=REPO).stdout
    assert text.count("B carries its finding: reward_with_spreading_phrases") == 3


@pytest.mark.slow
def test_page_marks_the_improvements_that_carry_a_finding_of_b(tmp_path):
    """AppTest: the same pair on the page (A's step 1 against B's steps 7-8): the better table's B's findings
    column names reward_with_spreading_phrases on p0-p2 and nothing on p3."""
    from page_steps import load as load_page
    from page_steps import open_page

    from rl_board.views import keys

    _hacked_pair(tmp_path)
    at = load_page(open_page(tmp_path / "runs", "a"), keys.DIFF)
    at.selectbox(key=keys.DIFF_RUN).select("b").run()
    at.text_input(key=keys.DIFF_STEPS).input("1:1").run()
    at.text_input(key=keys.DIFF_STEPS_B).input("7:8").run()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # B's checks run in a thread of their own: the page says so until they end
        if not any("still being checked" in c.value for c in at.caption):
            break
        at.run()
    assert not at.exception, at.exception
    better = at.dataframe[0].value.set_index("prompt")
    assert better["B's findings"].to_dict() == {"p0": "reward_with_spreading_phrases", "p1": "reward_with_spreading_phrases",
                                                "p2": "reward_with_spreading_phrases", "p3": ""}
    assert any("3 of the better prompts carry a finding of B" in c.value for c in at.caption)


def test_diff_never_computes_the_per_step_statistics_it_does_not_read(tmp_path, monkeypatch, capsys):
    """``rl-board diff`` opens both runs without computing their per-step statistics (not one call of
    ``compute_step_stats``) and prints the diff worked out by hand; a run's ``steps``, read afterwards,
    is computed once and kept (one row per step, each step's 12 samples counted)."""
    from rl_board import load
    from rl_board.analysis import steps as step_module
    from rl_board.cli import main

    calls = []
    compute = step_module.compute_step_stats
    monkeypatch.setattr(step_module, "compute_step_stats", lambda *args: calls.append(1) or compute(*args))
    a, b = _write_pair(tmp_path)
    assert main(["diff", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["matched"], out["regressions"], out["improvements"], out["unchanged"]) == (6, 3, 0, 3)
    assert {p["prompt"]: p["delta"] for p in out["prompts"][:3]} == pytest.approx(DELTAS)
    assert calls == []
    run = load(b)
    assert calls == []
    assert run.steps is run.steps and len(calls) == 1
    assert run.steps["samples"].to_dict() == {1: 12, 2: 12}  # 6 prompts x 2 samples in each of B's steps
