"""A sample's images, found again from its turns' image references (``readers.turns.image_refs``): each
image's bytes (bounded), mime, width and height from its header, and where it sits; or why there are no
bytes (``base.images``' notes). Nothing here fetches a URL or decodes pixels: ``base.images.thumbnail``
does that, on demand, for what is shown."""

from __future__ import annotations

from ..base import defaults
from ..base import images as I


def compute_sample_images(messages, read_path, bounds: tuple[int, int, int] | None = None) -> list[dict]:
    """Each image of a sample's turns (``messages``: canonical turns as a record gives them, with their
    ``images`` references), in order: ``data`` (bytes, or None), ``mime``, ``width``, ``height`` (from the
    header; None where unknown), ``size`` (bytes, None without), ``message_index`` (0-based over the
    turns), ``at`` (where its ``[image]`` begins in the turn's content), ``url`` (an http(s) URL or the
    path as written, else None) and ``note`` (why ``data`` is None, else None).

    ``read_path(text, max_bytes)`` reads an image file a rollout names: its bytes, or a note (a string) saying
    why not (outside the run's folder, missing, too large). ``bounds``: (pixels per image, bytes per image,
    bytes per sample), default ``defaults.image_bounds()``; an image past a bound keeps its place, its note
    says which."""
    max_pixels, max_bytes, max_sample = bounds or defaults.image_bounds()
    out, total = [], 0
    for index, turn in enumerate(messages or []):
        refs = turn.get("images") if isinstance(turn, dict) else None
        for ref in refs or []:
            item = {"data": None, "mime": None, "width": None, "height": None, "size": None,
                    "message_index": index, "at": ref.get("at"), "url": ref.get("url"), "note": None}
            out.append(item)
            source = ref.get("source")
            if source == "url":
                item["note"] = I.NOTE_URL
                continue
            if source == "elsewhere":
                item["url"], item["note"] = None, I.NOTE_ELSEWHERE.format(where=ref.get("url"))
                continue
            if source == "data" and isinstance(ref.get("data"), str):
                size = I.data_url_size(ref["data"])
                if size > max_bytes:
                    item["size"], item["note"] = size, I.NOTE_BYTES.format(size=size, bound=max_bytes)
                    continue
                got = I.decode_data_url(ref["data"], max_bytes)
                data = got[1] if got is not None else None
                if data is None:
                    item["note"] = I.NOTE_FORMAT
                    continue
            elif source == "path" and isinstance(ref.get("url"), str):
                data = read_path(ref["url"], max_bytes)
                if isinstance(data, str):
                    item["note"] = data
                    continue
            else:
                item["note"] = I.NOTE_NOT_KEPT
                continue
            mime, size, note = I.check(data, max_pixels)
            item["mime"], item["size"] = mime, len(data)
            if size is not None:
                item["width"], item["height"] = size
            if note is None and total + len(data) > max_sample:
                note = I.NOTE_SAMPLE.format(bound=max_sample)
            if note is not None:
                item["note"] = note
                continue
            total += len(data)
            item["data"] = data
    return out
