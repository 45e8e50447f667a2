"""A snapshot of what a run's loader holds: every file's segments joined into one row of numbers per
sample (``Snapshot``), and what the load read (``LoadReport``: counts, rejected lines, notes).
``analysis.run.Run`` is built from it. Texts stay in the segments; a segment several small files
share (``segments.SharedSlice``) gives its numbers at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..base import fields as F
from ..base.compression import APPEND_NOTE, codec_of
from ..base.defaults import MAX_ERRORS_ENV, max_errors
from ..base.location import RunLocation
from ..derive.samples import SCHEMA
from ..derive.step_stats import read_step_stats
from ..derive.tokenizer import TOKENIZER_FAILED
from ..readers import ReadOptions, describe_size
from ..readers.extras import FieldNotes, first_met, merged_notes
from ..readers.notes import notes_of
from .columns import frame, gather, one_value, take
from .numbers import Numbers, segment_numbers
from .segments import SharedSlice
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
    # each segment's step statistics as its worker computed them (``derive.step_stats.read_step_stats``)
    step_stats: tuple[dict, ...] = field(repr=False, default=())
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
    options = loader.options
    parts, places, segments, grouped, gathered = _gathered_parts(loader, names)
    parts, field_notes = _cap_extras(parts, options.max_extras)
    file_notes = _file_notes([(name, note) for name in names for _, _, table in files[name].segments
                              if not isinstance(table, SharedSlice) for note in notes_of(table)])
    if not parts:
        parts, places = [segment_numbers(SCHEMA.empty_table())], [_Places.of_segment(0, 1, 0, 0)]
    first_names = parts[0].schema.names
    columns, first_rows = (gathered, {}) if gathered is not None else gather(parts, grouped)
    del parts
    columns = _with_places(columns, first_names, places)
    ends = np.cumsum(np.concatenate([p.rows for p in places]))  # where each run of one file's rows ends
    if grouped:
        columns = _extras_in_file_order(columns, first_rows)
    columns = _in_order(columns, ends)
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
    notes = [*notes, *file_notes, *field_notes.messages(options.max_extras),
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
                    loader.location, loader.max_per_step, _step_stats(files, names, loader.max_per_step),
                    segment_names)


def _gathered_parts(loader, names: list[str]) -> tuple:
    """``_parts`` of the run, and the columns gathered as the read went (``numbers.Numbers``) when they are the
    run's: its parts are the segments gathered, in that order, and ``gather`` would give the same (else None,
    and the parts' numbers themselves to gather)."""
    made = loader.take_numbers()
    if made is not None and not made.streams(loader.file_states, names):
        made.stop()
    parts, places, segments, grouped = _parts(loader, names, made)
    gathered = None
    if made is not None and made.gathering is not None:  # the parts' columns were gathered as the read went
        extras = set(chain.from_iterable(F.extra_columns(part.column_names) for part in parts))
        gathered = made.columns() if len(extras) <= loader.options.max_extras else None
        if gathered is None:  # (extras past the limit, or one ``gather`` may keep sparse): gathered here
            made.stop()
            parts, places, segments, grouped = _parts(loader, names, made)
    return parts, places, segments, grouped, gathered


def _step_stats(files: dict, names: list[str], max_per_step: int | None) -> tuple[dict, ...]:
    """The step statistics the segments of ``names`` carry (a shared segment's parts, of several files,
    none); none where a step's rows were cut to ``max_per_step`` after they were read."""
    if max_per_step is not None:
        return ()
    found = (read_step_stats(table) for name in names for _, _, table in files[name].segments
             if not isinstance(table, SharedSlice))
    return tuple(stats for stats in found if stats is not None)


def _parts(loader, names: list[str], made: Numbers | None = None
           ) -> tuple[list[pa.Table], list[_Places], dict[tuple[int, int], pa.Table], bool]:
    """(the numbers of every file's segments, a table a segment or a shared segment's run of parts,
    read through a mapping of their own; where each such table's rows live (``_Places``); (file, segment)
    -> the store's table, which the texts are read from; whether any segment is shared). ``made``: the
    numbers made while the read went on (``Numbers``), taken where a segment's are there."""
    files = loader.file_states
    parts, places, segments, group = [], [], {}, None  # group: consecutive parts of one shared segment
    grouped = False
    made = made if made is not None and made.cache is loader.cache else Numbers(loader.cache, gather=False)
    own = made.own
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
                places.append(group.places())
                group = None
            if isinstance(table, SharedSlice):
                grouped = True
                group = _Group(table.parent, table.start)
                group.add(table.num_rows, first_line, file_index, seg_index)
            else:
                segments[(file_index, seg_index)] = table
                parts.append(made.take(seg_name, table))
                places.append(_Places.of_segment(table.num_rows, first_line, file_index, seg_index))
    if group is not None:
        parts.append(group.numbers())
        places.append(group.places())
    return parts, places, segments, grouped


WHERE = (F.FILE, "seg", "row")  # the columns that say where each sample's row lives


@dataclass(frozen=True)
class _Places:
    """Where the rows of one part (``_parts``) live, as runs of rows of one file each: ``rows`` (how many),
    ``line_offsets`` (added to the segment's line numbers, which count from the segment's start), ``files``,
    ``segs`` (int64, shape (runs,)), and ``first_row``: the part's first row in its segment (the rest follow)."""

    rows: np.ndarray
    line_offsets: np.ndarray
    files: np.ndarray
    segs: np.ndarray
    first_row: int

    @classmethod
    def of_segment(cls, rows: int, first_line: int, file_index: int, seg_index: int) -> _Places:
        return cls(*(np.array([value], np.int64) for value in (rows, first_line - 1, file_index, seg_index)), 0)


def _with_places(columns: dict, first_names: list[str], places: list[_Places]) -> dict:
    """``columns`` (``columns.gather``'s, of the parts' numbers) with the line numbers made absolute and
    ``file``, ``seg`` and ``row`` (int64) added after the first part's columns, where ``concat_tables`` of the
    parts with those columns appended would put them; each made for all the parts at once rather than as a
    column of each part's table, and kept as one value, broadcast, when all its values are (``one_value``), as
    ``gather`` keeps the columns it gathers. The gathered line numbers are made absolute in place, a run of one
    file's rows at a time, and ``row`` written a run at a time from one ``arange``: no array of every row is
    made for them beside it (verl's 10M samples: 0.27-0.50 s before, each such array's pages new memory)."""
    rows = np.concatenate([p.rows for p in places])
    part_rows = np.array([int(p.rows.sum()) for p in places], np.int64)
    first_rows = np.array([p.first_row for p in places], np.int64)
    total = int(part_rows.sum())
    offsets = np.concatenate([p.line_offsets for p in places])
    line = np.asarray(columns[F.LINE])
    if (line.strides[0] and line.flags.writeable and line.flags.owndata and line.dtype == np.int64
            and len(rows) <= _PLACES_LOOPED):
        ends = np.cumsum(rows)
        for offset, start, end in zip(offsets.tolist(), (ends - rows).tolist(), ends.tolist()):
            if offset:
                line[start:end] += offset
    else:  # (one value broadcast, or an array another holds): a new one
        line = np.repeat(offsets, rows) + line
    if len(part_rows) <= _PLACES_LOOPED:
        row = np.empty(total, np.int64)
        counting = np.arange(int((part_rows + first_rows).max(initial=0)), dtype=np.int64)
        at = 0
        for first, count in zip(first_rows.tolist(), part_rows.tolist()):
            row[at:at + count] = counting[first:first + count]
            at += count
    else:
        row = np.arange(total, dtype=np.int64)
        row -= np.repeat(np.cumsum(part_rows) - part_rows - first_rows, part_rows)
    made = {F.LINE: one_value(line), F.FILE: _repeated(np.concatenate([p.files for p in places]), rows),
            "seg": _repeated(np.concatenate([p.segs for p in places]), rows), "row": one_value(row)}
    first = set(first_names)
    names = [n for n in columns if n in first] + list(WHERE) + [n for n in columns if n not in first]
    return {name: made[name] if name in made else columns[name] for name in names}


#: runs of one file's rows up to which ``_with_places`` adds each run's line offset in place (a run of 100,000
#: small files: one ``np.repeat`` instead of 100,000 slices)
_PLACES_LOOPED = 1 << 14


def _repeated(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``np.repeat(values, counts)`` as ``one_value`` gives it, told from ``values`` alone when the runs
    with rows hold one value (a run of one file: no array of its rows made, nor compared)."""
    held = values[counts > 0]
    if len(held) and (held == held[0]).all():
        return np.broadcast_to(held[:1].copy(), (int(counts.sum()),))
    return one_value(np.repeat(values, counts))


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


def _in_order(columns: dict, ends: np.ndarray | None = None) -> dict:
    """``columns`` (``columns.gather``'s) ordered by step, file and line (a stable sort). A run's files
    are mostly in that order already (verl's ``{step}.jsonl``, one step a file): then nothing is
    sorted (the same rows, the same index); else each column is taken in that order in turn. ``ends``:
    as ``_ordered``'s."""
    if _ordered(*(np.asarray(columns[name]) for name in (F.STEP, F.FILE, F.LINE)), ends):
        return columns
    keys = frame({name: columns[name] for name in (F.STEP, F.FILE, F.LINE)})
    order = keys.sort_values([F.STEP, F.FILE, F.LINE], kind="stable").index.to_numpy()
    del keys
    return {name: take(column, order) for name, column in columns.items()}


def _ordered(step: np.ndarray, file: np.ndarray, line: np.ndarray, ends: np.ndarray | None = None) -> bool:
    """Whether the rows are in (step, file, line) order, ties allowed; a NaN is out of order. Compared
    a key at a time, each on the rows whose keys before it tie (masks of a byte a row, no differences).
    ``ends`` (ascending; None: unknown): the row after each run of rows of one file (``_Places``): the
    files are then compared only where one run ends and the next begins, not at every row."""
    if not (step[1:] >= step[:-1]).all():
        return False
    tie = step[1:] == step[:-1]
    if ends is None:
        if (tie & ~(file[1:] >= file[:-1])).any():
            return False
        tie &= file[1:] == file[:-1]
    else:  # inside a run the file is one: only the pairs across a run's end can differ
        at = ends[(ends > 0) & (ends < len(step))] - 1  # pair (at, at + 1): the last row of a run, the next
        if (tie[at] & ~(file[at + 1] >= file[at])).any():
            return False
        tie[at] &= file[at + 1] == file[at]
    return not (tie & ~(line[1:] >= line[:-1])).any()


def _cap_extras(parts: list[pa.Table], limit: int) -> tuple[list[pa.Table], FieldNotes]:
    """(``parts``, the run's segments in file order, with the first ``limit`` extra fields met kept and
    the others dropped; what became of the run's field names: renamed, dropped here or while read, and
    (``partly``) the names the run keeps that a part dropped while it was read: a range of a file caps its own extra
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
    notes.partly = kept
    return parts, notes


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


class _Group:
    """Rows [start, end) of a segment several small files share, each file's part in turn: their
    numbers are made at once (``segment_numbers`` per part costs a table each, 100,000 of them for a
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
        return segment_numbers(self.parent.slice(self.start, self.end - self.start))

    def places(self) -> _Places:
        return _Places(*(np.asarray(values, np.int64) for values in (
            self.rows, [line - 1 for line in self.first_lines], self.files, self.segs)), self.start)
