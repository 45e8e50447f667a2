"""prime-rl's token exports (``trainer.enable_token_export = true``).

The trainer writes ``OUT/token_exports/step_{N}/rank_{R}.jsonl`` (and a ``STABLE``
marker in ``step_{N}/`` once every rank flushed): one JSON object per line per
exported sequence (``TokenExporter.export``), ``json.dumps(..., allow_nan=False)``
with every non-finite number written as ``null``::

    {"schema_version": 1, "step": 3, "rank": 0, "micro_step": 0, "micro_sequence_idx": 0,
     "export_sequence_idx": 0, "env_name": "gsm8k", "token_ids": [...], "position_ids": [...],
     "loss_mask": [false, ..., true], "advantages": [...], "inference_logprobs": [...],
     "trainer_logprobs": [...], "entropy": [...], "mismatch_kl": [...], "importance_ratio": [...], ...}

Every list is aligned over the prompt and the completion; ``loss_mask`` marks the
trained positions. No reward and no text are logged: a sample has no reward, its
tokens are its ``token_ids`` decoded with the run's tokenizer, and its prompt and
response are decoded from them (``derive``). ``inference_logprobs`` is the sampler's
(-> ``rollout_logprobs``), ``trainer_logprobs`` the trainer's (-> ``logprobs``); both
are aliases of ``fields.ALIASES``. The run folder is ``OUT``, or ``OUT/token_exports`` (when ``OUT``
also holds prime-rl's episodes, ``rollouts/``, it opens as those). A file is read whole
(with the JSON-lines reader's decoder), block by block; a last line without its
newline is read when it is a whole JSON object, else left for the next read.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ..base import ReadOptions
from . import jsonl

NAME = "prime-rl-tokens"
SUFFIX = ".jsonl"
APPENDABLE = False  # read whole: a file is appended to while its step runs, then left alone
ALIASES: dict[str, tuple[str, ...]] = {}  # beyond fields.ALIASES (inference_logprobs, trainer_logprobs)
GLOBS = ("token_exports/step_*/rank_*.jsonl", "step_*/rank_*.jsonl")  # the output folder, or its token_exports/
#: Bookkeeping numbers of each line: where the sequence sat in the trainer's batch, not extras.
BOOKKEEPING = ("schema_version", "rank", "micro_step", "micro_sequence_idx", "export_sequence_idx")
BLOCK_BYTES = 4 << 20  # bytes decoded at once (a longer line is one block of its own)


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read) of one rank file."""
    data = read_bytes(path)  # compressed or not
    end = data.rfind(b"\n") + 1
    if end < len(data) and jsonl.is_whole_record(data[end:]):  # the writer stopped before its newline
        data, end = data + b"\n", len(data) + 1
    tables, errors, lines, start = [], [], 0, 0
    while start < end:
        stop = data.rfind(b"\n", start, min(start + BLOCK_BYTES, end)) + 1
        if stop <= start:  # one line longer than a block
            stop = data.index(b"\n", start) + 1
        parsed = jsonl.parse_block(data[start:stop], lines + 1, start, options, reward_required=False)
        tables.append(parsed.table)
        errors.extend(parsed.errors)
        lines += parsed.lines
        start = stop
    table = (pa.concat_tables(tables, promote_options="default") if tables
             else jsonl.parse_block(b"", options=options).table)
    table = table.drop_columns([F.extra_column(name) for name in BOOKKEEPING
                                if F.extra_column(name) in table.column_names])
    return table, errors, lines


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One exported sequence as its line holds it."""
    return jsonl.record(fh, name, offset, length, line)
