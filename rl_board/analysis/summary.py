"""The headless summary: one JSON-ready dict per run (see ``python -m rl_board summary``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..analysis.run import Run
from ..base import fields as F
from .checks import count_checks

#: Per-step keys of the summary and the ``Run.steps`` column each comes from.
STEP_KEYS = {
    "reward_mean": "reward_mean",
    "reward_std": "reward_std",
    "ref_reward_mean": "ref_reward_mean",
    "kl_mean": "kl_mean",
    "log_ratio_mean": "log_ratio_mean",
    "response_len_mean": "response_len_mean",
    "neg_log_ratio_share": "neg_log_ratio_share",
    "reward_len_corr": "reward_len_corr",
    "repeat_4gram_share": "repeat_4gram_mean",
    "explained_variance": "explained_variance",
    "mismatch_kl": "mismatch_kl_mean",
    "entropy_mean": "entropy_mean",
    "masked_share": "masked_share",
    "truncated_share": "truncated_share",
}
#: Per-step counts (integers).
COUNT_KEYS = ("prompt_groups", "zero_std_groups")


def _number(value) -> float | None:
    """A finite float, or None where JSON has no number for it (NaN, +-Infinity, absent)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def compute_turn_stats(run: Run) -> dict[int, dict]:
    """For each step where any sample has ``messages``: ``turns_mean`` (the mean ``num_turns``, assistant
    turns, over those samples), ``tool_calls_mean`` (the mean ``num_tool_calls`` over them) and
    ``tool_calls`` (tool name -> calls of that tool in the step's assistant turns, by name)."""
    samples = run._samples
    if "has_messages" not in samples or not samples["has_messages"].any():
        return {}
    agents = samples[samples["has_messages"].astype(bool)]
    # the two columns as one block (pandas' grouped mean of a column can round otherwise alone than
    # beside another with NaN; the frame keeps each column apart, store/columns.py)
    pair = pd.DataFrame({name: agents[name] for name in (F.extra_column(F.NUM_TURNS), F.extra_column(F.NUM_TOOL_CALLS))})
    means = pair.groupby(agents[F.STEP])[list(pair.columns)].mean()
    calls = run.tool_calls(agents)
    return {int(step): {"turns_mean": _number(turns), "tool_calls_mean": _number(tool_calls),
                        "tool_calls": dict(sorted(calls.get(int(step), {}).items()))}
            for step, (turns, tool_calls) in zip(means.index, means.to_numpy())}


def build_summary(run: Run) -> dict:
    """Files, line counts, every rejected line and unreadable file, and per-step statistics,
    steps ascending. Each step's ``extras`` holds the extra fields some sample of the step has, in the
    run's order of extras: the mean over the step's samples that have it (NaN ignored); a field no
    sample of the step has is left out (so sparse extras cost what their values cost: 50,000 steps
    each of one of 256 fields are 50,000 values, not 12.8 million nulls). A step where any sample
    has ``messages`` also has ``compute_turn_stats``' keys."""
    report = run.report
    extras = run.extras
    turns = compute_turn_stats(run)
    frame = run.steps
    present = set(frame.columns)
    n = len(frame)

    def column(name, default=None) -> list:  # one column as Python values (a row at a time costs 100x more)
        return frame[name].tolist() if name in present else [default] * n

    numbers = {key: [_number(v) for v in column(source)] for key, source in STEP_KEYS.items()}
    counts = {key: [int(v) for v in column(key, 0)] for key in COUNT_KEYS}
    step_extras: list[list] = [[] for _ in range(n)]  # per step, its (name, mean) pairs in the run's order
    for name in extras:
        if (source := f"{F.extra_column(name)}_mean") not in present:
            continue
        means = frame[source].to_numpy(dtype=float)
        where = np.flatnonzero(np.isfinite(means))
        for i, value in zip(where.tolist(), means[where].tolist()):
            step_extras[i].append((name, value))
    samples = column("samples")
    steps = []
    for i, step in enumerate(frame.index.tolist()):
        entry = {"step": int(step), "samples": int(samples[i])}
        entry.update((key, values[i]) for key, values in numbers.items())
        entry.update((key, values[i]) for key, values in counts.items())
        entry["extras"] = dict(step_extras[i])
        entry.update(turns.get(int(step), {}))
        steps.append(entry)
    return {
        "format": report.reader,
        "files": len(report.files),
        "lines_ok": report.lines_ok,
        "lines_bad": report.lines_bad,
        "lines_skipped": report.skipped,
        "errors": [{"file": f, "line": line, "error": reason} for f, line, reason in report.errors],
        "files_unreadable": [{"file": f, "error": reason} for f, reason in report.unreadable],
        "checks": count_checks(run._samples, run.options.eos_token),
        "steps": steps,
    }
