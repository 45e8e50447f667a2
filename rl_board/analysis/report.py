"""A run as one self-contained HTML file (``rl-board report``, the page's download button): its recap, the
main curves, every finding with its evidence tables and its samples' text (tokens coloured where the run
logs per-token numbers, its images as small thumbnails within a budget), and how the file was made. Nothing in it asks the network for anything: the
styles, the data and plotly's script are inline. Every text from the run is escaped (``html.escape``, or
pandas' escaping of the evidence tables): a response holding ``<script>`` reads as those characters."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..base.colors import build_token_text_html, metric_scale
from ..base.defaults import MAX_REPORT_SAMPLES, MAX_SHOWN_CHARS, REPORT_SAMPLES
from .figures import build_curve_figure
from .findings import Findings, compute_evidence, compute_evidence_tables
from .recap import compute_recap
from .run import Run
from .steps import curve_frame
from .tables import compute_token_table

MAX_REPORT_TOKENS = 2_000  # tokens of a sample's coloured text; the rest is left out, and the report says so
MAX_PROMPT_CHARS = MAX_SHOWN_CHARS  # characters of a sample's prompt shown above its response
MAX_RESPONSE_CHARS = MAX_SHOWN_CHARS  # characters of a response shown as text (no per-token numbers to colour)
REPORT_IMAGE_SIDE = 160  # pixels: the longer side of a sample's image thumbnail in the report
REPORT_IMAGE_BYTES = 2 << 20  # bytes of thumbnails (PNG) the whole report embeds; the images past it are named

#: The curves drawn, in order: (series names, title). A series the run lacks is left out; a curve none of
#: whose series the run has is not drawn.
CURVES = ((["reward"], "Reward"), (["kl"], "KL (k3, mean per sample)"), (["response_len"], "Response length (tokens)"),
          (["entropy"], "Entropy (mean per sample)"))

#: The per-token number a sample's text is coloured by: the first the sample has.
COLOR_BY = ("kl", "log_ratio", "logp", "entropy", "token_reward")

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;
color:#222}
h1{font-size:1.6rem}h2{margin-top:2.2rem;border-bottom:1px solid #ddd}h3{margin-bottom:.3rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.2rem .6rem;text-align:left}
.rlb-finding{border:1px solid #ccc;border-radius:6px;padding:.4rem 1rem;margin:1rem 0}
.rlb-severity-high{border-left:6px solid #c0392b}.rlb-severity-medium{border-left:6px solid #e67e22}
.rlb-severity-low{border-left:6px solid #95a5a6}
.rlb-meta{color:#666;font-size:.9em}.rlb-prompt{white-space:pre-wrap;font-family:monospace;background:#f6f6f6;
padding:.3rem;max-height:12rem;overflow:auto}
.rlb-sample{margin:.8rem 0 1.2rem 0}.rlb-images img{margin:.2rem .4rem .2rem 0;border:1px solid #ddd}
mark{background:#ffe08a}
"""


@dataclass(frozen=True)
class ReportSettings:
    """How a report was made, printed at its end: the command (as typed, or what the page did), the read's
    settings (``read_settings``), the steps asked for and the samples per finding, the board's version."""

    command: str
    settings: dict
    version: str
    steps: tuple[int | None, int | None] = (None, None)
    samples: int = REPORT_SAMPLES
    run_name: str | None = None  # how the title and recap name the run; None: ``report_name`` of its path


def report_name(path) -> str:
    """How a report names a run unless asked for its path: a URL as it is (no local path in it), a local
    folder by its own name (``.`` resolved: the folder's name, never its absolute path)."""
    from pathlib import Path

    from ..base.access import is_url

    if is_url(str(path)):
        return str(path)
    return Path(path).expanduser().resolve().name or "run"


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value) -> str:
    return "–" if value is None or (isinstance(value, float) and not np.isfinite(value)) else f"{value:.4g}"


def _in_steps(index: pd.Index, steps: tuple[int | None, int | None]) -> np.ndarray:
    low, high = steps
    keep = np.ones(len(index), bool)
    if low is not None:
        keep &= index.to_numpy() >= low
    if high is not None:
        keep &= index.to_numpy() <= high
    return keep


def _recap_html(run: Run, frame: pd.DataFrame, name: str) -> str:
    """The run in a few lines: where, what format, how much; then each main series' first → last, min and
    max over the steps shown (of the per-step means)."""
    report = run.report
    rows = [("run", _e(name)), ("format", _e(report.reader)), ("files", f"{len(report.files):,}"),
            ("samples loaded", f"{report.lines_ok:,}"), ("lines rejected", f"{report.lines_bad:,}")]
    if len(frame):
        rows.append(("steps shown", f"{int(frame.index[0])} → {int(frame.index[-1])} ({len(frame):,} steps, "
                                    f"{int(frame['samples'].sum()):,} samples)"))
    out = ["<table>", *(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows), "</table>"]
    series = []
    for names, title in CURVES:
        column = f"{names[0]}_mean"
        if column not in frame:
            continue
        recap = compute_recap(zip(frame.index.tolist(), frame[column].tolist()))
        if recap is not None:
            series.append(f"<tr><td>{_e(title)}</td><td>{_fmt(recap.first)} → {_fmt(recap.last)}</td>"
                          f"<td>{_fmt(recap.min)} (step {recap.min_step})</td>"
                          f"<td>{_fmt(recap.max)} (step {recap.max_step})</td></tr>")
    if series:
        out += ["<table><tr><th>series</th><th>first → last</th><th>min</th><th>max</th></tr>", *series, "</table>"]
    for note in report.notes:
        out.append(f'<p class="rlb-meta">note: {_e(note)}</p>')
    return "\n".join(out)


def _curves_html(frame: pd.DataFrame) -> str:
    """The main curves as plotly figures; plotly's script is inlined once, before the first."""
    import plotly.io as pio

    parts, first = [], True
    for i, (names, title) in enumerate(CURVES):
        if f"{names[0]}_mean" not in frame or not frame[f"{names[0]}_mean"].notna().any():
            continue
        figure = build_curve_figure(frame, names, title)
        parts.append(pio.to_html(figure, include_plotlyjs=first, full_html=False, div_id=f"rlb-curve-{i}",
                                 config={"displaylogo": False, "responsive": True}))
        first = False
    return "\n".join(parts) if parts else "<p>No per-step series to draw.</p>"


def _table_html(table: pd.DataFrame) -> str:
    return table.to_html(index=False, escape=True, border=0, na_rep="–")


def _images_html(run: Run, label, budget: list[int]) -> str:
    """A sample's images as thumbnails (``REPORT_IMAGE_SIDE``), while ``budget`` (bytes left, one-element
    list shared by the whole report) lasts; one line names those left out, by the budget or for want of bytes."""
    if "images" not in run._samples or not run._samples.at[label, "images"]:
        return ""
    from ..base.images import thumbnail

    try:
        images = run.images(label)
    except (OSError, ValueError, RuntimeError):
        return ""
    shown, over, missing = [], 0, 0
    for image in images:
        png = thumbnail(image["data"], REPORT_IMAGE_SIDE) if image["data"] is not None else None
        if png is None:
            missing += 1
        elif len(png) > budget[0]:
            over += 1
        else:
            budget[0] -= len(png)
            size = f"{image['width']} × {image['height']}"
            shown.append(f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}" alt="image {size}" '
                         f'title="turn {image["message_index"] + 1} · {size}">')
    notes = []
    if missing:
        notes.append(f"{missing} without pixels here (see the board)")
    if over:
        notes.append(f"{over} left out: the report embeds at most {REPORT_IMAGE_BYTES:,} bytes of thumbnails")
    line = (f'<p class="rlb-meta">{len(shown)} of {len(images)} images shown; ' + "; ".join(notes) + ".</p>"
            if notes else "")
    return '<div class="rlb-images">' + "".join(shown) + "</div>" + line


def _sample_html(run: Run, item, prompt: str | None, budget: list[int] | None = None) -> str:
    """One sample of a finding: where it is, its prompt (cut), its images (thumbnails within ``budget``), and
    its response: its tokens coloured by the first per-token number it has (``COLOR_BY``; its first
    ``MAX_REPORT_TOKENS``), else its words with the finding's phrases marked (``item``: ``compute_evidence``'s,
    cut at ``MAX_RESPONSE_CHARS``). Where a text is cut, its full length is said."""
    head = f'<div class="rlb-meta">step {item.step} · {_e(item.sample_id)} · reward {_fmt(item.reward)}</div>'
    parts = [head]
    if prompt:
        cut = prompt[:MAX_PROMPT_CHARS] + ("…" if len(prompt) > MAX_PROMPT_CHARS else "")
        parts.append(f'<div class="rlb-prompt">{_e(cut)}</div>')
        if len(prompt) > MAX_PROMPT_CHARS:
            parts.append(f'<p class="rlb-meta">The first {MAX_PROMPT_CHARS:,} of the prompt\'s {len(prompt):,} '
                         "characters are shown.</p>")
    if budget is not None:
        parts.append(_images_html(run, item.label, budget))
    coloured = None
    try:
        tokens = run.sample_tokens(item.label)
    except (OSError, ValueError, RuntimeError):  # the file changed since (SourceChanged), the tokenizer went away
        tokens = None
    if tokens is not None and len(tokens.tokens):
        metrics = compute_token_table(tokens, drop_pad=run.pad_token is not None)
        metric = next((m for m in COLOR_BY if m in metrics and metrics[m].notna().any()), None)
        if metric is not None:
            shown = metrics.iloc[:MAX_REPORT_TOKENS]
            values = shown[metric].to_numpy(dtype=float)
            counted = shown["counted"].to_numpy(dtype=bool)
            coloured = build_token_text_html([str(t) for t in shown["token"]], values, metric,
                                             metric_scale(metric, values[counted]),
                                             dimmed=~counted if tokens.has_mask else None)
            if len(metrics) > MAX_REPORT_TOKENS:
                coloured += (f'<p class="rlb-meta">The first {MAX_REPORT_TOKENS:,} of {len(metrics):,} tokens '
                             "are shown.</p>")
    if coloured is not None:
        parts.append(coloured)
    else:
        parts.append(item.html)
        if item.shown < item.chars:
            parts.append(f'<p class="rlb-meta">The first {item.shown:,} of the response\'s {item.chars:,} '
                         "characters are shown.</p>")
    return '<div class="rlb-sample">' + "\n".join(parts) + "</div>"


def _findings_html(run: Run, found: Findings, samples: int) -> str:
    """Every finding: its line, how much, its evidence tables and its first ``samples`` samples."""
    if not found.findings:
        ran = ", ".join(c.kind for c in found.checks if c.ran) or "none"
        return f"<p>No findings. Checked: {_e(ran)}.</p>"
    out = []
    budget = [REPORT_IMAGE_BYTES]
    for finding in found.findings:
        steps = (f"step {finding.first_step}" if finding.first_step == finding.last_step
                 else f"steps {finding.first_step} to {finding.last_step}")
        out.append(f'<section class="rlb-finding rlb-severity-{_e(finding.severity)}" data-kind="{_e(finding.kind)}">')
        out.append(f"<h3>{_e(finding.kind)}</h3><p>{_e(finding.message)}</p>")
        # the detail says how much and since when (its onset step)
        out.append(f'<p class="rlb-meta">{_e(finding.severity)} · {_e(steps)}'
                   + (f" · {_e(finding.detail)}" if finding.detail else "") + "</p>")
        out += [_table_html(table) for table in compute_evidence_tables(finding, found.words_from_tokens)]
        items = compute_evidence(run, finding, MAX_RESPONSE_CHARS)[:samples]
        if items:
            prompts = run.with_text(run._samples.loc[[item.label for item in items]])
            prompts = prompts["prompt"].tolist() if "prompt" in prompts else [None] * len(items)
            out.append(f"<h4>Samples ({len(items)} of {len(finding.samples)})</h4>")
            out += [_sample_html(run, item, prompt if isinstance(prompt, str) else None, budget)
                    for item, prompt in zip(items, prompts)]
        out.append("</section>")
    return "\n".join(out)


def _made_html(made: ReportSettings) -> str:
    low, high = made.steps
    rows = [("command", made.command), ("rl-board version", made.version),
            ("steps", "all" if low is None and high is None else f"{'' if low is None else low}:"
                                                                f"{'' if high is None else high}"),
            ("samples per finding", str(made.samples)),
            *((name, "none" if value is None else str(value)) for name, value in made.settings.items())]
    return "<table>" + "".join(f"<tr><th>{_e(name)}</th><td><code>{_e(value)}</code></td></tr>"
                               for name, value in rows) + "</table>"


def build_report_html(run: Run, found: Findings, made: ReportSettings) -> str:
    """The report of ``run`` with its findings ``found`` (``get_findings``), made as ``made`` says: one HTML
    document, every script, style and number inline. The curves and the recap cover ``made.steps``; the
    findings are the whole run's (they compare its early and late steps)."""
    samples = max(0, min(made.samples, MAX_REPORT_SAMPLES))
    steps = curve_frame(run.steps)
    steps = steps[_in_steps(steps.index, made.steps)]
    name = made.run_name if made.run_name is not None else report_name(run.path)
    title = f"rl-board report: {name}"
    count = len(found.findings)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # the file asks nothing of the network: no script, style, image or frame from anywhere else
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:\">",
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        "<h2>Recap</h2>", _recap_html(run, steps, name),
        "<h2>Curves</h2>", _curves_html(steps),
        f"<h2>Findings ({count})</h2>", _findings_html(run, found, samples),
        "<h2>How this report was made</h2>", _made_html(made),
        "</body></html>", ""])


def board_version() -> str:
    """The installed rl-board's version; for a source tree that is not installed, its pyproject's, so marked."""
    from importlib import metadata
    from pathlib import Path

    try:
        return metadata.version("rl-board")
    except metadata.PackageNotFoundError:
        import tomllib

        try:
            project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
            return f"{project['project']['version']} (source tree)"
        except (OSError, ValueError, KeyError):
            return "unknown"
