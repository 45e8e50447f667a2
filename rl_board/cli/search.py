"""``rl-board search``: the samples of a run whose text or numbers match, as on the page's Explore area."""

from __future__ import annotations

import json
import sys

from ..base.defaults import read_settings
from .common import _fmt, _load

def _search(args) -> int:
    from ..analysis.search import Query, build_search_json, compute_matches
    from ..store.tags import TagsError

    if args.regex is None and not args.truncated and args.tag is None:
        print("error: give --regex PATTERN, --truncated, --tag TAG, or several", file=sys.stderr)
        return 2
    run = _load(args)
    if isinstance(run, int):
        return run
    try:
        matches = compute_matches(run, Query(args.regex, args.text_field, args.pad_token,
                                             truncated=True if args.truncated else None, tag=args.tag))
    except (ValueError, TagsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = {"settings": read_settings(run, args.max_samples_per_step), **build_search_json(run, matches)}
    if args.json:
        print(json.dumps(result, ensure_ascii=False, allow_nan=False))
    else:
        print(f"{result['matches']} matches in {len(run.report.files)} files "
              f"({run.report.lines_ok} samples loaded, {run.report.lines_bad} lines rejected)")
        for s in result["samples"][:50]:
            print(f"  step {s['step']}  {s['file']}:{s['line']}  reward {_fmt(s['reward'])}")
    return 0 if run.report.lines_ok else 1

