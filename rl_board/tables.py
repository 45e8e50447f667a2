"""Per-step views of the samples: sorting, the batch table, step grids and text clean-up."""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import fields as F

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


def sort_samples(samples: pd.DataFrame, key: str, descending: bool = True, estimator: str = "k3",
                 ) -> pd.DataFrame:
    """``samples`` ordered by the column behind sort choice ``key`` (KL by ``estimator``);
    NaN last either way, ties in log order."""
    column = SORT_KEYS[key]
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
    table = samples[columns].copy()
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
