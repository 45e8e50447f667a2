"""Figure builders and table helpers, read through their data."""

import math

import numpy as np
import pandas as pd
import pytest

from rl_board.figures import (build_curve_figure, build_gap_figure, build_reward_hist_figure,
                              build_token_heatmap_figure, normal_pdf, scale_rows)
from rl_board.tables import build_batch_table, sort_samples, step_grid, strip_system_prompt


def _steps():
    return pd.DataFrame({"reward_mean": [1.0, 2.0, 4.0], "reward_std": [0.5, 0.0, 1.0]},
                        index=pd.Index([10, 20, 30], name="step"))


def test_curve_band_is_mean_plus_minus_scaled_std():
    """The band runs mean + k·std forward and mean − k·std back."""
    fig = build_curve_figure(_steps(), ["reward"], "t", std_scale=2.0)
    band, line = fig.data
    assert list(line.y) == [1.0, 2.0, 4.0] and list(line.x) == [10, 20, 30]
    assert list(band.y) == [2.0, 2.0, 6.0, 2.0, 2.0, 0.0]


def test_zero_shift_starts_each_curve_at_zero():
    """Zero shift subtracts each curve's first mean."""
    fig = build_curve_figure(_steps(), ["reward", "absent"], "t", std_scale=0.0, zero_shift=True)
    assert len(fig.data) == 1 and list(fig.data[0].y) == [0.0, 1.0, 3.0]


def test_gap_bars_colour_by_sign():
    """Positive gaps are green, negative red."""
    fig = build_gap_figure(pd.DataFrame({"reward_gap": [0.5, -0.5]}))
    assert list(fig.data[0].y) == [0.5, -0.5] and fig.data[0].marker.color[0] != fig.data[0].marker.color[1]


def test_histogram_normal_fit_integrates_to_counts():
    """The fitted normal, scaled by count × bin width, has the data's mean at its peak."""
    rewards = [0.0, 1.0, 1.0, 2.0]
    fig = build_reward_hist_figure(pd.DataFrame({"reward": rewards, "ref_reward": [np.nan] * 4}), bins=4)
    bars, fit = fig.data
    assert sum(bars.y) == 4
    assert fit.x[int(np.argmax(fit.y))] == pytest.approx(1.0, abs=0.02)
    std = np.std(rewards)
    assert max(fit.y) == pytest.approx(4 * 0.5 / (std * math.sqrt(2 * math.pi)), rel=1e-3)
    assert normal_pdf(np.array([0.0]), 0.0, 1.0)[0] == pytest.approx(1 / math.sqrt(2 * math.pi))


def test_heatmap_rows_are_scaled_separately():
    """A row of tiny KLs spans the full colour range just like a row of large logps."""
    assert scale_rows(np.array([[0.001, 0.002, 0.003], [-5.0, -1.0, np.nan]])).tolist()[0] == [0.0, 0.5, 1.0]
    table = pd.DataFrame({"token": ["a", "b"], "kl": [0.001, 0.003], "logp": [-5.0, -1.0]})
    fig = build_token_heatmap_figure(table, ["kl", "logp"])
    assert np.asarray(fig.data[0].z).tolist() == [[0.0, 1.0], [0.0, 1.0]]
    assert np.asarray(fig.data[0].customdata).tolist() == [[0.001, 0.003], [-5.0, -1.0]]


def test_sort_puts_nan_last_both_ways():
    """Sorting by KL puts the largest first (or last), and samples without KL at the end either way."""
    frame = pd.DataFrame({"kl_mean": [0.2, np.nan, 0.9, 0.1], "k2_mean": [4.0, 3.0, 2.0, 1.0],
                          "file": 0, "line": [1, 2, 3, 4]})
    assert sort_samples(frame, "KL mean")["kl_mean"].tolist()[:3] == [0.9, 0.2, 0.1]
    assert sort_samples(frame, "KL mean", descending=False).index.tolist() == [3, 0, 2, 1]
    assert sort_samples(frame, "KL mean", estimator="k2").index.tolist() == [0, 1, 2, 3]


def test_batch_table_strips_pad_and_system_prompt():
    """Pad tokens leave the response text; the prompt loses the system part."""
    frame = pd.DataFrame({"prompt": ["sys<|im_end|> user asks"], "response": ["ok<pad><pad>"], "reward": [1.0],
                          "kl_mean": [np.nan], "response_len": [-1]})
    table = build_batch_table(frame, "<|im_end|>", "<pad>")
    assert table.loc[0, "prompt"] == "user asks" and table.loc[0, "response"] == "ok"
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
               build_reward_hist_figure(samples), build_token_heatmap_figure(tokens, ["kl", "logp"])]
    from rl_board.figures import build_reward_bars_figure
    figures.append(build_reward_bars_figure(samples))
    for fig in figures:
        go.Figure(fig.to_dict())  # raises ValueError on any invalid property


def test_heatmap_escapes_token_markup():
    """Tokens are model output: plotly would read <b> as bold, so they are escaped."""
    fig = build_token_heatmap_figure(pd.DataFrame({"token": ["<b>"], "kl": [0.1]}), ["kl"])
    assert list(fig.data[0].x) == ["0:&lt;b&gt;"]
