"""What a run reads again from its source files, through its location: a sample's whole record, its
token lists, its line byte for byte, and the keys the first lines hold (what a field mapping can
name). ``SourceRecords`` is one of ``Run``'s parts; it reads ``_samples``, ``files``, ``path``,
``options``, ``cache``, ``_reader`` and ``_open`` of the run (``self.run``). ``compute_faults``: the
turn faults of samples, found again in their turns read from the source (``search`` and the
notebook's ``sample_faults`` use it).

Several samples are read a file at a time, in offset order, through one open file (``_read_each``):
a compressed log is then decompressed at most once per batch, never from its start for each sample.
A compressed log of a run with a cache folder is read through its uncompressed copy there
(``store.seekable``), so a single sample costs what it costs in the plain file (issue 38)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa

from ..base import fields as F
from ..base.access import RootError
from ..base.location import open_location
from ..derive.faults import DROPPED_AT, KINDS, find_faults, image_fault
from ..derive.metrics import SampleTokens, compute_sample_tokens
from ..readers import SourceChanged, canonical_record
from ..readers.turns import keep_image_data

TEXT_FIELD_FILES, TEXT_FIELD_LINES = 20, 20  # files, and samples of each, that name a run's text fields (``text_fields``)


class SourceRecords:
    """The queries of a ``Run`` answered by reading its source files again."""

    def __init__(self, run):
        self.run = run  # the Run whose part this is

    def _open_seekable(self, name: str):
        """The run file ``name`` opened as its uncompressed bytes: a compressed file through its copy in
        the run's cache folder (``store.seekable``) when there is one or one can be made, else as a stream."""
        from ..base.compression import codec_of, open_stream
        from ..store.seekable import seekable_copy

        path = self.run.path / name
        if codec_of(name) is None or self.run.cache is None:
            return self.run._open(path)

        location = self.run.location if self.run.location is not None else open_location(self.run.path)
        raw = location.open(path)  # checked again: it may be a symlink out by now
        try:
            copy = seekable_copy(self.run.cache[0], name, raw)
            if copy is not None:
                raw.close()
                return open(copy, "rb")
            raw.seek(0)
            return open_stream(raw, path)
        except BaseException:
            raw.close()
            raise

    def _read_each(self, labels, read, stop=None) -> list:
        """``read(fh, name, row)`` for each label (rows of ``_samples``), in ``labels``' order, each the
        value it returned or the exception it (or opening its file) raised. The samples are read a file at
        a time in offset order through one open file: one pass over a compressed file per call. Once
        ``stop`` (a ``threading.Event``) is set, the samples not read yet get ``InterruptedError``."""
        labels = list(labels)
        rows = [self.run._samples.loc[label] for label in labels]
        out: list = [InterruptedError("stopped before it was read")] * len(labels)  # each read replaces its own
        by_file: dict[int, list[int]] = {}
        for place, row in enumerate(rows):
            by_file.setdefault(int(row[F.FILE]), []).append(place)
        for file, places in by_file.items():
            if stop is not None and stop.is_set():
                break
            name = self.run.files[file]
            places.sort(key=lambda place: int(rows[place]["offset"]))
            try:
                fh = self._open_seekable(name)
            except Exception as exc:  # noqa: BLE001 (each sample of the file gets it, as its own read would)
                for place in places:
                    out[place] = exc
                continue
            with fh:
                for place in places:
                    if stop is not None and stop.is_set():
                        break
                    try:
                        out[place] = read(fh, name, rows[place])
                    except Exception as exc:  # noqa: BLE001 (handed to the caller, which raises or skips it)
                        out[place] = exc
        return out

    def source_lines(self, labels) -> bytes:
        """The samples' lines as they are in the log files, one per line, byte for byte (a table
        file's row as one JSON line); a sample that can no longer be read is left out."""
        appendable = self.run._reader.APPENDABLE

        def read(fh, name, row) -> bytes:
            offset, length = int(row["offset"]), int(row["length"])
            if appendable:
                fh.seek(offset)
                return fh.read(length)
            got = self.run._reader.record(fh, name, offset, length, int(row[F.LINE]))
            return json.dumps(got, ensure_ascii=False, default=str).encode()

        out = []
        for got in self._read_each(labels, read):
            if isinstance(got, (OSError, SourceChanged, RootError)):
                continue
            if isinstance(got, Exception):
                raise got
            out.append(got)
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

        for name in self.run.files[:files]:
            path = self.run.path / name
            try:
                if path.suffix == ".parquet":
                    import pyarrow.parquet as pq

                    with self.run._open(path) as fh:
                        for column in pq.read_schema(fh):
                            found.setdefault(column.name, _arrow_kind(column.type))
                    continue
                with self.run._open(path) as fh:
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

    def _raw_record(self, fh, name: str, row) -> dict:
        with keep_image_data():  # its images' bytes can be found again (``images``)
            return self.run._reader.record(fh, name, int(row["offset"]), int(row["length"]), int(row[F.LINE]))

    def _canonical(self, label, got) -> tuple[dict, dict]:
        """What ``_read_each`` read for ``label`` as (canonical field -> value, every other field -> value);
        raises what the read raised (``SourceChanged`` for a file that moved out) or ``SourceChanged``."""
        row = self.run._samples.loc[label]
        name = self.run.files[int(row[F.FILE])]
        line = int(row[F.LINE])
        if isinstance(got, RootError):
            raise SourceChanged(f"{name} can't be read any more ({got}); refresh it.") from got
        if isinstance(got, BaseException):
            raise got
        with keep_image_data():
            canonical, others = canonical_record(got, self.run.options.fields, self.run._reader.ALIASES)
        if F.TOKEN_IDS in canonical and F.MESSAGES not in canonical and self.run.options.tokenizer is not None:
            from ..derive.samples import compute_turns_from_ids
            from ..derive.tokenizer import load_tokenizer

            turns = compute_turns_from_ids(canonical, load_tokenizer(self.run.options.tokenizer))
            if turns is not None:
                canonical[F.MESSAGES] = turns
        step = canonical.get(F.STEP)
        if not isinstance(step, (int, float)) or step != row[F.STEP]:
            raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
        return canonical, others

    def record(self, sample_id) -> dict:
        """One sample's whole record (``sample_id``: ``FILE:LINE``), read again from its source, as one dict:
        its fields under the board's names (``response``, ``reward``, ``messages`` as turns, those a field
        mapping reads from your keys), then every other key of the record as written. A key named like a
        board field is the board's (with ``fields={"reward": "my_score"}``, ``reward`` is ``my_score``'s value,
        as everywhere the run is read). ``KeyError`` for a sample the run doesn't have, ``SourceChanged`` when
        the file changed since it was read."""
        canonical, others = self.record_parts(sample_id)
        return {**canonical, **others}  # no other key is a board field's name (``KeyResolver`` takes them)

    def record_parts(self, label) -> tuple[dict, dict]:
        """One sample's record (``label`` in ``_samples``, or a ``sample_id``), read again from its source, in
        two parts: (canonical field -> value, every other field -> value). ``SourceChanged`` when it moved."""
        label = self.run.label_of(label)
        return self._canonical(label, self._read_each([label], self._raw_record)[0])

    def records(self, labels) -> list[tuple[dict, dict] | None]:
        """``record_parts`` of each label, None for a sample that can no longer be read; read a file at a
        time in offset order (``_read_each``)."""
        labels = list(labels)
        out = []
        for label, got in zip(labels, self._read_each(labels, self._raw_record)):
            try:
                out.append(self._canonical(label, got))
            except (OSError, ValueError, SourceChanged, RootError):  # a line that no longer parses changed too
                out.append(None)
        return out

    def text_fields(self, files: int = TEXT_FIELD_FILES, lines: int = TEXT_FIELD_LINES) -> list[str]:
        """The run's text fields: the top-level string fields no reader maps to a canonical field (a judge's
        ``judge_rationale``, a ``critique``), as the first ``lines`` samples of each of the first ``files`` files
        hold them, in the order met. Their values are not kept at the cold read; ``texts`` reads them again."""
        known = self.__dict__.setdefault("_text_fields", {})  # read once per run object and bounds
        if (files, lines) not in known:
            samples = self.run._samples
            first_files = samples[F.FILE].drop_duplicates().head(files)
            firsts = samples[samples[F.FILE].isin(first_files)].groupby(F.FILE, sort=False).head(lines)
            found: dict[str, None] = {}
            for got in self.records(firsts.index):
                for key, value in (got[1] if got is not None else {}).items():
                    if isinstance(value, str):
                        found.setdefault(key, None)
            known[files, lines] = list(found)
        return list(known[files, lines])

    def texts(self, labels, name: str, stop=None) -> list[str | None]:
        """The text field ``name`` (``text_fields``) of each sample (``labels``: sample ids, ``FILE:LINE``, or
        labels of ``_samples``), read again from the source byte for byte; None where the sample has no such
        string field, can no longer be read, or was not read before ``stop`` (a ``threading.Event``) was set.
        Read a file at a time in offset order (``text_columns``). ``KeyError`` for an id the run doesn't have."""
        labels = [self.run.label_of(label) for label in labels]
        return self.text_columns(labels, [name], stop)[name]

    def text_columns(self, labels, names, stop=None) -> dict[str, list]:
        """``texts`` of each of ``names``, each record read once: name -> one value per label. Only the
        records are read (a JSON line is parsed, not split into turns nor mapped), a file at a time in offset
        order, the samples' places taken from ``samples`` at once (not row by row, as ``_read_each`` does)."""
        from ..readers import jsonl, verl

        out: dict[str, list] = {name: [None] * len(labels) for name in names}
        if not len(labels) or not names:
            return out
        where = self.run._samples.loc[list(labels), [F.FILE, "offset", "length", F.LINE]]
        files, offsets, lengths, lines = (where[c].to_numpy(np.int64) for c in (F.FILE, "offset", "length", F.LINE))
        read = jsonl.record if self.run._reader.record in (jsonl.record, verl.record) else self.run._reader.record
        order = np.lexsort((offsets, files))  # a file at a time, in offset order: one pass over each file
        for file in np.unique(files):
            if stop is not None and stop.is_set():
                break
            name = self.run.files[int(file)]
            try:
                fh = self._open_seekable(name)
            except (OSError, RootError, ValueError):  # each of its samples reads as None
                continue
            with fh:
                for place in order[files[order] == file]:
                    if stop is not None and stop.is_set():
                        break
                    try:
                        got = read(fh, name, int(offsets[place]), int(lengths[place]), int(lines[place]))
                    except (OSError, ValueError, SourceChanged, RootError):
                        continue
                    if isinstance(got, dict):
                        for key, column in out.items():
                            value = got.get(key)
                            column[place] = value if isinstance(value, str) else None
        return out

    def images(self, label) -> list[dict]:
        """One sample's images (``label`` in ``samples``, or a ``sample_id``), read again from its source,
        each as ``analysis.images.compute_sample_images`` gives it: ``data`` (bytes or None), ``mime``,
        ``width``, ``height``, ``size``, ``message_index``, ``at``, ``url`` and ``note``. An image file the
        rollout names is read only inside the run's folder and the allowed roots; a URL is never fetched."""
        return self.images_of(self.record_parts(label)[0])

    def images_of(self, canonical: dict) -> list[dict]:
        """``images`` of a sample whose canonical record (``record_parts(label)[0]``) is read already."""
        from .images import compute_sample_images

        return compute_sample_images(canonical.get(F.MESSAGES), self._image_file)

    def _image_file(self, text: str, max_bytes: int) -> bytes | str:
        """The bytes of an image file a rollout names (relative to the run's folder), or why not: outside
        the run's folder or the allowed roots, unreadable, or more than ``max_bytes``."""
        from ..base import images as I
        from ..base.remote import RemotePath

        if isinstance(self.run.path, RemotePath) or "\x00" in text:
            return "an image path of a run at a URL is not read"
        location = self.run.location if self.run.location is not None else open_location(self.run.path)
        path = self.run.path / text  # an absolute path stays itself
        try:
            inside = path.resolve().is_relative_to(self.run.path.resolve())
        except (OSError, RuntimeError, ValueError):
            inside = False
        if not inside:
            return f"{text} is outside the run's folder: not read"
        try:
            with location.open(path) as fh:
                data = fh.read(max_bytes + 1)
        except (OSError, RootError) as error:
            return f"{text} can't be read ({error})"
        if len(data) > max_bytes:
            return I.NOTE_FILE_BYTES.format(bound=max_bytes)
        return data

    def sample_tokens(self, label) -> SampleTokens:
        """One sample's token lists (``label`` in ``_samples``, or a ``sample_id``), read again from its source; token ids
        decoded with the run's tokenizer."""
        from ..derive.tokenizer import load_tokenizer

        return compute_sample_tokens(self.record_parts(label)[0], self.run.pad_token, self.run.options.eos_token,
                                     load_tokenizer(self.run.options.tokenizer))

    def samples_tokens(self, labels, stop=None) -> list[SampleTokens | None]:
        """``sample_tokens`` of each label, None for a sample that can no longer be read or whose token
        lists are malformed or that was not read before ``stop`` was set; the records read a file at a
        time (``_read_each``)."""
        from ..derive.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(self.run.options.tokenizer)
        labels = list(labels)
        out = []
        for label, got in zip(labels, self._read_each(labels, self._raw_record, stop)):
            try:
                out.append(compute_sample_tokens(self._canonical(label, got)[0], self.run.pad_token,
                                                 self.run.options.eos_token, tokenizer))
            except (OSError, ValueError, SourceChanged, RootError):
                out.append(None)
        return out

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


def compute_faults(run, frame: pd.DataFrame) -> list[list[dict]]:
    """The faults of each row of ``frame`` (rows of ``run._samples``) as ``{"kind", "message_index",
    "assistant_turn"}``: found again in the sample's turns read from its source, only for the rows whose
    ``fault_kinds`` say they have some ([] for the others, and for a sample that changed since)."""
    out = [[] for _ in range(len(frame))]
    if "fault_kinds" not in run._samples:
        return out
    where = np.flatnonzero(run._samples["fault_kinds"].reindex(frame.index).fillna(0).to_numpy(dtype=np.int64))
    if not len(where):
        return out
    dropped_at = F.extra_column(DROPPED_AT)
    at_message = (run._samples[dropped_at].reindex(frame.index).to_numpy(dtype=float) if dropped_at in run._samples
                  else np.full(len(frame), np.nan))
    for at, got in zip(where.tolist(), run.records(frame.index[where])):
        if got is not None:
            out[at] = [f.as_json() for f in sample_faults(got[0].get(F.MESSAGES) or [], at_message[at])]
    return out


def sample_faults(turns: list[dict], dropped_at=None) -> list:
    """A sample's faults (``derive.faults.Fault``), in message order: those of its turns, and the
    ``images_dropped`` fault a reader found at message ``dropped_at`` (its ``images_dropped_at`` extra)."""
    found = find_faults(turns)
    dropped = image_fault(turns, dropped_at) if dropped_at is not None and dropped_at == dropped_at else None
    if dropped is not None:
        found = sorted([*found, dropped], key=lambda f: (f.message_index, KINDS.index(f.kind)))
    return found


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
