"""Plotly figures, built from plain frames. No Streamlit here: views only display them."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import get_colorscale

from ..base import fields as F
from ..base.colors import NONNEGATIVE, is_constant, metric_scale, visible_token
from ..base.text import escape_plotly

_COLORS = ("#4C9BE8", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#9C755F")
MAX_HEATMAP_TOKENS = 512  # columns drawn at most; the view draws a range of a longer response
HEATMAP_ROW_PX = 52  # pixels a heatmap row gets: room for its colour bar's labels and the gap to the next
COLORBAR_LEN = 0.62  # of a row's height: end labels (13 px) stay clear of the next bar's
HEATMAP_PLOT_PX = 640  # pixels across the heatmap's cells on a narrow page: cell numbers must fit in them
CELL_CHAR_PX = 6  # pixels a character of a cell's number takes (10 px font)
CELL_PAD_PX = 6  # pixels between two cells' numbers


def _figure(traces: list[dict], title: str, height: int = 320, margin: dict | None = None, **layout) -> go.Figure:
    """A figure from plain trace dicts. Plotly's validators cost ~10 ms a figure on every
    rerun; these dicts are built here from known names, so they are skipped.

    With ``margin`` (pixels, over ``_FIXED_MARGIN``) the margins are fixed, and a legend (two or
    more named traces) sits in a taller bottom one: left to expand, plotly.js measures legends,
    colour bars and tick labels and lays the figure out again, a third of the browser's drawing
    time on every step change. The figures a step change redraws are built that way; the others
    let plotly fit the margins.
    """
    if margin is None:
        base = dict(margin=dict(l=40, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.3))
    else:
        legend = sum(t.get("showlegend", t.get("type") != "heatmap") for t in traces) > 1
        base = dict(margin={**_FIXED_MARGIN, **(_LEGEND_BELOW if legend else {}), **margin, "autoexpand": False},
                    legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0))
    for trace in traces:  # names come from disk (fields, runs, metrics): shown literally, never as HTML
        if "name" in trace:
            trace["name"] = escape_plotly(trace["name"])
    return go.Figure(data=traces, layout={"title": dict(text=escape_plotly(title)), "height": height, **base, **layout},
                     _validate=False)


_FIXED_MARGIN = dict(l=60, r=20, t=50, b=60)
_LEGEND_BELOW = dict(b=95)  # room for tick labels, the axis title and a one-row legend


def smooth_ema(values, weight: float) -> np.ndarray:
    """TensorBoard's smoothing: an exponential moving average with debiasing, so the first
    points are not pulled towards 0; non-finite points stay as they are and are skipped."""
    values = np.asarray(values, dtype=float)
    if not 0 < weight < 1:
        return values.copy()
    out, last, count = values.copy(), 0.0, 0
    for i, value in enumerate(values):
        if not math.isfinite(value):
            continue
        last = last * weight + (1 - weight) * value
        count += 1
        out[i] = last / (1 - weight ** count)
    return out


def clip_band(spread: np.ndarray, percentile: float | None) -> np.ndarray:
    """``spread`` (a band's half-width per step) capped at its ``percentile`` over the steps (NaN steps
    ignored); unchanged when ``percentile`` is None or nothing is finite. One step whose std spikes
    then no longer stretches the axis over the whole run."""
    finite = spread[np.isfinite(spread)]
    if percentile is None or not len(finite):
        return spread
    return np.minimum(spread, np.percentile(finite, percentile))


def build_curve_figure(steps: pd.DataFrame, names: list[str], title: str, std_scale: float = 1.0,
                       zero_shift: bool = False, labels: dict[str, str] | None = None, smoothing: float = 0.0,
                       band_clip: float | None = None, height: int = 320) -> go.Figure:
    """Mean of each ``name`` over steps with a band of ± ``std_scale`` × std.

    ``steps`` is indexed by step with columns ``{name}_mean`` and optionally
    ``{name}_std`` (a name without them is left out). With ``zero_shift`` each curve (and its band) is moved so its
    first finite mean is 0, which makes curves on different scales comparable. ``labels`` names
    the curves in the legend (default: their names). Bands of series that are never negative
    (``colors.NONNEGATIVE``) are clipped at 0. With ``smoothing`` in (0, 1) the mean is smoothed
    by ``smooth_ema`` and the raw curve stays, faint. With ``band_clip`` (a percentile, e.g. 95) each
    band's half-width is capped at that percentile of its steps' (``clip_band``).
    """
    traces = []
    x = steps.index.to_numpy()
    labels = labels or {}
    for i, name in enumerate(names):
        if f"{name}_mean" not in steps:
            continue
        label = labels.get(name, name)
        mean = steps[f"{name}_mean"].to_numpy(dtype=float)
        finite = mean[np.isfinite(mean)]
        if not len(finite):
            continue
        if zero_shift:
            mean = mean - finite[0]
        color = _COLORS[i % len(_COLORS)]
        std_col = f"{name}_std"
        band = None
        if std_col in steps and std_scale > 0:
            spread = clip_band(std_scale * steps[std_col].to_numpy(dtype=float), band_clip)
            lower = mean - spread
            if name in NONNEGATIVE and not zero_shift:
                lower = np.maximum(lower, 0.0)
            band = (mean + spread, lower)
        if len(x) == 1:  # one step: a point with its band as an error bar (a band of one step has no area)
            error = None if band is None else dict(type="data", array=band[0] - mean, arrayminus=mean - band[1],
                                                   visible=True, color=color)
            traces.append(dict(type="scatter", x=x, y=mean, mode="markers", name=label, error_y=error,
                               marker=dict(color=color, size=10)))
            continue
        if band is not None:
            traces.append(dict(type="scatter", x=np.concatenate([x, x[::-1]]),
                               y=np.concatenate([band[0], band[1][::-1]]),
                               fill="toself", fillcolor=color, opacity=0.2, line=dict(width=0),
                               hoverinfo="skip", showlegend=False, name=f"{label} ± {std_scale:g}·std"))
        if 0 < smoothing < 1:
            traces.append(dict(type="scatter", x=x, y=mean, mode="lines", name=f"{label} (raw)", opacity=0.3,
                               line=dict(color=color, width=1), showlegend=False, hoverinfo="skip"))
            traces.append(dict(type="scatter", x=x, y=smooth_ema(mean, smoothing), mode="lines", name=label,
                               line=dict(color=color)))
        else:
            traces.append(dict(type="scatter", x=x, y=mean, mode="lines+markers", name=label,
                               line=dict(color=color)))
    return _figure(traces, title, height=height, xaxis=step_axis(x))


def step_axis(x) -> dict:
    """The x axis over steps ``x``; with one step, that step alone on an axis one step wide each side
    (plotly would centre it on a span of 2 with fractional ticks: a dot on an axis from -1 to 1)."""
    axis = dict(title=dict(text="step"))
    if len(x) == 1:
        axis.update(range=[float(x[0]) - 1, float(x[0]) + 1], tickmode="array", tickvals=[x[0]])
    return axis


def build_reward_bars_figure(samples: pd.DataFrame) -> go.Figure:
    """Reward and ref reward of each sample of a step, side by side, in the order given."""
    x = [str(i) for i in range(len(samples))]
    traces = [dict(type="bar", x=x, y=samples[F.REWARD].to_numpy(), name="reward", marker=dict(color=_COLORS[0]))]
    if "ref_reward" in samples and samples["ref_reward"].notna().any():
        traces.append(dict(type="bar", x=x, y=samples["ref_reward"].to_numpy(), name="ref_reward",
                           marker=dict(color=_COLORS[1])))
    return _figure(traces, "Reward vs ref reward", barmode="group", margin={},
                   xaxis=dict(title=dict(text="sample (table order)"), type="category"))


def build_gap_figure(samples: pd.DataFrame) -> go.Figure:
    """reward − ref_reward per sample: green where the policy beat the reference."""
    gap = samples["reward_gap"].to_numpy(dtype=float)
    colors = np.where(gap >= 0, _COLORS[2], _COLORS[3]).tolist()
    trace = dict(type="bar", x=[str(i) for i in range(len(gap))], y=gap, marker=dict(color=colors), name="gap")
    return _figure([trace], "Reward gap (reward − ref reward)", margin={},
                   xaxis=dict(title=dict(text="sample (table order)"), type="category"))


def normal_pdf(x: np.ndarray, mean: float, std: float) -> np.ndarray:
    """The normal density with ``mean`` and ``std`` at ``x`` (zero where std is 0 or NaN)."""
    if not std or not math.isfinite(std):
        return np.zeros_like(x, dtype=float)
    return np.exp(-0.5 * ((x - mean) / std) ** 2) / (std * math.sqrt(2 * math.pi))


def build_reward_hist_figure(samples: pd.DataFrame, bins: int = 20) -> go.Figure:
    """Histogram of reward and ref reward with the normal each one fits, scaled to counts; a discrete
    reward (at most ``DISCRETE_REWARD_VALUES`` distinct values over both) gets one bar per value and
    no fit (``build_reward_counts_figure``)."""
    title = "Reward distribution (lines: normal fits)"
    traces = []
    columns = [c for c in (F.REWARD, "ref_reward") if c in samples and samples[c].notna().any()]
    values = {c: samples[c].to_numpy(dtype=float) for c in columns}
    finite = np.concatenate([v[np.isfinite(v)] for v in values.values()]) if values else np.zeros(0)
    if not len(finite):
        return _figure(traces, title, margin={})
    if len(np.unique(finite)) <= DISCRETE_REWARD_VALUES:
        return build_reward_counts_figure(values)
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    width = edges[1] - edges[0]
    grid = np.linspace(lo, hi, 200)
    for i, column in enumerate(columns):
        v = values[column][np.isfinite(values[column])]
        counts, _ = np.histogram(v, bins=edges)
        color = _COLORS[i]
        traces.append(dict(type="bar", x=(edges[:-1] + edges[1:]) / 2, y=counts, width=width, name=column,
                           marker=dict(color=color), opacity=0.55))
        traces.append(dict(type="scatter", x=grid, y=normal_pdf(grid, v.mean(), v.std()) * len(v) * width,
                           mode="lines", name=f"{column} normal fit", line=dict(color=color), showlegend=False))
    return _figure(traces, title, barmode="overlay", margin={}, xaxis=dict(title=dict(text="reward")),
                   yaxis=dict(title=dict(text="samples")))


DISCRETE_REWARD_VALUES = 10  # distinct reward values at most that are counted one bar each, unfitted


def build_reward_counts_figure(values: dict[str, np.ndarray]) -> go.Figure:
    """How many samples got each reward value: one bar per distinct value (of any series in ``values``,
    name -> float array; NaN left out), the series side by side, no fitted curve (a normal says nothing
    about a reward of a few values)."""
    finite = {name: v[np.isfinite(v)] for name, v in values.items()}
    levels = np.unique(np.concatenate(list(finite.values())))
    x = [f"{level:.4g}" for level in levels]
    traces = []
    for i, (name, v) in enumerate(finite.items()):
        counts = [int(np.count_nonzero(v == level)) for level in levels]
        traces.append(dict(type="bar", x=x, y=counts, name=name, marker=dict(color=_COLORS[i])))
    return _figure(traces, "Reward distribution (samples per value)", barmode="group", margin={},
                   xaxis=dict(title=dict(text="reward"), type="category"), yaxis=dict(title=dict(text="samples")))


def heatmap_cell_text(values: np.ndarray) -> list[str]:
    """The numbers a heatmap cell shows: 2 significant digits ("" for NaN); the hover has 4."""
    return [f"{v:.2g}" if np.isfinite(v) else "" for v in values]


def cell_numbers_fit(columns: int, texts: list[list[str]], plot_px: int = HEATMAP_PLOT_PX) -> bool:
    """Whether the cells' numbers fit side by side: ``columns`` cells across ``plot_px`` pixels, each
    wide enough for the longest text at ``CELL_CHAR_PX`` a character plus ``CELL_PAD_PX``."""
    longest = max((len(t) for row in texts for t in row), default=0)
    return columns * (longest * CELL_CHAR_PX + CELL_PAD_PX) <= plot_px


def build_token_heatmap_figure(table: pd.DataFrame, metrics: list[str], estimator: str = "k3") -> go.Figure:
    """Token positions across, ``metrics`` down (first on top), each row on its own colour scale
    (``colors.metric_scale``: light to hot for non-negative metrics, diverging only for a row that
    holds both signs) with its own colour bar, labelled at its ends (and its centre when diverging).

    ``table`` holds the positions to draw (its index; at most ``MAX_HEATMAP_TOKENS``: the view picks
    a range of a long response). Hover gives every value; the cells show theirs only when the numbers
    fit side by side (``cell_numbers_fit``). Tokens are labelled with their whitespace visible.
    """
    shown = table.iloc[:MAX_HEATMAP_TOKENS]
    # plotly reads a few HTML tags in labels; tokens are model output, so escape them
    x = [f"{pos}:{html.escape(visible_token(tok))}" for pos, tok in zip(shown.index, shown["token"])]
    rows = len(metrics)
    values = {metric: shown[metric].to_numpy(dtype=float) for metric in metrics}
    texts = {metric: heatmap_cell_text(v) for metric, v in values.items()}
    numbers = cell_numbers_fit(len(shown), list(texts.values()))
    traces = []
    for i, metric in enumerate(metrics):
        scale = metric_scale(metric, values[metric], estimator)
        finite = values[metric][np.isfinite(values[metric])]
        if len(finite) and is_constant(finite.min(), finite.max()):  # one value: one label, where it sits
            ticks = [float(finite.mean())]
        elif scale.kind == "diverging":
            ticks = [scale.zmin, (scale.zmin + scale.zmax) / 2, scale.zmax]
        else:
            ticks = [scale.zmin, scale.zmax]
        # one trace per row, at a numeric position: single-row heatmaps on a shared categorical axis
        # are drawn at the wrong heights
        # explicit colours: plotly.js reads some scale names the other way round from plotly.py
        trace = dict(type="heatmap", z=[values[metric]], x=x, y=[i], colorscale=get_colorscale(scale.colorscale),
                     zmin=scale.zmin, zmax=scale.zmax,
                     hovertemplate=f"{html.escape(metric)} at %{{x}}: %{{z:.4g}}<extra></extra>",
                     colorbar=dict(len=COLORBAR_LEN / rows, y=1 - (i + 0.5) / rows, yanchor="middle", ypad=0, thickness=12,
                                   outlinewidth=0, tickfont=dict(size=10), tickmode="array", tickvals=ticks,
                                   ticktext=[f"{t:.3g}" for t in ticks], ticks="outside", ticklen=3))
        if numbers:
            trace["text"] = [texts[metric]]
            trace["texttemplate"] = "%{text}"
            trace["textfont"] = dict(size=10)
        traces.append(trace)
    # room for the rows' names on the left, the colour bars on the right, slanted tokens on top (where
    # the eye starts reading; the title moves down to the bottom)
    fig = _figure(traces, "Per-token heatmap (each row on its own scale)", height=160 + HEATMAP_ROW_PX * rows,
                   margin=dict(l=110, r=90, t=110, b=40),
                   xaxis=dict(tickangle=-60, type="category", side="top"),
                   yaxis=dict(autorange="reversed", tickmode="array", tickvals=list(range(rows)),
                              ticktext=list(metrics), zeroline=False, showgrid=False))
    fig.layout.title.update(yref="container", y=0, yanchor="bottom", x=0, xanchor="left")
    return fig


def build_matches_figure(per_step: pd.Series, title: str = "Matches per step") -> go.Figure:
    """How often a search matched at each step: one bar per step of the run (0 where none)."""
    trace = dict(type="bar", x=per_step.index.to_numpy(), y=per_step.to_numpy(), name="matches",
                 marker=dict(color=_COLORS[0]))
    return _figure([trace], title, height=260, xaxis=step_axis(per_step.index.to_numpy()),
                   yaxis=dict(title=dict(text="samples")))


def build_prompt_history_figure(history: pd.DataFrame) -> go.Figure:
    """Every sample of one prompt: its reward at its step (markers) and the mean per step (line)."""
    means = history.groupby(F.STEP)[F.REWARD].mean()
    traces = [dict(type="scatter", x=history[F.STEP].to_numpy(), y=history[F.REWARD].to_numpy(), mode="markers",
                   name="sample", marker=dict(color=_COLORS[0], opacity=0.5)),
              dict(type="scatter", x=means.index.to_numpy(), y=means.to_numpy(), mode="lines+markers",
                   name="mean per step", line=dict(color=_COLORS[1]))]
    return _figure(traces, "This prompt's reward over training", height=300, xaxis=dict(title=dict(text="step")),
                   yaxis=dict(title=dict(text="reward")))


ALIGN_STEP = "step"
ALIGN_PROGRESS = "progress"  # percent of each run's own step range
MAX_SPAN_RATIO = 4.0  # step ranges this many times apart are compared by progress at first


def align_runs_by(steps_by_run: dict[str, pd.DataFrame]) -> str:
    """How to align runs at first: by progress when the longest step range (last − first step) is
    more than ``MAX_SPAN_RATIO`` times the shortest (a 2300-step run would squeeze a 30-step one into a
    sliver), else by step."""
    spans = [float(frame.index.max() - frame.index.min()) for frame in steps_by_run.values() if len(frame)]
    if len(spans) < 2:
        return ALIGN_STEP
    return ALIGN_PROGRESS if max(spans) > MAX_SPAN_RATIO * max(min(spans), 1.0) else ALIGN_STEP


def run_progress(steps) -> np.ndarray:
    """Each step as a percent of its run's step range: 100 · (step − first) ÷ (last − first); 0 for a
    run of one step."""
    steps = np.asarray(steps, dtype=float)
    if not len(steps):
        return steps
    span = steps.max() - steps.min()
    return np.zeros(len(steps)) if span == 0 else 100.0 * (steps - steps.min()) / span


def build_runs_figure(steps_by_run: dict[str, pd.DataFrame], name: str, title: str, std_scale: float = 1.0,
                      zero_shift: bool = False, smoothing: float = 0.0, align: str = ALIGN_STEP) -> go.Figure:
    """Series ``name`` of several runs overlaid, one colour per run, each with its band
    (``build_curve_figure``'s rules: clipped at 0 for non-negative series, smoothing, shift), aligned by
    step or (``align`` = ``ALIGN_PROGRESS``) by the percent of each run's own step range, the step
    shown on hover."""
    traces = []
    for i, (run_name, steps) in enumerate(steps_by_run.items()):
        single = build_curve_figure(steps, [name], "", std_scale, zero_shift, labels={name: run_name},
                                    smoothing=smoothing)
        color = _COLORS[i % len(_COLORS)]
        x = steps.index.to_numpy()
        for trace in single.data:
            trace = trace.to_plotly_json()
            if trace.get("fill"):
                trace["fillcolor"] = color
            else:
                trace["line"] = {**trace.get("line", {}), "color": color}
            if trace.get("mode") == "markers":  # a run of one step: its point and error bar
                trace["marker"] = {**trace.get("marker", {}), "color": color}
                if trace.get("error_y"):
                    trace["error_y"] = {**trace["error_y"], "color": color}
            if align == ALIGN_PROGRESS:
                raw = np.asarray(trace["x"], dtype=float)
                trace["x"] = run_progress(raw) if not trace.get("fill") else np.concatenate(
                    [run_progress(x), run_progress(x)[::-1]])
                if not trace.get("fill"):
                    trace["customdata"] = raw
                    trace["hovertemplate"] = "step %{customdata}: %{y:.4g}<extra>%{fullData.name}</extra>"
            traces.append(trace)
    if align == ALIGN_STEP:
        every = np.unique(np.concatenate([s.index.to_numpy() for s in steps_by_run.values()] or [np.array([])]))
        return _figure(traces, title, xaxis=step_axis(every))
    return _figure(traces, title, xaxis=dict(title=dict(text="progress (% of each run's steps)")))


def build_overlay_figure(steps: pd.DataFrame, name: str, label: str, series: pd.DataFrame, series_label: str,
                         smoothing: float = 0.0) -> go.Figure:
    """A rollout curve (``{name}_mean`` of ``steps``, left axis) and a trainer series (``s_mean`` of
    ``series``, right axis) on one step axis, each smoothed like the page's curves."""
    traces = []
    for i, (frame, column, text, axis) in enumerate(((steps, f"{name}_mean", label, "y"),
                                                     (series, "s_mean", series_label, "y2"))):
        x = frame.index.to_numpy()
        y = frame[column].to_numpy(dtype=float)
        shown = smooth_ema(y, smoothing) if 0 < smoothing < 1 else y
        traces.append(dict(type="scatter", x=x, y=shown, mode="lines+markers" if axis == "y" else "lines",
                           name=text, yaxis=axis, line=dict(color=_COLORS[i])))
    return _figure(traces, f"{label} and {series_label}", height=360, xaxis=dict(title=dict(text="step")),
                   yaxis=dict(title=dict(text=escape_plotly(label), font=dict(color=_COLORS[0]))),
                   yaxis2=dict(title=dict(text=escape_plotly(series_label), font=dict(color=_COLORS[1])),
                               overlaying="y", side="right", showgrid=False))


def build_position_figure(profile: pd.DataFrame, column: str, title: str) -> go.Figure:
    """One column of ``positions.compute_position_profile`` over token positions; hover gives how many
    samples reach each position."""
    trace = dict(type="scatter", x=profile.index.to_numpy(), y=profile[column].to_numpy(dtype=float),
                 mode="lines", name=title, line=dict(color=_COLORS[0]), customdata=profile["samples"].to_numpy(),
                 hovertemplate="position %{x}: %{y:.4g} (%{customdata} samples)<extra></extra>")
    return _figure([trace], title, height=280, xaxis=dict(title=dict(text="token position")))


def build_length_bucket_figure(buckets: pd.DataFrame, unit: str) -> go.Figure:
    """Mean reward per response-length bucket (``positions.compute_reward_by_length``), ± its std,
    with each bucket's sample count on its bar."""
    labels = [f"{lo}–{hi}" if hi > lo else f"{lo}" for lo, hi in zip(buckets["low"], buckets["high"])]
    trace = dict(type="bar", x=labels, y=buckets["reward_mean"].to_numpy(dtype=float), name="reward",
                 marker=dict(color=_COLORS[0]), text=[f"n={n}" for n in buckets["samples"]], textposition="outside",
                 error_y=dict(type="data", array=buckets["reward_std"].to_numpy(dtype=float), visible=True))
    return _figure([trace], f"Reward by response length ({unit})", height=280,
                   xaxis=dict(title=dict(text=f"response length ({unit})"), type="category"),
                   yaxis=dict(title=dict(text="reward (mean ± std)")))
