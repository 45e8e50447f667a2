"""Diff by prompt: a run in the board's lines against the same prompts as verl dumps (lines shuffled, some
rewards changed), matched by the prompt's text with pads removed; numbers against hand-computed values."""

from __future__ import annotations

import json
import random
import subprocess
import sys

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
    """``rl_board.diff`` on two folders returns the command's table, its counts in ``attrs``."""
    import rl_board

    a, b = _write_pair(tmp_path)
    table = rl_board.diff(a, b, steps="2:2")
    # step 2 only: samples 3 and 4 of each prompt
    assert table.attrs["matched"] == 6 and list(table["a_samples"]) == [2] * 6
    by_prompt = table.set_index("prompt")
    assert by_prompt.at["Spell cat.", "delta"] == pytest.approx((0.2 + 0.1) / 2 - (0.2 + 0.9) / 2)
    assert by_prompt.at["Name a prime.", "delta"] == pytest.approx(0.25 - 0.5)
    assert by_prompt.at["What is 7 * 6?", "delta"] == 0.0


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
