"""``rl-board runs [ROOT]``: every run under a root folder, as the page's runs list and the MCP ``runs``
tool list them (``store.discovery``): one function builds the JSON all three give."""

from __future__ import annotations

import json
import sys

from .common import CommandError, printed


class RunsError(ValueError):
    """No root to list, or a root that can't be listed: the message says why."""


def build_runs_json(root: str | None) -> dict:
    """The runs under ``root`` (default: every allowed folder, ``RL_BOARD_ROOTS``): ``roots``, ``runs`` (each
    run's root, name (its path under the root), path, format, splits, files, size in bytes, steps and samples,
    null where not known without reading the run), ``unclaimed`` (folders of logs no reader opens, with the
    reason) and ``notes`` (where the walk stopped, folders it could not read). ``RunsError`` with a plain
    message for a missing, unusable or empty root."""
    from ..analysis.provider import discover_runs
    from ..base.access import allowed_roots

    roots = [root] if root else [str(r) for r in (allowed_roots() or [])]
    if not roots:
        raise RunsError("give a root folder: every folder is allowed here (no --roots, no RL_BOARD_ROOTS), so "
                        "there is none to list")
    out = {"roots": [], "runs": [], "unclaimed": [], "notes": []}
    for top in roots:
        try:
            found = discover_runs(top)
        except (ValueError, OSError) as exc:  # RootError, NoRunsError: their messages say why
            raise RunsError(str(exc)) from None
        out["roots"].append(str(found.root))
        out["runs"] += [{"root": str(found.root), "name": run.name, "path": str(run.path), "format": run.format,
                         "splits": list(run.splits), "files": run.files, "size": run.size, "steps": run.steps,
                         "samples": run.samples} for run in found.runs]
        out["unclaimed"] += [{"root": str(found.root), "name": u.name, "reason": u.reason} for u in found.unclaimed]
        out["notes"] += found.notes
    return out


def runs_json(args) -> dict:
    """What ``runs --json`` prints (docs/schemas/runs.json): ``build_runs_json`` of ``args.root``;
    ``CommandError`` when it can't be listed."""
    try:
        return build_runs_json(args.root)
    except RunsError as exc:
        raise CommandError(str(exc)) from None


def _runs(args) -> int:
    """0 with a run listed, 2 when the root can't be listed (or holds no run)."""
    from ..analysis.provider import describe_size

    found, status = printed(runs_json, args)
    if status is not None:
        return status
    if args.json:
        print(json.dumps(found, ensure_ascii=False))
        return 0
    columns = ("run", "format", "splits", "steps", "samples", "files", "size")
    rows = [(run["name"] if len(found["roots"]) == 1 else f"{run['root']}/{run['name']}", run["format"],
             ",".join(run["splits"]) or "-", _count(run["steps"]), _count(run["samples"]), f"{run['files']:,}",
             describe_size(run["size"])) for run in found["runs"]]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    for row in (columns, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    for unclaimed in found["unclaimed"]:
        print(f"not read: {unclaimed['name']}/ ({unclaimed['reason']})")
    for note in found["notes"]:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"
