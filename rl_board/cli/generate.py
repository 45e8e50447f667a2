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
    return 0
