"""The one set of defaults the page and every command share, and the word that turns a token off.

OpenRLHF, verl and TRL's Qwen-style models end a response with ``<|endoftext|>`` and pad with it, so
both the pad and the EOS token default to it (see ``metrics`` for how they cut a response), unless the
run's tokenizer says otherwise: ``auto``, every command's and the page's default, takes them from the
``tokenizer_config.json`` beside the run's ``tokenizer.json`` (``derive.tokenizer.special_tokens``), else
these. ``none`` (any case) or an empty value turns either off: ``--pad-token none``.
"""

from __future__ import annotations

import math
import os
import re
from typing import NamedTuple

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|endoftext|>"
OFF = "none"  # --pad-token none / --eos-token none: no such token
AUTO = "auto"  # --pad-token auto (the default): the run's tokenizer_config.json's, else the token above
MAX_EXTRA_FIELDS_ENV = "RL_BOARD_MAX_EXTRA_FIELDS"
DEFAULT_MAX_EXTRA_FIELDS = 256  # extra-field columns a run makes; later new keys are dropped (readers.extras)


def max_extra_fields() -> int:
    """``$RL_BOARD_MAX_EXTRA_FIELDS`` (a positive integer, at most its cap), else ``DEFAULT_MAX_EXTRA_FIELDS``.
    Here, not in the readers: a kept summary's name needs it, and must not import every reader to learn it."""
    return int(setting(MAX_EXTRA_FIELDS_ENV))


MAX_LINE_ENV = "RL_BOARD_MAX_LINE_MB"
DEFAULT_MAX_LINE = 64 << 20  # bytes: a longer line is named and skipped, never held in memory


def max_line_bytes() -> int:
    """``$RL_BOARD_MAX_LINE_MB`` in bytes (MiB; a positive number, at most its cap), else 64 MiB."""
    return int(setting(MAX_LINE_ENV) * (1 << 20))


# What one compressed file may expand to (``base.compression``): a bomb costs a bounded read, never the machine
MAX_RATIO_ENV = "RL_BOARD_MAX_RATIO"
DEFAULT_MAX_RATIO = 1000  # uncompressed bytes per compressed byte (gzip can't pass ~1032; a real log is 5-50)
RATIO_FLOOR = 64 << 20  # bytes any compressed file may expand to, whatever its ratio (a tiny file of one line)
MAX_EXPANDED_ENV = "RL_BOARD_MAX_EXPANDED_GB"
DEFAULT_MAX_EXPANDED = 16 << 30  # bytes one file expands to at most, and a file read whole (in memory) holds
MAX_ERRORS_ENV = "RL_BOARD_MAX_ERRORS"
DEFAULT_MAX_ERRORS = 100  # rejected lines a file keeps with their line numbers and reasons; all are counted


# What opening one of slime's .pt files may cost (``readers.formats.slime``: torch's restricted loader in a worker)
PT_MEMORY_ENV = "RL_BOARD_PT_MEMORY_GB"
DEFAULT_PT_MEMORY = 2 << 30  # bytes of address space the worker may take (RLIMIT_AS)
PT_SECONDS_ENV = "RL_BOARD_PT_SECONDS"
DEFAULT_PT_SECONDS = 60  # seconds of CPU (RLIMIT_CPU) and of waiting for the worker
PT_OUTPUT_ENV = "RL_BOARD_PT_OUTPUT_MB"
DEFAULT_PT_OUTPUT = 256 << 20  # bytes of JSON the worker may print (about 4x that once read, in the board)


def max_ratio() -> float:
    """``$RL_BOARD_MAX_RATIO`` (times a file's compressed size), else ``DEFAULT_MAX_RATIO``."""
    return setting(MAX_RATIO_ENV)


def max_expanded() -> int:
    """``$RL_BOARD_MAX_EXPANDED_GB`` in bytes (GiB), else ``DEFAULT_MAX_EXPANDED``."""
    return int(setting(MAX_EXPANDED_ENV) * (1 << 30))


def pt_limits() -> tuple[int, int, int]:
    """(memory bytes, seconds, output bytes) a .pt file's worker may use: ``$RL_BOARD_PT_MEMORY_GB``,
    ``$RL_BOARD_PT_SECONDS``, ``$RL_BOARD_PT_OUTPUT_MB``, else the defaults."""
    return (int(setting(PT_MEMORY_ENV) * (1 << 30)), int(setting(PT_SECONDS_ENV)),
            int(setting(PT_OUTPUT_ENV) * (1 << 20)))


def max_errors() -> int:
    """``$RL_BOARD_MAX_ERRORS`` (rejected lines kept per file), else ``DEFAULT_MAX_ERRORS``."""
    return int(setting(MAX_ERRORS_ENV))


# -- every numeric RL_BOARD_* setting: its default, its cap, and one line for a bad value ------------------


class Setting(NamedTuple):
    """A numeric environment setting: its default and cap in ``unit``, the least value it takes (``low``:
    above it, or at it when ``low_ok``), and whether it is a whole number."""

    default: float | None  # None: computed where it is used (the workers: one per usable CPU)
    cap: float  # a larger value (``inf`` too) is taken as this: past it the setting would risk the machine
    unit: str
    whole: bool = False
    low: float = 0.0
    low_ok: bool = False


#: name -> Setting: each numeric RL_BOARD_* setting of the package (tests/test_settings.py finds them all)
SETTINGS = {
    MAX_LINE_ENV: Setting(DEFAULT_MAX_LINE / (1 << 20), 2047, "MiB"),  # below 2 GiB: one Arrow string value
    MAX_RATIO_ENV: Setting(DEFAULT_MAX_RATIO, 1_000_000, "times"),
    MAX_EXPANDED_ENV: Setting(DEFAULT_MAX_EXPANDED / (1 << 30), 1024, "GiB"),
    MAX_ERRORS_ENV: Setting(DEFAULT_MAX_ERRORS, 1_000_000, "lines", whole=True),
    MAX_EXTRA_FIELDS_ENV: Setting(DEFAULT_MAX_EXTRA_FIELDS, 4096, "columns", whole=True),
    PT_MEMORY_ENV: Setting(DEFAULT_PT_MEMORY / (1 << 30), 64, "GiB"),
    PT_SECONDS_ENV: Setting(DEFAULT_PT_SECONDS, 3600, "s"),
    PT_OUTPUT_ENV: Setting(DEFAULT_PT_OUTPUT / (1 << 20), 65536, "MiB"),  # no more than its memory can hold
    "RL_BOARD_SQLITE_SECONDS": Setting(20, 3600, "s"),
    "RL_BOARD_STORE_CONNECT_TIMEOUT": Setting(5, 600, "s", low_ok=True),
    "RL_BOARD_STORE_READ_TIMEOUT": Setting(10, 600, "s", low_ok=True),
    "RL_BOARD_STORE_RETRIES": Setting(2, 10, "tries", whole=True, low_ok=True),
    "RL_BOARD_FINDINGS_WAIT": Setting(0.05, 60, "s", low_ok=True),
    "RL_BOARD_WORKERS": Setting(None, 256, "workers", whole=True),
}


def _parse(name: str) -> tuple[float | None, str | None]:
    """(the value of ``$name``: its default when unset, blank or bad, its cap when larger; the problem in
    words when it is bad, or None)."""
    spec = SETTINGS[name]
    text = os.environ.get(name, "").strip()
    if not text:
        return spec.default, None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < spec.low or (value == spec.low and not spec.low_ok) or (
            spec.whole and math.isfinite(value) and value != int(value)):
        least = ("at least " if spec.low_ok else "more than ") + _shown(spec.low)
        default = "one per usable CPU" if spec.default is None else f"{_shown(spec.default)} {spec.unit}"
        return spec.default, (f"{name}={text[:40]!r} is not a {'whole ' if spec.whole else ''}number {least} "
                              f"({spec.unit}; default {default}, at most {_shown(spec.cap)}): set one, or unset it.")
    return min(value, spec.cap), None


def _shown(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def setting(name: str) -> float | None:
    """The value of the numeric setting ``$name`` in its unit (``SETTINGS``): its default when unset, blank
    or not a usable number (``setting_problems`` names it: commands and the page refuse to start), at most
    its cap (``inf`` is the cap)."""
    return _parse(name)[0]


def setting_problems() -> tuple[list[str], list[str]]:
    """(one line per numeric setting whose value can't be used, one line per setting capped): a command
    prints them before it starts (the first kind ends it, exit status 2), the page shows them at its top
    (the first kind instead of the page)."""
    bad, capped = [], []
    for name, spec in SETTINGS.items():
        value, problem = _parse(name)
        if problem:
            bad.append(problem)
        elif value is not None and value == spec.cap and float(os.environ[name].strip()) > spec.cap:
            capped.append(f"{name}={os.environ[name].strip()[:40]} is more than its cap: {_shown(spec.cap)} "
                          f"{spec.unit} is used.")
    size = os.environ.get(CACHE_MAX_ENV, "").strip()
    if size and parse_size(size) is None:
        bad.append(f"{CACHE_MAX_ENV}={size[:40]!r} is not a size (a number with an optional K, M, G or T: 20G; "
                   "default 10G): set one, or unset it.")
    return bad, capped


CACHE_MAX_ENV = "RL_BOARD_CACHE_MAX"


def parse_size(text: str) -> int | None:
    """Bytes in ``text``, a number with an optional K, M, G or T (powers of 1000) and B; None when it is not one."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)B?", text.strip().upper())
    if not match:
        return None
    return int(float(match[1]) * 1000 ** " KMGT".index(match[2] or " "))


def bounds_key() -> str:
    """The bounds set away from their defaults, as a cache key's tail ("" when all are defaults, so the keys
    of caches written before the bounds stay valid): a file cut short by one is read again when it changes."""
    names = (MAX_RATIO_ENV, MAX_EXPANDED_ENV, MAX_ERRORS_ENV, PT_MEMORY_ENV, PT_SECONDS_ENV, PT_OUTPUT_ENV)
    return "".join(f":{name}={os.environ[name]}" for name in names if os.environ.get(name))


def token_option(value: str | None) -> str | None:
    """A token as given on the command line: None for ``none`` (any case), an empty value or None."""
    if value is None or not value or value.strip().lower() == OFF:
        return None
    return value


# What a shared report (``rl-board report``, the page's download button) shows of each finding
REPORT_SAMPLES = 3  # samples under each finding, unless asked otherwise (``--samples``)
MAX_REPORT_SAMPLES = 20  # the most a finding shows, whatever is asked: the file stays small enough to mail
MAX_SHOWN_CHARS = 2_000  # characters of a prompt or response a report or ``diff --json`` gives; its full length
#                          is given beside it

# What one sample by its address gives a program (``analysis.address``, the MCP server's sample tool)
SAMPLE_TOKENS = 256  # per-token positions given unless more are asked for
MAX_SAMPLE_TOKENS = 4_096  # the most positions given, whatever is asked
MAX_SAMPLE_CHARS = 20_000  # characters of each text (prompt, response, a turn's content) given
SAMPLE_IMAGES = 8  # images given as image content (thumbnails), in the order of the turns
SAMPLE_IMAGE_SIDE = 768  # pixels: the longer side of each image given


# What one image in a rollout may cost (``base.images``): read from its header first, decoded only within these
MAX_IMAGE_PIXELS_ENV = "RL_BOARD_MAX_IMAGE_PIXELS"
DEFAULT_MAX_IMAGE_PIXELS = 40_000_000  # width x height an image's header may claim before it is decoded
MAX_IMAGE_BYTES_ENV = "RL_BOARD_MAX_IMAGE_MB"
DEFAULT_MAX_IMAGE_BYTES = 16 << 20  # bytes of one image (decoded from base64 or read from a file)
MAX_SAMPLE_IMAGE_BYTES_ENV = "RL_BOARD_MAX_SAMPLE_IMAGES_MB"
DEFAULT_MAX_SAMPLE_IMAGE_BYTES = 64 << 20  # bytes of all of one sample's images together


def image_bounds() -> tuple[int, int, int]:
    """(pixels per image, bytes per image, bytes per sample): ``$RL_BOARD_MAX_IMAGE_PIXELS``,
    ``$RL_BOARD_MAX_IMAGE_MB`` and ``$RL_BOARD_MAX_SAMPLE_IMAGES_MB`` (MiB) where set, else the defaults."""
    return (int(setting(MAX_IMAGE_PIXELS_ENV)), int(setting(MAX_IMAGE_BYTES_ENV) * (1 << 20)),
            int(setting(MAX_SAMPLE_IMAGE_BYTES_ENV) * (1 << 20)))


SAMPLE_TURNS = 50  # turns given unless more are asked for (the first ones; ``n_turns`` counts them all)
MAX_SAMPLE_TURNS = 1_000  # the most turns given, whatever is asked

# What one MCP tool call may cost (``cli.mcp_server``): it runs in a process of its own, ended past this
MCP_SECONDS_ENV = "RL_BOARD_MCP_SECONDS"
DEFAULT_MCP_SECONDS = 60  # seconds a tool call may take; then its process is ended and the call is an error


MAX_SECONDS = 86_400  # a time limit set larger (inf) is taken as a day


def mcp_seconds() -> float:
    """``$RL_BOARD_MCP_SECONDS`` (a positive number, at most ``MAX_SECONDS``), else ``DEFAULT_MCP_SECONDS``."""
    return setting(MCP_SECONDS_ENV)


# What a regular expression's search may cost (``analysis.regex``: every search, the page's and the commands')
SEARCH_SECONDS_ENV = "RL_BOARD_SEARCH_SECONDS"
DEFAULT_SEARCH_SECONDS = 30  # seconds a regular expression searches a run's texts; then it stops and says where
MAX_REGEX_SIZE_ENV = "RL_BOARD_MAX_REGEX_SIZE"
DEFAULT_MAX_REGEX_SIZE = 400  # a pattern's atoms counted once per repetition (x{1000}y: 1,001): larger is refused


MAX_REGEX_SIZE = 100_000  # a size limit set larger (inf) is taken as this: RE2 refuses larger programs anyway


def search_seconds() -> float:
    """``$RL_BOARD_SEARCH_SECONDS`` (a positive number, at most ``MAX_SECONDS``), else ``DEFAULT_SEARCH_SECONDS``."""
    return setting(SEARCH_SECONDS_ENV)


def max_regex_size() -> int:
    """``$RL_BOARD_MAX_REGEX_SIZE`` (a positive number, at most ``MAX_REGEX_SIZE``), else ``DEFAULT_MAX_REGEX_SIZE``."""
    return int(setting(MAX_REGEX_SIZE_ENV))


SETTINGS.update({
    MAX_IMAGE_PIXELS_ENV: Setting(DEFAULT_MAX_IMAGE_PIXELS, 500_000_000, "pixels", whole=True),  # 2 GB as RGBA
    MAX_IMAGE_BYTES_ENV: Setting(DEFAULT_MAX_IMAGE_BYTES / (1 << 20), 1024, "MiB"),
    MAX_SAMPLE_IMAGE_BYTES_ENV: Setting(DEFAULT_MAX_SAMPLE_IMAGE_BYTES / (1 << 20), 4096, "MiB"),
    MCP_SECONDS_ENV: Setting(DEFAULT_MCP_SECONDS, MAX_SECONDS, "s"),
    SEARCH_SECONDS_ENV: Setting(DEFAULT_SEARCH_SECONDS, MAX_SECONDS, "s"),
    MAX_REGEX_SIZE_ENV: Setting(DEFAULT_MAX_REGEX_SIZE, MAX_REGEX_SIZE, "atoms", whole=True),
})
