"""``rl-board findings``: what went wrong in a run, with evidence (``analysis.findings``)."""

from __future__ import annotations

import json

from .common import _describe_settings, _load


def _findings(args) -> int:
    from ..analysis.findings import get_findings
    from ..analysis.source import read_settings

    run = _load(args)
    if isinstance(run, int):
        return run
    found = get_findings(run)
    if args.json:
        print(json.dumps({"settings": read_settings(run, args.max_samples_per_step),
                          "findings": found.to_json(full=True)}, ensure_ascii=False, allow_nan=False))
    else:
        print(f"{len(found.findings)} finding{'s' if len(found.findings) != 1 else ''} in {run.path} "
              f"({run.report.lines_ok} samples loaded; "
              f"{_describe_settings(read_settings(run, args.max_samples_per_step))})")
        for finding in found.findings:
            steps = (f"step {finding.first_step}" if finding.first_step == finding.last_step
                     else f"steps {finding.first_step}..{finding.last_step}")
            detail = f" ({finding.detail})" if finding.detail else ""
            print(f"  {finding.severity:<6} {finding.kind:<32} {steps:<16} {finding.message}{detail}")
            for sample_id in finding.samples:
                print(f"  {'':<6} {'':<32} {'':<16} {sample_id}")
        skipped = [c for c in found.checks if not c.ran]
        for check in skipped:
            print(f"  not checked: {check.kind} ({check.note})")
    return 0 if run.report.lines_ok else 1

