"""A segment's words (issue 16's words of each response), found where they are first read and kept beside it.

A cold read keeps in a segment only the words of its samples with tokens (``token_words``): the words of a
response without tokens (verl's dumps) are found again from the segment's texts when a search, the findings
or a diff's marks first read them (``derive.samples.compute_words``, the function the 4-grams' words come
from), so a read that never looks at them does not pay for them (issue 52). With a cache they are written
beside the segment as one more Arrow file (``cache.words_name``: named by the segment's digest and by that of
its own bytes, checked when it is opened again, removed with its segment) and memory-mapped from there, for
every later reader of the run; a segment whose samples all have tokens (or no response) reads its own column.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..derive.samples import KEPT_WORDS, WORDS, compute_words
from .cache import RunCache, digest_of, open_checked, words_digests, words_name, write_named

WORDS_SCHEMA = pa.schema([("words", WORDS)])  # a words file's one column, a row per row of its segment


class KeptWords:
    """The words of the segments of one cache folder (``folder``; None without a cache: found each time,
    held in memory by the caller). The folder is listed once, on first use."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self._files: dict[str, str] | None = None  # segment digest -> its words file's name

    def column(self, table: pa.Table, name: str | None, pad_token: str | None) -> pa.ChunkedArray:
        """The ``words`` of the segment ``table`` (its file's name in the folder is ``name``; "" or None for
        one not in it): ``compute_words`` of its ``token_words`` and responses with ``pad_token`` removed,
        read from its words file when one is kept and sound, else found and kept (when the folder can be
        written; else they are only returned). A list of dictionary-encoded strings (``WORDS``), a row a row."""
        tokens, responses = table.column("token_words"), table.column("response")
        if not _has_text_words(tokens, responses):
            return tokens
        digest = digest_of(name) if name and self.folder is not None else None
        if digest is not None:
            kept = self._open(digest, table.num_rows)
            if kept is not None:
                return kept
        words = compute_words(tokens, responses, pad_token)
        if digest is not None:
            try:
                return self._keep(name, words)
            except (OSError, pa.ArrowException):  # a folder that can't be written: found again next time
                pass
        return pa.chunked_array([words])

    def _open(self, digest: str, rows: int) -> pa.ChunkedArray | None:
        """The words file of the segment of ``digest``, mapped, once its bytes hash to the digest its name
        carries and it holds ``rows`` rows of ``WORDS_SCHEMA``; None without one. One that fails is deleted
        (then found again)."""
        if self._files is None:
            try:
                names = os.listdir(self.folder)
            except OSError:
                names = []
            self._files = {found[0]: name for name in names if (found := words_digests(name))}
        name = self._files.get(digest)
        if name is None:
            return None
        path = self.folder / name
        try:
            table = open_checked(path, words_digests(name)[1])
            if not table.schema.equals(WORDS_SCHEMA) or table.num_rows != rows:
                raise ValueError("it is not its segment's words")
        except (OSError, ValueError, pa.ArrowException):
            path.unlink(missing_ok=True)
            del self._files[digest]
            return None
        return table.column(0)

    def _keep(self, segment: str, words: pa.Array) -> pa.ChunkedArray:
        """``words`` written beside ``segment`` as its words file (holding the folder's lock, so no refresh
        removes the file half written, nor keeps it once its segment is gone), then mapped from there."""
        cache = RunCache(self.folder)
        with cache.locked():
            if not (self.folder / segment).exists():  # a refresh replaced the segment since the run was read
                return pa.chunked_array([words])
            name = _write(self.folder, segment, words)
        if self._files is not None:
            self._files[digest_of(segment)] = name
        return pa.ipc.open_file(pa.memory_map(str(self.folder / name), "r")).read_all().column(0)


def _write(folder: Path | str, segment: str, words: pa.Array | pa.ChunkedArray) -> str:
    """Write ``words`` as the words file of ``segment`` in ``folder``; returns its name (``words_name``)."""
    return write_named(pa.Table.from_arrays([words], schema=WORDS_SCHEMA), folder,
                       lambda digest: words_name(segment, digest))


def without_words(table: pa.Table) -> tuple[pa.Table, pa.ChunkedArray | None]:
    """(``table`` without the words ``derive`` adds with ``ReadOptions.keep_words``, those words; None
    without them): a segment's rows never hold them."""
    if KEPT_WORDS not in table.column_names:
        return table, None
    return table.drop_columns([KEPT_WORDS]), table.column(KEPT_WORDS)


def keep_beside(out_dir: str, segment: str, table: pa.Table, words: pa.ChunkedArray) -> None:
    """Write ``words`` (``derive``'s with ``keep_words``, of the rows ``table`` of the segment ``segment`` just
    written to ``out_dir``) as the segment's words file, when any of its samples has text words (else its
    ``token_words`` are its words). A worker writes it while the read's process holds the folder's lock; a
    file that can't be written only leaves the words to their first use."""
    if not _has_text_words(table.column("token_words"), table.column("response")):
        return
    try:
        _write(out_dir, segment, words.combine_chunks())  # one dictionary (an IPC file holds one a column)
    except (OSError, pa.ArrowException):
        pass


def _has_text_words(tokens: pa.ChunkedArray, responses: pa.ChunkedArray) -> bool:
    """Whether any sample without tokens has a response (its words are then found from the text)."""
    return any(pc.any(pc.and_(pc.is_null(t), pc.is_valid(r))).as_py()
               for t, r in zip(*_aligned(tokens, responses)))


def _aligned(*columns: pa.ChunkedArray) -> list[list[pa.Array]]:
    """The columns' chunks cut at the same rows (a segment's columns are written a batch at a time, so
    they are; a table made otherwise is joined)."""
    if len({tuple(len(c) for c in column.chunks) for column in columns}) == 1:
        return [column.chunks for column in columns]
    return [[column.combine_chunks()] for column in columns]
