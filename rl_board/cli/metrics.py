"""``rl-board metrics``: the trainer's own scalars found next to a run (or in a file given)."""

from __future__ import annotations

import json
import math
import sys

from .common import _fmt


def _metrics(args) -> int:
    from ..analysis.provider import ScalarsError, load_scalars
    from ..base.access import RootError as AccessError
    from ..base.access import check_allowed

    try:
        check_allowed(args.path)
        scalars = load_scalars(args.path)
    except (ScalarsError, AccessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = scalars.to_json()
    signs = []
    if args.warnings:
        from dataclasses import replace

        from ..analysis.provider import Thresholds, compute_signs

        given = {name: getattr(args, name) for name in ("ratio_max", "clip_max", "spike_k", "entropy_fraction", "kl_noise_k")
                 if getattr(args, name) is not None}
        signs = compute_signs(scalars.series, replace(Thresholds(), **given))
        result["warnings"] = [{"kind": s.kind, "series": s.series, "step": s.step,
                               "value": s.value if math.isfinite(s.value) else None, "message": s.message}
                              for s in signs]
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
