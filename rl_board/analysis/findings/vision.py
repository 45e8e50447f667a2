"""Findings about what the trainer saw: images lost between the rollout and the tokens trained on (16)."""

from __future__ import annotations

from ...base import fields as F
from ...readers.placeholders import IMAGES_DROPPED
from .common import Finding, _ids, _log_order

NAMED_SAMPLES = 50  # dropped-image samples a finding names (its evidence counts them all)


def _images_dropped(run):
    """Raised when any sample's images and the image placeholders of the tokens it was trained on differ (the
    extra ``images_dropped`` is 1); names those samples, in step, file and line order."""
    column = F.extra_column(IMAGES_DROPPED)
    samples = run._samples
    if column not in samples:
        return None
    checked = samples[column].notna()
    dropped = (samples[column] == 1).to_numpy()
    if not dropped.any():
        return None
    hits = _log_order(samples[dropped])
    steps = sorted({int(s) for s in hits[F.STEP]})
    labels = tuple(hits.index[:NAMED_SAMPLES])
    count, total = len(hits), int(checked.sum())
    message = (f"{count} of {total} samples with images were trained on tokens that mark a different number of "
               f"images than their messages hold (images dropped before training), first at step {steps[0]}")
    return Finding(IMAGES_DROPPED, steps[0], steps[-1],
                   {"samples_dropped": count, "samples_checked": total, "steps": steps},
                   _ids(run, samples.loc[list(labels)]), message, labels, steps[0],
                   amount=f"{count} of {total} samples with images ({count / total * 100:.3g} %)")
