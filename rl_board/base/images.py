"""Images in rollouts, bytes in and facts out: what an image is (from its magic bytes), its size (from its
header, no pixel decoded), a ``data:`` URL's bytes (bounded), and a small PNG of it (decoded only after its
header passed the pixel bound).

Only PNG, JPEG, WebP and GIF are images here: anything else (SVG above all: it can hold a script) is
``sniff`` None and is never decoded or shown. The bounds (``defaults.image_bounds``) are per image: pixels
its header may claim, bytes it may hold; and per sample: bytes of all its images. A bound that bites is
said, in ``BOUND_NOTES``' words, never silently.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import struct

from . import defaults

#: the images read, by mime; magic bytes decide, never a declared type or a file's extension
MIMES = ("image/png", "image/jpeg", "image/webp", "image/gif")
#: why an image has no bytes, as ``run.images`` and the page say it
NOTE_PIXELS = "its header claims {width} x {height} pixels, over the bound of {bound:,} (RL_BOARD_MAX_IMAGE_PIXELS)"
NOTE_BYTES = "{size:,} bytes, over the bound of {bound:,} per image (RL_BOARD_MAX_IMAGE_MB)"
NOTE_FILE_BYTES = "a file of more than {bound:,} bytes, the bound per image (RL_BOARD_MAX_IMAGE_MB)"
NOTE_SAMPLE = "the sample's images passed the bound of {bound:,} bytes together (RL_BOARD_MAX_SAMPLE_IMAGES_MB)"
NOTE_FORMAT = "not a PNG, JPEG, WebP or GIF image (only those are shown; never SVG)"
NOTE_URL = "a URL: shown as text, never fetched"
NOTE_NOT_KEPT = "the writer did not keep the pixels"
NOTE_ELSEWHERE = "the writer kept the pixels in {where}, which is not in this folder (see docs/images.md)"

_DATA_URL = re.compile(r"data:([\w.+/-]*)((?:;[\w.+=-]+)*),", re.ASCII)
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers: they hold the size


def sniff(data: bytes) -> str | None:
    """The mime of an image from its first bytes: one of ``MIMES``, None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return None


def dimensions(data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels as the image's header says, no pixel decoded; None for what ``sniff``
    refuses or a header cut short."""
    try:
        kind = sniff(data)
        if kind == "image/png":
            if data[12:16] != b"IHDR":
                return None
            return struct.unpack(">II", data[16:24])
        if kind == "image/gif":
            return struct.unpack("<HH", data[6:10])
        if kind == "image/webp":
            return _webp_size(data)
        if kind == "image/jpeg":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":  # lossy: the key frame's start code, then 14-bit sizes
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":  # lossless: 14 bits each of width - 1 and height - 1
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":  # extended: 24 bits each of width - 1 and height - 1
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", data[at + 2:at + 4])
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        at += 2 + length
    return None


def is_data_url(url) -> bool:
    """Whether ``url`` is a ``data:`` URL (any case)."""
    return isinstance(url, str) and url[:5].lower() == "data:"


def is_web_url(url) -> bool:
    """Whether ``url`` is an ``http(s)`` URL: shown as text, never fetched."""
    return isinstance(url, str) and url[:8].lower().startswith(("http://", "https://"))


def decode_data_url(url: str, max_bytes: int | None = None) -> tuple[str, bytes] | None:
    """(the mime the URL declares, lower case; its bytes) of a ``data:`` URL, base64 or percent-encoded;
    None when it is not one, is malformed, or would decode to more than ``max_bytes`` (default: the bytes
    per image of ``defaults.image_bounds``), which is checked before anything is decoded. The declared
    mime is the writer's word: ``sniff`` the bytes before trusting them."""
    if not is_data_url(url):
        return None
    got = _DATA_URL.match(url[:5].lower() + url[5:])
    if got is None:
        return None
    bound = defaults.image_bounds()[1] if max_bytes is None else max_bytes
    body = url[got.end():]
    is_base64 = ";base64" in got.group(2).lower()
    if (len(body) * 3 // 4 if is_base64 else len(body)) > bound:
        return None
    try:
        if is_base64:
            data = base64.b64decode("".join(body.split()), validate=True)
        else:
            from urllib.parse import unquote_to_bytes

            data = unquote_to_bytes(body)
    except (binascii.Error, ValueError):
        return None
    return got.group(1).lower(), data


def data_url_size(url: str) -> int:
    """About how many bytes a ``data:`` URL's body decodes to (its base64 length x 3/4), nothing decoded."""
    at = url.find(",")
    return (len(url) - at - 1) * 3 // 4 if at >= 0 else 0


def data_url_head(url: str, count: int = 64) -> bytes:
    """The first bytes (at most ``count``, a multiple of 3 read from 4-character groups) of a base64
    ``data:`` URL's body: enough for ``sniff`` and ``dimensions`` of most images without decoding the rest;
    b"" when it is not one."""
    got = _DATA_URL.match(url[:5].lower() + url[5:]) if is_data_url(url) else None
    if got is None or ";base64" not in got.group(2).lower():
        return b""
    chars = (count + 2) // 3 * 4
    body = "".join(url[got.end():got.end() + chars * 2].split())[:chars]
    try:
        return base64.b64decode(body[:len(body) // 4 * 4])
    except (binascii.Error, ValueError):
        return b""


def check(data: bytes, max_pixels: int | None = None) -> tuple[str | None, tuple[int, int] | None, str | None]:
    """(mime, (width, height), note) of an image's bytes from its header: the note says why it will not be
    shown (not an image ``MIMES`` names, or more pixels than ``max_pixels``, default the pixel bound of
    ``defaults.image_bounds``), None when it can be."""
    mime = sniff(data)
    if mime is None:
        return None, None, NOTE_FORMAT
    size = dimensions(data)
    bound = defaults.image_bounds()[0] if max_pixels is None else max_pixels
    if size is None:
        return mime, None, NOTE_FORMAT
    if size[0] * size[1] > bound:
        return mime, size, NOTE_PIXELS.format(width=size[0], height=size[1], bound=bound)
    return mime, size, None


def thumbnail(data: bytes, max_side: int, max_pixels: int | None = None) -> bytes | None:
    """A PNG of the image at most ``max_side`` pixels wide and high (its aspect kept; never enlarged);
    None when ``check`` refuses it (its header read first: a PNG that would decompress to 50,000 x 50,000
    costs nothing) or Pillow can't decode it. The first frame of an animation."""
    mime, size, note = check(data, max_pixels)
    if note is not None:
        return None
    from PIL import Image

    formats = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP", "image/gif": "GIF"}
    try:
        with Image.open(io.BytesIO(data), formats=[formats[mime]]) as image:
            if image.size != tuple(size):  # the header read here and Pillow's disagree: trust neither
                return None
            if mime == "image/jpeg":
                image.draft("RGB", (max_side, max_side))  # decode at 1/2, 1/4 or 1/8 where it still covers the box
            image.load()
            image.thumbnail((max_side, max_side))
            mode = "RGBA" if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info else "RGB"
            out = io.BytesIO()
            image.convert(mode).save(out, format="PNG", optimize=False)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError, EOFError):
        return None
    return out.getvalue()
