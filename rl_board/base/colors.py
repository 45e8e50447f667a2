"""Colour that reads right, and a sample's response as running text coloured token by token.

Non-negative metrics (KL k3/k2, probabilities, entropy, mismatch) use a sequential
scale from light (0) to hot (the largest value); log-probabilities, never
positive, use it the other way (hot = least likely). Signed metrics (log-ratio,
rewards, values, advantages, returns) use a diverging scale centred at 0 only when
the values shown hold both signs; values of one sign use the sequential scale from
their smallest to their largest (hot at the end farthest from 0), so an
always-positive row (a critic's values) is not one solid colour. A ratio (the
rollout ratio) is the same around 1. Every token is HTML-escaped: model output is
text, never markup; whitespace is made visible (``visible_token``).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import numpy as np
from plotly.colors import sample_colorscale

SEQUENTIAL = "YlOrRd"
DIVERGING = "RdBu_r"
NONNEGATIVE = frozenset({"kl", "k2", "prob", "ref_prob", "entropy", "neg_logp", "mismatch_k3", "mismatch_kl",
                         "response_len", "response_chars", "repeat_4gram", "neg_log_ratio_share",
                         "masked_share", "truncated_share", "zero_std_share"})
NONPOSITIVE = frozenset({"logp", "ref_logp", "rollout_logp"})
RATIOS = frozenset({"rollout_ratio", "importance_ratio"})


@dataclass(frozen=True)
class Scale:
    """How values map to colours: ``colorscale`` (a plotly name) from ``zmin`` to ``zmax``."""

    colorscale: str
    zmin: float
    zmax: float
    kind: str  # "sequential" or "diverging"


def metric_scale(metric: str, values, estimator: str = "k3") -> Scale:
    """The scale for ``metric`` over ``values`` (the KL is signed under the k1 estimator)."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if metric in NONNEGATIVE and not (metric == "kl" and estimator == "k1"):
        return Scale(SEQUENTIAL, 0.0, _positive(finite.max() if len(finite) else 0.0), "sequential")
    if metric in NONPOSITIVE:
        return Scale(SEQUENTIAL + "_r", -_positive(-finite.min() if len(finite) else 0.0), 0.0, "sequential")
    center = 1.0 if metric in RATIOS else 0.0
    if len(finite) and finite.min() >= center and finite.max() > center:  # one side: hot at the far end
        return Scale(SEQUENTIAL, *_span(finite.min(), finite.max()), "sequential")
    if len(finite) and finite.max() <= center and finite.min() < center:
        return Scale(SEQUENTIAL + "_r", *_span(finite.min(), finite.max()), "sequential")
    spread = _positive(np.abs(finite - center).max() if len(finite) else 0.0)
    return Scale(DIVERGING, center - spread, center + spread, "diverging")


def _span(low: float, high: float) -> tuple[float, float]:
    """(low, high), widened around their value when they are equal (to float precision)."""
    if is_constant(low, high):
        middle = (float(low) + float(high)) / 2
        return middle - 0.5, middle + 0.5
    return float(low), float(high)


def is_constant(low: float, high: float) -> bool:
    """Whether values from ``low`` to ``high`` are one value but for float rounding."""
    return high - low <= 1e-9 * max(1.0, abs(low), abs(high))


def _positive(value: float) -> float:
    return float(value) if value > 0 and math.isfinite(value) else 1e-12


def colors_for(values, scale: Scale) -> list[str | None]:
    """An ``rgb(...)`` colour per value (None for NaN), clipped to the scale's range."""
    values = np.asarray(values, dtype=float)
    fractions = np.clip((values - scale.zmin) / (scale.zmax - scale.zmin), 0.0, 1.0)
    ok = np.isfinite(fractions)
    sampled = iter(sample_colorscale(scale.colorscale, fractions[ok].tolist()) if ok.any() else [])
    return [next(sampled) if good else None for good in ok]


def _text_color(rgb: str) -> str:
    r, g, b = (int(v) for v in rgb[4:-1].split(","))
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


def display_token(token: str) -> str:
    """A token as it reads in running text: SentencePiece's ▁ and byte-BPE's Ġ are spaces, byte-BPE's
    Ċ a newline and ĉ a tab."""
    return token.replace("▁", " ").replace("Ġ", " ").replace("Ċ", "\n").replace("ĉ", "\t")


#: How whitespace shows where a token stands alone (table cells, heatmap labels, hover).
VISIBLE_WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
_VISIBLE = str.maketrans(VISIBLE_WHITESPACE)


def visible_token(token: str) -> str:
    """A token with its whitespace visible: ``display_token``, then space ␣, newline ↵, tab ⇥, CR ␍."""
    return display_token(str(token)).translate(_VISIBLE)


# Running text keeps the real whitespace (copying it gives the real text) and marks it: a faint mark
# drawn over each space, and before each newline and tab.
_WHITESPACE_STYLE = ("<style>.rlb-ws{position:relative}"
                     ".rlb-ws::after{content:attr(data-mark);position:absolute;left:0;right:0;text-align:center;"
                     "opacity:.45;pointer-events:none}"
                     ".rlb-nl::before,.rlb-tab::before{content:attr(data-mark);opacity:.45}</style>")
_RUNNING_MARKS = {" ": ('rlb-ws', "·"), "\n": ("rlb-nl", "↵"), "\t": ("rlb-tab", "⇥")}


def _running_text(token: str) -> str:
    """A token's running text, escaped, each space, newline and tab wrapped so CSS marks it."""
    out = []
    for char in display_token(str(token)):
        mark = _RUNNING_MARKS.get(char)
        out.append(f'<span class="{mark[0]}" data-mark="{mark[1]}">{char}</span>' if mark else html.escape(char))
    return "".join(out)


DIMMED_OPACITY = 0.35  # of a position the loss mask leaves out (not trained): shown, faint


def build_token_text_html(tokens: list[str], values, metric: str, scale: Scale, dimmed=None,
                          legend: bool = True) -> str:
    """The response as running text, each token's background coloured by ``metric`` (value on
    hover), followed by a colour bar (``build_legend_html``) unless ``legend`` is False. Every token
    is escaped. ``dimmed`` (bool per token) marks untrained positions: drawn faint and uncoloured,
    "not trained" on hover."""
    dimmed = np.zeros(len(tokens), bool) if dimmed is None else np.asarray(dimmed, bool)
    spans = []
    for token, value, color, faint in zip(tokens, values, colors_for(values, scale), dimmed):
        text = _running_text(token)
        if faint:
            title = html.escape(f"not trained · {metric} = {value:.4g}" if value == value
                                else f"not trained · {metric}: no value")
            spans.append(f'<span class="rlb-tok rlb-untrained" style="opacity:{DIMMED_OPACITY}" '
                         f'title="{title}">{text}</span>')
            continue
        if color is None:
            spans.append(f'<span class="rlb-tok" title="{html.escape(metric)}: no value">{text}</span>')
            continue
        title = html.escape(f"{metric} = {value:.4g}")
        spans.append(f'<span class="rlb-tok" style="background:{color};color:{_text_color(color)}" '
                     f'title="{title}">{text}</span>')
    # a run of tokens with no space (ids shown as #ID, code) still wraps inside its box: breaks anywhere
    return (_WHITESPACE_STYLE + '<div class="rlb-token-text" style="white-space:pre-wrap;overflow-wrap:anywhere;'
            'line-height:1.9;font-family:monospace">' + "".join(spans) + "</div>" + (build_legend_html(metric, scale) if legend else ""))


def build_legend_html(metric: str, scale: Scale) -> str:
    """The colour bar of ``scale``: its ends, the gradient, the metric's name (escaped) and the kind."""
    stops = sample_colorscale(scale.colorscale, [0.0, 0.25, 0.5, 0.75, 1.0])
    middle = (scale.zmin + scale.zmax) / 2
    return (f'<div class="rlb-legend" style="display:flex;align-items:center;gap:8px;margin-top:6px;'
            f'font-size:0.8em"><span>{scale.zmin:.3g}</span>'
            f'<span style="flex:0 0 240px;height:10px;background:linear-gradient(to right,{",".join(stops)})">'
            f'</span><span>{scale.zmax:.3g}</span><span>{html.escape(metric)} ({scale.kind}'
            + (f", centred at {middle:.3g}" if scale.kind == "diverging" else "") + ")</span></div>")
