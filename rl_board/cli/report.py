"""``rl-board report``: a run as one self-contained HTML file (``analysis.report``) to mail or attach:
its recap, curves, findings with their evidence and samples, and how it was made."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ..analysis.source import read_settings
from .common import _load


def default_output(run_dir) -> Path:
    """Where the report goes without ``-o``: ``<run folder's name>.report.html`` in the current folder."""
    name = str(run_dir).rstrip("/").rsplit("/", 1)[-1] or "run"
    return Path(f"{name}.report.html")


def _report(args) -> int:
    from ..analysis.findings import get_findings
    from ..analysis.report import ReportSettings, board_version, build_report_html
    from ..analysis.search import parse_steps

    try:
        steps = parse_steps(args.steps) if args.steps is not None else (None, None)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run = _load(args)
    if isinstance(run, int):
        return run
    command = "rl-board " + shlex.join(getattr(args, "argv", None) or ["report", str(args.run_dir)])
    made = ReportSettings(command, read_settings(run, args.max_samples_per_step), board_version(), steps,
                          args.samples)
    found = get_findings(run)
    page = build_report_html(run, found, made)
    if args.output == "-":
        sys.stdout.write(page)
        return 0 if run.report.lines_ok else 1
    output = Path(args.output) if args.output else default_output(args.run_dir)
    try:
        output.write_text(page, encoding="utf-8")
    except OSError as exc:
        print(f"error: can't write {output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"{output} ({len(page.encode()) / 1e6:.1f} MB): {run.report.lines_ok:,} samples, "
          f"{len(found.findings)} finding{'' if len(found.findings) == 1 else 's'}")
    return 0 if run.report.lines_ok else 1
