"""A block's per-token lists, left as raw JSON by its decode, turned into Arrow list arrays a column at a time.

The JSON-lines reader decodes the per-token lists of a block as ``msgspec.Raw``: their
bytes, checked as JSON, with no Python object per value. Here a whole column of them
becomes one Arrow array (``read_column``) with no Python work per line or per value:

- numbers: the column's lists joined into one JSON array, parsed once by simdjson, whose
  ``as_buffer`` writes every number into one flat buffer; each list's length is its commas
  plus one, counted with numpy (a marker number written between the lists, read back among
  the values, was at most 1.1-1.3 x faster: issue 53 keeps no kernel for that);
- token strings: each string's quotes found with numpy (a quote
  after an odd run of backslashes is inside a string), the bytes from one string to the
  next dictionary-encoded by Arrow where they lie, and each distinct piece cut to the
  text between its quotes (and unescaped, when it has escapes) once.

It gives no array (None) when the column holds anything else (a null inside a list, a
string among numbers, a nested list, a number beyond the float range, bytes that are
not UTF-8, white space where it expects none or inside an empty list of numbers); the
caller then reads that column by the typed path, which decides line by line. Either way the values are the same: both
parse numbers to the nearest double.
"""

from __future__ import annotations

import threading
from itertools import compress

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import simdjson

from .canonical import TOKEN_STRINGS, present_mask

_LOCAL = threading.local()  # a simdjson parser is not shared between threads
_NULL, _LIST, _COMMA, _QUOTE, _BACKSLASH = 110, 91, 44, 34, 92
_TYPES = {"d": (np.float64, pa.float64()), "i": (np.int64, pa.int64())}


def read_column(raws: list, kind: str) -> tuple[pa.Array | None, np.ndarray, np.ndarray]:
    """(the Arrow array of one column of raw values, null where a value is not a list, or None when a
    list holds anything else; where a value is a JSON list; where it is neither a list nor null nor
    absent: that line is refused). ``kind``: "d" lists of numbers, "i" of integers, "t" of strings."""
    first, kept, sizes, joined = _joined(raws)
    lists = first == _LIST
    refused = ~(lists | (first == _NULL) | (first == 0))
    if len(kept) != np.count_nonzero(lists):  # a null or another value among them: join the lists alone
        kept = list(compress(raws, lists))
        sizes = np.fromiter(map(len, kept), np.int64, len(kept))
        joined = b"".join(kept)
    if kind == "t":
        return _token_lists(joined, sizes, lists), lists, refused
    return _number_lists(kept, sizes, lists, kind), lists, refused


def first_bytes(raws: list) -> np.ndarray:
    """The first byte of each raw value (0 for None: a key the line lacks); uint8, shape (len(raws),)."""
    return _joined(raws)[0]


def _joined(raws: list) -> tuple[np.ndarray, list, np.ndarray, bytes]:
    """(the first byte of each raw value, 0 for None; the values present; their sizes; them joined): each
    first byte read where its value starts in the join (a raw value is never empty)."""
    present = present_mask(raws)
    kept = raws if present.all() else list(compress(raws, present))
    sizes = np.fromiter(map(len, kept), np.int64, len(kept))
    joined = b"".join(kept)
    first = np.zeros(len(raws), np.uint8)
    if kept:
        first[present] = np.frombuffer(joined, np.uint8)[np.cumsum(sizes) - sizes]
    return first, kept, sizes, joined


def _parser() -> simdjson.Parser:
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = simdjson.Parser()
    return parser


def _number_lists(kept: list, sizes: np.ndarray, lists: np.ndarray, code: str) -> pa.Array | None:
    """The lists of numbers of a column (``kept``), joined into one JSON array parsed once by simdjson
    (every value into one flat buffer); a list's length is its commas plus one (none for ``[]``), the
    commas counted with numpy. None for a nested list (simdjson would flatten it), a null, a string,
    a boolean, a number out of range, or white space inside an empty list."""
    dtype, type_ = _TYPES[code]
    if not kept:
        return _lists(lists, np.zeros(0, np.int64), pa.array([], type_))
    joined = b"[" + b",".join(kept) + b"]"
    buffer = np.frombuffer(joined, np.uint8)
    if np.count_nonzero(buffer == _LIST) != len(kept) + 1:  # a nested list
        return None
    try:
        values = np.frombuffer(_parser().parse(joined).as_buffer(of_type=code), dtype)
    except (TypeError, ValueError, RuntimeError):  # null, a string, a boolean, a number out of range
        return None
    ends = np.cumsum(sizes + 1)  # the joining comma (or the closing bracket) after each list
    commas = np.flatnonzero(buffer == _COMMA)
    before = np.searchsorted(commas, ends) - np.arange(len(sizes))  # commas inside the lists up to each end
    lengths = np.where(sizes > 2, np.diff(before, prepend=0) + 1, 0)
    if lengths.sum() != len(values):  # white space inside an empty list
        return None
    return _lists(lists, lengths, pa.array(values, type_))


def _lists(lists: np.ndarray, lengths: np.ndarray, values: pa.Array) -> pa.Array:
    sizes = np.zeros(len(lists), np.int64)
    sizes[lists] = lengths
    offsets = np.zeros(len(lists) + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(~lists))


def _token_lists(joined: bytes, sizes: np.ndarray, lists: np.ndarray) -> pa.Array | None:
    """The lists of strings of a column (``joined``, each ``sizes`` bytes), written without white space
    (``["a","b"]``) or with one space after each comma (Python's ``json.dumps``), as a dictionary-encoded
    ``list<string>`` array; None for any other shape."""
    # speed: 1.7 x pyarrow.json's reader on a GRPO block's tokens (benchmarks/bench_kernels.py); reference
    # test: tests/test_rawlists.py::test_token_lists_give_what_orjson_gives
    buffer = np.frombuffer(joined, np.uint8)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    quotes = np.flatnonzero(buffer == _QUOTE)
    escapes = _BACKSLASH in buffer
    if escapes:
        quotes = quotes[~_escaped(quotes, np.flatnonzero(buffer == _BACKSLASH))]
    if len(quotes) % 2:
        return None
    opens, closes = quotes[0::2], quotes[1::2]
    counts = np.diff(np.searchsorted(opens, ends), prepend=0)
    if not _only_strings(buffer, starts, ends, sizes, opens, closes, counts):
        return None
    # each string runs from its opening quote to the next one's: its text between quotes, then the
    # commas, brackets and spaces before the next. Encoded as they are (few distinct), then cut to the
    # text between quotes once per distinct string.
    offsets = np.r_[opens, len(joined)].astype(np.int32)
    pieces = pc.dictionary_encode(pa.StringArray.from_buffers(len(opens), pa.py_buffer(offsets), pa.py_buffer(joined)))
    try:  # UTF-8 (the decode skipped these bytes without looking)
        pieces.dictionary.validate(full=True)
    except pa.ArrowInvalid:
        return None
    texts = pc.replace_substring_regex(pieces.dictionary, pattern='^"|"[^"]*$', replacement="")
    if escapes:
        texts = _unescape(texts)
        if texts is None:
            return None
    distinct = pc.dictionary_encode(texts)  # pieces that differ only after their text are one string
    values = pa.DictionaryArray.from_arrays(distinct.indices.take(pieces.indices), distinct.dictionary)
    array = _lists(lists, counts, values)
    return array if array.type == TOKEN_STRINGS else array.cast(TOKEN_STRINGS)


def _escaped(quotes: np.ndarray, backslashes: np.ndarray) -> np.ndarray:
    """Whether each quote is escaped: right after a run of an odd number of backslashes."""
    if not len(backslashes) or not len(quotes):
        return np.zeros(len(quotes), bool)
    new_run = np.r_[True, backslashes[1:] != backslashes[:-1] + 1]
    run_starts = backslashes[new_run]
    run_ends = np.r_[backslashes[np.flatnonzero(new_run)[1:] - 1], backslashes[-1]]
    k = np.minimum(np.searchsorted(run_ends, quotes - 1), len(run_ends) - 1)
    return (run_ends[k] == quotes - 1) & ((run_ends[k] - run_starts[k]) % 2 == 0)


def _only_strings(buffer, starts, ends, sizes, opens, closes, counts) -> bool:
    """Whether every list holds strings only: a list is ``[]``, or its first string opens right after
    ``[``, its last closes right before ``]``, and between two strings lies ``,`` or ``, ``."""
    nonempty = counts > 0
    if np.any((counts == 0) & (sizes != 2)):
        return False
    if not len(opens):
        return True
    first = np.cumsum(counts) - counts  # index of each list's first string
    last = first + counts - 1
    if np.any(opens[first[nonempty]] != starts[nonempty] + 1) or np.any(closes[last[nonempty]] != ends[nonempty] - 2):
        return False
    between = np.ones(len(opens), bool)
    between[last[nonempty]] = False  # the gap after a list's last string is not inside it
    gaps = opens[1:] - closes[:-1] - 1
    inner = between[:-1]
    after = buffer[closes[:-1][inner] + 1]
    width = gaps[inner]
    spaced = width == 2
    return bool(np.all(after == _COMMA) and np.all((width == 1) | spaced)
                and np.all(buffer[closes[:-1][inner][spaced] + 2] == 32))


def _unescape(texts: pa.Array) -> pa.Array | None:
    """``texts`` with each string that holds an escape read as JSON."""
    try:
        return pa.array([orjson.loads(f'"{text}"') if "\\" in text else text for text in texts.to_pylist()],
                        pa.string())
    except orjson.JSONDecodeError:
        return None
