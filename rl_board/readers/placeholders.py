"""Image placeholders: where a trainer's conversation or template marks an image, counted, and the images a
sample's messages hold, compared with them (the ``images_dropped`` fault).

- ``image_blocks(messages)``: content parts ``{"type": "image"}`` that hold no image (TRL 1.16 strips the PIL
  image from each block before it writes its completions parquet: the block says an image was there).
- ``vision_runs(text)``: the images a chat template's text marks: a Qwen-VL vision run
  ``<|vision_start|>`` then ``<|image_pad|>`` tokens then ``<|vision_end|>`` is one image (``<|video_pad|>``
  runs are videos, not counted); outside such runs, each run of consecutive ``<image>`` tokens is one (LLaVA
  expands one image to many ``<image>`` tokens, Idefics and others write one).
- ``vision_ids(tokenizer_file)`` and ``id_runs(ids, vision)``: the same count over token ids, with the ids the
  run's ``tokenizer.json`` gives those tokens.
- ``images_held(message)``: the image parts of a message that carry the image (bytes, a data URL, a URL or a
  path), the count the ``images_dropped`` check compares. This is the seam for the image model: it counts
  what ``turns.IMAGE_PARTS`` names with something besides its type.
- ``image_faults(held, placeholders, roles)``: the ``images_dropped`` faults of one sample;
  ``image_faults_of(nodes, vision)`` and ``image_check(nodes, vision)``: those of a verifiers v1 trace's
  branch, and the extras they give its sample.
- ``vision_model(folder)``: whether the chat template or image processor beside a run is a vision model's.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from ..base.location import as_path
from .turns import IMAGE_PARTS

IMAGES_DROPPED = "images_dropped"
IMAGES_DROPPED_AT = "images_dropped_at"
#: the extra (per-sample number) counting a sample's image placeholders; null where the format can't tell
IMAGE_PLACEHOLDERS = "image_placeholders"
VISION_START, VISION_END, IMAGE_PAD, VIDEO_PAD, IMAGE = (
    "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<image>")
#: the strings whose presence in a text means its template's image markers were kept
MARKERS = (VISION_START, IMAGE_PAD, IMAGE)
_RUNS = re.compile(r"<\|vision_start\|>(?:<\|image_pad\|>)+<\|vision_end\|>|(?:<image>)+")
_KIND_KEYS = frozenset({"type", "_type"})
#: a verl VLM run's note (readers ``verl`` and ``jsonl``)
VLM_NOTE = ("this trainer does not save images: the model beside the dumps reads images, and verl decodes "
            "its dumps with skip_special_tokens=True, which drops each <|vision_start|><|image_pad|>…<|vision_end|> "
            "run with the pixels; how many images a prompt held is not in the dump")


def image_blocks(messages) -> int:
    """Content parts of type ``image`` that hold nothing but their type (None values aside) in a list of
    chat messages; 0 for anything else."""
    if not isinstance(messages, list):
        return 0
    count = 0
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and part.get("type") == "image" and not _holds_image(part):
                count += 1
    return count


def has_markers(text) -> bool:
    """Whether a text holds an image marker of a chat template (``MARKERS``)."""
    return isinstance(text, str) and any(marker in text for marker in MARKERS)


def as_image_marks(text: str) -> str:
    """``text`` with each image it marks (a vision run, a run of ``<image>``) written ``[image]``, as a turn
    shows an image part, so a turn holds no thousands of pad tokens."""
    return _RUNS.sub("[image]", text) if any(marker in text for marker in MARKERS) else text


def vision_runs(text) -> int:
    """The images ``text`` marks (see the module's docstring); 0 for no text."""
    return len(_RUNS.findall(text)) if isinstance(text, str) else 0


@lru_cache(maxsize=8)
def _vision_ids(path: str, size: int, mtime: int) -> tuple[int, int, int, int] | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ids = {}
    for token in data.get("added_tokens", []) if isinstance(data, dict) else ():
        if isinstance(token, dict) and isinstance(token.get("id"), int):
            ids[token.get("content")] = token["id"]
    got = tuple(ids.get(name, -1) for name in (VISION_START, IMAGE_PAD, VISION_END, IMAGE))
    return got if got[:3] != (-1, -1, -1) or got[3] != -1 else None


def vision_ids(tokenizer_file: str | None) -> tuple[int, int, int, int] | None:
    """The ids of ``<|vision_start|>``, ``<|image_pad|>``, ``<|vision_end|>`` and ``<image>`` (-1 for one it
    lacks) among the added tokens of a ``tokenizer.json``; None without a file or when it has none of them."""
    if not tokenizer_file:
        return None
    try:
        st = Path(tokenizer_file).stat()
    except OSError:
        return None
    return _vision_ids(str(tokenizer_file), st.st_size, st.st_mtime_ns)


def id_runs(ids, vision: tuple[int, int, int, int]) -> int:
    """The images a list of token ids marks, as ``vision_runs`` counts them in text."""
    start, pad, end, image = vision
    count, at, n = 0, 0, len(ids)
    while at < n:
        token = ids[at]
        if token == start >= 0:
            k = at + 1
            while k < n and ids[k] == pad:
                k += 1
            if k > at + 1 and k < n and ids[k] == end:
                count += 1
                at = k + 1
                continue
        elif token == image >= 0:
            count += 1
            while at < n and ids[at] == image:
                at += 1
            continue
        at += 1
    return count


def _holds_image(part: dict) -> bool:
    """Whether an image part carries its image: any value besides its type that is not None or empty."""
    return any(key not in _KIND_KEYS and value not in (None, "", {}, []) for key, value in part.items())


def images_held(message) -> int:
    """The image parts of one chat message that carry their image (``turns.IMAGE_PARTS`` with a value)."""
    content = message.get("content") if isinstance(message, dict) else None
    return sum(1 for part in content if isinstance(part, dict)
               and (part.get("type") or part.get("_type")) in IMAGE_PARTS and _holds_image(part)) \
        if isinstance(content, list) else 0


def image_faults(held: list[int], placeholders: list[int | None], roles: list) -> list[dict]:
    """The ``images_dropped`` faults of one sample: for each message (in order; ``held``: the images it holds,
    ``placeholders``: the images the tokens or text it was trained on mark, None where unknown, ``roles``: its
    role) where both are known, the message holds images and the two differ, ``{"kind": "images_dropped",
    "message_index": i, "assistant_turn": k}``, ``k`` the 0-based index of the first assistant turn after it
    (the turn that should have seen the images), None when none follows."""
    faults = []
    assistants_before = 0
    for i, (count, marked, role) in enumerate(zip(held, placeholders, roles)):
        if count and marked is not None and marked != count:
            faults.append({"kind": IMAGES_DROPPED, "message_index": i, "assistant_turn": assistants_before})
        if role == "assistant":
            assistants_before += 1
    for fault in faults:
        if fault["assistant_turn"] >= assistants_before:
            fault["assistant_turn"] = None
    return faults


#: files beside a run that say its model reads images: an image processor's config, or a chat template that
#: writes a vision run (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) or an ``<image>`` token
_PROCESSOR = "preprocessor_config.json"
_TEMPLATES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


def vision_model(folder) -> bool:
    """Whether the run folder or its parent holds a vision model's files: ``preprocessor_config.json``, or a
    chat template (``chat_template.jinja``, ``chat_template.json``, ``tokenizer_config.json``'s) naming
    ``<|vision_start|>``, ``<|image_pad|>`` or ``<image>``. Files that can't be read say nothing."""
    for place in (as_path(folder), as_path(folder).parent):
        try:
            if (place / _PROCESSOR).is_file():
                return True
            for name in _TEMPLATES:
                path = place / name
                if path.is_file() and path.stat().st_size <= 1 << 24:
                    text = path.read_text(encoding="utf-8", errors="replace")
                    if name == "tokenizer_config.json":  # its added tokens name vision tokens in text models too
                        try:
                            config = json.loads(text)
                        except ValueError:
                            continue
                        text = json.dumps(config.get("chat_template")) if isinstance(config, dict) else ""
                    if any(marker in text for marker in MARKERS):
                        return True
        except OSError:
            continue
    return False


def image_faults_of(nodes: list, vision: tuple[int, int, int, int]) -> tuple[list[dict], int, int]:
    """(the ``images_dropped`` faults of a branch's verifiers v1 nodes (``MessageNode``: ``message``, ``token_ids``), the images its messages hold, the images its token
    ids mark): each node's message's images (``placeholders.images_held``) against the vision runs of its own
    ``token_ids`` (``placeholders.id_runs``), the ids it was trained on. ([], 0, 0) when no message holds an
    image: the ids are then not scanned."""
    held = [images_held(n.get("message")) for n in nodes]
    if not any(held):  # a branch of text only: its ids are not scanned (a Qwen text tokenizer has the vision ids)
        return [], 0, 0
    marked = [id_runs(n.get("token_ids") or [], vision) for n in nodes]
    roles = [n.get("message", {}).get("role") if isinstance(n.get("message"), dict) else None for n in nodes]
    return image_faults(held, marked, roles), sum(held), sum(marked)


def image_check(nodes: list, vision: tuple[int, int, int, int]) -> dict[str, float]:
    """The extras of a branch whose messages hold images: ``image_placeholders`` (the vision runs of its ids),
    ``images_dropped`` (1 when a message's images and its placeholders differ, else 0) and
    ``images_dropped_at`` (the first such message's index; absent without one); {} for a branch whose
    messages hold no image (its ids are not scanned)."""
    faults, held, marked = image_faults_of(nodes, vision)
    if not held:
        return {}
    out = {IMAGE_PLACEHOLDERS: float(marked), IMAGES_DROPPED: float(bool(faults))}
    if faults:
        out[IMAGES_DROPPED_AT] = float(faults[0]["message_index"])
    return out
