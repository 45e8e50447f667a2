"""Derived numbers against values worked out by hand."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from rl_board.analysis.steps import compute_step_stats
from rl_board.analysis.tables import compute_token_table
from rl_board.derive.metrics import compute_sample_tokens, kl_per_token
from rl_board.derive.samples import derive
from rl_board.readers import ReadOptions
from rl_board.readers.formats.jsonl import parse_block

# logprobs and ref_logprobs of two tokens; d = ref - logp = (-0.5, +1.0)
LOGP = [-1.0, -2.0]
REF = [-1.5, -1.0]
K3 = [math.exp(-0.5) - 1 + 0.5, math.exp(1.0) - 1 - 1.0]  # exp(d) - 1 - d
K3_WRONG_DIRECTION = [math.exp(0.5) - 1 - 0.5, math.exp(-1.0) - 1 + 1.0]  # exp(-d) - 1 + d


def _agg(lines: list[dict], pad_token=None) -> dict:
    """Per-sample columns of ``lines`` as the loader computes them: name -> numpy array."""
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    options = ReadOptions(pad_token)
    table = derive(parse_block(data, options=options).table, options)
    return {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}


def test_k3_is_kl_policy_to_ref():
    """k3 uses d = ref_logprob - logprob: exp(d) - 1 - d, not the reverse-direction estimator."""
    got = kl_per_token(np.array(LOGP), np.array(REF), "k3")
    assert got == pytest.approx(K3, rel=1e-12)
    assert got[0] != pytest.approx(K3_WRONG_DIRECTION[0])
    assert (got >= 0).all()


def test_k1_and_k2():
    """k1 is the log-ratio and k2 half its square."""
    assert kl_per_token(np.array(LOGP), np.array(REF), "k1") == pytest.approx([0.5, -1.0])
    assert kl_per_token(np.array(LOGP), np.array(REF), "k2") == pytest.approx([0.125, 0.5])


def test_sample_aggregates_by_hand():
    """Mean and sum of log-ratio and k3 over a sample's tokens match hand arithmetic."""
    agg = _agg([{"step": 1, "reward": 1, "logprobs": LOGP, "ref_logprobs": REF}])
    assert agg["log_ratio_sum"][0] == pytest.approx(-0.5)
    assert agg["log_ratio_mean"][0] == pytest.approx(-0.25)
    assert agg["kl_sum"][0] == pytest.approx(sum(K3), rel=1e-6)
    assert agg["kl_mean"][0] == pytest.approx(sum(K3) / 2, rel=1e-6)
    assert agg["n_tokens"][0] == 2 and agg["response_len"][0] == 2


def test_pad_cut_leaves_pad_and_after_out():
    """Positions at and after the first pad token are left out of every aggregate."""
    line = {"step": 1, "reward": 0, "response_tokens": ["a", "b", "<pad>", "c"],
            "logprobs": [-1.0, -2.0, -7.0, -9.0], "ref_logprobs": [-1.5, -1.0, 0.0, 0.0]}
    agg = _agg([line], "<pad>")
    assert agg["response_len"][0] == 2
    assert agg["log_ratio_sum"][0] == pytest.approx(-0.5)
    assert agg["kl_mean"][0] == pytest.approx(sum(K3) / 2, rel=1e-6)
    no_pad = _agg([line])
    assert no_pad["response_len"][0] == 4
    assert no_pad["log_ratio_sum"][0] == pytest.approx(0.5 - 1.0 - 7.0 - 9.0)


def test_pad_cut_per_sample_in_a_batch():
    """Each sample of a block is cut at its own first pad."""
    lines = [
        {"step": 1, "reward": 0, "response_tokens": ["<pad>", "x"], "logprobs": [-1, -1], "ref_logprobs": [0, 0]},
        {"step": 1, "reward": 0, "response_tokens": ["x", "y", "z"], "logprobs": [-1, -2, -3],
         "ref_logprobs": [0, 0, 0]},
        {"step": 1, "reward": 0, "response_tokens": ["x", "<pad>", "<pad>"], "logprobs": [-4, -2, -3],
         "ref_logprobs": [0, 0, 0]},
    ]
    agg = _agg(lines, "<pad>")
    assert agg["response_len"].tolist() == [0, 3, 1]
    assert math.isnan(agg["log_ratio_mean"][0])
    assert agg["log_ratio_sum"][1:].tolist() == pytest.approx([-6.0, -4.0])


def test_unequal_lengths_use_the_shortest_numeric_list():
    """n is the shortest numeric list present; the docs' extra token (docs/formats/jsonl.md) does not count."""
    line = {"step": 1, "reward": 0, "response_tokens": ["a", "b", "c", "d"],
            "logprobs": [-1.0, -2.0, -3.0], "ref_logprobs": [-1.5, -1.0], "values": None}
    agg = _agg([line])
    assert agg["n_tokens"][0] == 2 and agg["lengths_differ"][0]
    assert agg["log_ratio_sum"][0] == pytest.approx(-0.5)
    tokens = compute_sample_tokens({"response_tokens": ["a"], "logprobs": [-1.0, -2.0, -3.0],
                                    "ref_logprobs": [-1.5, -1.0]})
    assert tokens.tokens == ["a", ""] and tokens.lengths_differ
    assert np.isnan(tokens.values).all()


def test_nan_tokens_are_ignored_in_means():
    """A NaN log-prob drops that position from the mean and the sum, nothing else."""
    line = {"step": 1, "reward": 0, "logprobs": [-1.0, float("nan"), -2.0], "ref_logprobs": [-1.5, -1.0, -1.0]}
    assert "NaN" in json.dumps(line)  # json writes NaN, which the loader must accept
    agg = _agg([line])
    assert agg["log_ratio_mean"][0] == pytest.approx((0.5 - 1.0) / 2)


def test_response_level_rows_have_nan_aggregates():
    """A sample without token lists has no KL and an unknown length."""
    agg = _agg([{"step": 1, "reward": 0.5}])
    assert math.isnan(agg["kl_mean"][0]) and agg["response_len"][0] == -1 and agg["n_tokens"][0] == 0


def test_step_stats_population_std():
    """Per step: count, mean and population (ddof=0) std of reward; NaN rewards ignored."""
    samples = pd.DataFrame({
        "step": [1, 1, 1, 2, 2], "reward": [1.0, 2.0, 4.0, 3.0, float("nan")],
        "kl_mean": [0.1, 0.2, 0.3, 0.5, 0.7], "response_len": [3, 5, -1, 2, 2],
    })
    stats = compute_step_stats(samples)
    assert stats.index.tolist() == [1, 2]
    assert stats["samples"].tolist() == [3, 2]
    assert stats.loc[1, "reward_mean"] == pytest.approx(7 / 3)
    assert stats.loc[1, "reward_std"] == pytest.approx(math.sqrt(((1 - 7/3)**2 + (2 - 7/3)**2 + (4 - 7/3)**2) / 3))
    assert stats.loc[2, "reward_mean"] == pytest.approx(3.0) and stats.loc[2, "reward_std"] == 0
    assert stats.loc[2, "kl_mean"] == pytest.approx(0.6)
    assert stats.loc[1, "response_len_mean"] == pytest.approx(4.0)  # the unknown length is left out


def test_token_table_probabilities_and_pad_drop():
    """prob = exp(logp); the pad and what follows leave the table when asked."""
    sample = compute_sample_tokens({"response_tokens": ["a", "<pad>", "b"], "logprobs": [math.log(0.5), 0, 0],
                                    "ref_logprobs": [math.log(0.25), 0, 0]}, "<pad>")
    table = compute_token_table(sample, "k3", drop_pad=True)
    assert table["token"].tolist() == ["a"]
    assert table["prob"].iloc[0] == pytest.approx(0.5) and table["ref_prob"].iloc[0] == pytest.approx(0.25)
    assert table["log_ratio"].iloc[0] == pytest.approx(math.log(2))
    assert table["kl"].iloc[0] == pytest.approx(0.5 - 1 + math.log(2))  # d = log(0.5): exp(d) - 1 - d
    assert len(compute_token_table(sample, "k3", drop_pad=False)) == 3


def test_gae_by_hand():
    """gamma 0.9, lambda 0.5 on rewards [0, 1] and values [0.5, 0.2]: delta_1 = 1 - 0.2 = 0.8,
    delta_0 = 0 + 0.9 * 0.2 - 0.5 = -0.32, A_0 = -0.32 + 0.45 * 0.8; returns = A + V."""
    from rl_board.derive.metrics import compute_gae

    advantages, returns = compute_gae(np.array([0.0, 1.0]), np.array([0.5, 0.2]), gamma=0.9, lam=0.5)
    assert advantages.tolist() == pytest.approx([-0.32 + 0.45 * 0.8, 0.8])
    assert returns.tolist() == pytest.approx([-0.32 + 0.36 + 0.5, 1.0])
    _, plain = compute_gae(np.array([0.0, 0.5, 1.0]), np.zeros(3), gamma=1.0, lam=1.0)
    assert plain.tolist() == [1.5, 1.5, 1.0]  # gamma = lambda = 1: returns are reward-to-go


def test_token_table_rows_for_mismatch_entropy_and_critic():
    """Rollout ratio, mismatch k3, GAE on counted positions only, and -logp only without entropy."""
    from rl_board.analysis.tables import compute_token_table
    from rl_board.derive.metrics import compute_sample_tokens

    row = {"response_tokens": ["a", "E", "E"], "logprobs": [-1.0, -0.5, -0.1], "ref_logprobs": [-1.0, -0.5, -0.1],
           "rollout_logprobs": [-1.5, -0.5, -0.1], "values": [0.2, 0.4, 9.0], "token_rewards": [0.0, 1.0, 5.0]}
    table = compute_token_table(compute_sample_tokens(row, "E", "E"), gamma=1.0, lam=1.0)
    assert table["rollout_ratio"].tolist()[0] == pytest.approx(math.exp(0.5))
    assert table["mismatch_k3"].tolist()[0] == pytest.approx(math.exp(0.5) - 1 - 0.5)
    assert table["return"].tolist()[:2] == pytest.approx([1.0, 1.0]) and math.isnan(table["return"][2])
    assert table["value_error"].tolist()[:2] == pytest.approx([0.8, 0.6])
    assert table["neg_logp"].tolist() == pytest.approx([1.0, 0.5, 0.1]) and table["entropy"].isna().all()
    with_entropy = compute_token_table(compute_sample_tokens({**row, "entropy": [1.0, 2.0, 3.0]}, "E", "E"))
    assert with_entropy["neg_logp"].isna().all() and with_entropy["entropy"].tolist() == [1.0, 2.0, 3.0]


def test_token_text_escapes_every_token_and_colours_by_scale():
    """Markup in tokens stays text; colours follow the scale (light at 0, hot at the max); NaN is uncoloured."""
    from rl_board.base.colors import build_token_text_html, colors_for, metric_scale

    tokens = ["<img src=x onerror=alert(1)>", "</span><script>alert(2)</script>", "&amp;", "▁ok"]
    values = [0.0, 1.0, 0.5, float("nan")]
    scale = metric_scale("kl", values)
    out = build_token_text_html(tokens, values, "kl", scale)
    assert "<img" not in out and "<script" not in out and "</span><script" not in out
    assert "&lt;img<span" in out and "onerror=alert(1)&gt;" in out and "&amp;amp;" in out
    assert '<span class="rlb-ws" data-mark="·"> </span>ok</span>' in out  # ▁ is a space, marked
    assert out.count('class="rlb-tok"') == 4 and 'title="kl: no value"' in out
    light, hot, _, none = colors_for(values, scale)
    assert light == "rgb(255, 255, 204)" and hot == "rgb(128, 0, 38)" and none is None


def test_token_kl_ranking_sums_counted_positions():
    """Token strings ranked by total k3 over counted positions; the uncounted tail is left out."""
    from rl_board.analysis.drivers import compute_token_kl_ranking
    from rl_board.derive.metrics import compute_sample_tokens

    a = compute_sample_tokens({"response_tokens": ["x", "y", "x", "<pad>"], "logprobs": [-1.0, -1.0, -1.0, -1.0],
                               "ref_logprobs": [-2.0, -1.0, -1.5, -9.0]}, "<pad>")
    ranking = compute_token_kl_ranking([a])
    k3 = lambda d: math.exp(d) - 1 - d  # noqa: E731  (d = ref - logp)
    assert ranking["token"].tolist() == ["x", "y"]
    assert ranking["count"].tolist() == [2, 1]
    assert ranking["total"].tolist() == pytest.approx([k3(-1.0) + k3(-0.5), 0.0])
    assert ranking["mean"].tolist() == pytest.approx([(k3(-1.0) + k3(-0.5)) / 2, 0.0])


def test_ngram_log_odds_by_hand():
    """Unigram z for 'win' with the step as prior: top has it twice in 3 words, bottom none in 3."""
    from rl_board.analysis.drivers import compute_ngram_log_odds, reward_quartiles

    top, bottom = [["win", "win", "a"]], [["b", "c", "a"]]
    everyone = top + bottom
    got = compute_ngram_log_odds(top, bottom, everyone, max_n=1).set_index("ngram")
    alpha, prior_total, n_top, n_bottom = 2, 6, 3, 3
    delta = (math.log((2 + alpha) / (n_top + prior_total - 2 - alpha))
             - math.log((0 + alpha) / (n_bottom + prior_total - 0 - alpha)))
    assert got.loc["win", "z"] == pytest.approx(delta / math.sqrt(1 / 4 + 1 / 2))
    assert got.index[0] == "win" and got.loc["win", "top"] == 2 and got.loc["win", "bottom"] == 0
    assert got.loc["a", "z"] == pytest.approx(0.0)  # as frequent in both
    top_idx, bottom_idx = reward_quartiles([0.5, 2.0, float("nan"), -1.0, 1.0, 0.0])
    assert top_idx.tolist() == [1, 4] and sorted(bottom_idx.tolist()) == [3, 5]  # ceil(5 / 4) = 2 each


def test_value_error_is_the_return_to_go_minus_the_value():
    """gamma 0.5, lambda 0.95 on rewards [1, 0, 2] and values [0.5, 1.0, 1.5]: G = [1 + 0 + 0.25*2,
    0 + 0.5*2, 2] = [1.5, 1.0, 2.0]; value error = G - V = [1.0, 0.0, 0.5], not the GAE advantage."""
    from rl_board.analysis.tables import compute_token_table
    from rl_board.derive.metrics import compute_sample_tokens

    row = {"response_tokens": ["a", "b", "c"], "logprobs": [-1.0] * 3, "ref_logprobs": [-1.0] * 3,
           "values": [0.5, 1.0, 1.5], "token_rewards": [1.0, 0.0, 2.0]}
    table = compute_token_table(compute_sample_tokens(row), gamma=0.5, lam=0.95)
    assert table["return_to_go"].tolist() == pytest.approx([1.5, 1.0, 2.0])
    assert table["value_error"].tolist() == pytest.approx([1.0, 0.0, 0.5])
    # delta = [1 + 0.5 - 0.5, 0 + 0.75 - 1, 2 - 1.5] = [1, -0.25, 0.5]; A_2 = 0.5, A_1 = -0.25 + 0.475 * 0.5
    a1 = -0.25 + 0.475 * 0.5
    assert table["advantage"].tolist() == pytest.approx([1.0 + 0.475 * a1, a1, 0.5])
    assert table["value_error"].tolist() != pytest.approx(table["advantage"].tolist())
    assert list(table.columns).index("value_error") == list(table.columns).index("advantage") + 1


def test_token_text_wraps_a_run_of_tokens_without_spaces():
    """Token ids shown as #ID (no space between them) wrap inside their card: the running text's box may
    break a line anywhere, not only at spaces."""
    from rl_board.base.colors import build_token_text_html, metric_scale

    values = np.array([0.1, 0.2, 0.3])
    html_text = build_token_text_html(["#28", "#92", "#7"], values, "kl", metric_scale("kl", values))
    box = html_text[html_text.index('<div class="rlb-token-text"'):]
    style = box[box.index('style="') + 7:box.index('"', box.index('style="') + 7)]
    assert "overflow-wrap:anywhere" in style.split(";")


@pytest.mark.parametrize("same_key_in_two_steps", [True, False])
def test_group_stats_count_groups_per_step_by_hand(same_key_in_two_steps):
    """GRPO groups per step, counted by hand: a prompt met in two steps is two groups, NaN equals NaN
    and -0.0 equals 0.0, a sample without a reward is in none, a step without prompts has no group."""
    from rl_board.analysis.steps import compute_group_stats

    later = 10.0 if same_key_in_two_steps else 11.0
    rows = [(2, later, 1.0, True), (1, 10.0, 0.0, True), (1, 10.0, -0.0, True), (2, later, 1.0, True),
            (2, 20.0, np.nan, True), (2, 20.0, np.nan, True), (2, 30.0, 0.5, True), (2, 30.0, 1.5, True),
            (2, 30.0, 0.5, False), (1, 40.0, 1.0, True), (3, np.nan, 1.0, True), (1, 20.0, 2.0, False)]
    samples = pd.DataFrame(rows, columns=["step", "prompt_key", "reward", "has_reward"])
    out = compute_group_stats(samples)
    assert out.index.tolist() == [1, 2, 3]
    assert out["prompt_groups"].tolist() == [2, 3, 0]
    assert out["zero_std_groups"].tolist() == [1, 2, 0]
    np.testing.assert_array_equal(out["group_size_mean"], [1.5, 2.0, np.nan])
    np.testing.assert_array_equal(out["zero_std_share"], [1.0, 2 / 3, np.nan])


def test_step_stats_do_not_depend_on_the_samples_order():
    """Per-step means and stds of samples shuffled equal those of the samples in step order."""
    rng = np.random.default_rng(3)
    samples = pd.DataFrame({"step": np.repeat([0, 5, 9], 7), "reward": rng.normal(size=21),
                            "kl_mean": rng.normal(size=21)})
    ordered = compute_step_stats(samples)
    shuffled = compute_step_stats(samples.sample(frac=1, random_state=1))
    assert ordered["samples"].tolist() == [7, 7, 7]
    np.testing.assert_allclose(shuffled[["reward_mean", "reward_std", "kl_mean", "kl_std"]],
                               ordered[["reward_mean", "reward_std", "kl_mean", "kl_std"]], rtol=1e-12)
    np.testing.assert_allclose(ordered["reward_mean"], samples.groupby("step")["reward"].mean(), rtol=1e-12)
