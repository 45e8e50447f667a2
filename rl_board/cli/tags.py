"""``rl-board tags``: list, export, set and clear a run's tags and notes."""

from __future__ import annotations

import json
import sys

from ..base import fields as F
from .common import _fmt, _load


def _tags(args) -> int:
    from ..analysis import provider as T
    from ..analysis import tagged as TG
    from ..analysis.source import read_settings

    changing = bool(args.add or args.remove or args.note is not None)
    if changing != (args.sample is not None):
        print("error: --sample goes with --add, --remove or --note, and they with it", file=sys.stderr)
        return 2
    if args.export and (args.json or changing):
        print("error: --export prints JSONL; it goes with neither --json nor a change", file=sys.stderr)
        return 2
    run = _load(args)
    if isinstance(run, int):
        return run
    try:
        if changing:
            return _tag_sample(args, run)
        tagged = TG.compute_tagged(run, T.load_tags(run.path))
    except T.TagsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tag = args.tag or T.ANY_TAG
    for entry, reason in tagged.missing:
        print(f"note: {entry.key} ({', '.join(entry.tags) or 'a note'}) is shown on no sample: {reason}",
              file=sys.stderr)
    if args.export:
        sys.stdout.buffer.write(TG.build_eval_set(run, tagged, args.pad_token, tag))
    elif args.json:
        print(json.dumps({"settings": read_settings(run, args.max_samples_per_step),
                          "tags_file": str(T.tags_path(run.path)), **TG.build_tags_json(run, tagged, tag)},
                         ensure_ascii=False, allow_nan=False))
    else:
        result = TG.build_tags_json(run, tagged, tag)
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


def _tag_sample(args, run) -> int:
    """``tags RUN --sample FILE:LINE --add/--remove/--note``: change one sample's entry."""
    from ..analysis import provider as T
    from ..analysis import tagged as TG

    name, line, position = F.parse_address(args.sample) or ("", -1, -1)
    samples = run._samples
    hit = samples.index[(samples[F.FILE] == (run.files.index(name) if name in run.files else -1))
                        & (samples[F.LINE] == line)
                        & ((samples[F.POSITION] if F.POSITION in samples else -1) == position)]
    if not len(hit):
        print(f"error: no sample {args.sample} in {run.path} (FILE:LINE, or FILE:LINE#K for one of a line's "
              "samples; FILE as the run names it)", file=sys.stderr)
        return 2
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
    shown = entry.to_json() if entry is not None else {"file": name, "line": line,
                                                        **({"position": position} if position >= 0 else {}),
                                                        "tags": [], "note": ""}
    if args.json:
        print(json.dumps(shown, ensure_ascii=False))
    else:
        print(f"{args.sample}: [{', '.join(shown['tags'])}]" + (f" {shown['note']}" if shown["note"] else ""))
    return 0

