"""Which samples of a loaded run carry which tags (``compute_tagged``), the tag columns of a table, and
the tagged samples' exports: the JSONL eval set and the ``tags --json`` output.

The tags themselves (the file beside the cache, its locked writes, ``Entry``) are
``rl_board.store.tags``'s; this module reads them against a ``Run``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..base import fields as F
from ..base.access import RootError
from ..readers import SourceChanged
from ..store.tags import ANY_TAG, Entry, clean_note, clean_tags


def sample_key(run, label) -> str:
    """The address of sample ``label`` (in ``run._samples``): ``FILE:LINE`` or ``FILE:LINE#K``."""
    return F.addresses(run.files, run._samples.loc[[label]])[0]


def sample_digest(run, label) -> str | None:
    """sha1 of sample ``label``'s line as it is in its file now (a table file's row as JSON), or None
    when it can't be read."""
    line = run.source_lines([label])
    return hashlib.sha1(line).hexdigest() if line else None


def new_entry(run, label, tags, note: str | None = "") -> Entry:
    """The entry that gives sample ``label`` of ``run`` these ``tags`` and ``note`` (checked by
    ``clean_tags`` and ``clean_note``)."""
    row = run._samples.loc[label]
    return Entry(run.files[int(row[F.FILE])], int(row[F.LINE]), int(row[F.STEP]), clean_tags(tags),
                 clean_note(note), sample_digest(run, label), position=_position(row))


@dataclass(frozen=True)
class Tagged:
    """The tags of one run snapshot. ``frame``: one row per tagged sample present in the run, indexed by
    its label in ``run._samples`` (step, file, line order), columns ``key`` (``FILE:LINE``), ``tags``
    (tuple), ``note``; ``missing``: (entry, reason) for each entry shown on no sample: its line is not
    among the loaded samples, or it changed since it was tagged."""

    frame: pd.DataFrame
    missing: tuple[tuple[Entry, str], ...] = ()
    entries: dict = field(default_factory=dict, repr=False)

    def labels_with(self, tag: str) -> pd.Index:
        """Labels of the samples carrying ``tag`` (every tagged one for ``ANY_TAG``)."""
        if tag == ANY_TAG:
            return self.frame.index
        return self.frame.index[[tag in tags for tags in self.frame["tags"]]]

    def names(self) -> list[str]:
        """Every tag of the run's entries, most used first, then by name."""
        counts: dict[str, int] = {}
        for entry in self.entries.values():
            for tag in entry.tags:
                counts[tag] = counts.get(tag, 0) + 1
        return sorted(counts, key=lambda t: (-counts[t], t))


NOT_LOADED = "not among the loaded samples (the file or line is gone, or max samples per step left it out)"
CHANGED = "its line changed since it was tagged (the file was rewritten)"


def _position(row) -> int:
    return int(row[F.POSITION]) if F.POSITION in row else -1


def compute_tagged(run, entries: dict[str, Entry], check: bool = True) -> Tagged:
    """Which samples of ``run`` the ``entries`` (``load_tags``) are on. With ``check``, each tagged line
    is read again and compared with its ``digest`` (one short read per tagged sample)."""
    samples = run._samples
    index = {name: i for i, name in enumerate(run.files)}
    wanted = [(index.get(e.file, -1), e.line) for e in entries.values()]
    files = np.array([f for f, _ in wanted], dtype=np.int64)
    lines = np.array([line for _, line in wanted], dtype=np.int64)
    near = samples[samples[F.FILE].isin(files) & samples[F.LINE].isin(lines)]  # a superset, found vectorised
    positions = near[F.POSITION] if F.POSITION in near else [-1] * len(near)
    where = {(int(f), int(line), int(k)): label
             for label, f, line, k in zip(near.index, near[F.FILE], near[F.LINE], positions)}
    rows, missing = [], []
    for entry, (f, line) in zip(entries.values(), wanted):
        label = where.get((f, line, entry.position))
        if label is None:
            missing.append((entry, NOT_LOADED))
        elif check and entry.digest is not None and sample_digest(run, label) != entry.digest:
            missing.append((entry, CHANGED))
        else:
            rows.append((label, entry.key, entry.tags, entry.note))
    frame = pd.DataFrame(rows, columns=["label", "key", "tags", "note"]).set_index("label")
    frame = frame.iloc[np.argsort(samples.index.get_indexer(frame.index), kind="stable")]  # the run's order
    frame.index.name = None
    return Tagged(frame, tuple(missing), dict(entries))


def add_tag_columns(frame: pd.DataFrame, tagged: Tagged | None) -> pd.DataFrame:
    """``frame`` (rows of ``run._samples``) with columns ``tags`` (comma-separated) and ``note`` for its
    tagged rows ("" elsewhere: a table shows nothing, not "None"); unchanged when none of its rows is
    tagged."""
    if tagged is None or tagged.frame.empty:
        return frame
    shown = tagged.frame.loc[tagged.frame.index.intersection(frame.index)]
    if shown.empty:
        return frame
    tags = pd.Series([", ".join(t) for t in shown["tags"]], index=shown.index, dtype=object)
    notes = pd.Series([n or "" for n in shown["note"]], index=shown.index, dtype=object)
    return frame.assign(tags=tags.reindex(frame.index, fill_value=""), note=notes.reindex(frame.index, fill_value=""))


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _messages(run, label):
    """Sample ``label``'s turns as its reader gives them, None when it has none or can't be read again."""
    try:
        return run.record_parts(label)[0].get(F.MESSAGES)
    except (OSError, SourceChanged, RootError):  # the file moved on: the rest of the line stays
        return None


def build_eval_set(run, tagged: Tagged, pad_token: str | None = None, tag: str = ANY_TAG) -> bytes:
    """The tagged samples (those carrying ``tag``) as a JSONL eval set, one line per sample in step,
    file, line order: ``prompt`` and ``response`` (pad tokens removed), ``reward`` (null when not
    finite), ``tags``, ``note``, where it came from (``run``, ``step``, ``file``, ``line``, and ``position``
    for one of a line's several samples), its
    ``ground_truth`` and, for an agent trajectory, its ``messages`` (the turns as read, from its file)."""
    labels = tagged.labels_with(tag)
    if not len(labels):
        return b""
    rows = run.with_text(run._samples.loc[labels])
    has_turns = F.extra_column(F.NUM_TURNS) in run._samples  # agent trajectories (``fields.MESSAGES``)
    out = []
    for label in labels:
        row, entry = rows.loc[label], tagged.frame.loc[label]
        file, line, position = F.parse_address(entry["key"])

        def text(name):
            value = row[name]  # noqa: B023
            return value.replace(pad_token, "") if isinstance(value, str) and pad_token else value

        item = {
            "prompt": text("prompt"), "response": text("response"), "reward": _finite(row[F.REWARD]),
            "tags": list(entry["tags"]), "note": entry["note"], "run": run.path.name, "step": int(row[F.STEP]),
            "file": file, "line": line, **({"position": position} if position >= 0 else {}),
            "ground_truth": text("ground_truth"),
        }
        if has_turns and (messages := _messages(run, label)) is not None:
            item["messages"] = messages
        out.append(json.dumps(item, ensure_ascii=False, allow_nan=False, default=str))
    return "".join(line + "\n" for line in out).encode()


def build_tags_json(run, tagged: Tagged, tag: str = ANY_TAG) -> dict:
    """The ``tags --json`` output: ``tags`` (each tag's count of shown samples), ``samples`` (the tagged
    samples carrying ``tag``, step, file, line order: step, file, line, reward, tags, note) and
    ``missing`` (entries on no sample: file, line, step, tags, note, reason)."""
    labels = tagged.labels_with(tag)
    counts: dict[str, int] = {}
    for tags in tagged.frame["tags"]:
        for name in tags:
            counts[name] = counts.get(name, 0) + 1
    samples = []
    for label in labels:
        entry, row = tagged.frame.loc[label], run._samples.loc[label]
        samples.append({"step": int(row[F.STEP]), "file": run.files[int(row[F.FILE])], "line": int(row[F.LINE]),
                        **({"position": _position(row)} if _position(row) >= 0 else {}),
                        "reward": _finite(row[F.REWARD]), "tags": list(entry["tags"]), "note": entry["note"]})
    missing = [{"file": e.file, "line": e.line, **({"position": e.position} if e.position >= 0 else {}),
                "step": e.step, "tags": list(e.tags), "note": e.note, "reason": reason} for e, reason in tagged.missing]
    return {"tags": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))), "samples": samples,
            "missing": missing}
