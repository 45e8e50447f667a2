"""Many small files read a batch at a time: each batch's complete lines are parsed as one block, derived
once and kept as one segment, every file's rows a slice of it (``RangeResult.span``), so a run of
100,000 one-line files (verl writes a ``{step}.jsonl`` per step) costs a few blocks, not 100,000."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import xxhash

from ..base import fields as F
from ..base.location import RunLocation
from ..base.remote import LocationError, fault_line
from ..readers import ReadOptions
from .cache import head_tail_hashes
from .ranges import READ_CHUNK, RangeResult, ingest_range, note_rejected, open_in
from .segments import write_segment

SMALL_FILE_BYTES = 64 << 10  # a file with fewer new bytes than this may be read in a batch with others
BATCH_MIN_FILES = 64  # small files to read before they are batched (fewer cost little one by one)
BATCH_BYTES = READ_CHUNK  # bytes of small files parsed as one block and kept as one segment


def read_small_files(reader, tasks: list[tuple[Path, int, int]], out_dir: str | None, options: ReadOptions,
                     progress: Callable[[int], None] | None = None,
                     location: RunLocation | None = None) -> list[RangeResult]:
    """Read the new bytes (path, start, stop) of many small files a batch at a time: each batch's
    complete lines are parsed as one block, derived once and kept as one segment, every file's rows a
    slice of it (``RangeResult.span``), so a run of 100,000 one-line files costs a few blocks, not
    100,000. Rows, line numbers, offsets and errors are each file's own, as ``ingest_range`` gives
    them; a file whose new bytes don't end with a newline is read by ``ingest_range``. Each file is read
    through ``location`` (a URL's object: a store that fails raises ``LocationError``)."""
    results, batch, size = [], [], 0
    for path, start, stop in tasks:
        try:
            with open_in(location, path) as fh:
                fh.seek(start)
                data = fh.read(stop - start)
        except OSError as exc:  # gone or locked since it was listed: this file only
            if location is not None and location.is_url:
                raise LocationError(fault_line(path, exc)) from None
            results.append(RangeResult(str(path), start, start, error=f"could not be read ({exc.strerror or exc})"))
            continue
        if not data.endswith(b"\n"):  # a line still being written, or a last line without its newline
            results.append(ingest_range(reader, str(path), start, stop, out_dir, options, location=location))
            if progress is not None:
                progress(stop - start)
            continue
        batch.append((str(path), start, data))
        size += len(data)
        if size >= BATCH_BYTES:
            results += _read_batch(reader, batch, out_dir, options, progress)
            batch, size = [], 0
    if batch:
        results += _read_batch(reader, batch, out_dir, options, progress)
    return results


def _read_batch(reader, batch: list[tuple[str, int, bytes]], out_dir, options, progress) -> list[RangeResult]:
    """One block of small files' complete lines (path, start, bytes): their results, sharing one segment."""
    import numpy as np
    import pyarrow as pa

    data = b"".join(chunk for _, _, chunk in batch)
    sizes = np.fromiter((len(chunk) for _, _, chunk in batch), np.int64, len(batch))
    lines = np.fromiter((chunk.count(b"\n") for _, _, chunk in batch), np.int64, len(batch))
    byte_base = np.r_[0, np.cumsum(sizes)[:-1]]
    line_base = np.r_[0, np.cumsum(lines)[:-1]]  # lines of the files before each one
    from ..derive.samples import derive  # not at the module's import: the parent plans ranges without it

    parsed = reader.parse_block(data, 1, 0, options)
    table = derive(parsed.table, options).combine_chunks()
    offsets = table["offset"].to_numpy()
    owner = np.searchsorted(byte_base, offsets, side="right") - 1  # the file each row comes from
    starts = np.fromiter((start for _, start, _ in batch), np.int64, len(batch))
    table = table.set_column(table.schema.get_field_index(F.LINE), F.LINE,
                             pa.array(table[F.LINE].to_numpy() - line_base[owner]))
    table = table.set_column(table.schema.get_field_index("offset"), "offset",
                             pa.array(offsets - byte_base[owner] + starts[owner]))
    counts = np.bincount(owner, minlength=len(batch))
    first_rows = np.r_[0, np.cumsum(counts)[:-1]]
    errors: list[list] = [[] for _ in batch]
    for line, reason in parsed.errors:
        at = int(np.searchsorted(line_base, line - 1, side="right") - 1)
        errors[at].append((line - int(line_base[at]), reason))
    unlisted = np.bincount(np.searchsorted(line_base, parsed.unlisted - 1, side="right") - 1, minlength=len(batch))
    from .words import keep_beside, without_words  # (pyarrow: not at a command's start)

    table, words = without_words(table)
    segment = write_segment(table, out_dir) if out_dir is not None and table.num_rows else None
    if segment is not None and words is not None:
        keep_beside(out_dir, segment, table, words)
    results = []
    for i, (path, start, chunk) in enumerate(batch):
        result = RangeResult(path, start, start + len(chunk), lines=int(lines[i]), rows=int(counts[i]),
                             digest=xxhash.xxh3_128(chunk).hexdigest())
        note_rejected(result, errors[i], int(unlisted[i]))
        if start == 0:
            result.hashes = head_tail_hashes(chunk)
        if counts[i]:
            result.span = [int(first_rows[i]), int(counts[i])]
            if segment is None:
                result.table = table  # the whole batch: its reader slices it
            else:
                result.segment = segment
        results.append(result)
        if progress is not None:
            progress(len(chunk))
    return results
