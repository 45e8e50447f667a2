"""TensorBoard event files read record by record, each record's CRCs checked, and reading going on past a
record that fails them.

An event file is a sequence of TFRecords: an 8-byte little-endian length, the masked CRC-32C of those 8
bytes, the record's bytes and their masked CRC-32C. TensorBoard's own reader stops at the first record
that fails its check and says nothing, so one flipped byte drops the rest of the file. Here a record
whose bytes fail their check is passed over (its length is trusted: its own CRC held) and named; a length
that fails its check is searched past, to the next place where a whole record's two checks hold, and
the bytes skipped are named. A record longer than the line limit (``defaults.max_line_bytes``) is passed
over unread, and named. A record cut short at the end of the file is a file still being written: not
named. The CRC is TensorBoard's own (pure Python, as its reader uses without TensorFlow).

A tensor's values are made only when its declared shape holds at most ``MAX_TENSOR_VALUES`` values:
TensorBoard fills a shape from the values stored (one value declared as a billion is a billion), so a
file of a few hundred bytes could otherwise ask for gigabytes (``tensor_array``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from .defaults import max_line_bytes
from .location import open_file

_SCAN_PIECE = 1 << 20  # bytes looked through at a time for the next whole record after a broken length
MAX_TENSOR_VALUES = 1 << 20  # values a summary's tensor may declare (its shape's product) to be made


def declared_values(tensor) -> int | None:
    """How many values ``tensor`` (a ``TensorProto``) declares by its shape (1 for a scalar), None when a
    dimension is unknown or negative. Python integers: a product of huge dimensions does not wrap."""
    count = 1
    for dim in tensor.tensor_shape.dim:
        if dim.size < 0:
            return None
        count *= dim.size
    return count


def tensor_array(value, step: int, lost: list[str], want: int | None = None):
    """The values of a summary value's tensor (``value.tensor``) as a flat numpy array, made only when
    its shape declares at most ``MAX_TENSOR_VALUES`` values (exactly ``want`` when given); else None,
    and a line naming the tag, the step and what the shape declares is added to ``lost``."""
    from tensorboard.util import tensor_util

    count = declared_values(value.tensor)
    if count is None or count > MAX_TENSOR_VALUES or (want is not None and count != want):
        declared = "an unknown number of" if count is None else f"{count:,}"
        bound = f"exactly {want:,}" if want is not None else f"at most {MAX_TENSOR_VALUES:,}"
        lost.append(f"the tensor of tag {value.tag!r} at step {step:,} declares {declared} values ({bound} are "
                    "read): 1 value not read")
        return None
    return tensor_util.make_ndarray(value.tensor).reshape(-1)


def _crc(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return masked_crc32c(data)


def records(path: Path | str, lost: list[str]) -> Iterator[bytes]:
    """The bytes of each whole record of the event file at ``path`` whose checks hold; each record (or
    span of bytes) passed over adds a line to ``lost``."""
    limit = max_line_bytes()
    with open_file(path) as fh:
        size = fh.seek(0, 2)
        position = 0
        while position + 12 <= size:
            fh.seek(position)
            header = fh.read(12)
            length = struct.unpack("<Q", header[:8])[0]
            if struct.unpack("<I", header[8:])[0] != _crc(header[:8]):
                found = _next_record(fh, position + 1, size, limit)
                end = size if found is None else found
                lost.append(f"the record at byte {position:,} has a length that fails its CRC check: bytes "
                            f"{position:,}-{end:,} skipped ({'at least one record' if found else 'the rest of the file'} lost)")
                if found is None:
                    return
                position = found
                continue
            if position + 16 + length > size:
                return  # cut short: a record still being written
            if length > limit:
                lost.append(f"the record at byte {position:,} is {length:,} bytes, more than the line limit "
                            f"({limit:,} bytes; RL_BOARD_MAX_LINE_MB): 1 record not read")
                position += 16 + length
                continue
            data = fh.read(length)
            check = fh.read(4)
            position += 16 + length
            if struct.unpack("<I", check)[0] != _crc(data):
                lost.append(f"the record at byte {position - 16 - length:,} fails its CRC check: 1 record lost")
                continue
            yield data


def _next_record(fh, start: int, size: int, limit: int) -> int | None:
    """The first offset from ``start`` where a whole record lies (its length's and its bytes' checks
    hold), None when there is none; read a piece at a time."""
    offset = start
    while offset + 16 <= size:
        fh.seek(offset)
        piece = fh.read(_SCAN_PIECE + 11)
        for at in range(max(0, len(piece) - 11)):
            length = int.from_bytes(piece[at:at + 8], "little")
            here = offset + at
            if length > limit or here + 16 + length > size:
                continue
            if int.from_bytes(piece[at + 8:at + 12], "little") != _crc(piece[at:at + 8]):
                continue
            fh.seek(here + 12)
            data = fh.read(length)
            if int.from_bytes(fh.read(4), "little") == _crc(data):
                return here
        offset += _SCAN_PIECE
    return None


def events(path: Path | str, lost: list[str]):
    """The events of the event file at ``path`` (``event_pb2.Event``), migrated as TensorBoard's
    ``EventFileLoader`` migrates them; each record passed over adds a line to ``lost``."""
    from tensorboard import data_compat, dataclass_compat
    from tensorboard.compat.proto import event_pb2

    initial: dict = {}
    for data in records(path, lost):
        try:
            event = event_pb2.Event.FromString(data)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError: a record whose checks held but is no event
            lost.append("a record is no event: 1 record lost")
            continue
        yield from dataclass_compat.migrate_event(data_compat.migrate_event(event), initial)
