"""The diagnostics of issue 7, each hand-computed on tiny fixtures through the summary contract."""

import json
import math
import statistics

import pytest
from conftest import REPO, command, sample, write_lines

E = "<|e|>"  # pad and EOS at once, as OpenRLHF writes them
NAN = None  # a JSON null entry in a per-token list


def _summary(run, *args):
    proc = command("summary", str(run), "--json", "--no-cache", *args)
    assert proc.returncode == 0, proc.stderr
    return {s["step"]: s for s in json.loads(proc.stdout)["steps"]}


def _k3(d):
    return math.exp(d) - 1 - d


@pytest.fixture
def ppo_run(tmp_path):
    """Step 1: two PPO samples with the reward at their EOS, a repetitive one, a response-level one."""
    write_lines(tmp_path / "r.jsonl", [
        sample(1, 2.0, response_tokens=["a", "b", E, E], logprobs=[-1.0, -2.0, -0.5, -0.01],
               ref_logprobs=[-1.5, -1.0, -0.5, -0.02], token_rewards=[0.0, 0.0, 1.5, 0.0],
               values=[0.5, 0.25, 1.0, 0.0], rollout_logprobs=[-1.0, -1.5, -0.5, 0.0], entropy=[1.0, 2.0, 3.0, 9.0]),
        sample(1, 0.0, response_tokens=["c", E, E, E], logprobs=[-0.2, -0.3, -0.01, -0.01],
               ref_logprobs=[-0.1, -0.3, -0.02, -0.02], token_rewards=[0.0, 0.5, 0.0, 0.0],
               values=[0.1, 0.2, 0.0, 0.0], rollout_logprobs=[-0.2, -0.5, 0.0, 0.0], entropy=[0.5, 1.5, 9.0, 9.0]),
        sample(1, 3.0, response_tokens=["d", "d", "d", "d", "d", E], logprobs=[-1.0] * 6, ref_logprobs=[-1.0] * 6),
        sample(1, 1.0, response="x y x y x"),
    ])
    return tmp_path


@pytest.mark.slow
def test_eos_equal_to_pad_counts_the_eos(ppo_run):
    """P = E: the first E counts (its reward and logprob with it), everything after does not."""
    got = _summary(ppo_run, "--pad-token", E, "--eos-token", E)[1]
    # counted: A = a, b, E (3); B = c, E (2); D = d x5, E (6)
    assert got["response_len_mean"] == pytest.approx((3 + 2 + 6) / 3)
    # log-ratios: A 0.5, -1.0, 0.0; B -0.1, 0.0; D six 0.0 -> 2 negative of 11 finite pairs
    assert got["neg_log_ratio_share"] == pytest.approx(2 / 11)
    assert got["reward_len_corr"] == pytest.approx(statistics.correlation([2.0, 0.0, 3.0], [3, 2, 6]))
    # 4-grams: D's d,d,d,d / d,d,d,d / d,d,d,E -> 1 - 2/3; the text "x y x y x" -> 2 of 2 distinct -> 0;
    # A and B have fewer than 4 counted tokens
    assert got["repeat_4gram_share"] == pytest.approx((1 / 3 + 0.0) / 2)
    returns = [1.5, 1.5, 1.5, 0.5, 0.5]  # sum of token rewards from each position to the counted end
    residuals = [1.5 - 0.5, 1.5 - 0.25, 1.5 - 1.0, 0.5 - 0.1, 0.5 - 0.2]
    assert got["explained_variance"] == pytest.approx(
        1 - statistics.pvariance(residuals) / statistics.pvariance(returns))
    assert got["mismatch_kl"] == pytest.approx(((_k3(0.0) + _k3(-0.5) + _k3(0.0)) / 3 + (_k3(0.0) + _k3(0.2)) / 2) / 2)
    assert got["entropy_mean"] == pytest.approx((2.0 + 1.0) / 2)
    k3_a = (_k3(-0.5) + _k3(1.0) + _k3(0.0)) / 3  # d = ref - logp
    k3_b = (_k3(0.1) + _k3(0.0)) / 2
    assert got["kl_mean"] == pytest.approx((k3_a + k3_b + 0.0) / 3)


@pytest.mark.slow
def test_without_eos_the_pad_cuts_before_the_eos(ppo_run):
    """Without --eos-token the first E is a pad: the reward at the EOS is lost, so the critic's
    returns are all 0 and explained variance is null, as the issue describes."""
    got = _summary(ppo_run, "--pad-token", E)[1]
    assert got["response_len_mean"] == pytest.approx((2 + 1 + 5) / 3)
    assert got["explained_variance"] is None
    assert got["neg_log_ratio_share"] == pytest.approx(2 / 8)
    assert got["entropy_mean"] == pytest.approx((1.5 + 0.5) / 2)
    assert got["repeat_4gram_share"] == pytest.approx(((1 - 1 / 2) + 0.0) / 2)  # d x5: 2 grams, 1 distinct


@pytest.mark.slow
def test_eos_different_from_pad(tmp_path):
    """P != E: counting stops after the first E or before the first P, whichever comes first."""
    write_lines(tmp_path / "r.jsonl", [
        sample(1, 0.0, response_tokens=["a", "<eos>", "z", "<pad>"], logprobs=[-1.0] * 4, ref_logprobs=[-1.0] * 4),
        sample(1, 0.0, response_tokens=["a", "<pad>", "<eos>", "z"], logprobs=[-1.0] * 4, ref_logprobs=[-1.0] * 4),
    ])
    assert _summary(tmp_path, "--pad-token", "<pad>", "--eos-token", "<eos>")[1]["response_len_mean"] == 1.5
    assert _summary(tmp_path, "--pad-token", "<pad>")[1]["response_len_mean"] == 2.0  # 3 and 1
    assert _summary(tmp_path, "--eos-token", "<eos>")[1]["response_len_mean"] == 2.5  # 2 and 3
    assert _summary(tmp_path)[1]["response_len_mean"] == 4.0


@pytest.mark.slow
def test_nan_entries_are_left_out(tmp_path):
    """A null logprob or ref_logprob leaves its position out of the share; null entropy is ignored."""
    write_lines(tmp_path / "r.jsonl", [
        sample(1, 1.0, logprobs=[-1.0, NAN, -3.0, -1.0], ref_logprobs=[-2.0, -2.0, NAN, -0.5],
               entropy=[NAN, 2.0, 4.0, 3.0], rollout_logprobs=[-1.0, -1.0, -3.0, NAN]),
    ])
    got = _summary(tmp_path)[1]
    assert got["neg_log_ratio_share"] == pytest.approx(1 / 2)  # positions 0 (+1.0) and 3 (-0.5)
    assert got["entropy_mean"] == pytest.approx(3.0)
    assert got["mismatch_kl"] == pytest.approx((_k3(0.0) + _k3(0.0)) / 2)  # positions 0 and 2
    assert got["reward_len_corr"] is None  # one sample


@pytest.mark.slow
def test_response_level_log_and_empty_response(tmp_path):
    """No token lists: length is characters (pads removed) and 4-grams run over words; an empty
    response has length 0 and no 4-grams; token diagnostics are null."""
    texts = ["a b c d a b c d<pad>", "one two", "p q r s t", ""]
    rewards = [1.0, 0.0, 2.0, 0.5]
    write_lines(tmp_path / "r.jsonl", [sample(5, r, response=t) for r, t in zip(rewards, texts)])
    got = _summary(tmp_path, "--pad-token", "<pad>")[5]
    chars = [len(t.replace("<pad>", "")) for t in texts]
    assert got["reward_len_corr"] == pytest.approx(statistics.correlation(rewards, chars))
    assert got["repeat_4gram_share"] == pytest.approx((1 - 4 / 5 + 0.0) / 2)  # a b c d a b c d: 4 of 5 distinct
    for key in ("neg_log_ratio_share", "explained_variance", "mismatch_kl", "entropy_mean", "response_len_mean"):
        assert got[key] is None


@pytest.mark.slow
def test_constant_reward_has_no_correlation(tmp_path):
    """Pearson is null when either side is constant."""
    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0, response=t) for t in ("a", "bb", "ccc")])
    assert _summary(tmp_path)[1]["reward_len_corr"] is None


def test_page_defaults_count_the_eos():
    """The demo's responses end in <|endoftext|> (pad and EOS): by default the page's run counts it."""
    from rl_board.analysis.source import load_run
    from rl_board.views.sidebar import DEFAULT_EOS, DEFAULT_PAD

    run = load_run(REPO / "rollout_samples" / "ppo_demo", pad_token=DEFAULT_PAD, eos_token=DEFAULT_EOS,
                   cache_root=False)
    lines = [json.loads(line) for f in sorted((REPO / "rollout_samples" / "ppo_demo").glob("*.jsonl"))
             for line in f.read_text().splitlines()]
    first = lines[0]
    eos = first["response_tokens"].index("<|endoftext|>")
    assert run.samples.loc[(run.samples["file"] == 0) & (run.samples["line"] == 1), "response_len"].item() == eos + 1
    tokens = run.sample_tokens(run.samples.index[(run.samples["file"] == 0) & (run.samples["line"] == 1)][0])
    assert (~tokens.is_pad).sum() == eos + 1 and tokens.token_rewards[eos] == pytest.approx(
        first["token_rewards"][eos])
