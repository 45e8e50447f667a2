"""The one set of defaults the page and every command share, and the word that turns a token off.

OpenRLHF, verl and TRL's Qwen-style models end a response with ``<|endoftext|>`` and pad with it, so
both the pad and the EOS token default to it (see ``metrics`` for how they cut a response), unless the
run's tokenizer says otherwise: ``auto``, every command's and the page's default, takes them from the
``tokenizer_config.json`` beside the run's ``tokenizer.json`` (``derive.tokenizer.special_tokens``), else
these. ``none`` (any case) or an empty value turns either off: ``--pad-token none``.
"""

from __future__ import annotations

import os

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|endoftext|>"
OFF = "none"  # --pad-token none / --eos-token none: no such token
AUTO = "auto"  # --pad-token auto (the default): the run's tokenizer_config.json's, else the token above
MAX_EXTRA_FIELDS_ENV = "RL_BOARD_MAX_EXTRA_FIELDS"
DEFAULT_MAX_EXTRA_FIELDS = 256  # extra-field columns a run makes; later new keys are dropped (readers.extras)


def max_extra_fields() -> int:
    """``$RL_BOARD_MAX_EXTRA_FIELDS`` (a positive integer), else ``DEFAULT_MAX_EXTRA_FIELDS``. Here, not in
    the readers: a kept summary's name needs it, and must not import every reader to learn it."""
    try:
        value = int(os.environ.get(MAX_EXTRA_FIELDS_ENV, ""))
    except ValueError:
        return DEFAULT_MAX_EXTRA_FIELDS
    return value if value > 0 else DEFAULT_MAX_EXTRA_FIELDS


MAX_LINE_ENV = "RL_BOARD_MAX_LINE_MB"
DEFAULT_MAX_LINE = 64 << 20  # bytes: a longer line is named and skipped, never held in memory


def max_line_bytes() -> int:
    """``$RL_BOARD_MAX_LINE_MB`` in bytes (MiB; a positive number), else 64 MiB."""
    try:
        value = float(os.environ.get(MAX_LINE_ENV, ""))
    except ValueError:
        return DEFAULT_MAX_LINE
    return int(value * (1 << 20)) if value > 0 else DEFAULT_MAX_LINE


# What one compressed file may expand to (``base.compression``): a bomb costs a bounded read, never the machine
MAX_RATIO_ENV = "RL_BOARD_MAX_RATIO"
DEFAULT_MAX_RATIO = 1000  # uncompressed bytes per compressed byte (gzip can't pass ~1032; a real log is 5-50)
RATIO_FLOOR = 64 << 20  # bytes any compressed file may expand to, whatever its ratio (a tiny file of one line)
MAX_EXPANDED_ENV = "RL_BOARD_MAX_EXPANDED_GB"
DEFAULT_MAX_EXPANDED = 16 << 30  # bytes one file expands to at most, and a file read whole (in memory) holds
MAX_ERRORS_ENV = "RL_BOARD_MAX_ERRORS"
DEFAULT_MAX_ERRORS = 100  # rejected lines a file keeps with their line numbers and reasons; all are counted


# What opening one of slime's .pt files may cost (``readers.slime``: torch's restricted loader in a worker)
PT_MEMORY_ENV = "RL_BOARD_PT_MEMORY_GB"
DEFAULT_PT_MEMORY = 2 << 30  # bytes of address space the worker may take (RLIMIT_AS)
PT_SECONDS_ENV = "RL_BOARD_PT_SECONDS"
DEFAULT_PT_SECONDS = 60  # seconds of CPU (RLIMIT_CPU) and of waiting for the worker
PT_OUTPUT_ENV = "RL_BOARD_PT_OUTPUT_MB"
DEFAULT_PT_OUTPUT = 256 << 20  # bytes of JSON the worker may print (about 4x that once read, in the board)


def _positive(name: str, default: float) -> float:
    """``$name`` as a positive number, else ``default``."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def max_ratio() -> float:
    """``$RL_BOARD_MAX_RATIO`` (times a file's compressed size), else ``DEFAULT_MAX_RATIO``."""
    return _positive(MAX_RATIO_ENV, DEFAULT_MAX_RATIO)


def max_expanded() -> int:
    """``$RL_BOARD_MAX_EXPANDED_GB`` in bytes (GiB), else ``DEFAULT_MAX_EXPANDED``."""
    return int(_positive(MAX_EXPANDED_ENV, DEFAULT_MAX_EXPANDED / (1 << 30)) * (1 << 30))


def pt_limits() -> tuple[int, int, int]:
    """(memory bytes, seconds, output bytes) a .pt file's worker may use: ``$RL_BOARD_PT_MEMORY_GB``,
    ``$RL_BOARD_PT_SECONDS``, ``$RL_BOARD_PT_OUTPUT_MB``, else the defaults."""
    return (int(_positive(PT_MEMORY_ENV, DEFAULT_PT_MEMORY / (1 << 30)) * (1 << 30)),
            int(_positive(PT_SECONDS_ENV, DEFAULT_PT_SECONDS)),
            int(_positive(PT_OUTPUT_ENV, DEFAULT_PT_OUTPUT / (1 << 20)) * (1 << 20)))


def max_errors() -> int:
    """``$RL_BOARD_MAX_ERRORS`` (rejected lines kept per file), else ``DEFAULT_MAX_ERRORS``."""
    return int(_positive(MAX_ERRORS_ENV, DEFAULT_MAX_ERRORS))


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

# What one sample by its address gives a program (``analysis.address``, the MCP server's sample tool)
SAMPLE_TOKENS = 256  # per-token positions given unless more are asked for
MAX_SAMPLE_TOKENS = 4_096  # the most positions given, whatever is asked
MAX_SAMPLE_CHARS = 20_000  # characters of each text (prompt, response, a turn's content) given
