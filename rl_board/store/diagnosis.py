"""What a folder holds, for ``rl-board detect`` and for saying why a folder does not open.

``compute_diagnosis(path)`` looks at a folder without reading it as a run: the reader that
would open it (``readers.detect``) with its files, splits, the steps their names carry and the
trainer's metrics the run's Trainer metrics area reads (``scalars.discover``: in the run folder, its
parent or grandparent); and when none holds it, what was found (files by kind, the first JSON line's keys, step and
split guesses from the paths, sub-folders that hold runs), the closest reader and what it
missed, and the one thing to try. Nothing is unpickled or parsed beyond one line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .. import readers
from ..base.access import RootError
from ..base.location import open_file, open_location
from ..base.remote import RemotePath
from ..readers import layout
from ..readers.formats.jsonl import first_line
from .discovery import MODEL_FILES, discover_runs
from .tracking import EXPECTED_LAYOUT, ROOT_RUN, list_run_files, list_splits, natural_key

MAX_WALKED = 5000  # files looked at before the counts stop
MAX_DEPTH = 12  # folder levels below the folder (the runs list has no depth bound; AReaL writes runs 7 down)
SHOWN = 12  # names listed
PICKLES = (".pt", ".pkl", ".pickle", ".bin")
_STEP_GUESS = re.compile(r"(?:^|[_.-])(?:global_step|step|iteration|iter|version|epoch)[_-]?(\d+)", re.I)
_SPLIT_WORDS = ("train", "eval", "val", "validation", "test", "rollout")
_WILDCARDS = re.compile(r"\*|\?|\[[^\]]*\]")


def _specific(pattern: str) -> bool:
    """Whether a reader's pattern names something of its own (``dumped_evals/*/*.jsonl``,
    ``train_data_step*.jsonl``), not only a suffix (``*/*.jsonl``, ``[0-9]*.jsonl``, ``*.pt``) that any
    folder of logs matches."""
    return any(_WILDCARDS.sub("", part).split(".", 1)[0] for part in pattern.split("/"))


def _walk(root) -> list:
    """The files below ``root`` (no hidden ones, ``MAX_DEPTH`` levels, ``MAX_WALKED`` at most); a URL's
    through its store's listing (``find``)."""
    if isinstance(root, RemotePath):
        top = str(root.pure).rstrip("/")
        keys = sorted(root.fs.find(top, maxdepth=MAX_DEPTH + 1), key=natural_key)
        found = (root._new(key) for key in keys if key.rstrip("/") != top)
        return [p for p in found if not any(part.startswith(".") for part in p.relative_to(root).parts)][:MAX_WALKED]
    out = []
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        dirs[:] = sorted((d for d in dirs if not d.startswith(".")), key=natural_key)[:200] if depth < MAX_DEPTH else []
        for name in sorted(files, key=natural_key):
            if not name.startswith("."):
                out.append(Path(folder) / name)
                if len(out) >= MAX_WALKED:
                    return out
    return out


def _runs_below(location) -> list[dict]:
    """The runs in the folder's sub-folders at any depth (TRL's ``output/completions``, NeMo-RL's
    ``logs/exp_001``), as the runs list finds them (its folder budget), by path under the folder."""
    try:
        found = discover_runs(location, details=False)
    except (OSError, RootError):  # NoRunsError too: nothing below is a run
        return []
    return [{"folder": run.name, "reader": run.format} for run in found.runs if run.name != ROOT_RUN]


def _first_keys(paths: list[Path], root: Path) -> dict | None:
    """The first JSON line's file and keys (one line read); a model's or tokenizer's files
    (``tokenizer.json``, ``config.json``…) are not logs and are never quoted."""
    for path in paths:
        if path.suffix not in (".jsonl", ".json") or path.name in MODEL_FILES:
            continue
        try:
            with open_file(path) as fh:  # a FIFO is named, never waited on; a huge file is not read whole
                head = first_line(fh) if path.suffix == ".jsonl" else fh.read(1 << 20)
            obj = json.loads(head)
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            return {"file": path.relative_to(root).as_posix(), "keys": list(obj)[:40]}
    return None


def _reader_steps(reader, names: list[str]) -> list[int] | None:
    steps = {s for n in names if (s := layout.step_of(reader, n)) is not None}
    return sorted(steps) or None


def _closest(paths: list[Path], root: Path, first: dict | None):
    """(reader, files of its layout) of the reader whose layout matches files, those whose ``KEYS`` the
    first line has first, then the most files; (None, 0) when none matches."""
    best, score, count = None, (0, 0), 0
    keys = set(first["keys"]) if first else set()
    for reader in readers.all_readers():
        if layout.is_flat(reader) and not hasattr(reader, "matches"):
            continue
        known = getattr(reader, "KEYS", None)
        keyed = bool(known) and set(known) <= keys
        # a pattern of suffixes only is no sign of the reader's layout, unless the first line has its keys
        patterns = [pattern for pattern in layout.globs(reader) if keyed or _specific(pattern)]
        n = sum(1 for p in paths if any(p.relative_to(root).match(pattern) for pattern in patterns))
        rank = (int(keyed), n)
        if n and rank > score:
            best, score, count = reader, rank, n
    return best, count


def compute_diagnosis(path: Path | str) -> dict:
    """What ``path`` holds (see the module's docstring), JSON-ready."""
    location = open_location(path)  # the door: nothing is looked at outside the allowed folders
    root = location.path
    if not root.is_dir():
        return {"path": str(root), "reader": None, "error": "not a folder", "try": EXPECTED_LAYOUT}
    out: dict = {"path": str(root)}
    held = readers.holds_run(root)
    if held:
        reader = readers.detect(root)
        files, ignored = list_run_files(location, reader)
        names = [layout.relative_name(root, p) for p in files]
        out.update({"reader": reader.NAME, "file_count": len(names), "files": names[:SHOWN],
                    "ignored": ignored[:SHOWN], "splits": list_splits(location, reader),
                    "steps": _reader_steps(reader, names), "metrics": _metrics_source(location)})
        return out
    paths = _walk(root)
    kinds: dict[str, int] = {}
    for p in paths:
        kinds[p.suffix or "(no suffix)"] = kinds.get(p.suffix or "(no suffix)", 0) + 1
    relative = [p.relative_to(root).as_posix() for p in paths]
    steps = sorted({m.group(0).strip("_.-") for n in relative for m in _STEP_GUESS.finditer(n)}, key=natural_key)
    splits = sorted({part for n in relative for part in Path(n).parts[:-1]
                     if any(w in part.lower() for w in _SPLIT_WORDS)}, key=natural_key)
    below = _runs_below(location)
    first = _first_keys(paths, root)
    reader, matched = _closest(paths, root, first)
    out.update({
        "reader": None,
        "found": {"files_by_kind": dict(sorted(kinds.items(), key=lambda kv: -kv[1])), "files_looked_at": len(paths),
                  "first_line": first, "step_guesses": steps[:SHOWN],
                  "split_guesses": splits[:SHOWN]},
        "runs_below": below[:SHOWN],
        "closest": None if reader is None else {
            "reader": reader.NAME, "files_of_its_layout": matched,
            "missed": getattr(reader, "EXPECTS", "its check of the files' layout or first line failed")},
    })
    out["pickles"] = [n for n in relative if n.endswith(PICKLES)][:SHOWN]
    out["try"] = _suggestion(out)
    return out


def _suggestion(d: dict) -> str:
    """The one thing to try."""
    if d["runs_below"]:
        first = d["runs_below"][0]
        return (f"open a sub-folder: {first['folder']} ({first['reader']}); or use this folder as the root "
                "folder, which lists each sub-folder that holds a run")
    if d["closest"] is not None:
        return f"this looks like {d['closest']['reader']}'s layout; it expects {d['closest']['missed']}"
    if d["pickles"]:
        return ("the folder holds pickles (" + ", ".join(d["pickles"][:3]) + "): the board never unpickles files; "
                "point it at the trainer's JSON/JSONL or parquet output")
    first = d["found"]["first_line"]
    if first is not None:
        return (f"the first line ({first['file']}) has keys {', '.join(first['keys'][:12])}: put the files in one "
                "folder per run and name the step and reward keys with a field map (--field step=KEY "
                "--field reward=KEY)")
    return EXPECTED_LAYOUT


def format_diagnosis(d: dict) -> str:
    """The diagnosis as plain text for people (names shown literally)."""
    lines = [f"folder: {d['path']}"]
    if d.get("error"):
        return "\n".join(lines + [f"error: {d['error']}", f"try: {d['try']}"])
    if d["reader"] is not None:
        lines.append(f"reader: {d['reader']}")
        lines.append(f"files: {d['file_count']}" + (" (" + ", ".join(d["files"]) + (", …" if d["file_count"] > len(d["files"]) else "") + ")" if d["files"] else ""))
        if d["ignored"]:
            lines.append("ignored: " + ", ".join(d["ignored"]))
        lines.append("splits: " + (", ".join(d["splits"]) if d["splits"] else "none"))
        steps = d["steps"]
        lines.append("steps: " + ("in the lines" if steps is None else _ranges(steps)))
        if d.get("metrics"):
            lines.append(f"trainer metrics: {d['metrics']} (rl-board metrics)")
        return "\n".join(lines)
    found = d["found"]
    lines.append("reader: none opens this folder")
    kinds = ", ".join(f"{n} {k}" for k, n in found["files_by_kind"].items()) or "no files"
    lines.append(f"found: {kinds} (in {found['files_looked_at']} files looked at)")
    if found["first_line"]:
        lines.append(f"first line ({found['first_line']['file']}): keys " + ", ".join(found["first_line"]["keys"]))
    if found["step_guesses"]:
        lines.append("steps in the paths: " + ", ".join(found["step_guesses"]))
    if found["split_guesses"]:
        lines.append("splits in the paths: " + ", ".join(found["split_guesses"]))
    if d["runs_below"]:
        lines.append("runs in sub-folders: " + ", ".join(f"{r['folder']} ({r['reader']})" for r in d["runs_below"]))
    if d["closest"]:
        c = d["closest"]
        lines.append(f"closest reader: {c['reader']} ({c['files_of_its_layout']} files of its layout); it expects {c['missed']}")
    if d["pickles"]:
        lines.append("pickles (never unpickled): " + ", ".join(d["pickles"]))
    lines.append(f"try: {d['try']}")
    return "\n".join(lines)


def _metrics_source(location) -> str | None:
    """The trainer's metrics of the run at ``location`` (``scalars.discover``), relative to the run folder
    (``../metrics.jsonl`` in its parent), or None."""
    from ..scalars import discover

    found = discover(location)
    if found is None:
        return None
    if isinstance(found, Path):
        return Path(os.path.relpath(found, Path(location.path).resolve())).as_posix()
    try:  # a URL's: its name in the run folder, else the whole URL
        return found.relative_to(location.path).as_posix()
    except (ValueError, AttributeError):
        return str(found)


def _ranges(steps: list[int]) -> str:
    """``0, 2..5, 9`` (consecutive steps as a range)."""
    parts, start = [], steps[0]
    for prev, cur in zip(steps, steps[1:] + [None]):
        if cur is None or cur != prev + 1:
            parts.append(str(start) if start == prev else f"{start}..{prev}")
            start = cur
    return ", ".join(parts)


def describe_folder(path: Path | str) -> str:
    """``format_diagnosis(compute_diagnosis(path))``, or why the folder can't be looked at."""
    try:
        return format_diagnosis(compute_diagnosis(path))
    except (OSError, ValueError) as exc:  # RootError is a ValueError: a folder outside the allowed ones
        return f"can't look into {path}: {exc}"
