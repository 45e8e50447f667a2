"""TensorBoard event files (``events.out.tfevents.*``), as verl, OpenRLHF and TRL write them, read
with the ``tensorboard`` package's own event reader. Every scalar tag is a series; of several
values for one step (a resumed run logs some steps again, often in a second file) the one with the
latest wall time wins, as TensorBoard shows. A scalar tensor whose shape declares other than one value
is not read, and named (``tfrecords.tensor_array``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..base.tfrecords import events, tensor_array
from .base import Scalars, ScalarsError, SeriesBuilder, anywhere

PATTERN = "events.out.tfevents.*"


def event_folder(folder: Path, deep: bool = True, inside: Callable[[Path], bool] = anywhere) -> Path | None:
    """The folder of event files to read under ``folder``: itself when it holds some, else the
    folder of the newest event file below it (None without any). Not ``deep``: only ``folder``
    and TRL's ``runs/*`` below it are looked at. ``inside``: whether a file lies inside the allowed
    folders (the location's ``contains``): a symlink out is never read."""
    if any(p.is_file() and inside(p) for p in folder.glob(PATTERN)):
        return folder
    found = [p for p in (folder.rglob(PATTERN) if deep else folder.glob(f"runs/*/{PATTERN}"))
             if p.is_file() and inside(p)]
    return max(found, key=lambda p: p.stat().st_mtime).parent if found else None


def read(folder: Path, inside: Callable[[Path], bool] = anywhere) -> Scalars:
    files = sorted(p for p in folder.glob(PATTERN) if p.is_file() and inside(p))  # no symlink out
    if not files:
        raise ScalarsError(f"No TensorBoard event files in {folder}.")
    builder, skipped, notes = SeriesBuilder(), 0, []
    for path in files:
        lost: list[str] = []
        try:
            for event in events(path, lost):
                if not event.HasField("summary"):
                    continue
                for value in event.summary.value:
                    kind = value.WhichOneof("value")
                    if kind == "simple_value":
                        number = value.simple_value
                    elif kind == "tensor" and value.metadata.plugin_data.plugin_name == "scalars":
                        array = tensor_array(value, int(event.step), lost, want=1)
                        if array is None or array.size != 1:
                            continue
                        number = float(array[0])
                    else:
                        continue
                    builder.add(value.tag, int(event.step), number, order=event.wall_time)
        except Exception:  # a corrupt file (the reader stops quietly at a truncated end): count it
            skipped += 1
        skipped += len(lost)
        notes.extend(f"{path.name}: {why}" for why in lost)
    series = builder.build()
    if not series and skipped:
        raise ScalarsError(f"Could not read the event files in {folder}.")
    return Scalars("tensorboard", folder, series, builder.non_finite, skipped, notes)
