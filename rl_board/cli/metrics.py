"""``rl-board metrics``: the trainer's own scalars found next to a run (or in a file given)."""

from __future__ import annotations

import json
import math
import sys

from .common import CommandError, _fmt, printed


def metrics_json(args) -> dict:
    """What ``metrics --json`` prints (docs/schemas/metrics.json). ``CommandError`` when the path can't be
    read."""
    return _measured(args)[0]


def _measured(args) -> tuple[dict, object, list]:
    """(``metrics_json``'s dict, the scalars read, the warning signs): with ``--warnings`` the dict's
    ``warnings`` lists every sign that fired and ``thresholds`` the values they were checked against (so an
    empty list says that none fired, not that none was looked for)."""
    from ..analysis.provider import ScalarsError, load_scalars
    from ..base.access import RootError as AccessError
    from ..base.access import check_allowed

    try:
        check_allowed(args.path)
        scalars = load_scalars(args.path)
    except (ScalarsError, AccessError) as exc:
        raise CommandError(str(exc)) from None
    result = scalars.to_json()
    signs = []
    if args.warnings:
        from dataclasses import asdict, replace

        from ..analysis.provider import Thresholds, compute_signs

        given = {name: getattr(args, name) for name in ("ratio_max", "clip_max", "spike_k", "entropy_fraction", "kl_noise_k")
                 if getattr(args, name) is not None}
        thresholds = replace(Thresholds(), **given)
        signs = compute_signs(scalars.series, thresholds)
        result["warnings"] = [{"kind": s.kind, "series": s.series, "step": s.step,
                               "value": s.value if math.isfinite(s.value) else None, "message": s.message}
                              for s in signs]
        result["thresholds"] = asdict(thresholds)
    return result, scalars, signs


def _metrics(args) -> int:
    got, status = printed(_measured, args)
    if status is not None:
        return status
    result, scalars, signs = got
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        print(f"{scalars.source}: {scalars.path} · {len(scalars.series)} series · "
              f"{scalars.non_finite} non-finite values · {scalars.skipped} records skipped")
        for note in scalars.notes:
            print(f"note: {note}", file=sys.stderr)
        _print_series(scalars.series)
        for sign in signs:
            print(f"  ! {sign.kind}: {sign.series} at step {sign.step}: {sign.message}")
        if args.warnings and not signs:
            print(f"no warning sign fired (checked: {_describe_thresholds(result['thresholds'])}; docs/page.md, "
                  "Trainer metrics)")
    return 0 if scalars.series else 1


def _print_series(series: dict) -> None:
    """One row per series: its steps, and first → last, min and max with their steps (finite values)."""
    from ..analysis.recap import compute_recap

    if not series:
        return
    width = max(len(name) for name in series)
    print(f"  {'series':<{width}}  {'steps':>12}  {'first → last':>23}  {'min (step)':>18}  {'max (step)':>18}")
    for name, points in series.items():
        recap = compute_recap(points)
        span = f"{points[0][0]}..{points[-1][0]}"
        if recap is None:
            print(f"  {name:<{width}}  {span:>12}  (no finite value)")
            continue
        change = f"{_fmt(recap.first)} → {_fmt(recap.last)}"
        low, high = f"{_fmt(recap.min)} ({recap.min_step})", f"{_fmt(recap.max)} ({recap.max_step})"
        print(f"  {name:<{width}}  {span:>12}  {change:>23}  {low:>18}  {high:>18}")


def _describe_thresholds(thresholds: dict) -> str:
    """The thresholds the warning signs were checked against, in a few words."""
    return ", ".join(f"{name} {value:g}" for name, value in thresholds.items())
