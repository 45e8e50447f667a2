"""Samples logged as TensorBoard text: the ``add_text`` summaries of ``events.out.tfevents.*`` files.

Trainers that log samples with ``SummaryWriter.add_text`` (OpenRLHF's ``TensorboardLogger``:
``add_text("train/generated_samples", f"Sample:\\\\n{text}\\\\n\\\\nReward: {reward:.4f}", step)``)
keep them in the event files beside their scalars. Each text value (a summary with the
``text`` plugin's metadata, a string tensor) is one sample, read with the ``tensorboard``
package's own event reader: the step is the event's; a text that is a JSON object is read
as a record (the board's keys, their aliases, a field map); any other text is the response,
and its reward the number after ``Reward:`` when it ends with one (OpenRLHF's ``\\n`` written
as a backslash and an n is read as a line break), else none. A response that is the whole
conversation (OpenRLHF decodes the sequence, prompt included, with ``skip_special_tokens=True``)
is split into turns where the decode left ChatML start markers or Llama 3 headers
(``chat_text.transcript``): the prompt is then the turns before the first assistant turn, the
response the last assistant turn; one whose markers were all dropped stays whole, and a note
counts those. The tag (without torch's ``/text_summary``) is shown with the sample. The run folder is the folder of the event files
(``{tensorboard_dir}/{run_name}`` for OpenRLHF); its scalars are the trainer's metrics.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa

from ...base import fields as F
from ...base.location import as_path
from ...base.tfrecords import events, tensor_array
from ..base import FileError, KeyResolver, ReadOptions, SourceChanged
from ..chat_text import UNMARKED_NOTE, looks_unmarked, transcript, with_turns
from ..lines import file_path, table
from ..notes import with_notes
from ..record_rows import canonical_row

NAME = "tensorboard-text"
SUFFIX = ".tfevents"
APPENDABLE = False
GLOBS = ("events.out.tfevents.*",)
ALIASES = {F.REWARD: ("rewards",), "response": ("completion", "text")}
EXPECTS = "events.out.tfevents.* files holding text summaries (SummaryWriter.add_text)"
NOTE = ("These samples are the texts the trainer logged to TensorBoard, which is all of its samples it saved "
        "(OpenRLHF logs one sample per step).")
SNIFF_EVENTS = 500  # events of the first file looked at for a text summary before a folder is called a run
_REWARD = re.compile(r"\s*Reward:\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|-?inf)\s*$")
_OPENRLHF = re.compile(r"^Sample:\n(?P<text>.*?)(?:\n\nReward:.*)?$", re.DOTALL)


def _texts(path: Path, limit: int | None = None, lost: list[str] | None = None):
    """(event number, step, tag, text) of each text summary of an event file; a record passed over
    (``tfrecords``: its CRC check fails) or a tensor declaring too many values (``tensor_array``) adds a
    line to ``lost``."""
    lost = [] if lost is None else lost
    for n, event in enumerate(events(path, lost)):
        if limit is not None and n >= limit:
            return
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            if value.WhichOneof("value") != "tensor" or value.metadata.plugin_data.plugin_name != "text":
                continue
            array = tensor_array(value, int(event.step), lost)
            for item in () if array is None else array:
                text = item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
                yield n, int(event.step), value.tag, text


def matches(run_dir: Path) -> bool:
    """A folder whose first event file holds a text summary among its first events."""
    files = sorted(p for p in as_path(run_dir).glob(GLOBS[0]) if p.is_file())
    for path in files[:1]:
        try:
            return next(_texts(path, SNIFF_EVENTS), None) is not None
        except Exception:  # a file the event reader can't read is no run of this format
            return False
    return False


def record_of(step: int, tag: str, text: str) -> dict:
    """One logged text as a record (see the module's docstring)."""
    tag = tag[:-len("/text_summary")] if tag.endswith("/text_summary") else tag
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return {F.STEP: step, **obj, "tag": tag}
    plain = text.replace("\\n", "\n")
    reward = _REWARD.search(plain)
    sample = _OPENRLHF.match(plain)
    response = sample.group("text") if sample else (plain[:reward.start()] if reward else plain)
    out = {F.STEP: step, "response": response, "tag": tag}
    if reward:
        out[F.REWARD] = float(reward.group(1))
    return out


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, one per logged text; (text number, reason) of each rejected one; texts read)."""
    resolver = KeyResolver(options.fields, ALIASES)
    rows, lines, offsets, errors, count, unmarked, lost = [], [], [], [], 0, 0, []
    try:
        for event_number, step, tag, text in _texts(Path(path), lost=lost):
            count += 1
            got = canonical_row(record_of(step, tag, text), resolver, reward_required=False)
            if isinstance(got, str):
                errors.append((count, got))
                continue
            got = with_turns(got)
            rows.append(got)
            unmarked += F.MESSAGES not in got and got["prompt"] is None and looks_unmarked(got["response"])
            lines.append(count)
            offsets.append(event_number)
    except Exception as exc:
        if not rows and not errors:
            raise FileError(f"not read by tensorboard's event reader ({type(exc).__name__}: {exc})") from exc
    errors.extend((count + 1, why) for why in lost)  # after the texts read: the texts lost can't be numbered
    notes = [UNMARKED_NOTE.format(count=unmarked)] if unmarked else []
    return with_notes(table(rows, lines, offsets, [0] * len(rows)), notes), errors, count


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """The ``line``-th text of the file (event ``offset``) as its record."""
    with file_path(fh) as path:
        for k, (event_number, step, tag, text) in enumerate(_texts(path)):
            if k + 1 == line and event_number == offset:
                got = record_of(step, tag, text)
                turns = transcript(got.get("response")) if "prompt" not in got else None
                return {**got, "text": text, **({F.MESSAGES: turns} if turns else {})}
    raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
