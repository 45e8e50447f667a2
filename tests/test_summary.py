"""The headless summary contract: `python -m rl_board summary RUN_DIR --json`."""

import json
import math
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, command, sample, write_lines


def _summary(*args):
    proc = command("summary", *map(str, args))
    return proc.returncode, proc.stdout, proc.stderr


def test_summary_numbers_match_hand_computation(tmp_path):
    """Steps ascending with count, mean, population std, ref mean, KL (k3) and lengths as defined."""
    pad = "<pad>"
    write_lines(tmp_path / "rank1.jsonl", [
        sample(7, 1.0, ref_reward=0.0, response_tokens=["a", "b", pad], logprobs=[-1.0, -2.0, -5.0],
               ref_logprobs=[-1.5, -1.0, 0.0]),
        "{broken",
    ])
    write_lines(tmp_path / "rank0.jsonl", [sample(7, 3.0, ref_reward=1.0, response_tokens=["a"],
                                                  logprobs=[-1.0], ref_logprobs=[-1.0]),
                                           sample(2, -1.0)])
    code, out, _ = _summary(tmp_path, "--json", "--pad-token", pad, "--no-cache")
    assert code == 0
    got = json.loads(out)
    assert (got["files"], got["lines_ok"], got["lines_bad"]) == (2, 3, 1)
    assert got["errors"] == [{"file": "rank1.jsonl", "line": 2, "error": got["errors"][0]["error"]}]
    assert [s["step"] for s in got["steps"]] == [2, 7]
    first, second = got["steps"]
    assert first == {"step": 2, "samples": 1, "reward_mean": -1.0, "reward_std": 0.0, "ref_reward_mean": None,
                     "kl_mean": None, "log_ratio_mean": None, "response_len_mean": None, "extras": {},
                     # one sample, no tokens, no text: every diagnostic is null by its definition
                     "neg_log_ratio_share": None, "reward_len_corr": None, "repeat_4gram_share": None,
                     "explained_variance": None, "mismatch_kl": None, "entropy_mean": None,
                     "masked_share": None,  # no sample with a loss mask
                     "truncated_share": None,  # no response_tokens: nothing tells
                     "prompt_groups": 0, "zero_std_groups": 0}  # no prompt: in no group
    k3 = ((math.exp(-0.5) - 0.5) + (math.exp(1.0) - 2.0)) / 2  # sample 1: two tokens before the pad
    assert second["samples"] == 2
    assert second["reward_mean"] == pytest.approx(2.0) and second["reward_std"] == pytest.approx(1.0)
    assert second["ref_reward_mean"] == pytest.approx(0.5)
    assert second["kl_mean"] == pytest.approx((k3 + 0.0) / 2, rel=1e-6)
    assert second["log_ratio_mean"] == pytest.approx((-0.25 + 0.0) / 2)
    assert second["response_len_mean"] == pytest.approx(1.5)


def test_summary_exit_codes(tmp_path):
    """0 with a line loaded, 1 with none, 2 for a bad path or argument."""
    write_lines(tmp_path / "bad" / "r.jsonl", ["nope"])
    assert _summary(tmp_path / "bad", "--json", "--no-cache")[0] == 1
    assert _summary(tmp_path / "missing", "--json")[0] == 2
    assert _summary(tmp_path / "bad", "--max-samples-per-step", "0")[0] == 2
    code, out, _ = _summary(REPO / "rollout_samples" / "eval_demo", "--json", "--no-cache")
    assert code == 0 and json.loads(out)["lines_ok"] == 80


def test_summary_max_samples_per_step(tmp_path):
    """--max-samples-per-step keeps the first N per step."""
    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0), sample(1, 5.0), sample(1, 9.0)])
    got = json.loads(_summary(tmp_path, "--json", "--max-samples-per-step", "2")[1])
    assert got["steps"][0]["samples"] == 2 and got["steps"][0]["reward_mean"] == 3.0


def test_summary_is_strict_json_with_infinity(tmp_path):
    """Infinite means become null, so the output parses as strict JSON."""
    write_lines(tmp_path / "r.jsonl", ['{"step": 1, "reward": Infinity}'])
    code, out, _ = _summary(tmp_path, "--json", "--no-cache")
    assert code == 0
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))["steps"][0][
        "reward_mean"] is None


EOT = "<|endoftext|>"


def _openrlhf_run(folder):
    """Two OpenRLHF-style samples (pad = EOS = <|endoftext|>, lists padded to 5 positions)."""
    write_lines(folder / "rank0.jsonl", [
        sample(1, 1.0, prompt="p", response="a b" + EOT * 3, response_tokens=["a", "b", EOT, EOT, EOT],
               logprobs=[-1.0, -2.0, -0.5, -0.01, -0.01], ref_logprobs=[-1.5, -1.0, -0.5, -0.3, -0.3]),
        sample(1, 0.0, prompt="p", response="c" + EOT * 4, response_tokens=["c", EOT, EOT, EOT, EOT],
               logprobs=[-0.2, -0.3, -0.01, -0.01, -0.01], ref_logprobs=[-0.1, -0.3, -0.4, -0.4, -0.4]),
    ])
    return folder


def _k3(logp, ref):
    d = ref - logp
    return math.exp(d) - 1 - d


def test_summary_counts_with_the_pages_defaults_without_flags(tmp_path):
    """No flags: pad and EOS are <|endoftext|> as on the page: the first one counts, nothing after it;
    ``--pad-token none --eos-token none`` counts every position. The JSON says which it used."""
    run = _openrlhf_run(tmp_path)
    code, out, _ = _summary(run, "--json", "--no-cache")
    assert code == 0
    got = json.loads(out)
    assert got["settings"] == {"pad_token": EOT, "eos_token": EOT, "fields": {}, "split": None,
                               "max_samples_per_step": None, "kl_estimator": "k3"}
    step = got["steps"][0]
    assert step["response_len_mean"] == pytest.approx((3 + 2) / 2)  # a b EOS, c EOS
    first = (_k3(-1.0, -1.5) + _k3(-2.0, -1.0) + _k3(-0.5, -0.5)) / 3
    second = (_k3(-0.2, -0.1) + _k3(-0.3, -0.3)) / 2
    assert step["kl_mean"] == pytest.approx((first + second) / 2)
    code, out, _ = _summary(run, "--json", "--no-cache", "--pad-token", "none", "--eos-token", "NONE")
    got = json.loads(out)
    assert got["settings"]["pad_token"] is None and got["settings"]["eos_token"] is None
    assert got["steps"][0]["response_len_mean"] == 5.0  # every position counts
    code, out, _ = _summary(run, "--json", "--no-cache", "--eos-token", "none")
    step = json.loads(out)["steps"][0]
    assert step["response_len_mean"] == pytest.approx((2 + 1) / 2)  # the first <|endoftext|> is a pad


def test_search_and_findings_json_carry_their_settings(tmp_path):
    """``search --json`` and ``findings --json`` say the pad, EOS, mapping and sample limit they used."""
    run = _openrlhf_run(tmp_path)
    for argv in (["search", run, "--regex", "a"], ["findings", run]):
        proc = command(*map(str, argv), "--json", "--no-cache", "--field", "ground_truth=prompt",
                       "--max-samples-per-step", "7")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["settings"] == {"pad_token": EOT, "eos_token": EOT,
                                                       "fields": {"ground_truth": "prompt"}, "split": None,
                                                       "max_samples_per_step": 7}
    proc = command("search", str(run), "--regex", "^a b$", "--json", "--no-cache")
    assert json.loads(proc.stdout)["matches"] == 1  # pads removed from the text by default
    proc = command("search", str(run), "--regex", "^a b$", "--json", "--no-cache", "--pad-token", "none")
    assert json.loads(proc.stdout)["matches"] == 0


def _truncation_run(folder):
    """Step 1: a response that ends with its EOS, one that fills its 4 positions without one
    (truncated), one cut by a pad before any EOS (ended by padding: not truncated), one with lists
    shorter than its tokens that hold no EOS (truncated), and a response-level one (unknown)."""
    write_lines(folder / "r.jsonl", [
        sample(1, 1.0, response_tokens=["a", "b", EOT, EOT], logprobs=[-1.0] * 4, ref_logprobs=[-1.0] * 4),
        sample(1, 0.0, response_tokens=["a", "b", "c", "d"], logprobs=[-1.0] * 4, ref_logprobs=[-1.0] * 4),
        sample(1, 0.5, response_tokens=["a", "<pad>", "<pad>"], logprobs=[-1.0] * 3, ref_logprobs=[-1.0] * 3),
        sample(1, 0.5, response_tokens=["a", "b", "c", EOT], logprobs=[-1.0] * 3, ref_logprobs=[-1.0] * 3),
        sample(1, 0.2, response="no tokens"),
        sample(2, 0.2, response_tokens=["x", EOT], logprobs=[-1.0] * 2, ref_logprobs=[-1.0] * 2),
    ])
    return folder


def test_truncated_share_and_search(tmp_path):
    """truncated_share = truncated ÷ samples whose flag is known: 2 of 4 at step 1, 0 of 1 at step 2;
    ``search --truncated`` lists exactly the two; without an EOS token nothing tells (null)."""
    run = _truncation_run(tmp_path)
    got = json.loads(_summary(run, "--json", "--no-cache", "--pad-token", "<pad>")[1])
    assert [s["truncated_share"] for s in got["steps"]] == [0.5, 0.0]
    proc = command("search", str(run), "--truncated", "--json", "--no-cache", "--pad-token", "<pad>")
    assert [(s["step"], s["line"]) for s in json.loads(proc.stdout)["samples"]] == [(1, 2), (1, 4)]
    got = json.loads(_summary(run, "--json", "--no-cache", "--pad-token", "<pad>", "--eos-token", "none")[1])
    assert [s["truncated_share"] for s in got["steps"]] == [None, None]
    assert command("search", str(run), "--json").returncode == 2  # neither --regex nor --truncated


def test_summary_text_opens_with_a_recap_and_json_is_unchanged(tmp_path):
    """The text output opens with steps first → last and each mean's first → last, min and max (with steps),
    computed by hand; the --json output has no recap (its keys are the contract's)."""
    rewards = {1: [0.0, 1.0], 2: [3.0, 3.0], 3: [-1.0, 0.0], 4: [0.5, 0.5]}  # means 0.5, 3, -0.5, 0.5
    write_lines(tmp_path / "r.jsonl", [sample(step, r) for step, rs in rewards.items() for r in rs])
    code, out, _ = _summary(tmp_path)
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == "steps 1 → 4: 4 steps, 8 samples"
    assert lines[2].split() == ["reward", "0.5", "→", "0.5", "min", "-0.5", "(step", "3)", "max", "3", "(step", "2)"]
    assert lines[3].split()[0] == "step"  # no ref_reward, KL or length recap: the run has none
    code, out, _ = _summary(tmp_path, "--json")
    assert set(json.loads(out)) == {"settings", "format", "files", "lines_ok", "lines_bad", "lines_skipped", "errors",
                                    "files_unreadable", "checks", "steps"}


def test_a_step_lists_only_the_extras_its_samples_have(tmp_path):
    """Step 1 has acc (0 and 1) and len (4, one sample), step 2 only len (6), step 3 none: each step
    lists its own, in the run's order of extras (acc met first), and no nulls."""
    write_lines(tmp_path / "a.jsonl", [
        {"step": 1, "reward": 0.5, "prompt": "p", "response": "r", "acc": 0},
        {"step": 1, "reward": 0.5, "prompt": "p", "response": "r", "acc": 1, "len": 4},
        {"step": 2, "reward": 0.5, "prompt": "p", "response": "r", "len": 6},
        {"step": 3, "reward": 0.5, "prompt": "p", "response": "r"},
    ])
    code, out, _ = _summary(tmp_path, "--json", "--no-cache")
    assert code == 0
    assert [s["extras"] for s in json.loads(out)["steps"]] == [{"acc": 0.5, "len": 4.0}, {"len": 6.0}, {}]


@pytest.mark.slow
def test_sparse_extras_over_50000_steps_cost_what_their_values_cost(tmp_path):
    """A 4 MB file of 50,000 steps, each line one of 256 extras: each step lists its one extra (50,000
    values; 12.8 million nulls and 258 MB of JSON before), under 1 GiB of memory."""
    lines = [{"step": i, "prompt": "p", "response": "r", "reward": 0.5, f"extra_{i % 256}": i % 7}
             for i in range(50_000)]
    write_lines(tmp_path / "run" / "rollout_data_rank0.jsonl", lines)
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    proc = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "rl_board", "summary", "--json",
                           str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={**os.environ, "RL_BOARD_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)["steps"]
    assert [s["extras"] for s in steps] == [{f"extra_{i % 256}": float(i % 7)} for i in range(50_000)]
    assert int(proc.stderr.strip().splitlines()[-1]) / 1024 < 1024  # MiB


@pytest.mark.slow
def test_300_sparse_extras_over_200000_steps_stay_under_1_gib_cold_and_kept(tmp_path):
    """The attack of 50.12: a 15 MB file of 200,000 steps, each line one of 300 extras. Read cold and again
    (its segments checked) and from the kept summary, the same output: each step lists its own extra or
    none, never one past the first 256 met; a note counts the 44 past the limit; every run's peak memory
    under 1 GiB (1.04 GB cold, 1.3 GB read again before the extras were kept sparse)."""
    with open(tmp_path / "a.jsonl", "w") as fh:  # (write_lines' json.dumps per line, without a list of them)
        fh.writelines(json.dumps({"step": i, "prompt": "p", "response": "r", "reward": 0.5, f"k{i % 300}": 1.0})
                      + "\n" for i in range(200_000))
    (tmp_path / "run").mkdir()
    (tmp_path / "a.jsonl").rename(tmp_path / "run" / "a.jsonl")
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    outputs = []
    for forget in (False, True, False):  # cold; the memo removed (the segments read, checked); the memo
        if forget:
            shutil.rmtree(tmp_path / "cache" / "memos", ignore_errors=True)  # none on a machine quick to read
        proc = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "rl_board", "summary", "--json",
                               str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO, timeout=600,
                              env={**os.environ, "RL_BOARD_CACHE_DIR": str(tmp_path / "cache")})
        assert proc.returncode == 0, proc.stderr
        assert "44 more field name(s) were not made columns" in proc.stderr
        assert int(proc.stderr.strip().splitlines()[-1]) / 1024 < 1024  # MiB
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    steps = json.loads(outputs[0])["steps"]
    assert [s["step"] for s in steps] == list(range(200_000))
    # each step lists its own extra or none, never one of the 44 past the limit (a later byte range of the
    # file that meets more than 256 names itself drops its values of kept ones: a loss left for its own fix)
    assert all(s["extras"] in ({f"k{i % 300}": 1.0}, {}) for i, s in enumerate(steps))
    assert not any(s["extras"] for i, s in enumerate(steps) if i % 300 >= 256)
    assert sum(bool(s["extras"]) for s in steps) > 100_000  # (149,576 here of the 170,667 a lossless read lists)


def test_a_sparse_extras_step_stats_are_kept_sparse_with_the_same_numbers(tmp_path):
    """An extra at 2 of 10 steps (step 1: 1 and 4, step 2: 3) is held as a sparse column of its step
    means (2.5, 3.0, NaN...) and population stds (1.5, 0.0, NaN...), and its curve draws those means;
    an extra at every step stays a plain float column."""
    import numpy as np
    import pandas as pd

    from rl_board import load
    from rl_board.analysis.figures import build_curve_figure

    lines = [{"step": s, "prompt": "p", "response": "r", "reward": 0.5, "every": s} for s in range(1, 11)]
    lines[0]["rare"], lines[1]["rare"] = 1, 3
    lines.insert(1, {"step": 1, "prompt": "p", "response": "r", "reward": 0.5, "every": 1, "rare": 4})
    write_lines(tmp_path / "run" / "a.jsonl", lines)
    steps = load(tmp_path / "run").steps
    assert isinstance(steps["extra:rare_mean"].dtype, pd.SparseDtype)
    assert not isinstance(steps["extra:every_mean"].dtype, pd.SparseDtype)
    mean = steps["extra:rare_mean"].to_numpy(dtype=float)
    np.testing.assert_array_equal(mean, [2.5, 3.0] + [np.nan] * 8)
    np.testing.assert_array_equal(steps["extra:rare_std"].to_numpy(dtype=float), [1.5, 0.0] + [np.nan] * 8)
    figure = build_curve_figure(steps, ["extra:rare"], "rare")
    means = [trace for trace in figure.data if trace.name == "extra:rare" and trace.showlegend is not False]
    assert [[y for y in trace.y if y == y] for trace in means] == [[2.5, 3.0]]
