"""``rl-board tags``: list, export, set and clear a run's tags and notes."""

from __future__ import annotations

import json
import sys

from ..base import fields as F
from .common import CommandError, _fmt, load_run_for, printed


def tags_json(args) -> dict:
    """What ``tags --json`` prints (docs/schemas/tags.json): the tagged samples and each tag's count, or with
    ``--sample`` and a change, that sample's entry after it. ``CommandError`` on a bad argument, a run that
    can't be read as asked or an unknown sample."""
    return _tagged(args)[0]


def _tagged(args) -> tuple[dict | None, object, object]:
    """(``tags_json``'s dict, the run, its ``Tagged``: None after a change); with ``--export`` the dict is
    None (the eval set is not JSON)."""
    from ..analysis import provider as T
    from ..analysis import tagged as TG
    from ..analysis.source import read_settings

    changing = bool(args.add or args.remove or args.note is not None)
    if changing != (args.sample is not None):
        raise CommandError("--sample goes with --add, --remove or --note, and they with it")
    if args.export and (args.json or changing):
        raise CommandError("--export prints JSONL; it goes with neither --json nor a change")
    run = load_run_for(args)
    try:
        if changing:
            return _tag_sample(args, run), run, None
        tagged = TG.compute_tagged(run, T.load_tags(run.path))
    except T.TagsError as exc:
        raise CommandError(str(exc)) from None
    for entry, reason in tagged.missing:
        print(f"note: {entry.key} ({', '.join(entry.tags) or 'a note'}) is shown on no sample: {reason}",
              file=sys.stderr)
    if args.export:
        return None, run, tagged
    result = {"settings": read_settings(run, args.max_samples_per_step), "tags_file": str(T.tags_path(run.path)),
              **TG.build_tags_json(run, tagged, args.tag or T.ANY_TAG)}
    return result, run, tagged


def _tags(args) -> int:
    from ..analysis import provider as T
    from ..analysis import tagged as TG

    got, status = printed(_tagged, args)
    if status is not None:
        return status
    result, run, tagged = got
    if tagged is None:  # a change: the sample's entry after it
        if args.json:
            print(json.dumps(result, ensure_ascii=False))
        else:
            print(f"{args.sample}: [{', '.join(result['tags'])}]" + (f" {result['note']}" if result["note"] else ""))
        return 0
    tag = args.tag or T.ANY_TAG
    if args.export:
        sys.stdout.buffer.write(TG.build_eval_set(run, tagged, args.pad_token, tag))
    elif args.json:
        print(json.dumps(result, ensure_ascii=False, allow_nan=False))
    else:
        count = len(result["samples"])
        print(f"{count} tagged sample{'' if count == 1 else 's'} in {run.path} (kept in {T.tags_path(run.path)})")
        for name, count in result["tags"].items():
            print(f"  {count:>6}  {name}")
        for s in result["samples"]:
            note = s["note"].replace("\n", " ")
            where = F.address(s["file"], s["line"], s.get("position", -1))
            print(f"  step {s['step']}  {where}  reward {_fmt(s['reward'])}  "
                  f"[{', '.join(s['tags'])}]" + (f"  {note[:80]}" if note else ""))
    return 0 if run.report.lines_ok else 1


def _tag_sample(args, run) -> dict:
    """``tags RUN --sample FILE:LINE --add/--remove/--note``: change one sample's entry; the entry after it."""
    from ..analysis import provider as T
    from ..analysis import tagged as TG

    name, line, position = F.parse_address(args.sample) or ("", -1, -1)
    samples = run._samples
    hit = samples.index[(samples[F.FILE] == (run.files.index(name) if name in run.files else -1))
                        & (samples[F.LINE] == line)
                        & ((samples[F.POSITION] if F.POSITION in samples else -1) == position)]
    if not len(hit):
        raise CommandError(f"no sample {args.sample} in {run.path} (FILE:LINE, or FILE:LINE#K for one of a line's "
                           "samples; FILE as the run names it)")
    label = hit[0]
    added, removed = T.clean_tags(args.add), set(T.clean_tags(args.remove))

    digest = TG.sample_digest(run, label)

    def change(current):
        if current is not None and current.digest in (None, digest):  # the tags of this very sample
            tags, note = current.tags, current.note
        else:  # none, or an old entry of a line that changed since: start afresh
            tags, note = (), ""
        tags = [t for t in (*tags, *added) if t not in removed]
        return TG.new_entry(run, label, tags, note if args.note is None else args.note)

    entry = T.update_tags(run.path, TG.sample_key(run, label), change)
    return entry.to_json() if entry is not None else {"file": name, "line": line,
                                                       **({"position": position} if position >= 0 else {}),
                                                       "tags": [], "note": ""}

