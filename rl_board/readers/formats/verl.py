"""verl's generation dumps, with turns: an experiment folder of rollout and validation folders,
or one folder whose multi-turn responses are glued text.

verl's ``_dump_generations`` (``RayPPOTrainer``, ``verl/trainer/ppo/ray_trainer.py``) writes
``{dump_path}/{global_steps}.jsonl``, each line ``json.dumps({"input", "output", "gts",
"score", "step", **reward_extra_infos}, ensure_ascii=False)``; ``trainer.rollout_data_dir``
gets the training batches (steps from 1) and ``trainer.validation_data_dir`` the validation
generations (step 0 is the validation before training). ``input`` and ``output`` are
decoded with ``skip_special_tokens=True``: with the tool agent loop
(``experimental/agent_loop/tool_agent_loop.py``) the output holds every assistant turn and
tool result of the trajectory, the chat template's markers dropped (``chat_text``).

This reader opens

- the **experiment folder** holding a rollout folder and a validation folder (a subfolder
  whose name holds ``val``, ``eval`` or ``test``): both as splits, ``train`` and
  ``validation``;
- a **single dump folder** whose first file's first line has verl's keys and whose first
  64 KiB hold a turn marker (``<tool_call>``, ``<tool_response>``, ``<information>``, a chat
  template's): one split. A dump folder without them is the JSONL reader's, as before.

Rows are what the JSONL reader makes of a line (aliases ``prompt ← input``, ``response ←
output``, ``reward ← score``, ``ground_truth ← gts``; numbers and booleans are extras),
plus ``messages`` (each vision run shown as ``[image]``, as an image part of a message is): the prompt as
one user turn (split at its markers when it keeps them)
and the output's turns (``chat_text.split_turns``; a plain answer is one assistant turn; the
chat template in ``tokenizer_config.json`` or ``chat_template.jinja`` in the dump folder or
the folder above it tells Llama 3 text whose markers the decode dropped).
An output whose turns can't be told apart stays one assistant turn and gets the extra
``turns_unsplit`` = 1.

Images: verl saves none. A vision-language run (verl's geo3k recipe, Qwen2.5-VL) decodes its dumps with
``skip_special_tokens=True``, which drops each ``<|vision_start|><|image_pad|>…<|vision_end|>`` run with the
pixels: the dump can't say how many images a prompt held. Such a run is told by the model's files beside
the dumps (``placeholders.vision_model``: an image processor's config, a chat template that writes vision
runs), and its files get the note ``VLM_NOTE``. A dump whose texts keep the special tokens (a trainer patched
to decode with ``skip_special_tokens=False``) keeps the runs: when any line of a file holds one, each line
whose texts keep the chat template's markers gets the extra ``image_placeholders``, its vision runs
(``placeholders.vision_runs``; 0 included), and the file the note ``KEPT_NOTE``.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path, open_file
from ..base import KeyResolver, ReadOptions, SourceChanged, line_too_long
from ..chat_text import family_of, split_prompt, split_turns, template_family
from ..layout import first_match, step_in
from ..lines import opened_path, read_rows
from ..notes import with_notes
from ..placeholders import IMAGE_PLACEHOLDERS, VLM_NOTE, as_image_marks, has_markers, vision_model, vision_runs
from ..record_rows import canonical_row
from ..signatures import VERL_MARKERS, VERL_SNIFF_BYTES, VERL_STEP_FILE
from . import jsonl

NAME = "verl"
SUFFIX = ".jsonl"
APPENDABLE = False  # each step's file is written whole (one write)
ALIASES: dict[str, str] = {}  # fields.ALIASES already holds verl's input/output/score/gts
GLOBS = ("*/[0-9]*.jsonl", "[0-9]*.jsonl")  # the experiment folder's dump folders, else the folder's own
DEFAULT_SPLIT = "train"
#: What ``rl-board detect`` says the reader expects, when a folder of its layout does not open.
EXPECTS = ("a rollout dump folder and a validation one (its name holding val, eval or test) of {step}.jsonl files "
           "with verl's keys input, output, gts, score, step; or one such folder whose output holds turn markers")
#: The keys ``_dump_generations`` writes on every line.
KEYS = frozenset({"input", "output", "gts", "score", "step"})
UNSPLIT = "turns_unsplit"
KEPT_NOTE = ("this trainer does not save images: the texts keep their image placeholders (vision runs), "
             "counted per sample in image_placeholders, but not the pixels")
_VALIDATION = re.compile(r"val|eval|test", re.I)
_STEP_FILE, _SNIFF_BYTES, _MARKERS = VERL_STEP_FILE, VERL_SNIFF_BYTES, VERL_MARKERS  # what detection reads


def split_of(name: str) -> str | None:
    """``validation`` for a file in a folder named like one, ``train`` in another folder, None for
    a file of a single dump folder."""
    parts = PurePosixPath(name).parts
    if len(parts) < 2:
        return None
    return "validation" if _VALIDATION.search(parts[-2]) else "train"


def _dump_folder(folder: Path) -> tuple[bool, bool]:
    """(whether ``folder`` holds verl dumps, whether their first 64 KiB, or their first line when it is
    longer, hold a turn marker)."""
    found = first_match(folder, "[0-9]*.jsonl", keep=lambda p: bool(_STEP_FILE.match(p.name)))
    if found is None:
        return False, False
    with open_file(found) as fh:
        head = fh.read(_SNIFF_BYTES)
        if len(head) == _SNIFF_BYTES and b"\n" not in head:  # a first line longer than the sniff: read it whole
            head += jsonl.first_line(fh) + b"\n"  # up to the per-line bound; a longer one is no verl line
    whole = head.split(b"\n")[:-1] if len(head) == _SNIFF_BYTES else head.split(b"\n")
    # the first lines the writer wrote in full: one with verl's keys is enough (a bad line is the reader's to name)
    objs = (jsonl.parse_line(line) for line in whole[:16] if line.strip())
    if not any(isinstance(obj, dict) and KEYS <= obj.keys() for obj in objs):
        return False, False
    return True, any(marker in head for marker in _MARKERS)


def matches(run_dir: Path) -> bool:
    """An experiment folder (a verl dump folder named like validation and another one), or a dump
    folder whose output holds turns."""
    run_dir = as_path(run_dir)
    is_dump, marked = _dump_folder(run_dir)
    if is_dump:
        return marked
    kinds = set()
    for sub in run_dir.iterdir():
        if sub.is_dir() and not sub.name.startswith(".") and _dump_folder(sub)[0]:
            kinds.add(split_of(f"{sub.name}/x"))
    return kinds == {"train", "validation"}


def samples_of(obj: dict, hint: str | None) -> tuple[list | None, float | None]:
    """(the turns of one line, None when its output is no text; 1.0 when they could not be told
    apart, else None)."""
    output = obj.get("output")
    if not isinstance(output, str):
        return None, None
    got = split_turns(as_image_marks(output), hint=hint)
    prompt = obj.get("input")
    return (split_prompt(as_image_marks(prompt) if isinstance(prompt, str) else prompt) + got.turns,
            (1.0 if got.note is not None else None))


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, (line, reason) for each rejected line, lines read) of one step's file."""
    path = as_path(path)
    step = step_in(path.name)
    hint = template_family(path.parent)
    resolver = KeyResolver(options.fields, ALIASES)
    table, errors, count = read_rows(read_bytes(path), lambda raw: _row(raw, resolver, step, options, hint))
    column = F.extra_column(IMAGE_PLACEHOLDERS)
    if column not in table.column_names:  # no text kept its markers: the decode may have dropped the images
        return (with_notes(table, [VLM_NOTE]) if vision_model(path.parent) else table), errors, count
    if not (table[column].fill_null(0).to_numpy() > 0).any():
        return table.drop_columns([column]), errors, count  # markers kept, and no image in this file
    return with_notes(table, [KEPT_NOTE]), errors, count


def placeholders_of(obj: dict) -> int | None:
    """The vision runs of a line's ``input`` and ``output`` when one of them keeps the chat template's
    markers (a vision run, ChatML's or Llama 3's), else None: a text decoded without its special tokens
    can't say."""
    texts = [t for t in (obj.get("input"), obj.get("output")) if isinstance(t, str)]
    if not any(has_markers(t) or family_of(t) is not None for t in texts):
        return None
    return sum(vision_runs(t) for t in texts if has_markers(t))  # a text of chat markers only: no regex over it


def _row(raw: bytes, resolver: KeyResolver, step: int | None, options: ReadOptions, hint) -> dict | str:
    if len(raw) > options.max_line:
        return line_too_long(len(raw), options.max_line)
    obj = jsonl.parse_line(raw)
    if isinstance(obj, str):
        return obj
    try:
        got = canonical_row(obj, resolver, default_step=step)
    except RecursionError:
        return "a value is nested too deeply"
    if isinstance(got, str):
        return got
    messages, unsplit = samples_of(obj, hint)
    got[F.MESSAGES] = messages
    if unsplit is not None:
        got["extras"][UNSPLIT] = unsplit
    marked = placeholders_of(obj)
    if marked is not None:
        got["extras"][IMAGE_PLACEHOLDERS] = float(marked)
    return got


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """One sample's line, with ``messages`` where its output holds turns."""
    obj = jsonl.record(fh, name, offset, length, line)
    if not isinstance(obj.get("step", 0), int):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    where = opened_path(fh)
    messages, unsplit = samples_of(obj, template_family(where.parent) if where is not None else None)
    if messages is not None:
        obj[F.MESSAGES] = messages
    if unsplit is not None:
        obj[UNSPLIT] = unsplit
    marked = placeholders_of(obj)
    if marked:
        obj[IMAGE_PLACEHOLDERS] = marked
    return obj
