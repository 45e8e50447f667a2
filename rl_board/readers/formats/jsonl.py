"""JSON lines: the board's own rollout lines, OpenRLHF-style rank files and verl's ``{step}.jsonl`` dumps.

The format's rules: which files are its own (``*.jsonl``, not a trainer's metrics file among them:
``other_kind``), that they grow by whole lines (``APPENDABLE``), and how one sample's line is read
again (``record``). How a block of lines becomes canonical rows is the line parser's job
(``jsonlines``), shared with every reader of JSON lines.

The rows are canonical (``canonical.ROWS``): scalars, texts, where the line lies,
the per-token lists and the extras, each a numeric or boolean top-level field
that feeds no canonical field.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path, PurePosixPath

import orjson

from ...base.compression import open_path
from ...base.defaults import max_line_bytes
from ...base.location import as_path
from ..base import SourceChanged

NAME = "jsonl"
SUFFIX = ".jsonl"
METRICS = "the trainer's metrics, not rollouts"
_SNIFF_BYTES = 1 << 16  # bytes of a file's start read to tell a trainer's metrics file from rollouts
APPENDABLE = True  # a file that grew is read from where the last read stopped
_VERL_FILE = re.compile(r"^\d+\.jsonl$")
_VERL_KEYS = frozenset({"input", "output", "gts", "score", "step"})  # what verl's _dump_generations writes
#: the reader's interface the line parser (``jsonlines``: numpy, pyarrow, msgspec) gives, imported on first
#: use: detecting a run and listing its files need none of it, so a command hands out its first range first
_PARSER = {"ParsedBlock": "..jsonlines", "parse_block": "..jsonlines", "ALIASES": "..jsonlines.shape",
           "parse_line": "..jsonlines.slow"}


def __getattr__(name: str):
    """``parse_block``, ``ParsedBlock``, ``ALIASES`` and ``parse_line`` (``_PARSER``), imported when first asked for."""
    if name not in _PARSER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_PARSER[name], __package__), name)
    globals()[name] = value  # asked again: found without this function
    return value


def first_line(fh) -> bytes:
    """The first line of ``fh`` (open for reading in binary), without its line end, whatever its length
    up to the per-line bound (``defaults.max_line_bytes``); b"" when it is longer (a line the reader
    names and skips). A trainer is told by its first line, which may hold a 230 KB judge's rationale."""
    limit = max_line_bytes()
    raw = fh.readline(limit + 1)
    return b"" if len(raw) > limit else raw.rstrip(b"\r\n")


def is_whole_record(raw: bytes) -> bool:
    """Whether ``raw`` (bytes after a file's last newline) is one whole line: a JSON object."""
    from ..jsonlines.slow import parse_line

    return isinstance(parse_line(raw), dict)


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """The line of one sample as a dict, read again from ``fh`` (its file, open for reading, called
    ``name``); ``SourceChanged`` when it is no longer there."""
    from ..jsonlines.slow import parse_line

    fh.seek(offset)
    raw = fh.read(length + 1)
    obj = parse_line(raw[:length]) if raw[length:] in (b"\n", b"") else "moved"  # b"": a last line, unterminated
    if isinstance(obj, str):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    return obj


def _scalar_record(record) -> bool:
    """A record of numbers only: a trainer's metrics line (``{"step": 3, "loss": 0.1}``, or verl's file
    logger's ``{"step": 3, "data": {"actor/kl": 0.01}}``), never a rollout, which has texts or lists."""
    def numbers(values):
        return all(v is None or isinstance(v, (bool, int, float)) for v in values)

    if not isinstance(record, dict) or not isinstance(record.get("step"), int):
        return False
    data = record.get("data")
    if isinstance(data, dict) and set(record) <= {"step", "data", "timestamp"}:
        return numbers(data.values())  # verl's file logger
    return numbers(record.values())


def other_kind(path: Path) -> str | None:
    """``METRICS`` for a trainer's metrics file lying among the rollouts, which is no run file: a file
    named like ``train_metrics.jsonl`` whose first line is numbers only (a step and scalars, or verl's
    file-logger line). Other files are not opened."""
    if "metric" not in path.name.lower():
        return None
    try:
        with open_path(path) as fh:
            head = fh.read(_SNIFF_BYTES)
    except (OSError, EOFError, ValueError):
        return None
    first = head.split(b"\n", 1)[0].strip()
    try:
        record = orjson.loads(first) if first else None
    except orjson.JSONDecodeError:
        return None
    return METRICS if _scalar_record(record) else None


def run_notes(run_dir, names: list[str]) -> list[str]:
    """Notes on the whole run: a folder of verl's dumps (``{step}.jsonl`` whose first line has verl's keys)
    whose model reads images (``placeholders.vision_model``) gets ``placeholders.VLM_NOTE``: verl saves no
    images, and its decode drops the placeholders with them. Reads the first such file's first line only."""
    from ..jsonlines.slow import parse_line
    from ..placeholders import VLM_NOTE, vision_model

    first = next((name for name in names if _VERL_FILE.match(PurePosixPath(name).name)), None)
    if first is None:
        return []
    path = as_path(run_dir) / first
    try:
        with open_path(path) as fh:
            head = fh.readline(_SNIFF_BYTES)
    except (OSError, EOFError, ValueError):
        return []
    obj = parse_line(head.rstrip(b"\r\n"))
    if not isinstance(obj, dict) or not _VERL_KEYS <= obj.keys():
        return []
    return [VLM_NOTE] if vision_model(path.parent) else []
