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

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path
from ..base import KeyResolver, ReadOptions, SourceChanged, line_too_long
from ..chat_text import roles_read, split_prompt, split_turns
from ..layout import step_in
from ..lines import read_rows
from ..record_rows import canonical_row
from ..turns import turn
from . import jsonl

NAME = "nemo-rl"
SUFFIX = ".jsonl"
APPENDABLE = False  # each step's file is written whole
ALIASES: dict[str, tuple[str, ...]] = {F.REWARD: ("rewards",)}  # beyond fields.ALIASES
GLOBS = ("train_data_step*.jsonl",)
#: The line's position in its batch: bookkeeping, not an extra.
BOOKKEEPING = ("idx",)
_MARKERS = ("<|im_start|>", "<|start_header_id|>")  # a message the chat template wrote
ENV_ROLE = "environment"  # the role NeMo-RL's envs give their observations (not logged)


def unwrap(obj: dict) -> dict:
    """A line with each one-element list replaced by its element (``idx`` and other values as they are)."""
    return {key: value[0] if type(value) is list and len(value) == 1 else value for key, value in obj.items()}


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read) of one step's file."""
    path = as_path(path)
    step = step_in(path.name)
    resolver = KeyResolver(options.fields, ALIASES)
    return read_rows(read_bytes(path), lambda raw: _row(raw, resolver, step, options))  # compressed or not


def _trained(content, mask, length=None) -> list[bool] | None:
    """Whether each message of ``content`` is trained, read from the runs of ``token_loss_mask`` (see
    ``texts_from_content``); None when the two can't be matched up."""
    if not isinstance(content, list) or not content or not all(isinstance(text, str) for text in content):
        return None
    if not isinstance(mask, list) or not all(isinstance(v, (int, float)) for v in mask):
        return None
    if isinstance(length, int) and not isinstance(length, bool) and 0 <= length <= len(mask):
        mask = mask[:length]
    runs = [bool(v) for i, v in enumerate(mask) if i == 0 or bool(v) != bool(mask[i - 1])]
    if not runs or len(runs) > len(content):
        return None
    return [runs[0]] * (len(content) - len(runs) + 1) + runs[1:]


def turns_from_content(content, mask, length=None) -> list[dict] | None:
    """The turns of a line's messages (``content``, each message's text as NeMo-RL keeps it: the first
    the chat template's text of the system and user messages with the generation prompt, each answer
    decoded with ``skip_special_tokens=True``, each env observation as the env wrote it), when the
    text holds the template's markers: an untrained message is split at its markers
    (``chat_text.split_prompt``: the generation prompt's open turn dropped), a trained one is an
    assistant turn (Hermes calls and reasoning taken out, ``<tool_response>`` blocks tool turns); an
    untrained message after the first one and without markers is an env's observation (role
    ``environment``, NeMo-RL's envs' own). None when the messages can't be matched to the mask,
    nothing is trained, no message holds a marker, or a marker's role is not a role name."""
    flags = _trained(content, mask, length)
    if flags is None or not any(flags) or not any(m in text for text in content for m in _MARKERS):
        return None
    turns = []
    for text, trained in zip(content, flags):
        if trained:
            turns.extend(split_turns(text).turns)
        elif turns and not any(m in text for m in _MARKERS):  # an env's observation as it wrote it
            turns.append(turn({"role": ENV_ROLE, "content": text}))
        else:
            turns.extend(split_prompt(text))
    return turns if roles_read(turns) else None


def texts_from_content(content, mask, length=None) -> tuple[str | None, str | None]:
    """(prompt, response) from a line's ``content`` (each message's text, in order) and its
    ``token_loss_mask`` (cut to ``input_lengths``): the messages are laid end to end in the tokens, a
    trained message under ones and the others under zeros, so the runs of equal mask values are the
    messages (where there are fewer runs than messages, the first run holds the first ones: a system
    and a user message, both untrained). The prompt is the messages before the first trained one
    joined as they lie (None when there are none), the response the first to the last trained one
    (None when none is trained); (None, None) when the two can't be matched up. What the ids decode
    to with the tokenizer, without it."""
    flags = _trained(content, mask, length)
    if flags is None:
        return None, None
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
    turns = None
    if "prompt" not in obj and "response" not in obj:
        turns = turns_from_content(obj.get("content"), obj.get("token_loss_mask"), obj.get("input_lengths"))
    if turns is None and options.tokenizer is None and "prompt" not in obj and "response" not in obj:
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
        if turns is not None:
            got[F.MESSAGES] = turns
    return got


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One sample's line, unwrapped, with the step of its file name."""
    obj = jsonl.record(fh, name, offset, length, line)
    out = unwrap(obj)
    turns = turns_from_content(out.get("content"), out.get("token_loss_mask"), out.get("input_lengths"))
    if turns is not None and "prompt" not in out and "response" not in out:
        out[F.MESSAGES] = turns
    if "step" not in out:
        out["step"] = step_in(name)
    if not isinstance(out.get("step"), int):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    return out
