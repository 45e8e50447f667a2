"""The base every reader imports: the ``Reader`` interface a format's module fulfils, the errors a reader
raises, how a run is read (``ReadOptions``), the user's field mapping and the key resolution every
reader shares.

The interface
-------------
A reader is a module (or any object) with these members; ``registry`` holds the built-in ones and
finds a third party's through the entry point group ``rl_board.readers``:

- ``NAME``: the format's name (``--format``, the cache key, ``docs/formats/NAME.md``);
- ``SUFFIX``: the suffix of its files (``.jsonl``); a folder holding one is this format's when the
  reader has no layout of its own;
- ``ALIASES``: canonical field -> the source key (or keys) this format writes it under;
- ``APPENDABLE``: whether its files grow by whole lines (read on from where the last read stopped);
- ``record(fh, name, offset, length, line) -> dict``: one sample's source record read again from its
  file (``fh``, open for reading), ``SourceChanged`` when it is no longer there;
- and either, for an ``APPENDABLE`` format, ``parse_block(data, first_line, base_offset, options)
  -> ParsedBlock`` (complete lines of a byte range -> canonical rows) with ``is_whole_record(raw)``
  (whether the bytes after a file's last newline are one whole record), or ``read_table(path,
  options) -> (rows, [(line, reason)], lines read)`` for a file read whole.

Rows are canonical (``canonical.ROWS``) and nothing derived. Optional members, each read with a
default where it is used: ``GLOBS``, ``NAMED_GLOBS``, ``DEFAULT_SPLIT``, ``split_of``, ``step_of``,
``matches``, ``other_kind`` (``layout``: where a format keeps its files), ``KEYS``, ``EXPECTS``
(``rl-board detect``'s explanation) and ``NOTE`` (a line the load report shows).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from ..base import fields as F
from ..base.defaults import DEFAULT_MAX_EXTRA_FIELDS, DEFAULT_MAX_LINE, MAX_LINE_ENV, max_line_bytes  # noqa: F401


@runtime_checkable
class Reader(Protocol):
    """What every reader has (see the module's docstring for each member); a format also has
    ``parse_block`` and ``is_whole_record`` (``LineReader``) or ``read_table`` (``TableReader``)."""

    NAME: str
    SUFFIX: str
    ALIASES: dict[str, str | tuple[str, ...]]
    APPENDABLE: bool

    def record(self, fh: BinaryIO, name: str, offset: int, length: int, line: int) -> dict: ...


@runtime_checkable
class LineReader(Reader, Protocol):
    """A format whose files grow by whole lines (``APPENDABLE``): read a byte range at a time."""

    def parse_block(self, data: bytes, first_line: int = 1, base_offset: int = 0,
                    options: ReadOptions = ...) -> Any: ...

    def is_whole_record(self, raw: bytes) -> bool: ...


@runtime_checkable
class TableReader(Reader, Protocol):
    """A format whose files are read whole: canonical rows, the rejected rows' reasons, lines read."""

    def read_table(self, path: Path, options: ReadOptions = ...) -> tuple[Any, list[tuple[int, str]], int]: ...


def reader_problems(reader) -> list[str]:
    """What ``reader`` lacks of the interface (empty when it has it all): a third party's reader is
    checked before it is used, and refused with these words."""
    missing = [name for name in ("NAME", "SUFFIX", "ALIASES", "APPENDABLE", "record") if not hasattr(reader, name)]
    if missing:
        return [f"has no {name}" for name in missing]
    if not isinstance(reader.NAME, str) or not reader.NAME:
        return ["its NAME is not a name"]
    if reader.APPENDABLE and not isinstance(reader, LineReader):
        return ["is APPENDABLE but lacks parse_block or is_whole_record"]
    if not reader.APPENDABLE and not isinstance(reader, TableReader):
        return ["is not APPENDABLE and has no read_table"]
    return []


class SourceChanged(RuntimeError):
    """A sample is no longer where the run last read it: the file changed; refresh to re-read it."""


class FileError(ValueError):
    """A whole file can't be read (a corrupt parquet file, a table without ``step``); the other files load."""


class MissingDependency(FileError):
    """A file that needs an optional module not installed: the reader's ``NEEDS``, its message the
    reader's ``INSTALL``. The store reads such a file again once the module is installed."""

    def __init__(self, module: str, message: str):
        super().__init__(message)
        self.module = module


class FieldMappingError(ValueError):
    """A ``CANONICAL=SOURCE`` mapping that can't be used; the message says why."""


@dataclass(frozen=True)
class ReadOptions:
    """How a run is read; everything here changes the parsed rows, so it keys the cache.

    pad_token: positions at and after its first occurrence are not counted (nor shown in texts).
    fields: ``(canonical, source)`` pairs from the user's field mapping.
    eos_token: positions after its first occurrence are not counted; it is (see ``metrics``).
    max_line: bytes; a longer line is rejected (named, not read).
    tokenizer: the ``tokenizer.json`` that decodes token ids (an absolute path), or None: ids
        are shown as ``#ID`` (see ``rl_board.derive.tokenizer``).
    max_extras: extra-field columns a run makes at most (``base.defaults.max_extra_fields``).
    keep_words: the read also keeps the words of each response without tokens, beside its segment, for a
        reader that will read them at once (the page's findings); without it they are found on their first
        use (``store.words``). The only field that does not key the cache: the words are the same either way.
    """

    pad_token: str | None = None
    fields: tuple[tuple[str, str], ...] = ()
    eos_token: str | None = None
    max_line: int = DEFAULT_MAX_LINE
    tokenizer: str | None = None
    max_extras: int = DEFAULT_MAX_EXTRA_FIELDS
    keep_words: bool = False

    def to_json(self) -> str:
        got = {"pad_token": self.pad_token, "fields": [list(p) for p in self.fields],
               "eos_token": self.eos_token, "max_line": self.max_line, "tokenizer": self.tokenizer}
        if self.max_extras != DEFAULT_MAX_EXTRA_FIELDS:  # keys of caches written before the limit stay valid
            got["max_extras"] = self.max_extras
        if self.keep_words:  # for the workers only: the cache's key is made without it (``cache_key``)
            got["keep_words"] = True
        return json.dumps(got)

    def cache_key(self) -> str:
        """What of these options keys the cache: ``to_json`` without ``keep_words``."""
        return replace(self, keep_words=False).to_json()

    @classmethod
    def from_json(cls, text: str) -> ReadOptions:
        raw = json.loads(text)
        return cls(raw["pad_token"], tuple((c, s) for c, s in raw["fields"]), raw["eos_token"],
                   raw.get("max_line", DEFAULT_MAX_LINE), raw.get("tokenizer"),
                   raw.get("max_extras", DEFAULT_MAX_EXTRA_FIELDS), raw.get("keep_words", False))


def describe_size(size: int) -> str:
    """Bytes as a person reads them: ``3.0 GB``, ``65 MB``, ``512 bytes``."""
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}" if size < 10 * scale else f"{size / scale:.0f} {unit}"
    return f"{size} bytes"


def line_too_long(size: int, limit: int, at_least: bool = False) -> str:
    """The reason a line of ``size`` bytes (``at_least``: of more, not read to its end) is rejected."""
    return (f"line of {'over ' if at_least else ''}{describe_size(size)} is longer than the limit of {describe_size(limit)} "
            f"(set {MAX_LINE_ENV}); not read")


def parse_field_mapping(items) -> tuple[tuple[str, str], ...]:
    """``["reward=my_score", "response=answer"]`` (or one comma-separated string) as
    ``(canonical, source)`` pairs, in canonical order. Raises ``FieldMappingError``."""
    if isinstance(items, str):
        items = items.split(",")
    pairs: dict[str, str] = {}
    for item in items:
        item = item.strip()
        if not item:
            continue
        canonical, sep, source = (part.strip() for part in item.partition("="))
        if not sep or not canonical or not source:
            raise FieldMappingError(f"field mapping {item!r} is not CANONICAL=SOURCE (e.g. reward=my_score)")
        if canonical not in F.CANONICAL:
            raise FieldMappingError(f"{canonical!r} is not a field the board knows; use one of: "
                                    + ", ".join(F.CANONICAL))
        if canonical in pairs:
            raise FieldMappingError(f"{canonical!r} is mapped twice")
        pairs[canonical] = source
    return tuple((c, pairs[c]) for c in F.CANONICAL if c in pairs)


def format_field_mapping(fields: tuple[tuple[str, str], ...]) -> str:
    """The mapping as a user types it: ``reward=my_score, response=answer``."""
    return ", ".join(f"{c}={s}" for c, s in fields)


def merged_aliases(aliases: dict | None = None) -> dict[str, tuple[str, ...]]:
    """``fields.ALIASES`` with a reader's own aliases (canonical name -> a key or a tuple of keys) first."""
    merged = dict(F.ALIASES)
    for name, keys in (aliases or {}).items():
        keys = (keys,) if isinstance(keys, str) else tuple(keys)
        merged[name] = tuple(dict.fromkeys((*keys, *merged.get(name, ()))))
    return merged


def candidate_keys(name: str, mapped: dict[str, str], aliases: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The source keys that can feed canonical field ``name``, in the order they are tried: the mapped
    key alone, else the field's own name and then its aliases."""
    return (mapped[name],) if name in mapped else (name, *aliases.get(name, ()))


class KeyResolver:
    """Which source key feeds each canonical field, for one key set (cached: lines of a run share keys)."""

    def __init__(self, fields: tuple[tuple[str, str], ...] = (), aliases: dict | None = None):
        self.mapped = dict(fields)
        self.aliases = merged_aliases(aliases)
        self._cache: dict[tuple, tuple[dict[str, str], frozenset]] = {}
        # the keys a resolution looks at (candidates, and the heads of nested ones): lines whose key sets
        # differ only in other keys (a key of its own on every line) resolve alike
        candidates = [key for name in F.CANONICAL for key in candidate_keys(name, self.mapped, self.aliases)]
        self._looked_at = frozenset(candidates) | {key.split(".", 1)[0] for key in candidates if is_path(key)}
        self._by_looked_at: dict[frozenset, tuple[dict[str, str], frozenset]] = {}

    def resolve(self, keys) -> tuple[dict[str, str], frozenset]:
        """(canonical name -> source key present in ``keys``, the keys that are not extras)."""
        keys = tuple(keys)
        hit = self._cache.get(keys)
        if hit is not None:
            return hit
        present = self._looked_at.intersection(keys)
        hit = self._by_looked_at.get(present)
        if hit is not None:
            return hit
        sources = {}
        for name in F.CANONICAL:
            for key in candidate_keys(name, self.mapped, self.aliases):
                if key in present or is_path(key) and key.split(".", 1)[0] in present:
                    sources[name] = key
                    break
        taken = frozenset(F.CANONICAL) | frozenset(sources.values())
        if len(self._cache) < 1024:
            self._cache[keys] = (sources, taken)
        if len(self._by_looked_at) < 1024:
            self._by_looked_at[present] = (sources, taken)
        return sources, taken

    def source_of(self, name: str) -> str:
        """How a missing canonical field is described in an error: ``'reward'`` or
        ``'reward' (mapped from 'my_score')``."""
        if name in self.mapped:
            return f"'{name}' (mapped from '{self.mapped[name]}')"
        return " or ".join(f"'{key}'" for key in (name, *self.aliases.get(name, ())))


MISSING = object()  # ``value_at`` found nothing at the path


def is_path(source: str) -> bool:
    """Whether a mapped source names a nested value (``run.work.step``): it has a dot."""
    return "." in source


def value_at(obj, source: str, default=None):
    """``obj[source]`` when ``obj`` has that key, else the value at the dot-separated path ``source``
    (dict keys, and list indices as integers: ``traces.0.rewards.correct.score``), else ``default``."""
    if isinstance(obj, dict) and source in obj:
        return obj[source]
    value = obj
    for part in source.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            return default
    return value


def canonical_record(obj: dict, fields: tuple[tuple[str, str], ...] = (),
                     aliases: dict | None = None) -> tuple[dict, dict]:
    """One source record as (canonical name -> value, every other field -> value). A record's
    ``messages`` (a list of chat messages) is canonical too, as ``turns.turns`` makes them."""
    from .turns import turns

    sources, taken = KeyResolver(fields, aliases).resolve(obj.keys())
    canonical = {name: value for name, key in sources.items()
                 if (value := value_at(obj, key, MISSING)) is not MISSING}
    others = {key: value for key, value in obj.items() if key not in taken}
    if isinstance(others.get(F.MESSAGES), list):
        canonical[F.MESSAGES] = turns(others.pop(F.MESSAGES))
    return canonical, others


def is_extra_value(value) -> bool:
    """Whether a top-level value makes its field an extra: a number or a boolean."""
    return isinstance(value, (int, float))
