"""``rl-board detect``: the reader that opens a folder, its files, splits and steps; or what the folder
holds, why no reader opens it and the one thing to try (``store.diagnosis``)."""

from __future__ import annotations

import json
import sys

from .common import CommandError, printed


def detect_json(args) -> dict:
    """What ``detect --json`` prints (docs/schemas/detect.json): the reader that opens the folder, its files,
    splits and steps, or what the folder holds and what to try. ``CommandError`` when it can't be looked at."""
    from ..analysis.provider import compute_diagnosis
    from ..base.access import RootError, is_url
    from ..base.remote import fault_line

    url = is_url(args.run_dir)
    try:
        return compute_diagnosis(args.run_dir)
    except RootError as exc:  # the door's refusal: its own message
        raise CommandError(str(exc)) from None
    except Exception as exc:  # a store's own errors (botocore's, aiohttp's) are many kinds
        if not url and not isinstance(exc, (ValueError, OSError)):
            raise
        raise CommandError(fault_line(args.run_dir, exc) if url else str(exc)) from None


def _detect(args) -> int:
    """0 when a reader opens the folder, 1 when none does, 2 when it can't be looked at."""
    from ..analysis.provider import format_diagnosis

    found, status = printed(detect_json, args)
    if status is not None:
        return status
    print(json.dumps(found, ensure_ascii=False) if args.json else format_diagnosis(found))
    return 0 if found["reader"] is not None else 2 if found.get("error") else 1


def why_no_files(run) -> None:
    """A run of no files: say on stderr what the folder holds and what to try."""
    from ..analysis.provider import compute_diagnosis, format_diagnosis

    try:
        print("note: no run files here.\n" + format_diagnosis(compute_diagnosis(run.path)), file=sys.stderr)
    except (ValueError, OSError):  # RootError is a ValueError
        pass
