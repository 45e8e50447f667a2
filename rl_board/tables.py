"""Per-step views of the samples: sorting, the batch table, step grids and text clean-up."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import fields as F
from .metrics import SampleTokens, kl_per_token

#: Sort choices a user sees -> the sample column they sort by.
SORT_KEYS = {
    "reward": F.REWARD,
    "KL mean": "kl_mean",
    "KL sum": "kl_sum",
    "log-ratio mean": "log_ratio_mean",
    "log-ratio sum": "log_ratio_sum",
    "reward gap": "reward_gap",
    "response length": "response_len",
    "log order": F.LINE,
}

#: Batch table columns in display order (those a run lacks are left out).
BATCH_COLUMNS = (
    "prompt", "response", F.REWARD, "ground_truth", "valid_reward", "kl_mean", "kl_sum",
    "log_ratio_mean", "log_ratio_sum", "ref_response", "ref_reward", "reward_gap", "response_len", "source",
)


#: Per-sample KL column prefix for each estimator (k1 is the log-ratio itself).
KL_PREFIX = {"k3": "kl", "k2": "k2", "k1": "log_ratio"}


def sort_choices(extras: list[str]) -> list[str]:
    """Every sort choice for a run: ``SORT_KEYS`` then each extra field by its name."""
    return list(SORT_KEYS) + [name for name in extras if name not in SORT_KEYS]


def sort_samples(samples: pd.DataFrame, key: str, descending: bool = True, estimator: str = "k3",
                 ) -> pd.DataFrame:
    """``samples`` ordered by the column behind sort choice ``key`` (a ``SORT_KEYS`` choice, KL by
    ``estimator``, or an extra field's name); NaN last either way, ties in log order."""
    column = SORT_KEYS[key] if key in SORT_KEYS else F.extra_column(key)
    if column.startswith("kl_"):
        column = column.replace("kl", KL_PREFIX[estimator], 1)
    if column == F.LINE:
        order = samples.sort_values([F.FILE, F.LINE], kind="stable")
        return order.iloc[::-1] if descending else order
    return samples.sort_values(column, ascending=not descending, na_position="last", kind="stable")


def build_batch_table(samples: pd.DataFrame, system_marker: str | None = None, pad_token: str | None = None,
                      estimator: str = "k3") -> pd.DataFrame:
    """The batch table for ``samples`` (already ordered): one row per sample, the columns a run has.

    With ``pad_token``, pad tokens are removed from the response texts; with
    ``system_marker``, prompts lose everything up to and including it.
    """
    samples = samples.assign(response_len=samples["response_len"].where(samples["response_len"] >= 0))
    columns = [c for c in BATCH_COLUMNS if c in samples and samples[c].notna().any()]
    extras = [c for c in F.extra_columns(samples.columns) if samples[c].notna().any()]
    at = columns.index("source") if "source" in columns else len(columns)
    columns[at:at] = extras
    table = samples[columns].copy()
    table = table.rename(columns={c: F.extra_name(c) for c in extras if F.extra_name(c) not in BATCH_COLUMNS})
    if estimator != "k3":
        for stat in ("mean", "sum"):
            if f"kl_{stat}" in table:
                table[f"kl_{stat}"] = samples[f"{KL_PREFIX[estimator]}_{stat}"]
    if system_marker and "prompt" in table:
        table["prompt"] = [strip_system_prompt(t, system_marker) for t in table["prompt"]]
    if pad_token:
        for name in ("response", "ref_response"):
            if name in table:
                table[name] = [strip_pad(t, pad_token) for t in table[name]]
    return table


def describe_samples(ordered: pd.DataFrame) -> list[str]:
    """One line per sample for a picker: rank in the table, reward, KL, length, file:line."""
    out = []
    for rank, (reward, kl, length, source) in enumerate(zip(
            ordered[F.REWARD], ordered["kl_mean"], ordered["response_len"], ordered["source"]), start=1):
        parts = [f"#{rank}", f"reward {reward:.4g}"]
        if kl == kl:  # not NaN
            parts.append(f"KL {kl:.4g}")
        if length >= 0:
            parts.append(f"len {length}")
        parts.append(source)
        out.append(" · ".join(parts))
    return out


def strip_system_prompt(text, marker: str):
    """The prompt after the first ``marker`` (the system prompt's end), or unchanged without one."""
    if not isinstance(text, str) or not marker or marker not in text:
        return text
    return text.split(marker, 1)[1].lstrip()


def strip_pad(text, pad_token: str):
    """Text without any ``pad_token``."""
    return text.replace(pad_token, "") if isinstance(text, str) and pad_token else text


def step_grid(steps) -> tuple[list[int], bool]:
    """(the logged steps ascending, whether they lie on an even grid a slider can walk)."""
    values = sorted(int(s) for s in steps)
    gaps = np.diff(values)
    return values, len(values) < 2 or bool((gaps == gaps[0]).all())


def length_change(steps: pd.DataFrame, step: int, column: str = "response_len_mean") -> tuple[float, float]:
    """(the step's mean of ``column``, its change from the previous logged step; NaN where unknown)."""
    if column not in steps or step not in steps.index:
        return np.nan, np.nan
    position = steps.index.get_loc(step)
    now = float(steps[column].iloc[position])
    before = float(steps[column].iloc[position - 1]) if position > 0 else np.nan
    return now, now - before


#: Rows of the token table and heatmap, in display order.
TOKEN_METRICS = ("token_reward", "log_ratio", "kl", "value", "logp", "ref_logp", "prob", "ref_prob")


def compute_token_table(sample: SampleTokens, estimator: str = "k3", drop_pad: bool = False) -> pd.DataFrame:
    """One row per token position, one column per metric of ``TOKEN_METRICS``."""
    frame = pd.DataFrame({
        "token": sample.tokens,
        "token_reward": sample.token_rewards,
        "log_ratio": sample.logprobs - sample.ref_logprobs,
        "kl": kl_per_token(sample.logprobs, sample.ref_logprobs, estimator),
        "value": sample.values,
        "logp": sample.logprobs,
        "ref_logp": sample.ref_logprobs,
        "prob": np.exp(sample.logprobs),
        "ref_prob": np.exp(sample.ref_logprobs),
    })
    frame.index.name = "position"
    return frame[~sample.is_pad] if drop_pad else frame


#: Per-step statistics: base name -> the per-sample column averaged.
STEP_SERIES = {**{name: name for name in F.REWARD_FIELDS}, "kl": "kl_mean", "k2": "k2_mean",
               "log_ratio": "log_ratio_mean", "kl_sum": "kl_sum", "log_ratio_sum": "log_ratio_sum",
               "response_len": "response_len", "response_chars": "response_chars",
               "ref_response_chars": "ref_response_chars"}


def compute_step_stats(samples: pd.DataFrame) -> pd.DataFrame:
    """Per step, indexed by step ascending: ``samples`` (count) and, for each series of
    ``STEP_SERIES`` and each extra field (``extra:NAME``) with any value, ``{name}_mean`` and
    population ``{name}_std`` (NaN ignored). ``kl_mean`` is the mean over samples of each
    sample's mean k3."""
    steps = samples[F.STEP]
    columns = {**STEP_SERIES, **{c: c for c in F.extra_columns(samples.columns)}}
    series = {name: samples[column].astype(float) for name, column in columns.items() if column in samples}
    if "response_len" in series:
        series["response_len"] = series["response_len"].where(series["response_len"] >= 0)
    values = pd.DataFrame({name: s for name, s in series.items() if s.notna().any()}, index=samples.index)
    out = steps.groupby(steps, sort=True).size().rename("samples").to_frame()
    if len(values.columns):
        grouped = values.groupby(steps, sort=True)
        out = out.join(grouped.mean().add_suffix("_mean")).join(grouped.std(ddof=0).add_suffix("_std"))
    out.index.name = F.STEP
    return out
