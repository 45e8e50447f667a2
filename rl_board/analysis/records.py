"""What a run reads again from its source files, through its location: a sample's whole record, its
token lists, its line byte for byte, and the keys the first lines hold (what a field mapping can
name). ``SourceRecords`` is one of ``Run``'s parts; it reads ``samples``, ``files``, ``path``,
``options``, ``_reader`` and ``_open`` of the run."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from ..base import fields as F
from ..base.access import RootError
from ..derive.metrics import SampleTokens, compute_sample_tokens
from ..readers import SourceChanged, canonical_record


class SourceRecords:
    """The queries of a ``Run`` answered by reading its source files again."""

    def source_lines(self, labels) -> bytes:
        """The samples' lines as they are in the log files, one per line, byte for byte (a table
        file's row as one JSON line); a sample that can no longer be read is left out."""
        out = []
        for label in labels:
            row = self.samples.loc[label]
            name = self.files[int(row[F.FILE])]
            path = self.path / name
            offset, length = int(row["offset"]), int(row["length"])
            try:
                if self._reader.APPENDABLE:
                    with self._open(path) as fh:  # checked again: it may be a symlink out by now
                        fh.seek(offset)
                        out.append(fh.read(length))
                else:
                    with self._open(path) as fh:
                        got = self._reader.record(fh, name, offset, length, int(row[F.LINE]))
                    out.append(json.dumps(got, ensure_ascii=False, default=str).encode())
            except (OSError, SourceChanged, RootError):
                continue
        return b"".join(line + b"\n" for line in out)

    def source_keys(self, files: int = 3, lines: int = 20) -> list[tuple[str, str]]:
        """The keys the first ``lines`` lines (or a table's columns) of the run's first ``files`` files
        hold, each with the kind of its first value ("number", "boolean", "text", "list", "object",
        "null"), in the order first seen; an object's own keys follow it as ``key.sub``. What a field
        mapping can name, for a run whose lines were all rejected. Files that can't be read are skipped."""
        found: dict[str, str] = {}

        def add(key: str, value, nested: bool = True) -> None:
            found.setdefault(key, _kind(value))
            if nested and isinstance(value, dict):
                for sub, inner in value.items():
                    add(f"{key}.{sub}", inner, nested=False)

        for name in self.files[:files]:
            path = self.path / name
            try:
                if path.suffix == ".parquet":
                    import pyarrow.parquet as pq

                    with self._open(path) as fh:
                        for column in pq.read_schema(fh):
                            found.setdefault(column.name, _arrow_kind(column.type))
                    continue
                with self._open(path) as fh:
                    for _, raw in zip(range(lines), fh):
                        try:
                            record = json.loads(raw)
                        except ValueError:
                            continue
                        for key, value in record.items() if isinstance(record, dict) else ():
                            add(key, value)
            except (OSError, RootError, ValueError):
                continue
        return list(found.items())

    def record(self, label) -> tuple[dict, dict]:
        """One sample's record (``label`` in ``samples``), read again from its source: (canonical
        field -> value, every other field -> value). ``SourceChanged`` when it moved. ``label`` may be
        a ``sample_id`` (``FILE:LINE``)."""
        label = self.label_of(label)
        row = self.samples.loc[label]
        name = self.files[int(row[F.FILE])]
        path = self.path / name
        line = int(row[F.LINE])
        try:
            with self._open(path) as fh:  # checked again, no symlink followed: it may point out by now
                obj = self._reader.record(fh, name, int(row["offset"]), int(row["length"]), line)
        except RootError as exc:
            raise SourceChanged(f"{name} can't be read any more ({exc}); refresh it.") from exc
        canonical, others = canonical_record(obj, self.options.fields, self._reader.ALIASES)
        if F.TOKEN_IDS in canonical and F.MESSAGES not in canonical and self.options.tokenizer is not None:
            from ..derive.samples import compute_turns_from_ids
            from ..derive.tokenizer import load_tokenizer

            turns = compute_turns_from_ids(canonical, load_tokenizer(self.options.tokenizer))
            if turns is not None:
                canonical[F.MESSAGES] = turns
        step = canonical.get(F.STEP)
        if not isinstance(step, (int, float)) or step != row[F.STEP]:
            raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
        return canonical, others

    def records(self, labels) -> list[tuple[dict, dict] | None]:
        """``record`` of each label, None for a sample that can no longer be read."""
        out = []
        for label in labels:
            try:
                out.append(self.record(label))
            except (OSError, SourceChanged, RootError):
                out.append(None)
        return out

    def sample_tokens(self, label) -> SampleTokens:
        """One sample's token lists (``label`` in ``samples``), read again from its source; token ids
        decoded with the run's tokenizer."""
        from ..derive.tokenizer import load_tokenizer

        return compute_sample_tokens(self.record(label)[0], self.pad_token, self.options.eos_token,
                                     load_tokenizer(self.options.tokenizer))

    def token_table(self, label) -> pd.DataFrame:
        """One sample's per-token lists (``sample_tokens``), one row per position: ``token``, each
        per-token number the sample has (``logprobs``, ``ref_logprobs``, ``values``, ``token_rewards``,
        ``rollout_logprobs``, ``entropy`` and the logged ones, float64, NaN where absent) and ``counted``
        (False after the EOS, from the pad token on, or where a loss mask is false)."""
        tokens = self.sample_tokens(label)
        columns = {"token": tokens.tokens}
        for name in ("logprobs", "ref_logprobs", "values", "token_rewards", "rollout_logprobs", "entropy"):
            values = getattr(tokens, name)
            if values is not None and not np.isnan(values).all():
                columns[name] = np.asarray(values, dtype=np.float64)
        for name, values in tokens.logged.items():
            columns[name] = np.asarray(values, dtype=np.float64)
        columns["counted"] = ~np.asarray(tokens.is_pad, dtype=bool)
        return pd.DataFrame(columns)


def _kind(value) -> str:
    """How a JSON value reads to a person: number, boolean, text, list, object or null."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "list"
    return "object" if isinstance(value, dict) else "null"


def _arrow_kind(kind: pa.DataType) -> str:
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return "number"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return "list"
    return "object" if pa.types.is_struct(kind) else str(kind)
