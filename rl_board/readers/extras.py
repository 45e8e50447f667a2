"""Extra fields as data: any JSON key becomes a column name safely, and a run makes a bounded number of them.

A JSON object's key can be any string: quotes, backslashes, control characters,
HTML, a megabyte of text. Such a name is data, shown literally; it never becomes
part of a schema identifier (the JSONL reader's msgspec struct learns only keys
it can name, ``struct_safe``). A name that can't be a column header on one line
(``column_name``: empty, longer than ``MAX_NAME_CHARS``, or holding a control
character or a lone surrogate) is renamed deterministically: its control
characters written as ``\\uXXXX``, cut to ``KEPT_NAME_CHARS`` characters, and
``#`` plus the 32 hex digits of its 128-bit BLAKE2b hash appended (``RENAMED``).
Two names never meet: a name spelled like a renaming (ending in ``#`` and 32 hex
digits) is renamed too, so no key that stays as written has that form, and two
renamed names differ in their hashes (a collision of 128 bits is out of reach;
one of 32 bits, which this once used, is found by brute force in under a second).

A run makes at most ``base.defaults.max_extra_fields()`` extra-field columns (default
``DEFAULT_MAX_EXTRA_FIELDS``, ``$RL_BOARD_MAX_EXTRA_FIELDS`` raises it): the first
met, in file order then line order; the keys past the limit are not made columns
(the samples still load). What was renamed or dropped travels with the rows, in
the segment table's schema metadata (``FieldNotes``), so a run opened from the
cache reports the same.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING

from ..base import fields as F
from ..base.defaults import MAX_EXTRA_FIELDS_ENV

if TYPE_CHECKING:
    import pyarrow as pa

MAX_NAME_CHARS = 256  # characters of a field name usable as a column as it is
KEPT_NAME_CHARS = 64  # characters of an unusable name kept in its new name (before the hash)
NAMES_KEPT = 1000  # dropped names remembered per segment (the count covers all)
NAMES_SHOWN = 5  # dropped or renamed names quoted in the load report
_METADATA_KEY = b"rl_board.extras"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_STRUCT_UNSAFE = re.compile(r'["\\\x00-\x1f]')  # msgspec refuses these in a struct's field names
HASH_BYTES = 16  # of a renamed name's BLAKE2b hash: 128 bits, no collision found by trying
RENAMED = re.compile(r"#[0-9a-f]{%d}\Z" % (2 * HASH_BYTES))  # how every renamed name ends


def struct_safe(key: str) -> bool:
    """Whether ``key`` can be a renamed field of a msgspec struct (no ``"``, ``\\`` or control character)."""
    return _STRUCT_UNSAFE.search(key) is None


def why_unusable(name: str) -> str | None:
    """Why ``name`` can't be a column header as it is, or None when it can."""
    if not name:
        return "empty"
    if len(name) > MAX_NAME_CHARS:
        return f"{len(name):,} characters long, over {MAX_NAME_CHARS}"
    if _CONTROL.search(name):
        return "holds a control character"
    if _SURROGATE.search(name):
        return "is not valid Unicode"
    if RENAMED.search(name):
        return "spelled like a renamed name"
    return None


def column_name(name: str) -> str:
    """The extra-field name ``name`` is stored under: itself when usable, else its deterministic new name."""
    if why_unusable(name) is None:
        return name
    raw = name.encode("utf-8", "surrogatepass")
    shown = _SURROGATE.sub("\ufffd", _CONTROL.sub(lambda m: f"\\u{ord(m[0]):04x}", name))
    return f"{shown[:KEPT_NAME_CHARS]}#{hashlib.blake2b(raw, digest_size=HASH_BYTES).hexdigest()}"


def first_met(table: pa.Table, rows: bool = False) -> list:
    """The extra-field columns of ``table`` in the order their first value is met (by row, then name);
    with ``rows``, (column, row of its first value) pairs."""
    import pyarrow.compute as pc

    found = []
    for name in F.extra_columns(table.column_names):
        valid = pc.is_valid(table[name])
        row = pc.index(valid, True).as_py()
        found.append((row if row >= 0 else table.num_rows, name))
    return [(name, row) if rows else name for row, name in sorted(found)]


@dataclass
class FieldNotes:
    """What became of a segment's extra-field names: renamed (new name -> why) and dropped past the limit
    (the first ``NAMES_KEPT`` distinct names, in the order met, and how many in all)."""

    renamed: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    dropped_count: int = 0
    exact: bool = True  # the count is of distinct names (False: segments with too many to remember met)
    #: the line (counted within the range read) where each remembered dropped name was first met, so
    #: names dropped by the steps of one range's reading are listed in the order met
    dropped_at: list = field(default_factory=list)
    #: names the run keeps that a part of it dropped while it was read (set by the snapshot: their values
    #: are missing from the samples of that part)
    partly: list[str] = field(default_factory=list)

    def drop(self, names, at=None) -> None:
        """Count ``names`` (distinct, not yet counted) as dropped; ``at``: the line each was first met on."""
        ordered = at is not None and None not in self.dropped_at
        at = repeat(None) if at is None else at
        for name, line in zip(names, at):
            self.dropped_count += 1
            if ordered or len(self.dropped) < NAMES_KEPT:  # ordered: the first met are kept below
                self.dropped.append(name)
                self.dropped_at.append(line)
        if None not in self.dropped_at:
            order = sorted(range(len(self.dropped)), key=self.dropped_at.__getitem__)[:NAMES_KEPT]
            self.dropped = [self.dropped[i] for i in order]
            self.dropped_at = [self.dropped_at[i] for i in order]

    def add(self, other: FieldNotes) -> None:
        """Take in another segment's notes (their dropped names not counted twice while all are known)."""
        self.renamed.update(other.renamed)
        if self.dropped_count and other.dropped_count and (len(self.dropped) < self.dropped_count
                                                           or len(other.dropped) < other.dropped_count):
            self.exact = False  # a name may be counted in both
        self.exact = self.exact and other.exact
        known = set(self.dropped)
        new = [(n, at) for n, at in zip(other.dropped, other.dropped_at) if n not in known]
        self.dropped_count += other.dropped_count - (len(other.dropped) - len(new))
        new = new[:max(0, NAMES_KEPT - len(self.dropped))]
        self.dropped.extend(n for n, _ in new)
        self.dropped_at.extend(at for _, at in new)

    def __bool__(self) -> bool:
        return bool(self.renamed or self.dropped_count)

    @classmethod
    def of(cls, table: pa.Table) -> FieldNotes:
        """The notes a table carries (none when it carries none)."""
        raw = (table.schema.metadata or {}).get(_METADATA_KEY)
        if raw is None:
            return cls()
        try:
            got = json.loads(raw)
            dropped = [str(name) for name in got["dropped"]]
            at = list(got.get("dropped_at", ()))
            return cls({str(k): str(v) for k, v in got["renamed"].items()}, dropped, int(got["dropped_count"]),
                       bool(got.get("exact", True)), at if len(at) == len(dropped) else [None] * len(dropped))
        except (ValueError, TypeError, KeyError, AttributeError):  # not ours as written: no notes
            return cls()

    def attach(self, table: pa.Table) -> pa.Table:
        """``table`` carrying these notes (replacing any it carried)."""
        metadata = dict(table.schema.metadata or {})
        metadata.pop(_METADATA_KEY, None)
        if self:
            metadata[_METADATA_KEY] = json.dumps({"renamed": self.renamed, "dropped": self.dropped,
                                                  "dropped_count": self.dropped_count,
                                                  "exact": self.exact, "dropped_at": self.dropped_at}).encode()
        return table.replace_schema_metadata(metadata or None)

    def messages(self, limit: int) -> list[str]:
        """The load report's lines for these notes, ``limit`` being the run's limit on extra fields."""
        out = []
        if self.renamed:
            shown = "; ".join(f"{name} ({why})" for name, why in list(self.renamed.items())[:NAMES_SHOWN])
            more = len(self.renamed) - NAMES_SHOWN
            out.append(f"{len(self.renamed):,} extra field name(s) can't be a column as written and were renamed "
                       f"(control characters written as \\uXXXX, cut to {KEPT_NAME_CHARS} characters, a hash "
                       f"added): {shown}" + (f"; and {more:,} more" if more > 0 else "") + ".")
        if self.dropped_count:
            exact = "" if self.exact else "up to "
            shown = ", ".join(json.dumps(n, ensure_ascii=False) for n in self.dropped[:NAMES_SHOWN])
            out.append(f"Past the limit of {limit:,} extra fields, {exact}{self.dropped_count:,} more field name(s) "
                       f"were not made columns (their samples loaded; set {MAX_EXTRA_FIELDS_ENV}, or "
                       f"--max-extra-fields on the command line, to keep more). Among them: {shown}.")
        if self.partly:
            shown = ", ".join(json.dumps(n, ensure_ascii=False) for n in self.partly[:NAMES_SHOWN])
            out.append(f"{len(self.partly):,} extra field(s) the run keeps are missing from some of its samples: a "
                       f"part of the files read on its own met {limit:,} other extra fields first and kept those "
                       f"({shown}); set {MAX_EXTRA_FIELDS_ENV}, or --max-extra-fields on the command line, above "
                       "the run's count of extra fields to keep every value.")
        return out


def merged_notes(tables) -> FieldNotes:
    """The notes of ``tables`` together."""
    notes, seen = FieldNotes(), set()
    for table in tables:
        raw = (table.schema.metadata or {}).get(_METADATA_KEY)
        if raw is not None and raw not in seen:  # slices of one batch carry its notes each: counted once
            seen.add(raw)
            notes.add(FieldNotes.of(table))
    return notes


def cap(table: pa.Table, limit: int, notes: FieldNotes | None = None) -> tuple[pa.Table, FieldNotes]:
    """(``table`` with at most ``limit`` extra-field columns, the first met; its notes with the others
    counted as dropped). ``notes``: what the table's parts carried (default: what it carries)."""
    notes = FieldNotes.of(table) if notes is None else notes
    met = first_met(table, rows=True) if len(F.extra_columns(table.column_names)) > limit else []
    if met:
        lines = table[F.LINE].to_numpy()
        table = table.drop_columns([c for c, _ in met[limit:]])
        notes.drop([F.extra_name(c) for c, _ in met[limit:]],
                   [int(lines[row]) if row < len(lines) else None for _, row in met[limit:]])
    return notes.attach(table), notes
