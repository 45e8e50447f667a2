"""``rl-board generate``: write the bundled demo runs, or a PPO run of a chosen size (``demo``).

It writes only into a folder that is missing, empty or holds nothing but its own earlier output (the
files its manifest, ``.rl-board-generated.json``, lists at the size it wrote them); anything else there is
someone's and is never overwritten without ``--force``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

MANIFEST = ".rl-board-generated.json"  # hidden: discovery and the runs list never show it


def _files(out: Path) -> dict[str, list[int]]:
    """Every file under ``out`` (links not followed, the manifest left out): relative path -> [size, mtime_ns]."""
    found = {}
    for folder, _dirs, names in os.walk(out):
        for name in names:
            path = Path(folder) / name
            rel = path.relative_to(out).as_posix()
            if rel != MANIFEST:
                st = path.lstat()
                found[rel] = [st.st_size, st.st_mtime_ns]
    return found


def _own(out: Path) -> dict[str, int]:
    """The files an earlier ``generate`` wrote in ``out``, as its manifest lists them (relative path -> size)."""
    try:
        listed = json.loads((out / MANIFEST).read_text(encoding="utf-8"))["files"]
        return {str(rel): int(size) for rel, size in listed.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def foreign_file(out: Path) -> str | None:
    """The first entry under ``out`` that ``generate`` did not write (not in its manifest, or not at the size
    written: edited since), None when there is none. Stops at the first one: a user's big folder is not walked."""
    own = _own(out)
    for folder, dirs, names in os.walk(out):
        for name in sorted(names) + sorted(d for d in dirs if os.path.islink(os.path.join(folder, d))):
            path = Path(folder) / name
            rel = path.relative_to(out).as_posix()
            if rel == MANIFEST:
                continue
            try:
                st = path.lstat()
            except OSError:
                return rel
            if path.is_symlink() or own.get(rel) != st.st_size:
                return rel
    return None


def _generate(args) -> int:
    if args.old_steps is not None:  # the count's old spelling: --steps is a range (A:B) in every other command
        if args.num_steps is not None:
            print("error: give --num-steps only (--steps is its deprecated spelling), not both.", file=sys.stderr)
            return 2
        print(f"warning: generate --steps is deprecated: use --num-steps {args.old_steps} (--steps is a range of "
              "steps, A:B, in search, diff and report).", file=sys.stderr)
        args.num_steps = args.old_steps
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        print(f"error: {out} is a file, not a folder: give a folder to write the runs in.", file=sys.stderr)
        return 2
    if out.is_dir() and not args.force:
        foreign = foreign_file(out)
        if foreign is not None:
            print(f"error: {out} already holds files generate did not write ({foreign}): nothing was written; "
                  "give an empty or new folder, or --force to write over them.", file=sys.stderr)
            return 2
    before = _files(out) if out.is_dir() else {}
    own = _own(out) if out.is_dir() else {}
    _write(args)
    after = _files(out)
    written = {rel: size for rel, (size, mtime) in after.items()
               if before.get(rel) != [size, mtime] or own.get(rel) == size}  # new, rewritten, or ours from before
    (out / MANIFEST).write_text(json.dumps({"files": dict(sorted(written.items()))}, indent=0) + "\n",
                                encoding="utf-8")
    _say_what_was_written(args.out)
    return 0


def _write(args) -> None:
    from ..demo import (
        write_art_run,
        write_demo_samples,
        write_ppo_demo,
        write_prime_rl_run,
        write_prime_rl_tokens_run,
        write_train_run,
        write_trl_run,
        write_verl_run,
    )

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
    elif args.num_steps is not None:
        write_train_run(args.out, steps=args.num_steps, samples_per_step=args.samples, max_tokens=args.tokens,
                        ranks=args.ranks, digits=None if args.full_precision else 6)
    elif args.format == "board":
        write_ppo_demo(args.out)
    else:
        write_demo_samples(args.out)


def _say_what_was_written(out) -> None:
    """One line per run now under ``out`` (as the runs list finds them): its folder, format, files and steps."""
    from ..analysis.provider import discover_runs

    runs = discover_runs(out).runs
    print(f"wrote {len(runs)} run{'s' if len(runs) != 1 else ''} in {out}:")
    for run in runs:
        steps = "" if run.steps is None else f", {run.steps} steps"
        print(f"  {'(the folder itself)' if run.name == '.' else run.name}  ({run.format}, {run.files} file{'s' if run.files != 1 else ''}{steps})")
