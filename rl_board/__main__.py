"""Command line: ``rl-board`` (or ``python -m rl_board``) ``serve``, ``summary``, ``search``, ``findings``,
``metrics``, ``tags``, ``cache`` and ``generate``.

``summary`` prints per-step statistics of a run without the page (a contract
other tools rely on; see the README). Exit status: 0 when at least one line
loaded, 1 when none did, 2 on a bad argument or path.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from . import workers
from .access import RootError
from .defaults import EOS_TOKEN, PAD_TOKEN, read_settings, token_option

# Heavy modules (pandas, pyarrow, the readers) are imported where used: a command that reads a run
# starts its parsing workers first, so their start overlaps this process's own imports.
READS_A_RUN = ("summary", "search", "findings", "tags")

FORMATS = ("board", "verl", "trl", "prime-rl", "art", "prime-rl-tokens")
# Every server setting ``serve`` needs, passed on the command line so they hold whatever folder it
# is started from (Streamlit reads .streamlit/config.toml only from the working folder; the
# repository's copy says the same for ``streamlit run app.py``).
SERVER_SETTINGS = {
    "server.headless": "true",
    "server.maxUploadSize": "1",
    "browser.gatherUsageStats": "false",
    "client.showErrorDetails": "none",  # no traceback (with server paths) ever reaches a viewer
    "runner.postScriptGC": "false",  # a full collection after every run held each answer back
    # Streamlit's cache of large messages lets a browser ask for one the server already
    # dropped under fast reruns ("Cached ForwardMsg MISS"), which kills the session: send all.
    "global.minCachedMessageSize": "1e15",
    "theme.base": "dark",
    "theme.primaryColor": "#4C9BE8",
}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _token_arguments(parser: argparse.ArgumentParser, pad_help: str = "positions from this token on are not "
                                                                             "counted") -> None:
    """``--pad-token`` and ``--eos-token``, with the page's defaults (``defaults``); ``none`` turns either off."""
    parser.add_argument("--pad-token", default=PAD_TOKEN, type=token_option,
                        help=f"{pad_help} (default {PAD_TOKEN}; 'none': no pad token)")
    parser.add_argument("--eos-token", default=EOS_TOKEN, type=token_option,
                        help=f"positions after this token are not counted; it is (may equal --pad-token; "
                             f"default {EOS_TOKEN}; 'none': no EOS)")


def _run_arguments(parser: argparse.ArgumentParser, **token_help) -> None:
    """What every command that reads a run takes: the run folder and how it is read (the page's options)."""
    parser.add_argument("run_dir", type=Path)
    _token_arguments(parser, **token_help)
    parser.add_argument("--max-samples-per-step", type=_positive_int, default=None)
    parser.add_argument("--tokenizer", default=None, metavar="PATH",
                        help="the tokenizer.json (or a model folder holding one) that decodes token ids; "
                             "default: one found in the run folder or up to two folders above")
    parser.add_argument("--field", action="append", default=[], metavar="CANONICAL=SOURCE",
                        help="read the board's field CANONICAL from your key SOURCE (repeatable), "
                             "e.g. --field reward=my_score")
    parser.add_argument("--split", default=None, metavar="NAME",
                        help="the split to read (train, eval, train/all…), for a format that has them")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")
    parser.add_argument("--max-extra-fields", type=_positive_int, default=None, metavar="N",
                        help="extra-field columns a run makes at most (sets RL_BOARD_MAX_EXTRA_FIELDS; default 256)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rl-board", description="RL Logging Board: token-level views of RL rollouts.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the page (Streamlit) with ROOT preselected")
    serve.add_argument("root", nargs="?", type=Path, default=None, help="folder of runs shown first")
    serve.add_argument("--port", type=int, default=8901)
    serve.add_argument("--address", default="127.0.0.1",
                       help="address to listen on; anyone who can reach it can read any log file the app can")
    serve.add_argument("--roots", default=None, metavar="DIR[:DIR…]",
                       help="only folders inside these can be listed or loaded (sets RL_BOARD_ROOTS); "
                            "set it whenever the address is not 127.0.0.1")
    summary = sub.add_parser("summary", help="per-step statistics of one run folder")
    summary.add_argument("--json", action="store_true", help="print one JSON object")
    _run_arguments(summary)
    search = sub.add_parser("search", help="samples of a run whose text matches a regular expression")
    search.add_argument("--regex", default=None, help="an RE2 regular expression; (?i) for case-insensitive")
    search.add_argument("--truncated", action="store_true",
                        help="only truncated responses (no EOS among the counted positions, which fill the lists)")
    search.add_argument("--tag", default=None,
                        help="only samples carrying this tag ('*': every tagged sample); see the tags command")
    search.add_argument("--in", dest="text_field", default="response",
                        choices=("prompt", "response", "ref_response", "ground_truth", "messages"),
                        help="the text searched; messages: any turn's content or tool-call arguments")
    search.add_argument("--json", action="store_true", help="print one JSON object")
    _run_arguments(search, pad_help="removed from the texts before matching; positions from it on are not counted")
    findings = sub.add_parser("findings", help="what went wrong in a run: reward hacking, length growth, entropy "
                                               "collapse, sampler mismatch, dead GRPO groups, empty responses")
    findings.add_argument("--json", action="store_true", help="print one JSON object: the settings used and the findings")
    _run_arguments(findings)
    tags = sub.add_parser("tags", help="the tags and notes put on a run's samples: list them, export them as a "
                                       "JSONL eval set, or tag a sample")
    tags.add_argument("--tag", default=None, help="only the samples carrying this tag (listing and export)")
    tags.add_argument("--export", action="store_true",
                      help="print the tagged samples as a JSONL eval set (prompt, response, reward, tags, note…)")
    tags.add_argument("--json", action="store_true", help="print one JSON object")
    tags.add_argument("--sample", default=None, metavar="FILE:LINE", help="the sample to tag (with --add, --remove, "
                                                                          "--note)")
    tags.add_argument("--add", action="append", default=[], metavar="TAG", help="add this tag (repeatable)")
    tags.add_argument("--remove", action="append", default=[], metavar="TAG", help="remove this tag (repeatable)")
    tags.add_argument("--note", default=None, help="replace the sample's note ('' removes it)")
    _run_arguments(tags, pad_help="removed from the exported prompts and responses; positions from it on are not "
                                  "counted")
    metrics = sub.add_parser("metrics", help="the trainer's own scalars: TRL, verl, TensorBoard or a metrics JSONL")
    metrics.add_argument("path", type=Path, help="a file, or a folder holding one")
    metrics.add_argument("--json", action="store_true", help="print one JSON object")
    metrics.add_argument("--warnings", action="store_true", help="also list the warning signs (see the README)")
    metrics.add_argument("--ratio-max", type=float, default=None, help="policy ratio threshold (default 10)")
    metrics.add_argument("--clip-max", type=float, default=None, help="clip fraction threshold (default 0.3)")
    metrics.add_argument("--spike-k", type=float, default=None, help="robust deviations for a spike (default 6)")
    metrics.add_argument("--entropy-fraction", type=float, default=None,
                         help="entropy collapse below this fraction of its early mean (default 0.2)")
    metrics.add_argument("--kl-noise-k", type=float, default=None,
                         help="negative KL below 0 by more than this many noise scales of the series (default 3)")
    cache = sub.add_parser("cache", help="list the columnar cache, or clear it (all of it, or one run's)")
    cache.add_argument("action", choices=("list", "clear"))
    cache.add_argument("run_dir", nargs="?", type=Path, default=None, help="only this run's caches")
    cache.add_argument("--json", action="store_true")
    generate = sub.add_parser("generate", help="write demo runs (the bundled rollout_samples/)")
    generate.add_argument("out", type=Path)
    generate.add_argument("--format", choices=FORMATS, default=None,
                          help="write one small run in this trainer's shape (board: OpenRLHF-style ranks, "
                               "verl: {step}.jsonl dumps, trl: completions_*.parquet, prime-rl: agent episodes "
                               "in rollouts/step_N/, art: agent trajectories in trajectories/train/, "
                               "prime-rl-tokens: token_exports/step_N/rank_R.jsonl with its tokenizer.json)")
    generate.add_argument("--steps", type=_positive_int, default=None, help="write one PPO run of this many steps")
    generate.add_argument("--samples", type=_positive_int, default=256)
    generate.add_argument("--tokens", type=_positive_int, default=200)
    generate.add_argument("--ranks", type=_positive_int, default=4)
    generate.add_argument("--full-precision", action="store_true", help="write floats in full, as trainers do")
    return parser


def _load(args):
    """The run of ``args`` (run_dir, pad token, field mapping…), or an exit status after an error."""
    from .loader import TokenizerError, load_run
    from .readers import FieldMappingError, parse_field_mapping

    try:
        fields = parse_field_mapping(args.field)
        run = load_run(args.run_dir, args.pad_token, args.max_samples_per_step,
                       cache_root=False if args.no_cache else None, fields=fields,
                       eos_token=args.eos_token, split=args.split, tokenizer=args.tokenizer)
    except (RootError, FieldMappingError, TokenizerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in run.report.notes:  # what the page says above the run (an uncached read, say)
        print(f"note: {note}", file=sys.stderr)
    if args.split and args.split not in run.splits:
        print(f"error: {args.run_dir} has no split {args.split!r}"
              + (f"; its splits: {', '.join(run.splits)}" if run.splits else " (its format has no splits)"),
              file=sys.stderr)
        return 2
    return run


def _search(args) -> int:
    from .search import Query, build_search_json, compute_matches
    from .tags import TagsError

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


def _tags(args) -> int:
    from . import tags as T

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
        tagged = T.compute_tagged(run, T.load_tags(run.path))
    except T.TagsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tag = args.tag or T.ANY_TAG
    for entry, reason in tagged.missing:
        print(f"note: {entry.key} ({', '.join(entry.tags) or 'a note'}) is shown on no sample: {reason}",
              file=sys.stderr)
    if args.export:
        sys.stdout.buffer.write(T.build_eval_set(run, tagged, args.pad_token, tag))
    elif args.json:
        print(json.dumps({"settings": read_settings(run, args.max_samples_per_step),
                          "tags_file": str(T.tags_path(run.path)), **T.build_tags_json(run, tagged, tag)},
                         ensure_ascii=False, allow_nan=False))
    else:
        result = T.build_tags_json(run, tagged, tag)
        count = len(result["samples"])
        print(f"{count} tagged sample{'' if count == 1 else 's'} in {run.path} (kept in {T.tags_path(run.path)})")
        for name, count in result["tags"].items():
            print(f"  {count:>6}  {name}")
        for s in result["samples"]:
            note = s["note"].replace("\n", " ")
            print(f"  step {s['step']}  {s['file']}:{s['line']}  reward {_fmt(s['reward'])}  "
                  f"[{', '.join(s['tags'])}]" + (f"  {note[:80]}" if note else ""))
    return 0 if run.report.lines_ok else 1


def _tag_sample(args, run) -> int:
    """``tags RUN --sample FILE:LINE --add/--remove/--note``: change one sample's entry."""
    from . import fields as F
    from . import tags as T

    name, _, line = args.sample.rpartition(":")
    samples = run.samples
    hit = samples.index[(samples[F.FILE] == (run.files.index(name) if name in run.files else -1))
                        & (samples[F.LINE] == (int(line) if line.isdigit() else -1))]
    if not len(hit):
        print(f"error: no sample {args.sample} in {run.path} (FILE:LINE, FILE as the run names it)", file=sys.stderr)
        return 2
    label = hit[0]
    added, removed = T.clean_tags(args.add), set(T.clean_tags(args.remove))

    digest = T.sample_digest(run, label)

    def change(current):
        if current is not None and current.digest in (None, digest):  # the tags of this very sample
            tags, note = current.tags, current.note
        else:  # none, or an old entry of a line that changed since: start afresh
            tags, note = (), ""
        tags = [t for t in (*tags, *added) if t not in removed]
        return T.new_entry(run, label, tags, note if args.note is None else args.note)

    entry = T.update_tags(run.path, T.sample_key(run, label), change)
    shown = entry.to_json() if entry is not None else {"file": name, "line": int(line), "tags": [], "note": ""}
    if args.json:
        print(json.dumps(shown, ensure_ascii=False))
    else:
        print(f"{args.sample}: [{', '.join(shown['tags'])}]" + (f" {shown['note']}" if shown["note"] else ""))
    return 0


def _metrics(args) -> int:
    from .access import RootError as AccessError, check_allowed
    from .scalars import ScalarsError, load_scalars

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

        from .scalars.signs import Thresholds, compute_signs

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
        for name, points in scalars.series.items():
            last = points[-1]
            print(f"  {name}: {len(points)} steps, {points[0][0]}..{last[0]}, last {_fmt(last[1])}")
        for sign in signs:
            print(f"  ! {sign.kind}: {sign.series} at step {sign.step}: {sign.message}")
    return 0 if scalars.series else 1


def _cache(args) -> int:
    from datetime import datetime, timezone

    from .access import allowed_roots, check_allowed, is_allowed
    from .cache import cache_limit, clear_caches, default_cache_root, list_caches

    roots = allowed_roots()
    # only caches of runs inside the allowed folders (a cache naming no run is nobody's to show)
    caches = [c for c in list_caches() if roots is None or (c.run_dir() and is_allowed(c.run_dir(), roots))]
    if args.run_dir is not None:
        try:
            check_allowed(args.run_dir)
        except RootError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        wanted = str(args.run_dir.expanduser().resolve())
        caches = [c for c in caches if c.run_dir() == wanted]
    if args.action == "clear":
        from . import memo

        cleared = clear_caches(caches)
        memo.clear(args.run_dir)
        print(f"cleared {cleared} run cache{'s' if cleared != 1 else ''} in {default_cache_root()}")
        return 0
    rows = [{"folder": c.folder.name, "run": c.run_dir(), "bytes": c.size(),
             "last_used": datetime.fromtimestamp(c.last_used(), timezone.utc).isoformat(timespec="seconds")}
            for c in caches]
    if args.json:
        print(json.dumps({"root": str(default_cache_root()), "limit_bytes": cache_limit(), "caches": rows}))
    else:
        total = sum(r["bytes"] for r in rows)
        print(f"{default_cache_root()}: {len(rows)} run caches, {total / 2**20:,.1f} MiB "
              f"(limit {cache_limit() / 2**20:,.0f} MiB; least recently used first)")
        for r in rows:
            print(f"  {r['last_used']}  {r['bytes'] / 2**20:>9,.1f} MiB  {r['run'] or '?'}  ({r['folder']})")
    return 0


def _summary(args) -> int:
    name = _memo_name(args)
    summary, files = _kept_summary(args, name)
    if summary is None:
        run = _load(args)
        if isinstance(run, int):
            return run
        from .summary import build_summary

        summary = {"settings": {**read_settings(run, args.max_samples_per_step), "kl_estimator": "k3"},
                   **build_summary(run)}
        _keep_summary(args, name, run, summary, files)
    if args.json:
        print(json.dumps(summary, ensure_ascii=False, allow_nan=False))
    else:
        print(f"{summary['format']}: {summary['files']} files, {summary['lines_ok']} lines loaded, "
              f"{summary['lines_bad']} rejected; {_describe_settings(summary['settings'])}")
        for error in summary["errors"][:10]:
            print(f"  {error['file']}:{error['line']}: {error['error']}")
        for error in summary["files_unreadable"]:
            print(f"  {error['file']}: {error['error']}")
        print(f"{'step':>8} {'samples':>8} {'reward':>10} {'std':>8} {'ref_rew':>8} {'kl':>10} {'len':>7}")
        for s in summary["steps"]:
            cells = [_fmt(s[k]) for k in ("reward_mean", "reward_std", "ref_reward_mean", "kl_mean",
                                          "response_len_mean")]
            print(f"{s['step']:>8} {s['samples']:>8} {cells[0]:>10} {cells[1]:>8} {cells[2]:>8} "
                  f"{cells[3]:>10} {cells[4]:>7}")
    return 0 if summary["lines_ok"] else 1


def _memo_name(args) -> str | None:
    """The memo of this summary (``memo``), or None when it is not kept: no cache, a per-step
    limit, or a tokenizer given (its file lies outside the run folder)."""
    if args.no_cache or args.max_samples_per_step is not None or args.tokenizer:
        return None
    from . import memo
    from .readers import DEFAULT_MAX_EXTRA_FIELDS, max_extra_fields

    settings = {"pad": args.pad_token, "eos": args.eos_token, "fields": args.field, "split": args.split}
    if max_extra_fields() != DEFAULT_MAX_EXTRA_FIELDS:  # the key of a summary kept before the limit stays
        settings["max_extras"] = max_extra_fields()
    return memo.key("summary", args.run_dir, settings)


def _kept_summary(args, name: str | None) -> tuple[dict | None, list | None]:
    """(the summary kept as ``name`` while the run's files are as they were, its notes printed as the
    read would print them, else None; the files as they are now, or None when not kept)."""
    from . import memo
    from .access import check_allowed

    if name is None:
        return None, None
    try:
        check_allowed(args.run_dir)
    except RootError:
        return None, None  # the read says why
    files = memo.fingerprint(args.run_dir)
    kept = memo.load(name, files)
    if kept is None:
        return None, files
    for note in kept["notes"]:
        print(f"note: {note}", file=sys.stderr)
    return kept["output"], files


def _keep_summary(args, name: str | None, run, summary: dict, files: list | None) -> None:
    """Keep a summary as ``name`` for the next time when the run's files did not change while it was read
    (``files``: as they were before), unless token ids were decoded with a tokenizer found next to the run
    (it lies outside the folder whose files the memo checks)."""
    from . import memo

    if name is None or files is None or ("from_ids" in run.samples and run.samples["from_ids"].any()):
        return
    if memo.fingerprint(args.run_dir) == files:
        memo.save(name, args.run_dir, files, summary, list(run.report.notes))


def _findings(args) -> int:
    from .findings import get_findings

    run = _load(args)
    if isinstance(run, int):
        return run
    found = get_findings(run)
    if args.json:
        print(json.dumps({"settings": read_settings(run, args.max_samples_per_step),
                          "findings": found.to_json()}, ensure_ascii=False, allow_nan=False))
    else:
        print(f"{len(found.findings)} finding{'s' if len(found.findings) != 1 else ''} in {run.path} "
              f"({run.report.lines_ok} samples loaded; "
              f"{_describe_settings(read_settings(run, args.max_samples_per_step))})")
        for finding in found.findings:
            steps = (f"step {finding.first_step}" if finding.first_step == finding.last_step
                     else f"steps {finding.first_step}..{finding.last_step}")
            print(f"  {finding.kind:<30} {steps:<16} {finding.message}")
            for sample_id in finding.samples:
                print(f"  {'':<30} {'':<16} {sample_id}")
        skipped = [c for c in found.checks if not c.ran]
        for check in skipped:
            print(f"  not checked: {check.kind} ({check.note})")
    return 0 if run.report.lines_ok else 1


def _describe_settings(settings: dict) -> str:
    """The counting settings in a few words, for the text output."""
    return (f"pad token {settings['pad_token'] or 'none'}, EOS token {settings['eos_token'] or 'none'}"
            + (f", fields {', '.join(f'{c}={s}' for c, s in settings['fields'].items())}" if settings["fields"] else ""))


def _fmt(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def main(argv: list[str] | None = None) -> int:
    from .access import check_roots

    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad arguments, 0 on --help
        return int(exc.code or 0)
    if getattr(args, "roots", None) is not None:
        os.environ["RL_BOARD_ROOTS"] = args.roots
    if getattr(args, "max_extra_fields", None) is not None:
        os.environ["RL_BOARD_MAX_EXTRA_FIELDS"] = str(args.max_extra_fields)
    try:
        check_roots()  # a blank or unusable RL_BOARD_ROOTS must stop us, never mean "allow all"
    except RootError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.command in READS_A_RUN and args.max_samples_per_step is None and not workers.can_fork():
        workers.warm_up_for(args.run_dir)  # where a read can't fork its workers, start them as we import
    printing = {"summary": _summary, "findings": _findings, "tags": _tags, "search": _search}
    if args.command in printing:
        try:
            return printing[args.command](args)
        except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    if args.command == "serve":
        return _serve(args)
    if args.command == "cache":
        return _cache(args)
    if args.command == "metrics":
        return _metrics(args)
    from .demo import (write_art_run, write_demo_samples, write_ppo_demo, write_prime_rl_run,
                       write_prime_rl_tokens_run, write_train_run, write_trl_run, write_verl_run)

    if args.format == "prime-rl":
        write_prime_rl_run(args.out)
    elif args.format == "art":
        write_art_run(args.out)
    elif args.format == "prime-rl-tokens":
        write_prime_rl_tokens_run(args.out)
    elif args.format == "verl":
        write_verl_run(args.out)
    elif args.format == "trl":
        write_trl_run(args.out)
    elif args.steps is not None:
        write_train_run(args.out, steps=args.steps, samples_per_step=args.samples, max_tokens=args.tokens,
                        ranks=args.ranks, digits=None if args.full_precision else 6)
    elif args.format == "board":
        write_ppo_demo(args.out)
    else:
        write_demo_samples(args.out)
    return 0


def serve_command(args) -> list[str]:
    """The command that runs the page in Streamlit with every setting it needs."""
    script = Path(__file__).resolve().parent / "views" / "main.py"
    command = [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", args.address,
               "--server.port", str(args.port)]
    for name, value in SERVER_SETTINGS.items():
        command += [f"--{name}", value]
    return command


def _serve(args) -> int:
    """Run the page in Streamlit (this process becomes the server)."""
    env = dict(os.environ)
    if args.address not in ("127.0.0.1", "localhost", "::1") and not env.get("RL_BOARD_ROOTS"):
        print("warning: listening beyond this machine without --roots (RL_BOARD_ROOTS): anyone who reaches "
              "the port can read every log file this process can.", file=sys.stderr)
    if args.root is not None:
        root = args.root.expanduser()
        if not root.is_dir():
            print(f"error: folder not found: {root}", file=sys.stderr)
            return 2
        env["RL_BOARD_ROOT"] = str(root.resolve())
    command = serve_command(args)
    print(f"RL Logging Board on http://{args.address}:{args.port}", file=sys.stderr, flush=True)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main())
