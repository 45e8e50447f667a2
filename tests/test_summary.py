"""The headless summary contract: `python -m rl_board summary RUN_DIR --json`."""

import json
import math
import subprocess
import sys

import pytest

from conftest import REPO, sample, write_lines


def _summary(*args):
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO)
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
