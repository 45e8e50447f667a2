"""A snapshot of a run: its samples, per-step statistics and what the load read.

``Run`` is immutable and what every view draws from. It holds one row of numbers
per sample; texts stay in the (memory-mapped) segments and are taken for the rows
shown, as are the words of each response (``words``), and a sample's full record
(token lists, other fields) is read again from its source file by the run's reader
when it is shown.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from . import fields as F
from .access import RootError, open_allowed
from .metrics import SampleTokens, compute_sample_tokens
from .readers import ReadOptions, SourceChanged, canonical_record


@dataclass(frozen=True)
class LoadReport:
    """What a load read: counts, the rejected lines, and notes for the user."""

    files: tuple[str, ...]
    lines_ok: int
    lines_bad: int
    errors: tuple[tuple[str, int, str], ...]  # (file, line, reason), by file then line
    skipped: int = 0  # lines left out by max samples per step
    ignored_files: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()  # files whose last line has no newline yet
    notes: tuple[str, ...] = ()
    unreadable: tuple[tuple[str, str], ...] = ()  # (file, reason) for each file that could not be read
    reader: str = "jsonl"  # the format the run was read as (``readers``)
    tokenizer_problem: str | None = None  # the note on a tokenizer found next to the run that can't be read


@dataclass(frozen=True)
class Run:
    """A snapshot of a run.

    ``samples`` has one row per sample, ordered by step, file, line, with numbers
    only (scalars, extras as ``extra:NAME`` columns, aggregates, where the sample
    lies); ``with_text`` adds the texts and ``record`` reads one sample's whole
    record from its source, so memory holds neither for the whole run. ``steps``
    has one row per step (``tables.compute_step_stats``).
    """

    path: Path
    files: tuple[str, ...]
    samples: pd.DataFrame
    steps: pd.DataFrame
    report: LoadReport
    options: ReadOptions
    _segments: dict[tuple[int, int], pa.Table] = field(repr=False)
    _reader: object = field(repr=False, default=None)  # the reader module (``readers``)
    #: the run's cache folder and its manifest's version when this snapshot was taken (None without
    #: a cache): what is derived from the whole snapshot (the findings) can be kept there
    cache: tuple[Path, tuple] | None = field(repr=False, default=None)
    split: str | None = None  # the split read, for a format that has them (``readers.layout``)
    splits: tuple[str, ...] = ()  # every split the run has

    @property
    def pad_token(self) -> str | None:
        return self.options.pad_token

    @property
    def extras(self) -> list[str]:
        """The run's extra fields (columns ``extra:NAME`` of ``samples``), by name."""
        return [F.extra_name(c) for c in F.extra_columns(self.samples.columns)]

    @functools.cached_property
    def _table_codes(self) -> tuple[list[pa.Table], np.ndarray, int]:
        """(the distinct segment tables; for file * width + seg, the index of its table; width). Small files
        read in a batch share one table (``segments.SharedSlice``): their rows are taken from it at once."""
        tables, index = [], {}
        width = 1 + max((seg for _, seg in self._segments), default=0)
        files = 1 + max((file for file, _ in self._segments), default=0)
        codes = np.full(files * width, -1, dtype=np.int64)
        for (file, seg), table in self._segments.items():
            at = index.setdefault(id(table), len(tables))
            if at == len(tables):
                tables.append(table)
            codes[file * width + seg] = at
        return tables, codes, width

    def _by_table(self, frame: pd.DataFrame) -> list[tuple[pa.Table, np.ndarray]]:
        """(segment table, positions in ``frame`` of its rows, in frame order) for each table ``frame``'s
        rows live in, in the order each is first met."""
        if not len(frame):
            return []
        tables, codes, width = self._table_codes
        which = codes[frame[F.FILE].to_numpy().astype(np.int64) * width + frame["seg"].to_numpy().astype(np.int64)]
        order = np.argsort(which, kind="stable")
        distinct, starts = np.unique(which[order], return_index=True)
        groups = np.split(order, starts[1:])
        firsts = [group[0] for group in groups]
        return [(tables[distinct[i]], groups[i]) for i in np.argsort(firsts, kind="stable")]

    def step_samples(self, step: int) -> pd.DataFrame:
        """The samples of one step with their texts, in file and line order."""
        return self.with_text(self.samples[self.samples[F.STEP] == step])

    def with_text(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` (rows of ``samples``) with the text columns, read from the parsed segments,
        and ``source`` ("file:line")."""
        texts = {name: [None] * len(frame) for name in F.TEXT_FIELDS}
        all_rows = frame["row"].to_numpy()
        for table, places in self._by_table(frame):
            rows = all_rows[places]
            for name in F.TEXT_FIELDS:
                values = _take(table.column(name), rows)
                column = texts[name]
                for place, value in zip(places, values):
                    column[place] = value
        texts["source"] = [f"{self.files[f]}:{line}" for f, line in zip(frame[F.FILE], frame[F.LINE])]
        return frame.assign(**{name: pd.Series(values, index=frame.index, dtype=object)
                               for name, values in texts.items()})

    def words(self, frame: pd.DataFrame) -> list[list[str] | None]:
        """The words (``derive.SCHEMA``) of ``frame``'s rows (rows of ``samples``), in its order,
        taken from the memory-mapped segments; None for a sample with neither tokens nor a response.
        No log file is read."""
        out: list = [None] * len(frame)
        places = np.arange(len(frame))
        for table, at in self._by_table(frame):
            column = table.column("words")
            # decoded in Arrow first: a dictionary's entries become Python strings ten times slower
            for place, value in zip(places[at], _take(column, frame["row"].to_numpy()[at], pa.list_(pa.string()))):
                out[place] = value
        return out

    def word_ids(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The words of ``frame``'s rows (rows of ``samples``), in its order, as ids into one vocabulary:
        (``ids``: int32, shape (words,), the rows' words one row after another; ``lengths``: int64, shape
        (rows,), each row's word count, -1 for a sample with neither tokens nor a response;
        ``vocabulary``: each id's word). ``words`` gives the same words as strings. Each segment's
        dictionary is mapped to the vocabulary once; no word becomes a Python string."""
        import pyarrow.compute as pc

        vocabulary: dict[str, int] = {}
        lengths = np.full(len(frame), -1, dtype=np.int64)
        parts = []  # (places in frame, their lengths, their ids)
        rows = frame["row"].to_numpy()
        for table, at in self._by_table(frame):
            column = table.column("words")
            for picked, values in _take_chunks(column, rows[at]):
                places = at[picked]
                lengths[places] = pc.list_value_length(values).fill_null(-1).to_numpy()
                flat = values.flatten()  # the taken rows' words, a dictionary array
                strings = flat.dictionary.to_pylist()  # small: each distinct word of the chunk once
                remap = np.fromiter((vocabulary.setdefault(w, len(vocabulary)) for w in strings), np.int32,
                                    len(strings))
                parts.append((places, np.take(remap, flat.indices.to_numpy(zero_copy_only=False))))
        sizes = np.maximum(lengths, 0)
        starts = np.cumsum(sizes) - sizes
        ids = np.empty(int(sizes.sum()), dtype=np.int32)
        for places, part in parts:
            own = sizes[places]
            # each taken row's words go to its row's place in frame order
            ids[np.repeat(starts[places] - (np.cumsum(own) - own), own) + np.arange(len(part))] = part
        return ids, lengths, list(vocabulary)

    def word_counts(self) -> np.ndarray:
        """How many words each row of ``samples`` has, -1 for a sample with neither tokens nor a
        response; int64, shape (samples,). Reads only the segments' list offsets."""
        import pyarrow.compute as pc

        counts = np.full(len(self.samples), -1, dtype=np.int64)
        rows = self.samples["row"].to_numpy()
        for table, places in self._by_table(self.samples):
            column = table.column("words")
            lengths = pc.list_value_length(column).fill_null(-1).to_numpy()
            counts[places] = lengths[rows[places]]
        return counts

    def text_matches(self, field: str, pattern: str, pad_token: str | None = None) -> np.ndarray:
        """Whether each row of ``samples`` has text ``field`` (or, for ``messages``, any turn's content or
        tool-call arguments) matching the RE2 regular expression
        ``pattern`` (``(?i)`` for case-insensitive), with ``pad_token`` removed first; bool, shape
        (samples,). Runs pyarrow's RE2 over the memory-mapped text columns, segment by segment:
        no text becomes a Python string. Raises ``ValueError`` for a pattern RE2 refuses."""
        import pyarrow.compute as pc

        found = np.zeros(len(self.samples), dtype=bool)
        rows = self.samples["row"].to_numpy()
        for table, places in self._by_table(self.samples):
            if field == F.MESSAGES:  # any turn's content or tool-call arguments
                lists = table.column("turn_texts").combine_chunks()
                column, owner = pc.list_flatten(lists), pc.list_parent_indices(lists).to_numpy()
            else:
                column, owner = table.column(field), None
            if pad_token:
                column = pc.replace_substring(column, pad_token, "")
            try:
                hits = np.asarray(pc.match_substring_regex(column, pattern).fill_null(False), dtype=bool)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise ValueError(f"not a valid RE2 regular expression: {pattern!r} ({exc})") from exc
            if owner is not None:
                hits = np.bincount(owner[hits], minlength=table.num_rows) > 0
            found[places] = hits[rows[places]]
        return found

    def tool_calls(self, frame: pd.DataFrame) -> dict[int, dict[str, int]]:
        """For each step of ``frame`` (rows of ``samples``) whose samples have any tool call: tool name ->
        how many tool calls of its samples' assistant turns name it. Read from the segments."""
        import pyarrow.compute as pc

        out: dict[int, dict[str, int]] = {}
        rows = frame["row"].to_numpy()
        steps = frame[F.STEP].to_numpy()
        for table, at in self._by_table(frame):
            column = table.column("tool_names")
            for picked, values in _take_chunks(column, rows[at]):
                owner = pc.list_parent_indices(values).to_numpy()
                names = pc.list_flatten(values).to_pylist()
                for step, name in zip(steps[at][picked][owner].tolist(), names):
                    counts = out.setdefault(int(step), {})
                    counts[name] = counts.get(name, 0) + 1
        return out

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
                    with open_allowed(path) as fh:  # checked again: it may be a symlink out by now
                        fh.seek(offset)
                        out.append(fh.read(length))
                else:
                    with open_allowed(path) as fh:
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

                    with open_allowed(path) as fh:
                        for column in pq.read_schema(fh):
                            found.setdefault(column.name, _arrow_kind(column.type))
                    continue
                with open_allowed(path) as fh:
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
        field -> value, every other field -> value). ``SourceChanged`` when it moved."""
        row = self.samples.loc[label]
        name = self.files[int(row[F.FILE])]
        path = self.path / name
        line = int(row[F.LINE])
        try:
            with open_allowed(path) as fh:  # checked again, no symlink followed: it may point out by now
                obj = self._reader.record(fh, name, int(row["offset"]), int(row["length"]), line)
        except RootError as exc:
            raise SourceChanged(f"{name} can't be read any more ({exc}); refresh it.") from exc
        canonical, others = canonical_record(obj, self.options.fields, self._reader.ALIASES)
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
        from .tokenizer import load_tokenizer

        return compute_sample_tokens(self.record(label)[0], self.pad_token, self.options.eos_token,
                                     load_tokenizer(self.options.tokenizer))


def _take_chunks(column: pa.ChunkedArray, rows: np.ndarray):
    """``column[rows]`` chunk by chunk: yields (the places in ``rows`` taken, those rows of one chunk as an
    Arrow array). ``ChunkedArray.take`` joins the chunks first, which would read a whole memory-mapped
    column to show a few rows."""
    ends = np.cumsum([len(chunk) for chunk in column.chunks])
    chunk_of = np.searchsorted(ends, rows, side="right")
    for index in np.unique(chunk_of):
        picked = np.flatnonzero(chunk_of == index)
        start = ends[index] - len(column.chunks[index])
        yield picked, column.chunks[index].take(pa.array(rows[picked] - start))


def _take(column: pa.ChunkedArray, rows: np.ndarray, type_: pa.DataType | None = None) -> list:
    """``column[rows]`` as Python values (cast to ``type_`` first, when given), taken chunk by chunk."""
    out = [None] * len(rows)
    for picked, values in _take_chunks(column, rows):
        values = (values if type_ is None else values.cast(type_)).to_pylist()
        for place, value in zip(picked, values):
            out[place] = value
    return out


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
