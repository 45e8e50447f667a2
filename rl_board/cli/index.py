"""``rl-board index``: read a run into its cache now (on a Ray cluster with ``--ray``), so every page and
command after it opens the run from the cache without reading the logs."""

from __future__ import annotations

import json
import os
import sys
import time

from ..base.access import RootError
from .common import CommandError, printed


def index_json(args) -> dict:
    """What ``index --json`` prints (docs/schemas/index.json): the run read into its cache, how many files were
    read and how many were cached already, where the cache is, and the Ray cluster's share. ``CommandError``
    when the run can't be read as asked or its cache can't be written."""
    report, run = _indexed(args)
    if run.cache is None:
        raise CommandError(NOT_WRITTEN)
    return report


def _indexed(args) -> tuple[dict, object]:
    """(``index_json``'s dict, the run); the dict comes back even when the cache could not be written (the
    command line prints it, then the error), ``CommandError`` is raised for that only by ``index_json``."""
    from ..analysis.provider import FieldMappingError, TokenizerError, cluster, parse_field_mapping
    from ..analysis.source import RunSource

    if args.no_cache:
        raise CommandError("index writes the run's cache: --no-cache leaves it nothing to do")
    if args.ray is not None:
        os.environ[cluster.RAY_ENV] = args.ray  # this read's ranges go to Ray tasks (store.ingest)
    started, last = time.monotonic(), [0.0]

    def progress(done: int, total: int) -> None:  # on stderr, at most twice a second and at the end
        now = time.monotonic()
        if now - last[0] >= 0.5 or done >= total:
            last[0] = now
            print(f"index: {cluster.describe_progress(done, total)}", file=sys.stderr, flush=True)

    try:
        source = RunSource(args.run_dir, args.pad_token, None, None, parse_field_mapping(args.field), args.eos_token,
                           args.split, args.tokenizer, keep_words=True)  # the page's findings read the words
        run = source.refresh(progress)
    except (RootError, FieldMappingError, TokenizerError) as exc:
        raise CommandError(str(exc)) from None
    for note in run.report.notes:
        print(f"note: {note}", file=sys.stderr)
    statuses = source.last_status
    parsed = sorted(name for name, status in statuses.items() if status in ("parsed", "appended"))
    report = {"run": str(run.path), "format": run.report.reader, "files": len(run.files),
              "files_read": len(parsed), "files_cached": sum(s in ("cached", "unchanged") for s in statuses.values()),
              "samples": int(run.report.lines_ok), "rejected": int(run.report.lines_bad),
              "cache": str(run.cache[0]) if run.cache else None, "ray": cluster.LAST_READ.get("address"),
              "ray_tasks": cluster.LAST_READ.get("tasks", 0),
              "ray_segments_shared": cluster.LAST_READ.get("published", 0), "seconds": round(time.monotonic() - started, 3)}
    return report, run


NOT_WRITTEN = "the run's cache could not be written (see the note above)"


def _index(args) -> int:
    got, status = printed(_indexed, args)
    if status is not None:
        return status
    report, run = got
    if args.json:
        print(json.dumps(report))
    else:
        where = f" on the Ray cluster {report['ray']} ({report['ray_tasks']} tasks)" if report["ray"] else ""
        print(f"{report['run']}: {report['samples']} samples from {report['files']} files; read {report['files_read']}"
              f"{where}, {report['files_cached']} already cached; cache: {report['cache']}")
    if run.cache is None:
        print(f"error: {NOT_WRITTEN}", file=sys.stderr)
        return 2
    return 0 if run.report.lines_ok else 1
