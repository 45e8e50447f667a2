"""JSON lines: the board's own rollout lines, OpenRLHF-style rank files and verl's ``{step}.jsonl`` dumps.

Each line is one sample, decoded by the first of three paths that takes it:

1. one msgspec call into a struct of every key the board knows (canonical names,
   aliases, mapped sources): the log-probabilities the aggregates read as typed
   floats, the other per-token lists left unparsed (only their length counts
   here), unknown keys refused;
2. a line with other keys (extra fields) is split into raw top-level values, and
   only those a row needs are decoded;
3. a line msgspec refuses (NaN and Infinity, which Python's json writes, or
   anything broken) is parsed by orjson, then ujson, which also word the error. What a sample's row keeps: its
scalars, texts, extras, where the line lies, and its per-sample aggregates
(log-ratio and KL over the positions before the pad). The per-token lists are
not kept: a sample's tokens are read again from its line when it is shown. A
bad line costs only itself: it becomes an entry in ``errors``.
"""

from __future__ import annotations

import functools
import gc
import json
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import orjson
import pyarrow as pa
import ujson

from .. import fields as F
from ..metrics import TokenColumns, compute_sample_aggregates, repeat_4gram_share, token_positions
from . import KeyResolver, ReadOptions, SourceChanged, is_extra_value
from .canonical import SCHEMA, build_table, prompt_key

NAME = "jsonl"
SUFFIX = ".jsonl"
APPENDABLE = True  # a file that grew is read from where the last read stopped
ALIASES: dict[str, str] = {}  # beyond fields.ALIASES

#: The fields of a row tuple built while parsing, in order.
_ROW_FIELDS = (F.LINE, "offset", "length", F.STEP, F.REWARD, *F.SCALAR_FIELDS, *F.TEXT_FIELDS,
               "n_tokens", "response_len", "lengths_differ", "response_chars", "ref_response_chars", "repeat_4gram",
               "prompt_key")
_PROMPT, _RESPONSE, _REF_RESPONSE = (F.TEXT_FIELDS.index(n) for n in ("prompt", "response", "ref_response"))
_STRICT = ("logprobs", "ref_logprobs")  # a line whose list here holds a non-number is rejected
_STEP_RE = re.compile(rb'(?<!\\)"step"\s*:\s*(-?\d+)')
_MAX_STEP = 2**62

_RAW = msgspec.Raw
_UNSET = msgspec.UNSET
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])  # the top level, values left unparsed
_FLOATS = msgspec.json.Decoder(list[float | None])
_ANY = msgspec.json.Decoder()
_SCALAR_START = frozenset(b"-0123456789tf")  # first byte of a JSON number or boolean


@dataclass
class ParsedBlock:
    """Samples parsed from a block of complete lines, and the lines rejected.

    table: one row per accepted line, canonical columns (``canonical.SCHEMA`` plus extras).
    errors: ``(line_number, reason)`` for every rejected line.
    lines: complete lines in the block (blank ones included).
    skipped: lines not parsed because their step already had enough samples.
    """

    table: pa.Table
    errors: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0
    skipped: int = 0


def parse_block(data: bytes, first_line: int = 1, base_offset: int = 0, options: ReadOptions = ReadOptions(),
                step_quota: dict[int, int] | None = None, max_per_step: int | None = None) -> ParsedBlock:
    """Parse the complete lines of ``data`` (up to its last newline).

    Args:
        data: bytes of a file starting at byte ``base_offset``, at a line start.
        first_line: the number of the first line.
        options: the pad and EOS tokens (which positions count, see ``metrics``) and the
            user's field mapping.
        step_quota, max_per_step: with ``max_per_step``, keep a line only while its
            step has fewer samples than that in ``step_quota`` (updated in place); a
            line whose step is already full is skipped without being parsed.
    """
    quota = step_quota if step_quota is not None else {}
    resolver = KeyResolver(options.fields, ALIASES)
    decoder = _line_decoder(options.fields)
    rows, extras, errors, skipped, lines = [], [], [], 0, 0
    token_columns = TokenColumns()
    enabled = gc.isenabled()
    gc.disable()  # lines make no reference cycles; collecting while parsing only costs time
    try:
        view, start, find = memoryview(data), 0, data.find
        while (end := find(b"\n", start)) >= 0:
            raw, line_start, start = view[start:end], start, end + 1
            number = first_line + lines
            lines += 1
            if max_per_step is not None:
                hits = _STEP_RE.findall(raw)  # a cheap look at the step, before any parsing
                if len(hits) == 1 and quota.get(int(hits[0]), 0) >= max_per_step:
                    skipped += 1
                    continue
            parsed = _parse_line(raw, options, resolver, decoder)
            if parsed is None:
                continue
            if isinstance(parsed, str):
                errors.append((number, parsed))
                continue
            row, extra, cut = parsed
            if max_per_step is not None:
                step = row[0]
                if quota.get(step, 0) >= max_per_step:
                    skipped += 1
                    continue
                quota[step] = quota.get(step, 0) + 1
            rows.append((number, base_offset + line_start, len(raw), *row))
            extras.append(extra)
            token_columns.add(cut)
    finally:
        if enabled:
            gc.enable()
    columns = dict(zip(_ROW_FIELDS, zip(*rows))) if rows else {name: () for name in _ROW_FIELDS}
    columns.update(compute_sample_aggregates(token_columns.finish()))
    names = {name for extra in extras for name in extra}
    extra_columns = {name: [extra.get(name) for extra in extras] for name in names}
    return ParsedBlock(build_table(columns, extra_columns), errors, lines, skipped)


def parse_line(raw: bytes) -> dict | str:
    """One line as a dict, or the reason it is not a JSON object."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"not UTF-8 (byte {exc.start + 1} of the line)"
        try:  # NaN, Infinity and 1e400 are JSON to Python's json and ujson, not to orjson
            obj = ujson.loads(text)
        except ValueError:
            return _json_error(text)
    if not isinstance(obj, dict):
        return f"line is a JSON {_json_type(obj)}, not an object"
    return obj


def record(path: Path, offset: int, length: int, line: int) -> dict:
    """The line of one sample as a dict, read again from its file; ``SourceChanged`` when it is
    no longer there."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        raw = fh.read(length + 1)
    obj = parse_line(raw[:length]) if raw[length:] in (b"\n", b"") else "moved"  # b"": a last line, unterminated
    if isinstance(obj, str):
        raise SourceChanged(f"{path.name}:{line} changed since the run was read; refresh it.")
    return obj


def read(tasks, out_dir: str, options: ReadOptions, quota=None, max_per_step=None, progress=None):
    """Parse every (path, start, stop) byte range of new lines into segments (see ``ingest``)."""
    from ..ingest import run_ranges, tasks_for

    return run_ranges(tasks_for(tasks), out_dir, options, quota, max_per_step, progress)


class _LineDecoder:
    """Decodes a line in one msgspec call into the keys the board knows for one field mapping.

    Keys that feed only per-token lists are typed floats; everything else is decoded as
    any JSON. A line with a key outside this set (an extra field) or a value of another type
    is refused: the caller takes a slower path."""

    def __init__(self, fields: tuple[tuple[str, str], ...]):
        mapped = dict(fields)
        aliases = {**F.ALIASES, **ALIASES}
        feeds: dict[str, set[str]] = {}
        for name in F.CANONICAL:
            sources = (mapped[name],) if name in mapped else (name, aliases.get(name))
            for key in filter(None, sources):
                feeds.setdefault(key, set()).add(name)
        for key in [*F.CANONICAL, *aliases.values()]:  # a name that feeds nothing may still be present
            feeds.setdefault(key, set())

        def kind(names, entry):
            return list[entry] | None if names and names <= set(F.TOKEN_FIELDS) else typing.Any

        self.keys = list(feeds)
        self.typed = frozenset(k for k in self.keys if kind(feeds[k], float) is not typing.Any)
        rename = {f"f{i}": k for i, k in enumerate(self.keys)}
        # a list of plain floats decodes fastest; one with nulls in it takes the second decoder
        self._decoders = [msgspec.json.Decoder(msgspec.defstruct(
            "Line", [(f"f{i}", kind(feeds[k], entry), _UNSET) for i, k in enumerate(self.keys)],
            rename=rename, forbid_unknown_fields=True)) for entry in (float, float | None)]

    def decode(self, raw) -> dict | None:
        """Key -> value of the keys present, or None when this decoder can't take the line."""
        for decoder in self._decoders:
            try:
                values = msgspec.structs.astuple(decoder.decode(raw))
            except msgspec.ValidationError as exc:
                if str(exc).startswith("Object contains unknown field"):
                    return None  # an extra field: no other struct takes it either
                continue
            except (msgspec.DecodeError, UnicodeDecodeError):
                return None
            return {k: v for k, v in zip(self.keys, values) if v is not _UNSET}
        return None


@functools.lru_cache(maxsize=16)
def _line_decoder(fields: tuple[tuple[str, str], ...]) -> _LineDecoder:
    return _LineDecoder(fields)


def _parse_line(raw: memoryview, options: ReadOptions, resolver: KeyResolver, decoder: _LineDecoder):
    """(row, extras, per-token lists (Python lists of floats or None) cut to the counted positions)
    for one line, None for a blank
    line, or the reason it is rejected. ``row`` holds the fields of ``_ROW_FIELDS`` after line,
    offset and length."""
    if not raw.nbytes or (raw.nbytes < 64 and not bytes(raw).strip()):
        return None
    top = decoder.decode(raw)
    if top is not None:
        return _build_row(top, decoder.typed, options, resolver)
    try:
        return _build_row(_TOP.decode(raw), frozenset(), options, resolver)
    except (msgspec.DecodeError, UnicodeDecodeError):  # not strict JSON, not an object: the slow path says why
        pass
    obj = parse_line(raw)
    if isinstance(obj, str):
        return obj
    return _build_row(obj, frozenset(), options, resolver)


def _build_row(top: dict, typed_keys: frozenset, options: ReadOptions, resolver: KeyResolver):
    """The row of one line from its top-level values: each a ``msgspec.Raw`` (decoded here) or a
    Python value; lists under ``typed_keys`` are already checked to hold only numbers or nulls.
    Raises ``msgspec.DecodeError`` on a raw value msgspec can't decode (the caller then takes
    the slow path)."""
    sources, taken = resolver.resolve(top.keys())

    def get(name):
        key = sources.get(name)
        if key is None:
            return None
        value = top[key]
        return _ANY.decode(value) if type(value) is _RAW else value

    step = get(F.STEP)
    if step is None:
        return f"missing {resolver.source_of(F.STEP)}"
    if type(step) is not int:
        if not _is_number(step) or not float(step).is_integer():
            return f"'step' must be an integer, got {_short(step)}"
        step = int(step)
    if abs(step) > _MAX_STEP:
        return f"'step' out of range: {_short(step)}"
    reward = get(F.REWARD)
    if reward is None:
        return f"missing {resolver.source_of(F.REWARD)}"
    if not _is_number(reward):
        return f"'reward' must be a number, got {_short(reward)}"
    scalars = [float(v) if _is_number(v) else None for v in map(get, F.SCALAR_FIELDS)]
    texts = [v if v is None or type(v) is str else json.dumps(v, ensure_ascii=False)
             for v in map(get, F.TEXT_FIELDS)]
    arrays, lengths = {}, {}
    for name in F.TOKEN_FIELDS:
        key = sources.get(name)
        if key is None:
            continue
        values, typed = top[key], key in typed_keys
        if type(values) is _RAW:
            try:
                values, typed = _FLOATS.decode(values), True
            except msgspec.ValidationError:  # null, or entries that are not numbers: look closer
                values = _ANY.decode(values)
        if values is None:
            continue
        if type(values) is not list:
            return f"'{name}' must be a list of numbers or null, got {_json_type(values)}"
        lengths[name] = len(values)
        if not typed:  # the slow path: check each entry
            if name in _STRICT:
                if not all(v is None or _is_number(v) for v in values):
                    return f"'{name}' must be a list of numbers or null"
            else:  # an entry that is not a number shows as empty, and counts as NaN
                values = [v if _is_number(v) else None for v in values]
        arrays[name] = values
    tokens = get(F.TOKENS)
    tokens = tokens if type(tokens) is list else None
    extras = {}
    for key, value in top.items():
        if key in taken:
            continue
        if type(value) is _RAW:
            if memoryview(value)[0] not in _SCALAR_START:
                continue
            value = _ANY.decode(value)
        if is_extra_value(value):
            extras[key] = _to_float(value)
    pad_token = options.pad_token
    n, counted = token_positions(lengths, tokens, pad_token, options.eos_token)
    sizes = set(lengths.values())
    if tokens is not None and lengths:
        sizes.add(len(tokens))
    response = texts[_RESPONSE]
    if pad_token and response is not None:
        response = response.replace(pad_token, "")
    ref_response = texts[_REF_RESPONSE]
    if pad_token and ref_response is not None:
        ref_response = ref_response.replace(pad_token, "")
    if tokens is not None:
        repeat = repeat_4gram_share(tokens[:counted])
    else:
        repeat = repeat_4gram_share(response.split()) if response is not None else None
    row = (step, float(reward), *scalars, *texts, n if lengths else 0,
           counted if lengths or tokens is not None else -1, len(sizes) > 1,
           None if response is None else float(len(response)),
           None if ref_response is None else float(len(ref_response)), repeat,
           prompt_key(texts[_PROMPT], pad_token))
    return row, extras, {name: values[:counted] for name, values in arrays.items()}


def _to_float(value) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range
        return float("inf") if value > 0 else float("-inf")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _short(value) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_error(text: str) -> str:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"invalid JSON: {exc.msg} at column {exc.colno}"
    except ValueError as exc:  # e.g. an integer too large
        return f"invalid JSON: {exc}"
    return "invalid JSON"
