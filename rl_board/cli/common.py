"""What the commands that read a run share: loading it from the arguments, and how numbers and
settings are printed."""

from __future__ import annotations

import math
import sys

from ..base.access import RootError


class CommandError(Exception):
    """What was asked can't be done (a bad argument, a run outside the allowed folders…): the message, which
    the command line prints after ``error: `` and exits 2 on, and the MCP server returns as a tool error."""


def printed(build, args) -> tuple[object, int | None]:
    """``build(args)`` (a command's function, ``load_run_for``…), or (None, 2) after printing its
    ``CommandError`` on stderr: (its result, None) when it worked."""
    try:
        return build(args), None
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, 2


def load_run_for(args, keep_words: bool = False):
    """The run of ``args`` (run_dir, pad token, field mapping…); ``CommandError`` when it can't be read as
    asked. Its notes (what the page says above a run) go to stderr. ``keep_words``: a command whose
    findings read every response's words has the workers find them (``analysis.source.load_run``)."""
    from ..analysis.provider import FieldMappingError, TokenizerError, parse_field_mapping
    from ..analysis.source import load_run

    try:
        fields = parse_field_mapping(args.field)
        run = load_run(args.run_dir, args.pad_token, args.max_samples_per_step,
                       cache_root=False if args.no_cache else None, fields=fields,
                       eos_token=args.eos_token, split=args.split, tokenizer=args.tokenizer, keep_words=keep_words)
    except (RootError, FieldMappingError, TokenizerError) as exc:
        raise CommandError(str(exc)) from None
    args.pad_token, args.eos_token = run.options.pad_token, run.options.eos_token  # "auto" as it was resolved
    if args.split and args.split not in run.splits:  # an error is said first, and alone
        raise CommandError(f"{args.run_dir} has no split {args.split!r}"
                           + (f"; its splits: {', '.join(run.splits)}" if run.splits else " (its format has no splits)"))
    for note in run.report.notes:  # what the page says above the run (an uncached read, say)
        print(f"note: {note}", file=sys.stderr)
    if not run.report.files:

        why_no_files(run)
    return run


def _load(args, keep_words: bool = False):
    """The run of ``args`` (``load_run_for``), or an exit status after printing its error."""
    run, status = printed(lambda args: load_run_for(args, keep_words), args)
    return run if status is None else status


def _describe_settings(settings: dict) -> str:
    """The counting settings in a few words, for the text output."""
    return (f"pad token {settings['pad_token'] or 'none'}, EOS token {settings['eos_token'] or 'none'}"
            + (f", fields {', '.join(f'{c}={s}' for c, s in settings['fields'].items())}" if settings["fields"] else ""))


def _fmt(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"


def why_no_files(run) -> None:
    """A run of no files: say on stderr what the folder holds and what to try."""
    from ..analysis.provider import compute_diagnosis, format_diagnosis

    try:
        print("note: no run files here.\n" + format_diagnosis(compute_diagnosis(run.path)), file=sys.stderr)
    except (ValueError, OSError):  # RootError is a ValueError
        pass
