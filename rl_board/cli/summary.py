"""``rl-board summary``: per-step statistics of a run (a contract other tools rely on; see the
docs/commands.md), kept beside the caches and printed again while the run folder is unchanged."""

from __future__ import annotations

import sys

from ..base.access import RootError
from ..base.defaults import AUTO, DEFAULT_MAX_EXTRA_FIELDS, max_extra_fields
from .common import _describe_settings, _fmt, load_run_for, printed


def summary_json(args) -> dict:
    """What ``summary --json`` prints (docs/schemas/summary.json): the settings, the files and lines read,
    and each step's statistics; kept beside the caches and given again while the run folder is unchanged.
    ``CommandError`` when the run can't be read as asked."""
    name = _memo_name(args)
    summary, files = _kept_summary(args, name)
    if summary is None:
        run = load_run_for(args)
        from ..analysis.source import read_settings
        from ..analysis.summary import build_summary

        summary = {"settings": {**read_settings(run, args.max_samples_per_step), "kl_estimator": "k3"},
                   **build_summary(run)}
        notes, decoded = list(run.report.notes), "from_ids" in run._samples and bool(run._samples["from_ids"].any())
        del run  # its columns are let go before the summary is written out (a run of 200,000 steps: twice)
        _keep_summary(args, name, notes, decoded, summary, files)
    return summary


def _summary(args) -> int:
    summary, status = printed(summary_json, args)
    if status is not None:
        return status
    if args.json:
        from ..analysis.provider import memo

        sys.stdout.writelines(memo.json_pieces(summary))  # (json.dumps' text, never whole: 85 MB for 200,000 steps)
        print()
    else:
        print(f"{summary['format']}: {summary['files']} files, {summary['lines_ok']} lines loaded, "
              f"{summary['lines_bad']} rejected; {_describe_settings(summary['settings'])}")
        for error in summary["errors"][:10]:
            print(f"  {error['file']}:{error['line']}: {error['error']}")
        for reason, named in _by_reason(summary["files_unreadable"]).items():  # a shared reason said once
            print(f"  {named[0]}: {reason}" if len(named) == 1 else
                  f"  {', '.join(named[:3])}" + (f" and {len(named) - 3:,} more" if len(named) > 3 else "")
                  + ": could not be read (the note above says why)")
        _print_recap(summary["steps"])
        print(f"{'step':>8} {'samples':>8} {'reward':>10} {'std':>8} {'ref_rew':>8} {'kl':>10} {'len':>7}")
        for s in summary["steps"]:
            cells = [_fmt(s[k]) for k in ("reward_mean", "reward_std", "ref_reward_mean", "kl_mean",
                                          "response_len_mean")]
            print(f"{s['step']:>8} {s['samples']:>8} {cells[0]:>10} {cells[1]:>8} {cells[2]:>8} "
                  f"{cells[3]:>10} {cells[4]:>7}")
    return 0 if summary["lines_ok"] else 1


def _by_reason(unreadable: list[dict]) -> dict[str, list[str]]:
    """The unreadable files by their reason, in the order of each reason's first file."""
    out: dict[str, list[str]] = {}
    for entry in unreadable:
        out.setdefault(entry["error"], []).append(entry["file"])
    return out


#: The per-step series the text output recaps before its table: summary key -> label.
RECAP_KEYS = {"reward_mean": "reward", "ref_reward_mean": "ref_reward", "kl_mean": "kl", "response_len_mean": "len"}


def _print_recap(steps: list[dict]) -> None:
    """A few lines before the table: the steps and samples, then each series' first → last, min and max
    (of the per-step means; a series no step has is left out)."""
    from ..analysis.series_line import compute_recap

    if not steps:
        return
    samples = sum(s["samples"] for s in steps)
    print(f"steps {steps[0]['step']} → {steps[-1]['step']}: {len(steps)} steps, {samples} samples")
    for key, label in RECAP_KEYS.items():
        recap = compute_recap((s["step"], s[key]) for s in steps)
        if recap is not None:
            print(f"  {label:<10} {_fmt(recap.first)} → {_fmt(recap.last)}   min {_fmt(recap.min)} (step "
                  f"{recap.min_step})   max {_fmt(recap.max)} (step {recap.max_step})")


def _memo_name(args) -> str | None:
    """The memo of this summary (``memo``), or None when it is not kept: no cache, a per-step
    limit, or a tokenizer given (its file lies outside the run folder)."""
    if args.no_cache or args.max_samples_per_step is not None or args.tokenizer:
        return None
    from ..analysis.provider import memo

    settings = {"pad": args.pad_token, "eos": args.eos_token, "fields": args.field, "split": args.split}
    if AUTO in (args.pad_token, args.eos_token):  # what auto reads now: a config put beside the tokenizer later counts
        from ..analysis.provider import find_tokenizer, special_tokens

        settings["tokens"] = special_tokens(str(found) if (found := find_tokenizer(args.run_dir)) else None)
    if max_extra_fields() != DEFAULT_MAX_EXTRA_FIELDS:  # the key of a summary kept before the limit stays
        settings["max_extras"] = max_extra_fields()
    return memo.key("summary", args.run_dir, settings)


def _kept_summary(args, name: str | None) -> tuple[dict | None, list | None]:
    """(the summary kept as ``name`` while the run's files are as they were, its notes printed as the
    read would print them, else None; the files as they are now, or None when not kept)."""
    from ..analysis.provider import memo
    from ..base.access import check_allowed

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


def _keep_summary(args, name: str | None, notes: list[str], decoded: bool, summary: dict, files: list | None) -> None:
    """Keep a summary (and the read's ``notes``) as ``name`` for the next time when the run's files did not
    change while it was read (``files``: as they were before), unless token ids were ``decoded`` with a
    tokenizer found next to the run (it lies outside the folder whose files the memo checks)."""
    from ..analysis.provider import memo

    if name is None or files is None or decoded:
        return
    if memo.fingerprint(args.run_dir) == files:
        memo.save(name, args.run_dir, files, summary, notes)

