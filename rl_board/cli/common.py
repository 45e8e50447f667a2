"""What the commands that read a run share: loading it from the arguments, and how numbers and
settings are printed."""

from __future__ import annotations

import math
import sys

from ..base.access import RootError


def _load(args):
    """The run of ``args`` (run_dir, pad token, field mapping…), or an exit status after an error."""
    from ..analysis.provider import FieldMappingError, TokenizerError, parse_field_mapping
    from ..analysis.source import load_run

    try:
        fields = parse_field_mapping(args.field)
        run = load_run(args.run_dir, args.pad_token, args.max_samples_per_step,
                       cache_root=False if args.no_cache else None, fields=fields,
                       eos_token=args.eos_token, split=args.split, tokenizer=args.tokenizer)
    except (RootError, FieldMappingError, TokenizerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.pad_token, args.eos_token = run.options.pad_token, run.options.eos_token  # "auto" as it was resolved
    if args.split and args.split not in run.splits:  # an error is said first, and alone
        print(f"error: {args.run_dir} has no split {args.split!r}"
              + (f"; its splits: {', '.join(run.splits)}" if run.splits else " (its format has no splits)"),
              file=sys.stderr)
        return 2
    for note in run.report.notes:  # what the page says above the run (an uncached read, say)
        print(f"note: {note}", file=sys.stderr)
    if not run.report.files:
        from .detect import why_no_files

        why_no_files(run)
    return run


def _describe_settings(settings: dict) -> str:
    """The counting settings in a few words, for the text output."""
    return (f"pad token {settings['pad_token'] or 'none'}, EOS token {settings['eos_token'] or 'none'}"
            + (f", fields {', '.join(f'{c}={s}' for c, s in settings['fields'].items())}" if settings["fields"] else ""))


def _fmt(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"

