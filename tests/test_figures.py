"""Figure builders and table helpers, read through their data."""

import math

import numpy as np
import pandas as pd
import pytest

from rl_board.analysis.figures import (
    build_curve_figure,
    build_gap_figure,
    build_reward_hist_figure,
    build_runs_figure,
    build_token_heatmap_figure,
    normal_pdf,
    smooth_ema,
)
from rl_board.analysis.tables import build_batch_table, sort_samples, step_grid, strip_system_prompt


def _steps():
    return pd.DataFrame({"reward_mean": [1.0, 2.0, 4.0], "reward_std": [0.5, 0.0, 1.0]},
                        index=pd.Index([10, 20, 30], name="step"))


def test_curve_band_is_mean_plus_minus_scaled_std():
    """The band runs mean + k·std forward and mean − k·std back."""
    fig = build_curve_figure(_steps(), ["reward"], "t", std_scale=2.0)
    band, line = fig.data
    assert list(line.y) == [1.0, 2.0, 4.0] and list(line.x) == [10, 20, 30]
    assert list(band.y) == [2.0, 2.0, 6.0, 2.0, 2.0, 0.0]


def test_a_run_of_one_step_is_a_point_with_an_error_bar_on_a_readable_axis():
    """One step (0): each curve is a marker at its mean with ± k·std as an error bar (no band of no
    area), on an x axis from -1 to 1 ticked at the step alone; two runs of one step keep their colours."""
    one = pd.DataFrame({"reward_mean": [0.25], "reward_std": [0.5], "response_len_mean": [12.0],
                        "response_len_std": [10.0]}, index=pd.Index([0], name="step"))
    fig = build_curve_figure(one, ["reward", "response_len"], "t", std_scale=2.0)
    reward, length = fig.data
    assert reward.mode == "markers" and list(reward.y) == [0.25] and list(reward.x) == [0]
    assert list(reward.error_y.array) == [1.0] and list(reward.error_y.arrayminus) == [1.0]
    assert list(length.error_y.array) == [20.0] and list(length.error_y.arrayminus) == [12.0]  # clipped at 0
    assert list(fig.layout.xaxis.range) == [-1.0, 1.0] and list(fig.layout.xaxis.tickvals) == [0]
    runs = build_runs_figure({"a": one, "b": one.assign(reward_mean=[0.75])}, "reward", "t")
    assert [list(t.y) for t in runs.data] == [[0.25], [0.75]]
    assert runs.data[0].marker.color != runs.data[1].marker.color
    assert list(runs.layout.xaxis.tickvals) == [0]
    many = build_curve_figure(_steps(), ["reward"], "t")
    assert many.layout.xaxis.tickvals is None and many.data[1].mode == "lines+markers"


def test_zero_shift_starts_each_curve_at_zero():
    """Zero shift subtracts each curve's first mean."""
    fig = build_curve_figure(_steps(), ["reward", "absent"], "t", std_scale=0.0, zero_shift=True)
    assert len(fig.data) == 1 and list(fig.data[0].y) == [0.0, 1.0, 3.0]


def test_gap_bars_colour_by_sign():
    """Positive gaps are green, negative red."""
    fig = build_gap_figure(pd.DataFrame({"reward_gap": [0.5, -0.5]}))
    assert list(fig.data[0].y) == [0.5, -0.5] and fig.data[0].marker.color[0] != fig.data[0].marker.color[1]


def test_histogram_normal_fit_integrates_to_counts():
    """The fitted normal of a continuous reward (11 distinct values 0, 0.2, …, 2), scaled by count × bin
    width (2 / 4 bins), has the data's mean at its peak."""
    rewards = [0.2 * i for i in range(11)]
    fig = build_reward_hist_figure(pd.DataFrame({"reward": rewards, "ref_reward": [np.nan] * 11}), bins=4)
    bars, fit = fig.data
    assert sum(bars.y) == 11
    assert fit.x[int(np.argmax(fit.y))] == pytest.approx(1.0, abs=0.02)
    std = np.std(rewards)
    assert max(fit.y) == pytest.approx(11 * 0.5 / (std * math.sqrt(2 * math.pi)), rel=1e-3)
    assert normal_pdf(np.array([0.0]), 0.0, 1.0)[0] == pytest.approx(1 / math.sqrt(2 * math.pi))


def test_heatmap_rows_have_their_own_scales():
    """Each metric is its own row (first on top) with a colour scale that reads right: KL light to hot
    from 0, log-probs hot where least likely, log-ratio diverging around 0; z holds the real values."""
    table = pd.DataFrame({"token": ["a", "b"], "kl": [0.001, 0.003], "logp": [-5.0, -1.0],
                          "log_ratio": [-0.5, 0.25]})
    fig = build_token_heatmap_figure(table, ["kl", "logp", "log_ratio"])
    kl, logp, ratio = fig.data
    assert np.asarray(kl.z).tolist() == [[0.001, 0.003]] and [list(t.y) for t in fig.data] == [[0], [1], [2]]
    assert list(fig.layout.yaxis.ticktext) == ["kl", "logp", "log_ratio"]
    assert list(fig.layout.yaxis.tickvals) == [0, 1, 2] and kl.hovertemplate.startswith("kl at ")
    light, hot, blue, red = "rgb(255,255,204)", "rgb(128,0,38)", "rgb(5,48,97)", "rgb(103,0,31)"
    ends = lambda trace: (trace.colorscale[0][1], trace.colorscale[-1][1])  # noqa: E731
    assert ends(kl) == (light, hot) and (kl.zmin, kl.zmax) == (0.0, 0.003)  # 0 is light, the largest hot
    assert ends(logp) == (hot, light) and (logp.zmin, logp.zmax) == (-5.0, 0.0)  # the least likely is hot
    assert ends(ratio) == (blue, red) and (ratio.zmin, ratio.zmax) == (-0.5, 0.5)  # diverging at 0
    assert kl.colorbar.y > logp.colorbar.y > ratio.colorbar.y and fig.layout.yaxis.autorange == "reversed"
    signed = table.assign(kl=[-0.001, 0.003])
    k1 = build_token_heatmap_figure(signed, ["kl"], estimator="k1").data[0]  # k1 is signed: both signs diverge
    assert ends(k1) == (blue, red) and (k1.zmin, k1.zmax) == (-0.003, 0.003)


def test_heatmap_rows_of_one_sign_are_sequential_from_their_least_to_their_largest():
    """A signed metric whose row holds one sign (a critic's values, all positive; a k1 KL, all
    positive; token rewards, all negative) is on the sequential scale over its own range, hot at the
    end farthest from 0, not on a scale centred at 0 where it would be one dark colour."""
    table = pd.DataFrame({"token": ["a", "b", "c"], "value": [0.5, 0.75, 1.0], "token_reward": [-0.2, -0.1, 0.0],
                          "log_ratio": [-0.1, 0.0, 0.2], "rollout_ratio": [1.0, 1.5, 2.0]})
    value, reward, ratio, rollout = build_token_heatmap_figure(
        table, ["value", "token_reward", "log_ratio", "rollout_ratio"]).data
    light, hot = "rgb(255,255,204)", "rgb(128,0,38)"
    ends = lambda trace: (trace.colorscale[0][1], trace.colorscale[-1][1])  # noqa: E731
    assert ends(value) == (light, hot) and (value.zmin, value.zmax) == (0.5, 1.0)
    assert ends(reward) == (hot, light) and (reward.zmin, reward.zmax) == (-0.2, 0.0)  # hot at the most negative
    assert (ratio.zmin, ratio.zmax) == (-0.2, 0.2)  # both signs: diverging at 0
    assert ends(rollout) == (light, hot) and (rollout.zmin, rollout.zmax) == (1.0, 2.0)  # one side of 1


def test_bands_of_nonnegative_series_stop_at_zero():
    """A KL band never dips below 0; a reward band may."""
    steps = pd.DataFrame({"kl_mean": [0.1, 0.2], "kl_std": [0.3, 0.1], "reward_mean": [0.1, 0.2],
                          "reward_std": [0.3, 0.1]}, index=[1, 2])
    kl_band = build_curve_figure(steps, ["kl"], "t").data[0]
    assert list(kl_band.y) == pytest.approx([0.4, 0.3, 0.1, 0.0])
    reward_band = build_curve_figure(steps, ["reward"], "t").data[0]
    assert list(reward_band.y) == pytest.approx([0.4, 0.3, 0.1, -0.2])


def test_smoothing_is_tensorboards_debiased_ema():
    """Weight 0.5 on [1, 2, NaN, 4]: 1, (0.25 + 1) / 0.75, NaN kept, (0.625 + 2) / 0.875."""
    assert smooth_ema([1.0, 2.0, float("nan"), 4.0], 0.5)[[0, 1, 3]].tolist() == pytest.approx(
        [1.0, 1.25 / 0.75, 2.625 / 0.875])
    assert np.isnan(smooth_ema([1.0, 2.0, float("nan"), 4.0], 0.5)[2])
    assert smooth_ema([3.0, 3.0, 3.0], 0.9).tolist() == pytest.approx([3.0, 3.0, 3.0])  # debiased: no pull to 0
    fig = build_curve_figure(_steps(), ["reward"], "t", std_scale=0.0, smoothing=0.5)
    raw, smooth = fig.data
    assert list(raw.y) == [1.0, 2.0, 4.0] and raw.opacity == 0.3
    assert list(smooth.y) == pytest.approx([1.0, 1.25 / 0.75, 2.625 / 0.875])


def test_sort_puts_nan_last_both_ways():
    """Sorting by KL puts the largest first (or last), and samples without KL at the end either way."""
    frame = pd.DataFrame({"kl_mean": [0.2, np.nan, 0.9, 0.1], "k2_mean": [4.0, 3.0, 2.0, 1.0],
                          "file": 0, "line": [1, 2, 3, 4]})
    assert sort_samples(frame, "KL mean")["kl_mean"].tolist()[:3] == [0.9, 0.2, 0.1]
    assert sort_samples(frame, "KL mean", descending=False).index.tolist() == [3, 0, 2, 1]
    assert sort_samples(frame, "KL mean", estimator="k2").index.tolist() == [0, 1, 2, 3]


def test_batch_table_strips_pad_and_system_prompt():
    """Pad tokens leave the prompt (OpenRLHF left-pads it) and the response; the prompt loses its system
    turn, and a prompt without one (a user turn first) keeps all of it."""
    frame = pd.DataFrame({"prompt": ["<pad><pad><|im_start|>system\nBe brief.<|im_end|> user asks",
                                     "<|im_start|>user\nasks<|im_end|>"], "response": ["ok<pad><pad>", "b"],
                          "reward": [1.0, 0.5], "kl_mean": [np.nan, np.nan], "response_len": [-1, -1]})
    table = build_batch_table(frame, "<|im_end|>", "<pad>")
    assert table.loc[0, "prompt"] == "user asks" and table.loc[0, "response"] == "ok"
    assert table.loc[1, "prompt"] == "<|im_start|>user\nasks<|im_end|>"
    assert "kl_mean" not in table and "response_len" not in table
    assert strip_system_prompt("no marker", "<|im_end|>") == "no marker"


def test_step_grid_detects_irregular_steps():
    """Even steps get a slider grid; the eval log's irregular steps do not."""
    assert step_grid([3, 1, 2]) == ([1, 2, 3], True)
    assert step_grid([0, 100, 200, 500])[1] is False


def test_every_figure_passes_plotly_validation():
    """Figures are built without plotly's validators for speed; each must still validate."""
    import plotly.graph_objects as go

    samples = pd.DataFrame({"reward": [0.1, 0.5, -0.2], "ref_reward": [0.0, 0.3, np.nan],
                            "reward_gap": [0.1, 0.2, np.nan]})
    tokens = pd.DataFrame({"token": ["<b>", "x"], "kl": [0.1, 0.2], "logp": [-1.0, -0.5]})
    figures = [build_curve_figure(_steps(), ["reward"], "t"), build_gap_figure(samples),
               build_curve_figure(_steps(), ["reward"], "t", smoothing=0.6),
               build_reward_hist_figure(samples), build_token_heatmap_figure(tokens, ["kl", "logp"])]
    from rl_board.analysis.figures import build_matches_figure, build_reward_bars_figure, build_runs_figure
    figures.append(build_reward_bars_figure(samples))
    figures.append(build_runs_figure({"a": _steps(), "b": _steps()}, "reward", "t", smoothing=0.5))
    figures.append(build_matches_figure(pd.Series([0, 2], index=[1, 2])))
    from rl_board.analysis.figures import build_length_bucket_figure, build_overlay_figure, build_position_figure
    figures.append(build_position_figure(pd.DataFrame({"samples": [2, 1], "kl_mean": [0.1, 0.2]}), "kl_mean", "KL"))
    figures.append(build_length_bucket_figure(pd.DataFrame({"low": [2, 4], "high": [3, 4], "samples": [2, 1],
                                                            "reward_mean": [0.5, 1.0], "reward_std": [0.5, 0.0]}),
                                              "tokens"))
    figures.append(build_overlay_figure(_steps(), "reward", "reward", pd.DataFrame({"s_mean": [1.0, 2.0]}, index=[1, 2]),
                                        "<b>kl</b>", smoothing=0.5))
    for fig in figures:
        go.Figure(fig.to_dict())  # raises ValueError on any invalid property


def test_heatmap_escapes_token_markup():
    """Tokens are model output: plotly would read <b> as bold, so they are escaped."""
    fig = build_token_heatmap_figure(pd.DataFrame({"token": ["<b>"], "kl": [0.1]}), ["kl"])
    assert list(fig.data[0].x) == ["0:&lt;b&gt;"]


def test_figures_a_step_change_redraws_have_fixed_margins():
    """The batch charts and the heatmap are redrawn on every step change: their margins are fixed
    (plotly.js would otherwise measure and lay them out twice); a legend of more than one entry gets
    the taller bottom margin, and the histogram's legend names the distributions, not the fits."""
    from rl_board.analysis.figures import build_reward_bars_figure

    both = pd.DataFrame({"reward": [0.1, 0.5], "ref_reward": [0.0, 0.3], "reward_gap": [0.1, 0.2]})
    alone = both.assign(ref_reward=np.nan)
    tokens = pd.DataFrame({"token": ["a", "b"], "kl": [0.1, 0.2]})
    for fig in (build_reward_bars_figure(both), build_reward_bars_figure(alone), build_gap_figure(both),
                build_reward_hist_figure(both), build_token_heatmap_figure(tokens, ["kl"])):
        assert fig.layout.margin.autoexpand is False
    assert build_reward_bars_figure(both).layout.margin.b > build_reward_bars_figure(alone).layout.margin.b
    spread = pd.DataFrame({"reward": np.arange(12) / 10, "ref_reward": np.arange(12) / 20})  # 12+ values
    hist = build_reward_hist_figure(spread)
    assert [t.name for t in hist.data if t.showlegend is not False] == ["reward", "ref_reward"]
    assert len(hist.data) == 4  # the two fitted normals are still drawn
    assert build_curve_figure(_steps(), ["reward"], "t").layout.margin.autoexpand is None  # curves: plotly fits


def test_heatmap_cells_show_numbers_only_when_they_fit():
    """5 cells of at most 5 characters need 5 × (5 × 6 + 6) = 180 px ≤ 640: numbers shown; 40 cells of
    4 characters need 40 × 30 = 1200 px: hover only. Each colour bar is labelled at its ends, a
    diverging one at its centre too, a constant row once."""
    short = pd.DataFrame({"token": list("abcde"), "kl": [0.5, 0.25, 1.5, 0.125, 0.75],
                          "log_ratio": [-0.5, 0.5, 0.25, -0.25, 0.0], "value": [2.0] * 5})
    fig = build_token_heatmap_figure(short, ["kl", "log_ratio", "value"])
    assert list(fig.data[0].text[0]) == ["0.5", "0.25", "1.5", "0.12", "0.75"]
    assert [list(t.colorbar.ticktext) for t in fig.data] == [["0", "1.5"], ["-0.5", "0", "0.5"], ["2"]]
    long = pd.DataFrame({"token": ["x"] * 40, "kl": [0.25] * 20 + [0.5] * 20})
    assert build_token_heatmap_figure(long, ["kl"]).data[0].text is None


def test_strip_system_prompt_drops_only_a_system_turn():
    """Llama 3's and Llama 2's system turns go; a user turn that mentions a system stays whole."""
    llama3 = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")
    assert strip_system_prompt(llama3, "<|eot_id|>") == "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    assert strip_system_prompt("<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]", "<</SYS>>") == "Hi [/INST]"
    user = "<|im_start|>user\nSolve the system x + y = 2<|im_end|>\n<|im_start|>assistant\n"
    assert strip_system_prompt(user, "<|im_end|>") == user


def test_a_discrete_reward_gets_a_bar_per_value_and_no_fit():
    """Rewards 0, 0.2, 1, 1.2 (counts 3, 1, 2, 1) and ref rewards 0, 1 (2 each): one bar per value of
    either, each series counted at every value, and no fitted curve."""
    samples = pd.DataFrame({"reward": [0, 0, 0, 0.2, 1, 1, 1.2], "ref_reward": [0, 0, 1, 1, np.nan, np.nan, np.nan]})
    fig = build_reward_hist_figure(samples)
    assert [t.type for t in fig.data] == ["bar", "bar"]
    reward, ref = fig.data
    assert list(reward.x) == ["0", "0.2", "1", "1.2"] and list(reward.y) == [3, 1, 2, 1]
    assert list(ref.x) == ["0", "0.2", "1", "1.2"] and list(ref.y) == [2, 0, 2, 0]


def test_band_clip_caps_a_spike_at_the_percentile():
    """Stds 1, 1, 1, 1, 41: the 50th percentile is 1, so the spike's band is mean ± 1 like the others;
    without the clip it is ± 41."""
    steps = pd.DataFrame({"reward_mean": [2.0] * 5, "reward_std": [1.0, 1.0, 1.0, 1.0, 41.0]},
                         index=[1, 2, 3, 4, 5])
    clipped = build_curve_figure(steps, ["reward"], "t", band_clip=50).data[0]
    assert list(clipped.y) == pytest.approx([3.0] * 5 + [1.0] * 5)
    whole = build_curve_figure(steps, ["reward"], "t").data[0]
    assert max(whole.y) == pytest.approx(43.0)


def test_heatmap_labels_its_tokens_on_top():
    """The tokens are labelled above the rows (where reading starts), the title moved below them."""
    fig = build_token_heatmap_figure(pd.DataFrame({"token": ["a", "b"], "kl": [0.1, 0.2]}), ["kl"])
    assert fig.layout.xaxis.side == "top"
    assert fig.layout.title.y == 0 and fig.layout.title.yanchor == "bottom"
