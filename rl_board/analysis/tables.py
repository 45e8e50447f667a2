"""Per-step views of the samples: sorting, the batch table, step grids and text clean-up."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..base import fields as F
from ..base.text import neutralise_cell
from ..derive.faults import kinds_of
from ..derive.metrics import SampleTokens, compute_gae, compute_return_to_go, kl_per_token
from .steps import rewarded

MAX_CELL_CHARS = 2_000  # characters of a text cell sent to the browser's table; the CSV has all

#: Sort choices a user sees -> the sample column they sort by.
SORT_KEYS = {
    "reward": F.REWARD,
    "KL mean": "kl_mean",
    "KL sum": "kl_sum",
    "log-ratio mean": "log_ratio_mean",
    "log-ratio sum": "log_ratio_sum",
    "reward gap": "reward_gap",
    "response length": "response_len",
    "mismatch KL": "mismatch_kl",
    "entropy": "entropy_mean",
    "4-gram repetition": "repeat_4gram",
    "images": "images",
    "log order": F.LINE,
}

#: Batch table columns in display order (those a run lacks are left out).
BATCH_COLUMNS = (
    "prompt", "response", F.REWARD, "tags", "note", "ground_truth", "valid_reward", "kl_mean", "kl_sum",
    "log_ratio_mean", "log_ratio_sum", "ref_response", "ref_reward", "reward_gap", "response_len", "truncated",
    "mismatch_kl", "entropy_mean", "repeat_4gram", "images", "source",
)


def has_images(samples: pd.DataFrame) -> bool:
    """Whether some sample has an image (its ``images`` count above 0): only then is the count a column
    to show, sort or filter by."""
    return "images" in samples and bool((samples["images"] > 0).any())


#: Per-sample KL column prefix for each estimator (k1 is the log-ratio itself).
KL_PREFIX = {"k3": "kl", "k2": "k2", "k1": "log_ratio"}


def sort_choices(extras: list[str], samples: pd.DataFrame | None = None) -> list[str]:
    """The sort choices for a run: ``SORT_KEYS`` then each extra field by its name. With the run's
    ``samples``, only the keys some sample has a value of (a response-level run has no KL, log-ratio,
    length, mismatch or entropy to sort by); the log order always."""
    keys = list(SORT_KEYS)
    if samples is not None:
        def has(column):
            if column not in samples:
                return False
            if column == "images":
                return has_images(samples)
            values = samples[column]
            return bool((values >= 0).any() if column == "response_len" else values.notna().any())

        keys = [key for key, column in SORT_KEYS.items() if column == F.LINE or has(column)]
        extras = [name for name in extras if has(F.extra_column(name))]
    return keys + [name for name in extras if name not in SORT_KEYS]


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

    With ``pad_token``, pad tokens are removed from the prompt and response texts (OpenRLHF
    left-pads prompts); with ``system_marker``, prompts lose everything up to and including it. Where a
    sample has turn faults, ``faults`` names each sample's kinds ("" for none), before the extras.
    """
    samples = samples.assign(response_len=samples["response_len"].where(samples["response_len"] >= 0))
    columns = [c for c in BATCH_COLUMNS if c in samples and samples[c].notna().any()
               and (c != "images" or has_images(samples))]
    extras = [c for c in F.extra_columns(samples.columns) if samples[c].notna().any()]
    at = columns.index("source") if "source" in columns else len(columns)
    columns[at:at] = extras
    table = samples[columns].copy()
    sparse = {c: float for c in extras if isinstance(table[c].dtype, pd.SparseDtype)}  # (kept so: store/columns.py)
    if sparse:  # as plain float64: Arrow, which the page's tables go through, takes no pandas sparse column
        # (pyarrow raises for one: https://github.com/apache/arrow/issues/1894, ARROW-2273)
        table = table.astype(sparse)
    if "truncated" in table:  # a flag: yes, no, or empty where nothing tells
        table["truncated"] = table["truncated"].map({1.0: True, 0.0: False}).astype("boolean")
    table = table.rename(columns={c: F.extra_name(c) for c in extras if F.extra_name(c) not in BATCH_COLUMNS})
    for stat in ("mean", "sum"):  # the KL columns show, and name, the chosen estimator
        if f"kl_{stat}" in table:
            table[f"kl_{stat}"] = samples[f"{KL_PREFIX[estimator]}_{stat}"]
    table = table.rename(columns={f"kl_{stat}": kl_column(stat, estimator) for stat in ("mean", "sum")})
    if "fault_kinds" in samples and samples["fault_kinds"].fillna(0).any():  # the kinds, where a sample has one
        table.insert(at, "faults", [", ".join(kinds_of(int(b))) for b in samples["fault_kinds"].fillna(0)])
    if system_marker and "prompt" in table:
        table["prompt"] = [strip_system_prompt(t, system_marker) for t in table["prompt"]]
    if pad_token:
        for name in ("prompt", "response", "ref_response"):
            if name in table:
                table[name] = [strip_pad(t, pad_token) for t in table[name]]
    return table


def kl_column(stat: str, estimator: str) -> str:
    """The batch table's header of the per-sample KL ``stat`` (mean or sum) by ``estimator``."""
    return f"kl_{stat} ({estimator})"


def describe_samples(ordered: pd.DataFrame, estimator: str = "k3") -> list[str]:
    """One line per sample for a picker: rank in the table, reward ("no reward" for a sample of a
    format that logs none), KL by ``estimator``, length, file:line."""
    out = []
    has_reward = rewarded(ordered)
    for rank, (reward, has, kl, length, source) in enumerate(zip(
            ordered[F.REWARD], has_reward, ordered[f"{KL_PREFIX[estimator]}_mean"], ordered["response_len"],
            ordered["source"]), start=1):
        parts = [f"#{rank}", f"reward {reward:.4g}" if has else "no reward"]
        if kl == kl:  # not NaN
            parts.append(f"KL {estimator} {kl:.4g}")
        if length >= 0:
            parts.append(f"len {length}")
        parts.append(source)
        out.append(" · ".join(parts))
    return out


#: A prompt's first turn is a system turn when, after leading special tokens (``<|im_start|>``, ``<s>``,
#: ``[INST]``) and spaces, it opens with the role ``system`` (ChatML, Llama 3, verl's decoded prompts) or
#: with Llama 2's ``<<SYS>>``.
_SYSTEM_TURN = re.compile(r"\s*(?:(?:<[^<>\s]{1,40}>|\[[A-Z_]{1,20}\])\s*)*(?:<<SYS>>|system\b)", re.IGNORECASE)


def strip_system_prompt(text, marker: str):
    """The prompt after its system turn, which ends at the first ``marker``; unchanged when the prompt
    does not open with a system turn (its first ``marker`` then ends the question, which stays)."""
    if not isinstance(text, str) or not marker or marker not in text:
        return text
    head, rest = text.split(marker, 1)
    return rest.lstrip() if _SYSTEM_TURN.match(head) else text


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
TOKEN_METRICS = ("token_reward", "log_ratio", "kl", "value", "advantage", "value_error", "return_to_go", "return",
                 "logp", "ref_logp", "prob", "ref_prob", "rollout_logp", "rollout_ratio", "mismatch_k3", "entropy",
                 "neg_logp", *F.LOGGED_TOKEN_FIELDS)
#: The heatmap's rows until the user picks others, in this order of preference (each row is ~50 px tall).
HEATMAP_ROWS = ("kl", "log_ratio", "token_reward", "advantage", "entropy", "mismatch_k3", "logp", "value")
HEATMAP_DEFAULT_ROWS = 6  # rows drawn at most by default


def default_heatmap_rows(available: list[str]) -> list[str]:
    """The heatmap's first rows: of the metrics ``available``, the first ``HEATMAP_DEFAULT_ROWS`` in the
    order of ``HEATMAP_ROWS``, then in ``available``'s order."""
    preferred = [m for m in HEATMAP_ROWS if m in available] + [m for m in available if m not in HEATMAP_ROWS]
    return preferred[:HEATMAP_DEFAULT_ROWS]


#: What each token metric is, for labels and docs/numbers.md.
TOKEN_METRIC_LABELS = {
    "advantage": "GAE advantage", "value_error": "value error (return-to-go − value)",
    "return_to_go": "return-to-go Σ γ^(k−t)·r_k", "return": "GAE return (advantage + value)",
    "rollout_logp": "rollout logp (the sampler's)", "rollout_ratio": "rollout ratio exp(logp − rollout logp)",
    "mismatch_k3": "mismatch k3 (sampler ‖ trainer)",
    "neg_logp": "−logp (no entropy logged)", "advantages": "advantage (logged)",
    "mismatch_kl": "mismatch KL (logged)", "importance_ratio": "importance ratio (logged)",
}


def compute_token_table(sample: SampleTokens, estimator: str = "k3", drop_pad: bool = False, gamma: float = 1.0,
                        lam: float = 0.95) -> pd.DataFrame:
    """One row per token position, one column per metric of ``TOKEN_METRICS`` (NaN where the
    sample lacks what a metric needs), and ``counted`` (the position is counted: trained, for a
    sample with a loss mask). Over the counted positions, in order: GAE advantage and return
    (advantage + value) with ``gamma`` and ``lam``; the empirical return-to-go
    G_t = sum_{k >= t} gamma^(k - t) r_k and the value error G_t - V_t, which shows a critic that can't
    fit (the GAE return minus the value is the advantage itself). ``neg_logp`` stands in for entropy
    only when none is logged. ``drop_pad`` leaves out the positions that are not counted, except for a
    sample with a loss mask, whose untrained positions (the prompt, tool results) are kept to be shown
    dimmed."""
    n = len(sample.tokens)
    rollout = sample.rollout_logprobs if sample.rollout_logprobs is not None else np.full(n, np.nan)
    entropy = sample.entropy if sample.entropy is not None else np.full(n, np.nan)
    mismatch = sample.logprobs - rollout
    counted = ~sample.is_pad
    advantage, returns, to_go = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    advantage[counted], returns[counted] = compute_gae(sample.token_rewards[counted], sample.values[counted],
                                                       gamma, lam)
    to_go[counted] = compute_return_to_go(sample.token_rewards[counted], gamma)
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
        "advantage": advantage,
        "return": returns,
        "return_to_go": to_go,
        "value_error": to_go - sample.values,
        "rollout_logp": rollout,
        "rollout_ratio": np.exp(mismatch),
        "mismatch_k3": np.expm1(mismatch) - mismatch,
        "entropy": entropy,
        "neg_logp": -sample.logprobs if np.isnan(entropy).all() else np.full(n, np.nan),
        **{name: sample.logged.get(name, np.full(n, np.nan)) for name in F.LOGGED_TOKEN_FIELDS},
        "counted": counted,
    })[["token", *TOKEN_METRICS, "counted"]]
    frame.index.name = "position"
    return frame[counted] if drop_pad and not sample.has_mask else frame


def build_export_csv(table: pd.DataFrame, samples: pd.DataFrame, run_name: str) -> bytes:
    """``table`` (rows of ``samples``, as shown) as CSV with the run and each row's step first."""
    out = table.copy()
    out.insert(0, F.STEP, samples.loc[table.index, F.STEP].to_numpy())
    out.insert(0, "run", run_name)
    # CRLF line ends (RFC 4180): then a cell holding a CR is quoted, not split into two rows
    return neutralise_frame(out).to_csv(index=False, lineterminator="\r\n").encode()


def neutralise_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell and column name a spreadsheet would run as a formula given a
    leading apostrophe (``text.neutralise_cell``); numbers stay numbers."""
    out = frame.rename(columns=neutralise_cell)
    for column in out.columns:
        if not pd.api.types.is_numeric_dtype(out[column]):
            out[column] = out[column].map(neutralise_cell)
    return out


def cut_cells(table: pd.DataFrame, limit: int = MAX_CELL_CHARS) -> pd.DataFrame:
    """``table`` with text cells longer than ``limit`` characters cut, marked with "…" (for display)."""
    out = table.copy()
    for column in out.columns:
        if not pd.api.types.is_numeric_dtype(out[column]):
            out[column] = out[column].map(lambda v: v[:limit] + "…" if isinstance(v, str) and len(v) > limit else v)
    return out


def build_group_table(samples: pd.DataFrame, system_marker: str | None = None,
                      pad_token: str | None = None) -> pd.DataFrame:
    """One row per GRPO group of ``samples`` (one step's samples with texts; same ``prompt_key`` =
    same prompt, pads removed): prompt, size, reward mean and population std, indexed by the
    group's key; groups whose rewards are all equal (no learning signal) first."""
    have = samples[samples["prompt_key"].notna() & rewarded(samples)]
    if have.empty:
        return pd.DataFrame(columns=["prompt", "size", "reward_mean", "reward_std"])
    grouped = have.groupby("prompt_key", sort=False)
    table = pd.DataFrame({
        "prompt": [strip_pad(strip_system_prompt(t, system_marker), pad_token) for t in grouped["prompt"].first()],
        "size": grouped.size().to_numpy(),
        "reward_mean": grouped[F.REWARD].mean().to_numpy(),
        "reward_std": grouped[F.REWARD].std(ddof=0).to_numpy(),
    }, index=grouped.size().index)
    return table.sort_values(["reward_std", "size"], ascending=[True, False], kind="stable")


def prompt_history(samples: pd.DataFrame, label) -> pd.DataFrame:
    """Every sample with the same prompt (pads removed: ``prompt_key``) as sample ``label``, at every
    step, in step, file, line order; empty when it has no prompt."""
    key = samples.at[label, "prompt_key"]
    if pd.isna(key):
        return samples.iloc[:0]
    return samples[samples["prompt_key"] == key]
