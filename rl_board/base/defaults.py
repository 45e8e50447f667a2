"""The one set of defaults the page and every command share, and the word that turns a token off.

OpenRLHF, verl and TRL's Qwen-style models end a response with ``<|endoftext|>`` and pad with it, so
both the pad and the EOS token default to it (see ``metrics`` for how they cut a response). ``none``
(any case) or an empty value turns either off: ``--pad-token none``.
"""

from __future__ import annotations

import os

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|endoftext|>"
OFF = "none"  # --pad-token none / --eos-token none: no such token
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
