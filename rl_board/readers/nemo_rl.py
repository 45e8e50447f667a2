"""NeMo-RL's training data dumps: ``logs/exp_NNN/train_data_step{N}.jsonl``.

GRPO (and PPO, distillation) write one file per step through
``Logger.log_batched_dict_as_jsonl``: the batch is cut into microbatches of one
sample and each is written as ``json.dumps({**sample, "idx": i}, default=str)``, so
every value of a line is a one-element list (a tensor's row, a list's item) and
``idx`` a plain integer::

    {"content": [["<user turn>", "<assistant turn>"]], "rewards": [1.0], "input_lengths": [9],
     "token_ids": [[...]], "token_loss_mask": [[0, ..., 1, 0]], "sample_loss_mask": [1.0],
     "advantages": [[...]], "generation_logprobs": [[...]], "prev_logprobs": [[...]], "idx": 0}

Lists are right-padded to the batch's longest sequence (``token_loss_mask`` 0 there).
The step is the file name's (``train_data_step{N}``); the reward is ``rewards[0]``;
``generation_logprobs`` are the sampler's (-> ``rollout_logprobs``), ``prev_logprobs``
the trainer's (-> ``logprobs``), ``token_loss_mask`` the loss mask. NaN is written as
Python's json writes it. The run folder is ``exp_NNN``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ..base import fields as F
from ..base.compression import read_bytes
from ..base.location import as_path
from . import jsonl
from .base import KeyResolver, ReadOptions, SourceChanged, line_too_long
from .layout import step_in
from .lines import read_rows
from .records import canonical_row

NAME = "nemo-rl"
SUFFIX = ".jsonl"
APPENDABLE = False  # each step's file is written whole
ALIASES: dict[str, tuple[str, ...]] = {F.REWARD: ("rewards",)}  # beyond fields.ALIASES
GLOBS = ("train_data_step*.jsonl",)
#: The line's position in its batch: bookkeeping, not an extra.
BOOKKEEPING = ("idx",)


def unwrap(obj: dict) -> dict:
    """A line with each one-element list replaced by its element (``idx`` and other values as they are)."""
    return {key: value[0] if type(value) is list and len(value) == 1 else value for key, value in obj.items()}


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read) of one step's file."""
    path = as_path(path)
    step = step_in(path.name)
    resolver = KeyResolver(options.fields, ALIASES)
    return read_rows(read_bytes(path), lambda raw: _row(raw, resolver, step, options))  # compressed or not


def texts_from_content(content, mask, length=None) -> tuple[str | None, str | None]:
    """(prompt, response) from a line's ``content`` (each message's text, in order) and its
    ``token_loss_mask`` (cut to ``input_lengths``): the messages are laid end to end in the tokens, a
    trained message under ones and the others under zeros, so the runs of equal mask values are the
    messages (where there are fewer runs than messages, the first run holds the first ones: a system
    and a user message, both untrained). The prompt is the messages before the first trained one
    joined as they lie (None when there are none), the response the first to the last trained one
    (None when none is trained); (None, None) when the two can't be matched up. What the ids decode
    to with the tokenizer, without it."""
    if not isinstance(content, list) or not content or not all(isinstance(text, str) for text in content):
        return None, None
    if not isinstance(mask, list) or not all(isinstance(v, (int, float)) for v in mask):
        return None, None
    if isinstance(length, int) and not isinstance(length, bool) and 0 <= length <= len(mask):
        mask = mask[:length]
    runs = [bool(v) for i, v in enumerate(mask) if i == 0 or bool(v) != bool(mask[i - 1])]
    if not runs or len(runs) > len(content):
        return None, None
    flags = [runs[0]] * (len(content) - len(runs) + 1) + runs[1:]
    trained = [i for i, flag in enumerate(flags) if flag]
    if not trained:
        return "".join(content), None
    return "".join(content[:trained[0]]) or None, "".join(content[trained[0]:trained[-1] + 1])


def _row(raw: bytes, resolver: KeyResolver, step: int | None, options: ReadOptions) -> dict | str:
    if len(raw) > options.max_line:
        return line_too_long(len(raw), options.max_line)
    obj = jsonl.parse_line(raw)
    if isinstance(obj, str):
        return obj
    obj = unwrap(obj)
    if options.tokenizer is None and "prompt" not in obj and "response" not in obj:
        # no tokenizer to decode the ids: the texts the messages had, not "#28 #92 …"
        prompt, response = texts_from_content(obj.get("content"), obj.get("token_loss_mask"), obj.get("input_lengths"))
        obj = {**obj, **({"prompt": prompt} if prompt is not None else {}),
               **({"response": response} if response is not None else {})}
    try:
        got = canonical_row(obj, resolver, default_step=step)
    except RecursionError:
        return "a value is nested too deeply"
    if not isinstance(got, str):
        for name in BOOKKEEPING:
            got["extras"].pop(name, None)
    return got


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One sample's line, unwrapped, with the step of its file name."""
    obj = jsonl.record(fh, name, offset, length, line)
    out = unwrap(obj)
    if "step" not in out:
        out["step"] = step_in(name)
    if not isinstance(out.get("step"), int):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    return out
