"""``rl-board search``: the samples of a run whose text or numbers match, as on the page's Explore area."""

from __future__ import annotations

import json
import sys

from ..base import fields as F
from .common import CommandError, _fmt, load_run_for, printed
from .parser import SEARCH_SHOWN


def search_json(args) -> dict:
    """What ``search --json`` prints (docs/schemas/search.json). ``CommandError`` on a bad argument or a run
    that can't be read as asked."""
    return _searched(args)[0]


def _searched(args) -> tuple[dict, object, object]:
    """(``search_json``'s dict, the run, the samples listed: rows of ``run._samples``)."""
    from ..analysis.provider import TagsError
    from ..analysis.search import (
        SEARCH_FIELDS,
        Query,
        build_search_json,
        column_for,
        compute_first_matches,
        compute_search,
        has_conversations,
        parse_range,
        parse_steps,
        sort_key_for,
    )
    from ..analysis.source import read_settings
    from ..analysis.tables import sort_samples

    if (args.regex is None and not args.truncated and args.tag is None and not args.ranges and args.steps is None
            and not args.has_images and args.fault is None):
        raise CommandError("give --regex PATTERN, --truncated, --has-images, --tag TAG, --fault KIND, "
                           "--range NAME=LOW:HIGH, --steps A:B, or several")
    try:
        steps = parse_steps(args.steps) if args.steps is not None else (None, None)
        bounds = [parse_range(text) for text in args.ranges]
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    run = load_run_for(args)
    if args.regex and args.text_field not in SEARCH_FIELDS and args.text_field not in run.text_fields():
        print(f"note: no first sample of the run's files has a text field {json.dumps(args.text_field, ensure_ascii=False)}; "
              "the run's text fields: " + (", ".join(json.dumps(n, ensure_ascii=False) for n in run.text_fields())
                                           or "none") + " (docs/formats/jsonl.md)", file=sys.stderr)
    if args.fault is not None and not has_conversations(run):
        print("note: no sample of this run has turns, so none has a turn fault (docs/faults.md)", file=sys.stderr)
    try:
        ranges = {column_for(run, name): (low, high) for name, low, high in bounds}
        sort = sort_key_for(run, args.sort) if args.sort is not None else None
        keep, scan = compute_search(run, Query(args.regex, args.text_field, args.pad_token, ranges, steps,
                                             truncated=True if args.truncated else None, tag=args.tag,
                                             has_images=True if args.has_images else None, fault=args.fault))
    except (ValueError, TagsError) as exc:
        raise CommandError(str(exc)) from None
    # every match's address and reward; all their columns only where a sort needs them
    matches = run._samples.loc[keep, [c for c in (F.STEP, F.FILE, F.LINE, F.POSITION, F.REWARD) if c in run._samples]]
    limit = args.limit if args.limit is not None else (None if args.json else SEARCH_SHOWN)
    if sort is not None:
        ordered = sort_samples(run._samples[keep], sort, not args.ascending)
        shown = ordered if limit is None else ordered.head(limit)
    else:
        shown = matches if limit is None else compute_first_matches(run, keep, limit)  # no limit: --json, every match
    listed = sort is not None or limit is not None  # the samples listed: those shown, in the order asked
    result = {"settings": read_settings(run, args.max_samples_per_step),
              **build_search_json(run, matches, scan, faults=args.json and not listed)}
    if scan is not None and scan.note():  # one line on stderr, for --json too
        print(f"note: {scan.note()}", file=sys.stderr)
    if listed:
        result["samples"] = build_search_json(run, shown, faults=args.json or args.fault is not None)["samples"]
    return result, run, shown


def _search(args) -> int:
    got, status = printed(_searched, args)
    if status is not None:
        return status
    result, run, shown = got
    if args.json:
        print(json.dumps(result, ensure_ascii=False, allow_nan=False))
        return 0 if run.report.lines_ok else 1
    print(f"{result['matches']} matches in {len(run.report.files)} files "
          f"({run.report.lines_ok} samples loaded, {run.report.lines_bad} lines rejected); "
          f"showing {len(shown)} of {result['matches']}"
          + (" (--limit N for more)" if len(shown) < result["matches"] else ""))
    excerpts = _excerpts(run, shown, args.text_field, args.regex, args.pad_token)
    for s, excerpt in zip(result["samples"], excerpts):
        where = F.address(s["file"], s["line"], s.get("position", -1))
        faults = "".join(f"  {f['kind']} at message {f['message_index']} (assistant turn {f['assistant_turn']})"
                         for f in s.get("faults", ()))
        print(f"  step {s['step']}  {where}  reward {_fmt(s['reward'])}{faults}")
        if excerpt:
            print(f"      {excerpt}")
    return 0 if run.report.lines_ok else 1


def _excerpts(run, shown, field: str, pattern: str | None, pad_token: str | None) -> list[str]:
    """Each shown sample's text around its first match (the match between « and »)."""
    from ..analysis.search import EXCERPT_SECONDS, build_excerpts, first_matching
    from ..base import fields as F

    if shown.empty:
        return []
    if field in F.TEXT_FIELDS:
        texts = run.with_text(shown)[field].tolist()
    elif field != F.MESSAGES:  # a text field: read again from the source
        texts = run.texts(shown.index, field)
    else:
        texts = []
        for got in run.records(shown.index):  # a file at a time: one pass over a compressed log
            turns = (got[0].get(F.MESSAGES) or []) if got is not None else []  # changed since: no excerpt
            parts = [str(t.get("content") or "") for t in turns]
            parts += [str(c.get("arguments") or "") for t in turns for c in (t.get("tool_calls") or [])]
            texts.append(first_matching(parts, pattern))
    if pad_token:
        texts = [t.replace(pad_token, "") if isinstance(t, str) else t for t in texts]
    excerpts, unmarked = build_excerpts(texts, pattern)
    if unmarked:
        print(f"note: {unmarked} of {len(texts)} excerpts show their text's start, their match not marked: finding "
              f"the matches took more than {EXCERPT_SECONDS} s", file=sys.stderr)
    return excerpts
