"""The run as a notebook reads it: one row per sample, named by its address, with the sample's logged
fields and the metrics computed from it, and none of the bookkeeping ``Run._samples`` keeps for the page
(where a sample lies in its file and segment, the partial sums the per-step statistics pool).

``PublicTable`` is one of ``Run``'s parts; it reads ``_samples`` and ``files`` of the run.

- ``sample_id``: ``FILE:LINE``, the sample's file (its name in the run) and its 1-based line (row, for a
  table file), as findings' evidence, links and tags name a sample. It stays the same while the log
  grows, across refreshes and read settings, where ``_samples``' row labels are positions.
- ``to_pandas()``: the public frame, indexed by ``sample_id``; ``to_arrow()``: the same as an Arrow
  table with ``sample_id`` as its first column.
- ``label_of(sample_id)``: the row label of ``_samples`` (what ``record_parts`` and ``token_table`` take;
  they take a ``sample_id`` too).
"""

from __future__ import annotations

from functools import cached_property

import pandas as pd
import pyarrow as pa

from ..base import fields as F

#: the columns of ``_samples`` a person reads, in this order (those a run has), then its extra fields
#: (``extra:NAME``): the logged scalars, and per-sample metrics (see docs/numbers.md)
PUBLIC_COLUMNS = (
    F.STEP, F.REWARD, *F.SCALAR_FIELDS, "reward_gap",
    "response_len", "n_tokens", "response_chars", "truncated", "repeat_4gram",
    "log_ratio_mean", "kl_mean", "k2_mean", "mismatch_kl", "entropy_mean", "lengths_differ",
    "images",
)
SAMPLE_ID = "sample_id"
FAULTS = "faults"  # to_pandas' column of each sample's fault kinds


def _fault_lists(frame: pd.DataFrame) -> list:
    """Each row's fault kinds (``derive.faults.kinds_of`` its ``fault_kinds``; None without turns)."""
    from ..derive.faults import kinds_of

    if "fault_kinds" not in frame:
        return [None] * len(frame)
    has = frame["has_messages"].fillna(False).astype(bool).tolist()
    bits = frame["fault_kinds"].fillna(0).astype("int64").tolist()
    return [kinds_of(b) if h else None for b, h in zip(bits, has)]


class PublicTable:
    """The public frame of a ``Run`` and the sample ids that index it."""

    def __init__(self, run):
        self.run = run  # the Run whose part this is

    def public_columns(self) -> list[str]:
        """The columns of ``_samples`` that ``to_pandas`` keeps."""
        present = set(self.run._samples.columns)
        return [c for c in PUBLIC_COLUMNS if c in present] + list(F.extra_columns(self.run._samples.columns))

    def sample_ids(self, frame: pd.DataFrame | None = None) -> pd.Index:
        """``FILE:LINE`` of each row of ``frame`` (rows of ``_samples``; default all of them)."""
        frame = self.run._samples if frame is None else frame
        names = pd.Series(self.run.files, dtype=object)
        files = names.reindex(frame[F.FILE].to_numpy()).to_numpy() if len(self.run.files) else frame[F.FILE]
        return pd.Index([f"{name}:{line}" for name, line in zip(files, frame[F.LINE].tolist())], name=SAMPLE_ID)

    @cached_property
    def _labels_by_id(self) -> dict[str, object]:
        return dict(zip(self.sample_ids(), self.run._samples.index))

    def label_of(self, key):
        """The row label in ``_samples`` of ``key``: a ``sample_id`` (``FILE:LINE``), or a label already.
        ``KeyError`` naming it when the run has no such sample."""
        if not isinstance(key, str):
            return key
        try:
            return self._labels_by_id[key]
        except KeyError:
            raise KeyError(f"no sample {key!r} in this run (a sample id is FILE:LINE, e.g. "
                           f"{next(iter(self._labels_by_id), 'rollout_data_rank0.jsonl:1')!r})") from None

    def to_pandas(self, text: bool = False) -> pd.DataFrame:
        """One row per sample, indexed by ``sample_id``: the public columns (``public_columns``), then, in a
        run with turns, ``faults``: the kinds of the sample's turn faults (``derive.faults.KINDS``; [] for
        none, None for a sample without turns); with ``text``, also the prompt, response, reference response and ground truth
        (read from the segments), then one column per text field (``text_fields``: a judge's rationale, named as
        the source names it), each read again from the source byte for byte (None where a sample lacks it).
        ``sample_faults`` names each fault's turn."""
        frame = self.run._samples
        if text:
            frame = self.run.with_text(frame)
        columns = self.public_columns() + ([c for c in F.TEXT_FIELDS if c in frame] if text else [])
        out = frame[columns].copy()
        if "has_messages" in frame and frame["has_messages"].any():
            out.insert(len(self.public_columns()), FAULTS, _fault_lists(frame))
        if text:
            names = [n for n in self.run.text_fields() if n not in out]  # one named like a column of ours: that stays
            for name, values in (self.run.text_columns(frame.index, names) if names else {}).items():
                out[name] = pd.Series(values, index=out.index, dtype=object)
        out.index = self.sample_ids(frame)
        return out

    def sample_faults(self, key) -> list[dict]:
        """One sample's turn faults (``key``: a ``sample_id`` or a row label) as ``{"kind", "message_index",
        "assistant_turn"}``, found in its turns read again from its source (``derive.faults``)."""
        from .source_records import compute_faults

        label = self.label_of(key)
        return compute_faults(self.run, self.run._samples.loc[[label]])[0]

    def to_arrow(self, text: bool = False) -> pa.Table:
        """``to_pandas(text)`` as an Arrow table, ``sample_id`` its first column."""
        return pa.Table.from_pandas(self.to_pandas(text).reset_index(), preserve_index=False)
