"""A snapshot of what a run's loader holds: every file's segments joined into one row of numbers per
sample (``Snapshot``), and what the load read (``LoadReport``: counts, rejected lines, notes).
``analysis.run.Run`` is built from it. Texts stay in the segments; a segment several small files
share (``segments.SharedSlice``) gives its numbers at once."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..base import fields as F
from ..base.compression import APPEND_NOTE, codec_of
from ..base.defaults import MAX_ERRORS_ENV, MAX_EXTRA_FIELDS_ENV, max_errors
from ..base.location import RunLocation
from ..derive.samples import SCHEMA, TURN_COLUMNS
from ..derive.tokenizer import TOKENIZER_FAILED
from ..readers import ReadOptions, describe_size
from ..readers.extras import NAMES_SHOWN, FieldNotes, first_met, merged_notes
from ..readers.notes import notes_of
from .columns import frame, gather, one_value, take
from .segments import SharedSlice, with_one_value_columns
from .tracking import natural_key

#: What the page and the commands say when a run's token ids can't be decoded.
NO_TOKENIZER = ("Token ids are shown as #ID: no tokenizer was found next to the run. Put its tokenizer.json in "
                "the run folder or one of the two folders above it (not in a folder beside them), or give it: the "
                "sidebar's Tokenizer box, or --tokenizer PATH on the command line.")


@dataclass(frozen=True)
class LoadReport:
    """What a load read: counts, the rejected lines, and notes for the user."""

    files: tuple[str, ...]
    lines_ok: int
    lines_bad: int
    # (file, line, reason), by file then line: the first rejected lines of each file (``defaults.max_errors``);
    # ``lines_bad`` counts them all
    errors: tuple[tuple[str, int, str], ...]
    skipped: int = 0  # lines left out by max samples per step
    ignored_files: tuple[str, ...] = ()
    pending: tuple[str, ...] = ()  # files whose last line has no newline yet
    notes: tuple[str, ...] = ()
    unreadable: tuple[tuple[str, str], ...] = ()  # (file, reason) for each file that could not be read
    reader: str = "jsonl"  # the format the run was read as (``readers``)
    tokenizer_problem: str | None = None  # the note on a tokenizer found next to the run that can't be read


@dataclass(frozen=True)
class Snapshot:
    """What one refresh read, as the store holds it: one row of numbers per sample (``samples``,
    ordered by step, file, line), the parsed segments the texts stay in, and the report.
    ``analysis.run.Run`` is built from it."""

    path: Path
    files: tuple[str, ...]
    samples: pd.DataFrame  # noqa: F821 (pandas is imported where a frame is first made)
    report: LoadReport
    options: ReadOptions
    segments: dict[tuple[int, int], pa.Table] = field(repr=False)
    reader: object = field(repr=False, default=None)  # the reader module (``readers``)
    cache: tuple[Path, tuple] | None = field(repr=False, default=None)  # cache folder, manifest stamp
    split: str | None = None
    splits: tuple[str, ...] = ()
    location: RunLocation | None = field(repr=False, default=None)  # where its files are read again
    max_per_step: int | None = None  # the samples kept of each step (the loader's), None: all
    segment_names: dict[tuple[int, int], str] = field(repr=False, default_factory=dict)  # (file, seg) -> its file


def _file_notes(pairs: list[tuple[str, str]]) -> list[str]:
    """``FILE: NOTE`` for each (file, note), a note many files share said once, after its first file and how many
    more (a trainer's note on every step's file, say), in the order of its first file."""
    files: dict[str, list[str]] = {}
    for name, note in pairs:
        named = files.setdefault(note, [])
        if name not in named:
            named.append(name)
    return [f"{named[0]}: {note}" if len(named) == 1 else f"{named[0]} and {len(named) - 1:,} more file(s): {note}"
            for note, named in files.items()]


def _unreadable_notes(failed: tuple[tuple[str, str], ...]) -> list[str]:
    """One note per reason files could not be read, naming its first file and how many more: a reason many
    files share (slime's .pt files without torch: what to install) is said once, not once a file."""
    by_reason: dict[str, list[str]] = {}
    for name, why in failed:
        by_reason.setdefault(why, []).append(name)
    return [f"Could not read {named[0]}" + (f" and {len(named) - 1:,} more file{'s' if len(named) > 2 else ''}"
                                            if len(named) > 1 else "") + f" ({why}); the other files loaded."
            for why, named in by_reason.items()]


def take_snapshot(loader, names: list[str], ignored: list[str], unreadable: dict[str, str],
                  notes: list[str] = ()) -> Snapshot:
    """What ``loader`` (a ``loader.RunLoader``) holds now, as one ``Snapshot``: every file's segments
    joined into one row of numbers per sample (a shared segment's parts at once), ordered by step,
    file and line, the extras capped, and the load report with its notes."""
    files = loader.file_states
    parts, segments, grouped = _parts(loader, names)
    options = loader.options
    parts, field_notes, partly = _cap_extras(parts, options.max_extras)
    file_notes = _file_notes([(name, note) for name in names for _, _, table in files[name].segments
                              if not isinstance(table, SharedSlice) for note in notes_of(table)])
    columns, first_rows = gather(parts or [_numbers(SCHEMA.empty_table(), 1, 0, 0)], grouped)
    del parts
    if grouped:
        columns = _extras_in_file_order(columns, first_rows)
    columns = _in_order(columns)
    columns[F.POSITION] = _positions(columns, getattr(loader.reader, "POSITION", None))
    skipped = sum(s.skipped for s in files.values())
    if loader.max_per_step is not None:
        import pandas as pd

        steps = pd.Series(columns[F.STEP])
        keep = steps.groupby(steps, sort=False).head(loader.max_per_step).index.to_numpy()
        skipped += len(steps) - len(keep)
        columns = {name: take(column, keep) for name, column in columns.items()}
    columns["reward_gap"] = one_value(np.subtract(columns[F.REWARD], columns["ref_reward"]))
    samples = frame(columns)
    del columns
    errors = tuple((name, line, reason) for name in names for line, reason in files[name].errors)
    unlisted = sum(files[name].unlisted for name in names)
    failed = {**unreadable, **{n: files[n].error for n in names if files[n].error}}
    failed = tuple((name, failed[name]) for name in sorted(failed, key=natural_key))
    tokenizer_notes = loader.tokenizer_notes
    # a tokenizer that failed (derive.tokenizer.GuardedTokenizer) says so once, not once per file read; how
    # many files said it is not told: that counts the segments (a batch of small files is one), which the
    # workers' count decides, and output is the same on every machine
    broken = [note for note in file_notes if TOKENIZER_FAILED in note.partition(": ")[2]]
    if broken:
        file_notes = [note for note in file_notes if note not in broken]
        notes = [*notes, min(note.partition(": ")[2] for note in broken)]
    if "from_ids" in samples and samples["from_ids"].any():
        if options.tokenizer:
            notes = notes if broken else [*notes, f"Token ids decoded with {options.tokenizer}."]
        else:  # the found tokenizer's problem, or that none was found: never both
            notes = [*notes, *(tokenizer_notes or [NO_TOKENIZER])]
    packed = [name for name in names if codec_of(name)]
    if packed:
        notes = [*notes, f"{len(packed)} compressed file{'s' if len(packed) != 1 else ''} ({packed[0]}"
                         f"{', …' if len(packed) > 1 else ''}): {APPEND_NOTE}."]
    if names and getattr(loader.reader, "NOTE", None):  # what the format itself can't hold
        notes = [*notes, loader.reader.NOTE]
    notes = [*notes, *file_notes, *field_notes.messages(options.max_extras), *_partly_note(partly, options.max_extras),
             *_unreadable_notes(failed),
             *([f"{unlisted:,} more rejected line{'s' if unlisted != 1 else ''} counted, not listed: the first "
                f"{max_errors():,} of each file are ({MAX_ERRORS_ENV} changes it)."] if unlisted else []),
             *(f"{name} ends in {describe_size(files[name].long_tail)} without a newline, more than the "
               f"line limit of {describe_size(options.max_line)}: it is not read (set RL_BOARD_MAX_LINE_MB)."
               for name in names if files[name].long_tail)]
    report = LoadReport(
        files=tuple(names), lines_ok=len(samples), lines_bad=len(errors) + unlisted, errors=errors, skipped=skipped,
        ignored_files=tuple(ignored), pending=tuple(n for n in names if files[n].pending),
        notes=(*loader.notes, *notes), unreadable=failed, reader=loader.reader.NAME,
        tokenizer_problem=tokenizer_notes[0] if tokenizer_notes else None,
    )
    cache = loader.cache
    stamp = cache.manifest_stamp() if cache is not None else None
    segment_names = {(f, s): seg[0] for f, name in enumerate(names) for s, seg in enumerate(files[name].segments)}
    return Snapshot(loader.run_dir, tuple(names), samples, report, options, segments, loader.reader,
                    (cache.folder, stamp) if stamp is not None else None, loader.split, loader.splits,
                    loader.location, loader.max_per_step, segment_names)


def _parts(loader, names: list[str]) -> tuple[list[pa.Table], dict[tuple[int, int], pa.Table], bool]:
    """(the numbers of every file's segments, a table a segment or a shared segment's run of parts,
    read through a mapping of their own; (file, segment) -> the store's table, which the texts are read
    from; whether any segment is shared)."""
    files = loader.file_states
    parts, segments, group = [], {}, None  # group: consecutive parts of one shared segment
    grouped = False
    own = _OwnMappings(loader.cache)
    for file_index, name in enumerate(names):
        for seg_index, (seg_name, first_line, table) in enumerate(files[name].segments):
            if isinstance(table, SharedSlice):  # its rows are read from the whole segment: "row" is there
                segments[(file_index, seg_index)] = table.parent
                table = SharedSlice(own.of(seg_name, table.parent), table.start, table.num_rows)
                if group is not None and group.follows(table):
                    group.add(table.num_rows, first_line, file_index, seg_index)
                    continue
            if group is not None:
                parts.append(group.numbers())
                group = None
            if isinstance(table, SharedSlice):
                grouped = True
                group = _Group(table.parent, table.start)
                group.add(table.num_rows, first_line, file_index, seg_index)
            else:
                segments[(file_index, seg_index)] = table
                parts.append(_numbers(own.of(seg_name, table), first_line, file_index, seg_index))
    if group is not None:
        parts.append(group.numbers())
    return parts, segments, grouped


def _positions(columns: dict, column: str | None) -> np.ndarray:
    """Each sample's ``fields.POSITION``: -1 where its line holds one sample; else its place in the line,
    which the reader keeps in ``column`` (its ``POSITION``: ROLL's row, a wide W&B row's group). A format
    whose lines hold one sample each declares none, and pays nothing (one value, broadcast)."""
    rows = len(columns[F.STEP])
    if column is None or not rows:
        return one_value(np.full(rows, -1, np.int64))
    out = np.full(rows, -1, np.int64)
    keys = frame({F.FILE: columns[F.FILE], F.LINE: columns[F.LINE]})
    shared = keys.groupby([F.FILE, F.LINE], sort=False)[F.LINE].transform("size").to_numpy() > 1
    out[shared] = np.asarray(columns[column])[shared]
    return out


def _in_order(columns: dict) -> dict:
    """``columns`` (``columns.gather``'s) ordered by step, file and line (a stable sort). A run's files
    are mostly in that order already (verl's ``{step}.jsonl``, one step a file): then nothing is
    sorted (the same rows, the same index); else each column is taken in that order in turn."""
    if _ordered(*(np.asarray(columns[name]) for name in (F.STEP, F.FILE, F.LINE))):
        return columns
    keys = frame({name: columns[name] for name in (F.STEP, F.FILE, F.LINE)})
    order = keys.sort_values([F.STEP, F.FILE, F.LINE], kind="stable").index.to_numpy()
    del keys
    return {name: take(column, order) for name, column in columns.items()}


def _ordered(step: np.ndarray, file: np.ndarray, line: np.ndarray) -> bool:
    """Whether the rows are in (step, file, line) order, ties allowed; a NaN is out of order. Compared
    a key at a time, each on the rows whose keys before it tie (masks of a byte a row, no differences)."""
    if not (step[1:] >= step[:-1]).all():
        return False
    tie = step[1:] == step[:-1]
    if (tie & ~(file[1:] >= file[:-1])).any():
        return False
    tie &= file[1:] == file[:-1]
    return not (tie & ~(line[1:] >= line[:-1])).any()


def _cap_extras(parts: list[pa.Table], limit: int) -> tuple[list[pa.Table], FieldNotes, list[str]]:
    """(``parts``, the run's segments in file order, with the first ``limit`` extra fields met kept and
    the others dropped; what became of the run's field names: renamed, and dropped here or while read;
    the names the run keeps that a part dropped while it was read: a range of a file caps its own extra
    fields at ``limit``, the first it meets, so a name the run keeps loses its values in a range that
    met ``limit`` others first (as far as the parts' notes remember their dropped names)."""
    notes = merged_notes(parts)
    columns = set(chain.from_iterable(F.extra_columns(part.column_names) for part in parts))
    if len(columns) > limit:
        met = list(dict.fromkeys(chain.from_iterable(first_met(part) for part in parts)))
        over = set(met[limit:])
        parts = [part.drop_columns([c for c in part.column_names if c in over]) for part in parts]
        known = set(notes.dropped)
        notes.drop(F.extra_name(c) for c in met[limit:] if F.extra_name(c) not in known)
        columns = set(met[:limit])
    kept = [name for name in notes.dropped if F.extra_column(name) in columns]  # dropped in one part only
    if kept:
        notes.dropped = [name for name in notes.dropped if F.extra_column(name) not in columns]
        notes.dropped_count -= len(kept)
    return parts, notes, kept


def _partly_note(names: list[str], limit: int) -> list[str]:
    """The load report's line for the kept extra fields that lost their values in part of the run."""
    if not names:
        return []
    shown = ", ".join(json.dumps(n, ensure_ascii=False) for n in names[:NAMES_SHOWN])
    return [f"{len(names):,} extra field(s) the run keeps are missing from some of its samples: a part of the "
            f"files read on its own met {limit:,} other extra fields first and kept those ({shown}); set "
            f"{MAX_EXTRA_FIELDS_ENV}, or --max-extra-fields on the command line, above the run's count of extra "
            "fields to keep every value."]


def _extras_in_file_order(columns: dict, first_rows: dict[str, int]) -> dict:
    """``columns`` with the extra-field columns where reading each file on its own puts them: a file's
    new ones after those of the files before it, by name (the first file's before ``file``, ``seg`` and
    ``row``). ``first_rows``: each extra column's first row not null (-1: none). A shared segment holds
    the extras of all its files, by name: without this, a run read in batches would list its extras in
    another order than the same run read file by file."""
    extras = F.extra_columns(columns)
    if not extras:
        return columns
    files = columns[F.FILE]
    first = {column: int(files[row]) if (row := first_rows[column]) >= 0 else len(files) for column in extras}
    start = int(files[0]) if len(files) else 0
    where = ["file", "seg", "row"]
    base = [c for c in columns if c not in first and c not in where]
    own = sorted(c for c in extras if first[c] == start)
    later = sorted((c for c in extras if first[c] != start), key=lambda c: (first[c], c))
    return {name: columns[name] for name in base + own + where + later}


class _OwnMappings:
    """The segment files of a run's cache mapped once more, for their numbers alone: the pages a
    snapshot reads from them are let go with the mapping once gathered (``columns.gather``), where
    the store's mapping, kept for the texts, would keep every page read resident for the run's life."""

    def __init__(self, cache):
        self.cache, self.opened = cache, {}

    def of(self, name: str, table: pa.Table) -> pa.Table:
        """Segment ``name`` (``table``, the store's whole segment) mapped again; ``table`` itself when it
        is held in memory (no name) or the file can't be mapped as it was."""
        if self.cache is None or not name:
            return table
        if name not in self.opened:
            try:
                mapped = self.cache.open_segment(name)
            except (OSError, pa.ArrowException):
                mapped = table
            same = mapped.num_rows == table.num_rows and mapped.schema.equals(table.schema)
            self.opened[name] = mapped if same else table
        return self.opened[name]


class _Group:
    """Rows [start, end) of a segment several small files share, each file's part in turn: their
    numbers are made at once (``_numbers`` per part costs a table each, 100,000 of them for a
    run of 100,000 one-line files). Their ``row`` is the row in the whole segment."""

    def __init__(self, parent: pa.Table, start: int):
        self.parent, self.start, self.end = parent, start, start
        self.rows, self.first_lines, self.files, self.segs = [], [], [], []

    def follows(self, part: SharedSlice) -> bool:
        return part.parent is self.parent and part.start == self.end

    def add(self, rows: int, first_line: int, file_index: int, seg_index: int) -> None:
        self.end += rows
        self.rows.append(rows)
        self.first_lines.append(first_line)
        self.files.append(file_index)
        self.segs.append(seg_index)

    def numbers(self) -> pa.Table:
        rows = np.asarray(self.rows, np.int64)
        numbers = with_one_value_columns(self.parent.slice(self.start, self.end - self.start)).drop_columns(
            [*F.TEXT_FIELDS, "token_words", *TURN_COLUMNS])
        line = numbers.schema.get_field_index(F.LINE)
        numbers = numbers.set_column(line, F.LINE, pa.array(
            numbers[F.LINE].to_numpy() + np.repeat(np.asarray(self.first_lines, np.int64) - 1, rows)))
        return (numbers.append_column(F.FILE, pa.array(np.repeat(np.asarray(self.files, np.int64), rows)))
                .append_column("seg", pa.array(np.repeat(np.asarray(self.segs, np.int64), rows)))
                .append_column("row", pa.array(np.arange(self.start, self.end, dtype=np.int64))))



def _numbers(table: pa.Table, first_line: int, file_index: int, seg_index: int) -> pa.Table:
    """The numeric columns of a segment (texts and words stay behind), line numbers made absolute
    (segments count lines from their own start), and where each row lives: file, seg, row."""
    rows = table.num_rows
    numbers = with_one_value_columns(table).drop_columns([*F.TEXT_FIELDS, "token_words", *TURN_COLUMNS])
    numbers = numbers.set_column(numbers.schema.get_field_index(F.LINE), F.LINE,
                                 pc.add(numbers[F.LINE], first_line - 1))
    return (numbers.append_column(F.FILE, pa.array(np.full(rows, file_index, dtype=np.int64)))
            .append_column("seg", pa.array(np.full(rows, seg_index, dtype=np.int64)))
            .append_column("row", pa.array(np.arange(rows, dtype=np.int64))))

