"""``rl-board findings``: what went wrong in a run, with evidence (``analysis.findings``), and which kinds
could not be checked on it and why."""

from __future__ import annotations

import json

from .common import _describe_settings, load_run_for, printed


def findings_json(args) -> dict:
    """What ``findings --json`` prints (docs/schemas/findings.json). ``CommandError`` when the run can't be
    read as asked."""
    return _found(args)[0]


def _found(args) -> tuple[dict, object, object]:
    """(``findings_json``'s dict, the run, its ``Findings``): the settings, the findings most worrying first,
    and ``not_checked``: each kind no check could run for on this run, with the reason (no KL logged, too few
    steps…)."""
    from ..analysis.findings import build_findings_json, get_findings
    from ..analysis.source import read_settings

    run = load_run_for(args, keep_words=True)  # the findings read every response's words
    found = get_findings(run)
    return build_findings_json(found, read_settings(run, args.max_samples_per_step)), run, found


def _findings(args) -> int:
    got, status = printed(_found, args)
    if status is not None:
        return status
    result, run, found = got
    if args.json:
        print(json.dumps(result, ensure_ascii=False, allow_nan=False))
    else:
        print(f"{len(found.findings)} finding{'s' if len(found.findings) != 1 else ''} in {run.path} "
              f"({run.report.lines_ok} samples loaded; {_describe_settings(result['settings'])})")
        for finding in found.findings:
            steps = (f"step {finding.first_step}" if finding.first_step == finding.last_step
                     else f"steps {finding.first_step}..{finding.last_step}")
            detail = f" ({finding.detail})" if finding.detail else ""
            print(f"  {finding.severity:<6} {finding.kind:<32} {steps:<16} {finding.message}{detail}")
            for sample_id in finding.samples:
                print(f"  {'':<6} {'':<32} {'':<16} {sample_id}")
        if result["not_checked"]:
            print(f"not checked on this run ({len(result['not_checked'])} of {len(found.checks)} kinds):")
        for check in result["not_checked"]:
            print(f"  {check['kind']:<32} {check['reason']}")
    return 0 if run.report.lines_ok else 1
