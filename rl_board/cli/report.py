"""``rl-board report``: a run as one self-contained HTML file (``analysis.report``) to mail or attach:
its recap, curves, findings with their evidence and samples, and how it was made. A report that can't be
made leaves no file; the run is named by its folder's name, its absolute local path only with
``--full-path``."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from ..analysis.source import read_settings
from .common import _load


def default_output(run_path) -> Path:
    """Where the report goes without ``-o``: ``<run folder's name>.report.html`` in the current folder (the
    name of the folder the run resolves to: ``.`` is the current folder's; a URL's last part)."""
    from ..analysis.report import report_name

    name = report_name(run_path).rstrip("/").rsplit("/", 1)[-1] or "run"
    return Path(f"{name}.report.html")


def shown_command(argv: list[str], full_path: bool) -> str:
    """The command as typed, for the report's end; without ``full_path`` each absolute local path in it
    (the run, ``-o``, ``--tokenizer``…) is shortened to ``.../NAME``, so the report carries no local path."""
    from ..base.access import is_url

    if not full_path:
        argv = [f".../{Path(a).name}" if not is_url(a) and (a.startswith("~") or Path(a).is_absolute()) else a
                for a in argv]
    return "rl-board " + shlex.join(argv)


def _report(args) -> int:
    from ..analysis.findings import get_findings
    from ..analysis.report import ReportSettings, board_version, build_report_html
    from ..analysis.search import parse_steps

    try:
        steps = parse_steps(args.steps) if args.steps is not None else (None, None)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run = _load(args, keep_words=True)  # its findings read every response's words
    if isinstance(run, int):
        return run
    if not run.report.lines_ok:  # nothing to report: no file, rather than an empty report
        print(f"error: no line of {args.run_dir} loaded, so no report was written", file=sys.stderr)
        return 1
    command = shown_command(getattr(args, "argv", None) or ["report", str(args.run_dir)], args.full_path)
    made = ReportSettings(command, read_settings(run, args.max_samples_per_step), board_version(), steps,
                          args.samples, run_name=str(run.path) if args.full_path else None)
    found = get_findings(run)
    page = build_report_html(run, found, made)
    if args.output == "-":
        sys.stdout.write(page)
        return 0
    output = Path(args.output) if args.output else default_output(run.path)
    partial = output.with_name(f".{output.name}.{os.getpid()}.part")  # renamed into place once whole
    try:
        partial.write_text(page, encoding="utf-8")
        os.replace(partial, output)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        print(f"error: can't write {output}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"{output} ({len(page.encode()) / 1e6:.1f} MB): {run.report.lines_ok:,} samples, "
          f"{len(found.findings)} finding{'' if len(found.findings) == 1 else 's'}")
    return 0
