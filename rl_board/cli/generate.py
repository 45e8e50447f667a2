"""``rl-board generate``: write the bundled demo runs, or a PPO run of a chosen size (``demo``)."""

from __future__ import annotations


def _generate(args) -> int:
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
    elif args.steps is not None:
        write_train_run(args.out, steps=args.steps, samples_per_step=args.samples, max_tokens=args.tokens,
                        ranks=args.ranks, digits=None if args.full_precision else 6)
    elif args.format == "board":
        write_ppo_demo(args.out)
    else:
        write_demo_samples(args.out)
    _say_what_was_written(args.out)
    return 0


def _say_what_was_written(out) -> None:
    """One line per run now under ``out`` (as the runs list finds them): its folder, format, files and steps."""
    from ..store.discovery import discover_runs

    runs = discover_runs(out).runs
    print(f"wrote {len(runs)} run{'s' if len(runs) != 1 else ''} in {out}:")
    for run in runs:
        steps = "" if run.steps is None else f", {run.steps} steps"
        print(f"  {'(the folder itself)' if run.name == '.' else run.name}  ({run.format}, {run.files} file{'s' if run.files != 1 else ''}{steps})")
