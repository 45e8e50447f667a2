"""Deterministic generator of demo and benchmark runs, one module per demo run.

It writes what a PPO trainer with a critic would log (every token-level field,
OpenRLHF-style padding, several ranks), a response-level evaluation log with
irregular steps, a verl rollout dump (``{step}.jsonl``: input/output/gts/score
plus reward extra info), TRL GRPO completions (``completions_{step:05d}.parquet``) and
agent runs with tool calls in prime-rl's (``rollouts/step_N/train/all/traces.jsonl``) and
OpenPipe ART's (``trajectories/train/{step:04d}.parquet``) shapes.
Same arguments, same bytes: the shipped ``rollout_samples/`` are made by
``python -m rl_board generate``.

Stands beside the layers: imports nothing of ``rl_board`` but ``base``.
"""

from __future__ import annotations

from pathlib import Path

from .art import write_art_run
from .eval import EVAL_STEPS, write_eval_run
from .grpo import write_grpo_run
from .ppo import write_ppo_demo, write_train_run
from .prime_rl import write_prime_rl_run, write_prime_rl_tokens_run
from .trl import write_trl_run
from .verl import write_verl_run
from .words import PAD_TOKEN, write_tokenizer

__all__ = ["EVAL_STEPS", "PAD_TOKEN", "write_art_run", "write_demo_samples", "write_eval_run", "write_grpo_run",
           "write_ppo_demo", "write_prime_rl_run", "write_prime_rl_tokens_run", "write_tokenizer", "write_train_run",
           "write_trl_run", "write_verl_run"]


def write_demo_samples(root: Path) -> None:
    """Write the bundled ``rollout_samples/``: a PPO run, an eval run, a verl dump, TRL completions, a
    prime-rl agent run and a prime-rl token export with its tokenizer."""
    write_ppo_demo(root / "ppo_demo")
    write_eval_run(root / "eval_demo")
    write_verl_run(root / "verl_grpo_demo")
    write_trl_run(root / "trl_grpo_demo")
    write_prime_rl_run(root / "prime_rl_agent_demo")
    write_prime_rl_tokens_run(root / "prime_rl_tokens_demo")
