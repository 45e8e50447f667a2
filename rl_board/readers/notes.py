"""Notes a reader has on one file's rows (what loaded but was not whole), carried with the rows.

A reader that loads a record while something in it was wrong (a prime-rl trace whose
node graph is broken, say) puts a sentence in the rows' table; it travels in the
schema metadata, so the segment written to the cache keeps it, and the load report
shows it, prefixed with the file's name.
"""

from __future__ import annotations

import json

import pyarrow as pa

_METADATA_KEY = b"rl_board.notes"


def with_notes(table: pa.Table, notes: list[str]) -> pa.Table:
    """``table`` carrying ``notes`` (besides any it carried)."""
    if not notes:
        return table
    metadata = dict(table.schema.metadata or {})
    metadata[_METADATA_KEY] = json.dumps(notes_of(table) + list(notes)).encode()
    return table.replace_schema_metadata(metadata)


def notes_of(table: pa.Table) -> list[str]:
    """The notes ``table`` carries."""
    raw = (table.schema.metadata or {}).get(_METADATA_KEY)
    try:
        got = json.loads(raw) if raw is not None else []
    except ValueError:  # not ours as written: no notes
        return []
    return [str(note) for note in got] if isinstance(got, list) else []
