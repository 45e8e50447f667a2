"""What a run answers from its parsed segments alone, no log file read: each sample's words (as
strings or as ids into one vocabulary), word counts, regular-expression matches over a text field, and
tool-call counts. ``SegmentQueries`` is one of ``Run``'s parts; it reads ``_samples`` (the rows'
file, segment and row) and ``_segments`` of the run. The words of a segment's responses without tokens
are found on first use and kept beside it in the run's cache (``store.words``)."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pyarrow as pa

from ..base import fields as F
from .regex import RegexScan, check_regex

PROBE_BYTES = 256 << 10  # bytes of text the first chunk of a regular expression's search holds
CHUNK_SECONDS = 0.25  # what each later chunk should take, from the rate of the ones before
MAX_CHUNK_BYTES = 64 << 20  # bytes of text a chunk holds at most


class SegmentQueries:
    """The queries of a ``Run`` answered from its memory-mapped segments."""

    def __init__(self, run):
        self.run = run  # the Run whose part this is
        self._words_of: dict[int, pa.ChunkedArray] = {}  # id of a segment table -> its words (``_words``)

    @functools.cached_property
    def _table_codes(self) -> tuple[list[pa.Table], np.ndarray, int]:
        """(the distinct segment tables; for file * width + seg, the index of its table; width). Small files
        read in a batch share one table (``segments.SharedSlice``): their rows are taken from it at once."""
        tables, index = [], {}
        width = 1 + max((seg for _, seg in self.run._segments), default=0)
        files = 1 + max((file for file, _ in self.run._segments), default=0)
        codes = np.full(files * width, -1, dtype=np.int64)
        for (file, seg), table in self.run._segments.items():
            at = index.setdefault(id(table), len(tables))
            if at == len(tables):
                tables.append(table)
            codes[file * width + seg] = at
        return tables, codes, width

    @functools.cached_property
    def _kept_words(self):
        from ..store.words import KeptWords

        names = {}  # id of a segment table -> its file's name in the cache folder
        for key, table in self.run._segments.items():
            names.setdefault(id(table), self.run.segment_names.get(key))
        return KeptWords(self.run.cache[0] if self.run.cache else None), names

    def _words(self, table: pa.Table) -> pa.ChunkedArray:
        """The words (``derive.samples.compute_words``) of a segment table's rows, found once a run (and
        kept beside the segment in the cache: ``store.words``)."""
        words = self._words_of.get(id(table))
        if words is None:
            kept, names = self._kept_words
            words = self._words_of[id(table)] = kept.column(table, names.get(id(table)), self.run.pad_token)
        return words

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

    def words(self, frame: pd.DataFrame) -> list[list[str] | None]:
        """The words (``derive.samples.compute_words``) of ``frame``'s rows (rows of ``_samples``), in its order,
        taken from the memory-mapped segments; None for a sample with neither tokens nor a response.
        No log file is read."""
        out: list = [None] * len(frame)
        places = np.arange(len(frame))
        for table, at in self._by_table(frame):
            column = self._words(table)
            # decoded in Arrow first: a dictionary's entries become Python strings ten times slower
            for place, value in zip(places[at], take_rows(column, frame["row"].to_numpy()[at], pa.list_(pa.string()))):
                out[place] = value
        return out

    def word_chunks(self, frame: pd.DataFrame):
        """The words of ``frame``'s rows (rows of ``_samples``) a stored chunk at a time, as indices into the
        chunk's own dictionary: yields (``places``: int64, the rows' places in ``frame``; ``lengths``: int64,
        each row's word count, -1 for a sample with neither tokens nor a response; ``indices``: int32, the
        rows' words one row after another; ``dictionary``: the chunk's words, a ``pa.StringArray``). Memory
        is that of one chunk; no word becomes a Python string."""
        import pyarrow.compute as pc

        rows = frame["row"].to_numpy()
        for table, at in self._by_table(frame):
            for picked, values in _take_chunks(self._words(table), rows[at]):
                flat = values.flatten()  # the taken rows' words, a dictionary array
                yield (at[picked], pc.list_value_length(values).fill_null(-1).to_numpy().astype(np.int64),
                       flat.indices.to_numpy(zero_copy_only=False), flat.dictionary)

    def word_ids(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """The words of ``frame``'s rows (rows of ``_samples``), in its order, as ids into one vocabulary:
        (``ids``: int32, shape (words,), the rows' words one row after another; ``lengths``: int64, shape
        (rows,), each row's word count, -1 for a sample with neither tokens nor a response;
        ``vocabulary``: each id's word). ``words`` gives the same words as strings. Each segment's
        dictionary is mapped to the vocabulary once; no word becomes a Python string."""
        vocabulary: dict[str, int] = {}
        lengths = np.full(len(frame), -1, dtype=np.int64)
        parts = []  # (places in frame, their ids)
        for places, counts, indices, dictionary in self.word_chunks(frame):
            lengths[places] = counts
            strings = dictionary.to_pylist()  # small: each distinct word of the chunk once
            remap = np.fromiter((vocabulary.setdefault(w, len(vocabulary)) for w in strings), np.int32,
                                len(strings))
            parts.append((places, np.take(remap, indices)))
        sizes = np.maximum(lengths, 0)
        starts = np.cumsum(sizes) - sizes
        ids = np.empty(int(sizes.sum()), dtype=np.int32)
        for places, part in parts:
            own = sizes[places]
            # each taken row's words go to its row's place in frame order
            ids[np.repeat(starts[places] - (np.cumsum(own) - own), own) + np.arange(len(part))] = part
        return ids, lengths, list(vocabulary)

    def word_counts(self) -> np.ndarray:
        """How many words each row of ``_samples`` has, -1 for a sample with neither tokens nor a
        response; int64, shape (samples,). Reads only the words' list offsets (the words found first where
        they are not kept yet: ``_words``)."""
        import pyarrow.compute as pc

        counts = np.full(len(self.run._samples), -1, dtype=np.int64)
        rows = self.run._samples["row"].to_numpy()
        for table, places in self._by_table(self.run._samples):
            column = self._words(table)
            lengths = pc.list_value_length(column).fill_null(-1).to_numpy()
            counts[places] = lengths[rows[places]]
        return counts

    def tool_call_lists(self, frame: pd.DataFrame) -> list[list[tuple[str, str]]]:
        """Each row's tool calls of its assistant turns as (name, arguments), in ``frame``'s order (rows of
        ``_samples``; [] for a sample without any). Read from the segments: a call's arguments are the
        trailing entries of ``turn_texts``, one per name of ``tool_names`` (tool calls come in assistant
        turns)."""
        out: list = [[] for _ in range(len(frame))]
        rows = frame["row"].to_numpy()
        for table, at in self._by_table(frame):
            names = take_rows(table.column("tool_names"), rows[at])
            if not any(names):
                continue
            texts = take_rows(table.column("turn_texts"), rows[at])
            for place, called, said in zip(at.tolist(), names, texts):
                if called:
                    out[place] = list(zip(called, said[len(said) - len(called):]))
        return out

    def text_matches(self, field: str, pattern: str, pad_token: str | None = None) -> np.ndarray:
        """Whether each row of ``_samples`` has text ``field`` matching the RE2 ``pattern``: ``text_search``'s
        ``found`` (so, past the time budget, only the rows searched can be set); bool, shape (samples,)."""
        return self.text_search(field, pattern, pad_token).found

    def text_search(self, field: str, pattern: str, pad_token: str | None = None,
                    seconds: float | None = None) -> RegexScan:
        """Which rows of ``_samples`` have text ``field`` (or, for ``messages``, any turn's content or
        tool-call arguments) matching the RE2 regular expression ``pattern`` (``(?i)`` for case-insensitive),
        with ``pad_token`` removed first. Runs pyarrow's RE2 over the memory-mapped text columns a chunk of
        samples at a time, in the samples' order (step, file, line): no text becomes a Python string. Each
        chunk is sized from the time the ones before took (``CHUNK_SECONDS``); once ``seconds`` (default
        ``search_seconds()``) are spent, or the next sample alone would pass them, it stops (the first
        chunk is always searched) and the ``RegexScan`` says how far it got. Raises ``ValueError`` for a
        pattern RE2 refuses, ``RegexTooLarge`` for one past ``max_regex_size()``, before any text is read."""
        import time

        import pyarrow.compute as pc

        from ..base.defaults import search_seconds

        check_regex(pattern)
        budget = search_seconds() if seconds is None else seconds
        samples = self.run._samples
        found = np.zeros(len(samples), dtype=bool)
        ends = np.cumsum(self._text_sizes(field))  # bytes of text up to and with each sample
        start, at, probed = time.monotonic(), 0, 0
        if len(samples) and ends[0] > PROBE_BYTES:  # a first sample too large to search before its rate is known
            for _, column, _ in self._chunk_texts(samples.iloc[:1], field, pad_token):
                cut = pc.utf8_slice_codeunits(column, 0, PROBE_BYTES // (1 if len(column) <= 1 else 64))
                _match(cut.slice(0, 64), pattern)
            probed = PROBE_BYTES
        while at < len(samples):
            before = int(ends[at - 1]) if at else 0
            target = PROBE_BYTES
            if at or probed:
                spent = time.monotonic() - start
                rate, left = spent / max(before + probed, 1), budget - spent  # seconds a byte took so far
                if left <= 0 or (int(ends[at]) - before) * rate > left:  # the next sample alone would pass it
                    break
                target = min(CHUNK_SECONDS / rate, left / rate, MAX_CHUNK_BYTES) if rate > 0 else MAX_CHUNK_BYTES
            # the fewest samples, at least one, whose texts hold ``target`` bytes
            stop = min(max(at + 1, int(np.searchsorted(ends, before + max(target, 1), side="left")) + 1),
                       len(samples))
            for places, column, owner in self._chunk_texts(samples.iloc[at:stop], field, pad_token):
                hits = _match(column, pattern)
                if owner is not None:
                    hits = np.bincount(owner[hits], minlength=len(places)) > 0
                found[at + places] = hits
            at = stop
        return RegexScan(found, at, samples[F.STEP].to_numpy().astype(np.int64), budget)

    def _chunk_texts(self, chunk: pd.DataFrame, field: str, pad_token: str | None):
        """The texts ``field`` of ``chunk``'s rows (rows of ``_samples``), a segment table at a time: yields
        (``places``: int64, the rows' places in ``chunk``; their texts, an Arrow string array; ``owner``:
        int64, for ``messages`` the place in ``places`` each turn's text belongs to, else None), pads removed."""
        import pyarrow.compute as pc

        from ..derive.text_words import without_pads

        for table, places in self._by_table(chunk):
            rows = chunk["row"].to_numpy()[places]
            if field == F.MESSAGES:  # any turn's content or tool-call arguments
                lists = _rows_of(table.column("turn_texts"), rows)
                if isinstance(lists, pa.ChunkedArray):
                    lists = lists.combine_chunks()
                column, owner = pc.list_flatten(lists), pc.list_parent_indices(lists).to_numpy()
            else:
                column, owner = _rows_of(table.column(field), rows), None
            yield places, without_pads(column, pad_token), owner

    def _text_sizes(self, field: str) -> np.ndarray:
        """Bytes of text ``field`` (for ``messages``: of every turn's text) of each row of ``_samples``; int64,
        shape (samples,). Read from the columns' offsets: no text is touched."""
        import pyarrow.compute as pc

        sizes = np.zeros(len(self.run._samples), dtype=np.int64)
        rows = self.run._samples["row"].to_numpy()
        for table, places in self._by_table(self.run._samples):
            if field == F.MESSAGES:
                lists = table.column("turn_texts").combine_chunks()
                lengths = pc.binary_length(pc.list_flatten(lists)).fill_null(0).to_numpy(zero_copy_only=False)
                owner = pc.list_parent_indices(lists).to_numpy()
                per_row = np.bincount(owner, weights=lengths, minlength=table.num_rows).astype(np.int64)
            else:
                per_row = np.concatenate([pc.binary_length(chunk).fill_null(0).to_numpy(zero_copy_only=False)
                                          for chunk in table.column(field).chunks] or [np.zeros(0)])
            sizes[places] = per_row[rows[places]]
        return sizes

    def tool_calls(self, frame: pd.DataFrame) -> dict[int, dict[str, int]]:
        """For each step of ``frame`` (rows of ``_samples``) whose samples have any tool call: tool name ->
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


def _match(column, pattern: str) -> np.ndarray:
    """Whether each text of ``column`` matches the RE2 ``pattern`` (null: no); bool. ``ValueError`` for a
    pattern RE2 refuses."""
    import pyarrow.compute as pc

    try:
        return np.asarray(pc.match_substring_regex(column, pattern).fill_null(False), dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"not a valid RE2 regular expression: {pattern!r} ({exc})") from exc


def _rows_of(column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array | pa.ChunkedArray:
    """``column[rows]``: a slice (no copy) where ``rows`` are consecutive, else taken chunk by chunk."""
    if len(rows) == 1 or (len(rows) and (np.diff(rows) == 1).all()):
        return column.slice(int(rows[0]), len(rows))
    pieces = list(_take_chunks(column, rows))
    picked = np.concatenate([p for p, _ in pieces])
    values = pa.chunked_array([v for _, v in pieces], type=column.type).combine_chunks()
    if (np.diff(picked) == 1).all():
        return values
    return values.take(pa.array(np.argsort(picked, kind="stable")))


def take_rows(column: pa.ChunkedArray, rows: np.ndarray, type_: pa.DataType | None = None) -> list:
    """``column[rows]`` as Python values (cast to ``type_`` first, when given), taken chunk by chunk."""
    out = [None] * len(rows)
    for picked, values in _take_chunks(column, rows):
        values = (values if type_ is None else values.cast(type_)).to_pylist()
        for place, value in zip(picked, values):
            out[place] = value
    return out
