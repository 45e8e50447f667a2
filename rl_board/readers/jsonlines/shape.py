"""The struct a block of JSON lines is decoded into, and the columns taken from it.

``_Shape`` types every key the board reads (canonical names, aliases, mapped sources) as the board
wants it and leaves every other key seen so far unparsed (``msgspec.Raw``); a key met for the first
time is learned and the block decoded again (at most ``_MAX_RELEARNS`` times, then lines with new
keys take the slow path); one decode and its state (the lines refused, whether a key was learned)
is a ``_BlockDecode``. ``_rows`` takes the canonical columns and the extras from the decoded
structs without Python work per line, and names the lines the slow path must read."""

from __future__ import annotations

import json
import re
import threading
import typing
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_not

import msgspec
import numpy as np
import orjson
import pyarrow as pa

from ...base import fields as F
from .. import rawlists
from ..base import candidate_keys, is_path, merged_aliases
from ..canonical import (
    ROWS,
    build_rows,
    float_lists,
    int_lists,
    present_mask,
    token_lists,
)
from ..extras import struct_safe
from ..records import MAX_STEP as _MAX_STEP

ALIASES: dict[str, tuple[str, ...]] = {}  # the board's own lines: none beyond fields.ALIASES
_MAX_KEYS = 512  # keys a shape learns before lines with new keys take the slow path


# Times one block is decoded again after its shape learned keys: lines with a new key on every line
# (a dict keyed by request id) would otherwise decode the block once per key; past it, they read slowly
_MAX_RELEARNS = 32
_MAX_RETRIES = 16  # refused lines in a block before its other lines are decoded one at a time
_UNSET = msgspec.UNSET
_RAW = msgspec.Raw
_SCALAR_START = frozenset(b"-0123456789tf")  # first byte of a JSON number or boolean
_NUMBERS = msgspec.json.Decoder(list[bool | int | float])
_UNKNOWN = re.compile(r"Object contains unknown field `(.*)` - at `\$\[(\d+)\]`$", re.S)
_AT_LINE = re.compile(r"- at `\$\[(\d+)\]")
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")


class _Shape:
    """A struct for the lines of a file, and how its values become canonical columns.

    Every key that can feed a canonical field is typed: ``step`` an int, rewards and scalars
    floats, texts anything (a non-text becomes JSON text), per-token lists floats, tokens
    strings; every other key seen is ``msgspec.Raw``. Keys are learned as they are met."""

    def __init__(self, fields: tuple[tuple[str, str], ...]):
        mapped, aliases = dict(fields), merged_aliases(ALIASES)
        self.candidates = {name: list(candidate_keys(name, mapped, aliases)) for name in F.CANONICAL}
        feeds: dict[str, set[str]] = {}
        for name, keys in self.candidates.items():
            for key in keys:
                feeds.setdefault(key, set()).add(name)
        kinds = {key: {_kind(name) for name in names} for key, names in feeds.items()}
        # a key feeding two kinds, or a nested source (``run.work.step``): every line by the slow path
        self.usable = all(len(k) == 1 for k in kinds.values()) and not any(is_path(s) for s in mapped.values())
        # a mapped key msgspec can't name (a quote, a backslash, a control character): every line by the slow path
        self.usable = self.usable and all(struct_safe(key) for key in feeds)
        self.types = {key: _TYPES[kind.pop()] for key, kind in kinds.items() if len(kind) == 1}
        # keys that are never extras: the canonical names and every key that can feed one
        self.taken = frozenset(F.CANONICAL).union(*self.candidates.values())
        self._lock = threading.Lock()  # one shape serves every thread of a process (the page's sessions)
        self.keys: list[str] = []
        self._known: set[str] = set()  # the keys, for a cheap look-up
        for key in [*self.types, *F.CANONICAL]:
            self._add(key)
        self._build()

    def _add(self, key: str) -> None:
        # a key msgspec can't name (a quote, a backslash, a control character) is never in the struct:
        # its lines take the slow path, where any name is data
        if key not in self._known and struct_safe(key):
            self.keys.append(key)
            self._known.add(key)

    def _build(self) -> None:
        def type_of(key):
            return self.types.get(key, _RAW)

        shared = {k for keys in self.candidates.values() if len(keys) > 1 for k in keys}
        names = {key: f"f{i}" for i, key in enumerate(self.keys)}
        struct = msgspec.defstruct("Line", [(names[k], type_of(k), _UNSET if k in shared else None)
                                            for k in self.keys],
                                   rename={v: k for k, v in names.items()}, forbid_unknown_fields=True)
        # replaced whole, never changed: a block decoded with one version is read with that version
        self.version = _Version(tuple(self.keys), names, msgspec.json.Decoder(struct))

    def learn(self, message: str, line=None) -> bool:
        """Add what a refusal names (an unknown key) to the shape, with every other key of the refused
        ``line`` (its bytes, when known): a file's extra fields are learned at once, not one decode each."""
        with self._lock:
            return self._learn(message, line)

    def _learn(self, message: str, line) -> bool:
        unknown = _UNKNOWN.search(message)
        if not unknown or len(self.keys) >= _MAX_KEYS or unknown[1] in self._known or not struct_safe(unknown[1]):
            return False
        self._add(unknown[1])
        if line is not None:
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                record = None
            for key in record if isinstance(record, dict) else ():
                if len(self.keys) < _MAX_KEYS:
                    self._add(key)
        self._build()
        return True

    def learn_keys(self, keys) -> bool:
        """Add ``keys`` (extras a block holds, met by Arrow's reader) to the shape at once, as a refusal
        naming them would; False, learning none, when one can't be a struct's field or they don't fit."""
        with self._lock:
            new = [key for key in dict.fromkeys(keys) if key not in self._known]
            if not all(struct_safe(key) for key in new) or len(self.keys) + len(new) > _MAX_KEYS:
                return False
            if new:
                for key in new:
                    self._add(key)
                self._build()
            return True

    def decode(self, data: bytes, starts: np.ndarray, ends: np.ndarray, lines: np.ndarray):
        """(structs, the line index of each, line indices the slow path reads, the shape's version
        that decoded them) for ``lines``. A decode that taught the shape a key is thrown away and the
        block decoded again with the new version, at most ``_MAX_RELEARNS`` times; after that a line
        with a new key is refused like any other and read by the slow path."""
        if not self.usable or not len(lines):
            return [], [], list(lines), self.version
        relearned = 0
        while True:
            version = self.version
            block = _BlockDecode(self, data, starts, ends, lines, version.decoder,
                                 may_learn=relearned < _MAX_RELEARNS)
            if block.run():
                return (*block.result(), version)
            relearned += 1


class _BlockDecode:
    """One decode of a block's ``lines`` by one version of a shape's struct, its state in plain sight.

    The lines are decoded a span at a time (``decoder.decode_lines``); a refusal names its line, which
    goes to the slow path while the spans on either side of it are decoded again. ``refusals`` counts
    them: past ``_MAX_RETRIES`` every line left is decoded alone (a block of many bad lines must not
    cost a span decode each). A refusal naming a key the shape did not know teaches the shape that key
    (when ``may_learn``): the decode stops there, ``relearned`` is set, and the caller decodes the block
    again with the shape's new version, since the structs already decoded lack the key."""

    def __init__(self, shape: _Shape, data, starts: np.ndarray, ends: np.ndarray, lines: np.ndarray,
                 decoder: msgspec.json.Decoder, may_learn: bool = True):
        self.shape, self.starts, self.ends, self.lines = shape, starts, ends, lines
        self.decoder, self.may_learn = decoder, may_learn
        self.view = memoryview(data)
        self.objs: list = []  # the decoded structs, in the order they were decoded
        self.fast: list[int] = []  # the line index of each struct
        self.slow: list[int] = []  # line indices the slow path reads
        self.refusals = 0  # lines refused so far (and spans given up); past _MAX_RETRIES lines go one at a time
        self.relearned = False  # the shape learned a key: this decode is void

    def run(self) -> bool:
        """Decode every line; False when the shape learned a key and the block must be decoded again.
        The spans wait on a stack, the left one on top, so they are decoded in the lines' order."""
        todo = [(0, len(self.lines))]
        while todo and not self.relearned:
            a, b = todo.pop()
            if a >= b:
                continue
            if self.refusals > _MAX_RETRIES:
                self._each(a, b)
            else:
                todo.extend(reversed(self._span(a, b)))
        return not self.relearned

    def result(self) -> tuple[list, list[int], list[int]]:
        """(structs, the line index of each, line indices the slow path reads), in the lines' order."""
        order = np.argsort(np.asarray(self.fast, np.int64), kind="stable")
        return [self.objs[i] for i in order], [self.fast[i] for i in order], sorted(self.slow)

    def _span(self, a: int, b: int) -> list[tuple[int, int]]:
        """Decode ``lines[a:b]`` at once; the spans left to decode again (left first) around a refused line."""
        starts, lines = self.starts, self.lines
        chunk = self.view[starts[lines[a]]:self.ends[lines[b - 1]]]
        try:
            got = self.decoder.decode_lines(chunk)
        except RecursionError:  # nested too deeply somewhere: read the lines one by one
            self.refusals += 1
            self._each(a, b)
            return []
        except UnicodeDecodeError as exc:  # bytes that are not UTF-8: name the line they are on
            self.refusals += 1
            at = _failed_line(f"(byte {exc.start})", chunk, starts, lines, a, b)
            self.slow.append(int(lines[at]))
            return [(a, at), (at + 1, b)]
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            message = str(exc)
            at = _failed_line(message, chunk, starts, lines, a, b)
            line = None if at is None else self.view[starts[lines[at]]:self.ends[lines[at]]]
            if self.may_learn and self.shape.learn(message, line):
                self.relearned = True
                return []
            self.refusals += 1
            if at is None:
                self._each(a, b)
                return []
            self.slow.append(int(lines[at]))
            return [(a, at), (at + 1, b)]
        if len(got) != b - a:  # white space the decoder skipped, or two objects on a line
            self._each(a, b)
            return []
        self.objs.extend(got)
        self.fast.extend(lines[a:b].tolist())
        return []

    def _each(self, a: int, b: int) -> None:
        """Decode ``lines[a:b]`` one at a time, stopping at a line that teaches the shape a key."""
        for k in range(a, b):
            index = int(self.lines[k])
            raw = self.view[self.starts[index]:self.ends[index]]
            try:
                got = self.decoder.decode(raw)
            except (UnicodeDecodeError, RecursionError):
                self.slow.append(index)
                continue
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                if self.may_learn and self.shape.learn(str(exc), raw):
                    self.relearned = True
                    return
                self.slow.append(index)
                continue
            self.objs.append(got)
            self.fast.append(index)


@dataclass(frozen=True)
class _Version:
    """One version of a shape: its keys, their struct field names, and the decoder of that struct."""

    keys: tuple[str, ...]
    names: dict[str, str]
    decoder: msgspec.json.Decoder


def _rows(shape: _Shape, version: _Version, objs: list, lines: np.ndarray, first_line: int, base_offset: int,
          starts: np.ndarray, lengths: np.ndarray, reward_required: bool = True) -> tuple[pa.Table, list[int]]:
    """(the canonical rows of lines decoded by ``shape``'s ``version``, positions in ``objs`` the slow path
    must read)."""
    count = len(objs)
    columns: dict[str, list] = {}
    refused = np.zeros(count, bool)
    for name, keys in shape.candidates.items():
        values = [list(map(attrgetter(version.names[k]), objs)) for k in keys]
        if len(values) > 1:  # a field and its aliases: absent is UNSET, null is None; the first present wins
            here = [_is_set(column) for column in values]
            refused |= np.sum(here, axis=0) > 1  # an alias beside its field: the slow path sorts it
            chosen, have = values[0], here[0]
            for column, present in zip(values[1:], here[1:]):
                take = present & ~have
                if take.any():
                    chosen = column if not have.any() else _take(column, chosen, take)
                    have |= take
            values[0] = _take(chosen, [None] * count, have)
        columns[name] = values[0]
    try:
        steps = np.fromiter(columns[F.STEP], np.int64, count)
        refused |= (steps < -_MAX_STEP) | (steps > _MAX_STEP)
    except (TypeError, OverflowError):  # a missing or huge step: the slow path words it
        refused |= np.fromiter(map(_bad_step, columns[F.STEP]), bool, count)
    if reward_required:
        refused |= ~present_mask(columns[F.REWARD])
    for name, kind in _RAW_KINDS.items():
        columns[name], odd = _raw_column(columns[name], kind)
        refused |= odd
    for name in F.TEXT_FIELDS:
        column = columns[name]
        kinds = set(map(type, column))
        if kinds - {str, type(None)}:
            for i in (i for i, v in enumerate(column) if v is not None and type(v) is not str):
                try:
                    column[i] = json.dumps(column[i], ensure_ascii=False)
                except (RecursionError, ValueError):
                    refused[i] = True
                    column[i] = None
    extras = {}
    for key in version.keys:
        if key in shape.taken:
            continue
        got = _extra(version, objs, key, count)
        if got is None:
            continue
        values, present, odd = got
        refused |= odd
        if present.any():
            extras[key] = pa.array(values, pa.float64(), mask=~present)
    keep = ~refused
    if not keep.all():
        kept = pa.array(keep)
        columns = {name: col.filter(kept) if isinstance(col, pa.Array) else list(compress(col, keep))
                   for name, col in columns.items()}
        extras = {name: col.filter(kept) for name, col in extras.items()}
        lines = lines[keep]
    if lines.size:
        columns[F.STEP] = np.asarray(columns[F.STEP], np.int64)
    columns[F.LINE] = first_line + lines
    columns["offset"] = base_offset + starts[lines]
    columns["length"] = lengths[lines]
    extras = {name: col for name, col in extras.items() if col.null_count < len(col)}
    return build_rows(columns, extras), np.flatnonzero(refused).tolist()


def _extra(version: _Version, objs: list, key: str, count: int):
    """(float values, present, lines to read slowly) of an unparsed key, or None when no line
    holds a number or boolean there."""
    raws = list(map(attrgetter(version.names[key]), objs))
    scalar = np.isin(rawlists.first_bytes(raws), list(_SCALAR_START))  # an absent key's 0 is not
    if not scalar.any():
        return None
    where = np.flatnonzero(scalar)
    values = np.full(count, np.nan)
    odd = np.zeros(count, bool)
    numbers = _NUMBERS.decode(b"[" + b",".join(compress(raws, scalar)) + b"]")
    try:
        values[where] = np.asarray(numbers, dtype=np.float64)
    except OverflowError:  # an integer beyond float range: the slow path makes it infinite
        odd[where] = True
    return values, scalar, odd


_TYPES = {"step": int, "number": float | None, "text": typing.Any, "list": _RAW, "tokens": _RAW, "ids": _RAW,
          "mask": list[bool | int | float] | None}


# the lists decoded as raw JSON: how a column becomes Arrow (None: not that shape), and the typed decoder
# and builder that read it when not
_RAW_LISTS = {kind: (code, msgspec.json.Decoder(list[element] | None), msgspec.json.Decoder(list[list[element]]), build)
              for kind, code, element, build in (("list", "d", float | None, float_lists),
                                                 ("tokens", "t", str, token_lists), ("ids", "i", int, int_lists))}


def _kind(name: str) -> str:
    if name == F.STEP:
        return "step"
    if name in F.TEXT_FIELDS:
        return "text"
    if name in F.TOKEN_FIELDS:
        return "list"
    if name == F.TOKENS:
        return "tokens"
    if name == F.TOKEN_IDS:
        return "ids"
    if name == F.LOSS_MASK:
        return "mask"
    return "number"


_RAW_KINDS = {name: _kind(name) for name in F.CANONICAL if _kind(name) in _RAW_LISTS}
_ROW_TYPES = {kind: ROWS.field(name).type for name, kind in _RAW_KINDS.items()}


def _raw_column(raws: list, kind: str) -> tuple[pa.Array, np.ndarray]:
    """(the Arrow array of a column of raw JSON lists, lines the slow path must read: a value that is
    neither a list nor null, or a list the typed decoder refuses)."""
    code, decoder, column_decoder, build = _RAW_LISTS[kind]
    if raws.count(None) == len(raws):  # no line has the key
        return pa.nulls(len(raws), _ROW_TYPES[kind]), np.zeros(len(raws), bool)
    array, lists, refused = rawlists.read_column(raws, code)
    if array is not None:
        return array, refused
    values = [None] * len(raws)
    where = np.flatnonzero(lists)
    try:  # the column in one typed decode
        for i, value in zip(where.tolist(), column_decoder.decode(b"[" + b",".join(compress(raws, lists)) + b"]")):
            values[i] = value
    except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        for i in where.tolist():  # this column of this block only, line by line: the bad ones go slow
            try:
                values[i] = decoder.decode(raws[i])
            except (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                refused[i] = True
    return build(values), refused


def _bad_step(value) -> bool:
    return type(value) is not int or not -_MAX_STEP <= value <= _MAX_STEP


def _is_set(values: list) -> np.ndarray:
    """Whether each value is present (not ``msgspec.UNSET``); bool, shape (len(values),). A key no line
    of the block holds (an alias the run doesn't use: most of them) is counted at C speed, not per value."""
    absent = values.count(_UNSET)
    if absent in (0, len(values)):
        return np.full(len(values), absent == 0)
    return np.fromiter(map(is_not, values, repeat(_UNSET)), bool, len(values))


def _take(first: list, second: list, use_first: np.ndarray) -> list:
    """``first[i]`` where ``use_first[i]``, else ``second[i]``, without Python work per entry."""
    if use_first.all():
        return first
    out = np.fromiter(second, object, len(second))
    picked = np.fromiter(compress(first, use_first), object, int(use_first.sum()))
    out[use_first] = picked
    return out.tolist()


_SHAPES: dict[tuple, _Shape] = {}  # field mapping -> the shape its blocks are decoded with, in this process
_SHAPES_KEPT = 16  # field mappings whose shapes are kept
_SHAPES_LOCK = threading.Lock()


def _shape(fields: tuple[tuple[str, str], ...]) -> _Shape:
    """The shape of this process for ``fields``, learned from every block read so far; a fresh one when
    that is full (``_MAX_KEYS``): a run of many distinct keys (one a line) fills it, and every run read
    after it in the same process (the page's server) would otherwise read each new key's lines slowly."""
    with _SHAPES_LOCK:
        shape = _SHAPES.get(fields)
        if shape is None or len(shape.keys) >= _MAX_KEYS:
            if shape is None and len(_SHAPES) >= _SHAPES_KEPT:
                _SHAPES.pop(next(iter(_SHAPES)))
            shape = _SHAPES[fields] = _Shape(fields)
        return shape


def _failed_line(message: str, chunk, starts, lines, a: int, b: int) -> int | None:
    """The position in ``lines`` (within [a, b)) of the line a refusal names, if it names one."""
    at = _AT_LINE.search(message)
    if at:
        k = a + int(at[1])
        return k if k < b else None
    at = _AT_BYTE.search(message)
    if at:
        offset = starts[lines[a]] + int(at[1])
        k = a + int(np.searchsorted(starts[lines[a:b]], offset, side="right")) - 1
        return k if a <= k < b else None
    return None
