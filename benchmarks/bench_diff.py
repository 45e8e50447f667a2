"""What lining two large runs up prompt by prompt costs, once both are cached (``rl-board diff``, the Diff area).

Usage:  python benchmarks/bench_diff.py [--quick] [--samples N] [--prompts P] [--json FILE]

Writes two runs of N samples each (default 256,000: P = 16,000 prompts, 16 samples each, over 16 steps):
A in the board's lines with its prompts left-padded, B as verl's ``{step}.jsonl`` dumps with its lines
shuffled and one prompt in eight given other rewards. Both are read once into the cache (``rl-board
index``); then, in a fresh process, each is opened from the cache with the read settings ``index`` used
(pad and EOS tokens ``auto``: a run opened with others is another cache, read again from its files;
``files_read`` counts the files parsed again, 0 when both came from the cache) and timed:

- ``compute_diff`` (the join on prompt keys, per-prompt means, the prompt texts of every matched
  prompt), then ``build_diff_json`` (what ``--json`` prints);
- the floor: the same numbers by pandas alone on the two opened sample frames (a ``groupby`` mean of
  each by ``prompt_key`` and an inner ``merge``), without texts or the ascending-order sums.

``--template`` writes B's ``input`` as verl keeps it when the decode leaves the chat template's markers
(``<|im_start|>system\n…<|im_end|>\n<|im_start|>user\nQUESTION<|im_end|>\n<|im_start|>assistant\n``): the diff
then matches on the user content, reading every distinct prompt's text once. ``marks`` times B's findings
(``get_findings``, not kept between runs here) and ``compute_finding_marks``, what a diff with improvements adds.

``--quick`` uses a tenth of the samples (for the test that keeps this script working). Nothing is
asserted: the printed table goes in the docs.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAD = "<|endoftext|>"

_PROBE = r"""
import json, sys, time
sys.path.insert(0, {repo!r})
import pandas as pd
from rl_board.analysis.source import RunSource
from rl_board.analysis.diff import build_diff_json, compute_diff
from rl_board.analysis.marks import compute_finding_marks
from rl_board.analysis.findings import compute_findings
start = time.perf_counter()
# read as `rl-board index` read them (pad and EOS tokens "auto"), so the cache it wrote is the one opened
sources = [RunSource(path, "auto", eos_token="auto") for path in ({a!r}, {b!r})]
a, b = (source.refresh() for source in sources)
opened = time.perf_counter() - start
files_read = [sum(s in ("parsed", "appended") for s in source.last_status.values()) for source in sources]
start = time.perf_counter()
diff = compute_diff(a, b)
aligned = time.perf_counter() - start
start = time.perf_counter()
out = build_diff_json(diff, a, b)
as_json = time.perf_counter() - start
start = time.perf_counter()
means = [run._samples.groupby("prompt_key")["reward"].mean() for run in (a, b)]
floor_table = pd.merge(means[0].rename("a"), means[1].rename("b"), left_index=True, right_index=True)
floor = time.perf_counter() - start
start = time.perf_counter()
marks = compute_finding_marks(diff, b, compute_findings(b))
marked = time.perf_counter() - start
print(json.dumps({{"open_s": opened, "files_read": files_read, "diff_s": aligned, "json_s": as_json, "floor_s": floor, "marks_s": marked,
                  "prompt_match": diff.prompt_match,
                  "samples": [len(a._samples), len(b._samples)], "matched": diff.matched,
                  "floor_matched": len(floor_table), "regressions": out["regressions"],
                  "improvements": out["improvements"], "unchanged": out["unchanged"]}}))
"""


CHATML = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{}<|im_end|>\n"
          "<|im_start|>assistant\n")


def write_runs(folder: Path, samples: int, prompts: int, seed: int = 0, template: bool = False) -> tuple[Path, Path]:
    """Run A (board lines, 4 rank files) and run B (verl ``{step}.jsonl``, shuffled): see the module."""
    rng = random.Random(seed)
    per_prompt = samples // prompts
    steps = 16
    a, b = folder / "a", folder / "b"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    ranks = [[] for _ in range(4)]
    by_step: dict[int, list[str]] = {}
    for p in range(prompts):
        prompt = f"Question {p}: what is {p % 97} + {p % 89}? Answer in one line."
        step = 1 + p % steps
        changed = p % 8 == 0
        for i in range(per_prompt):
            reward = round(rng.random(), 3)
            response = f"The answer is {p % 97 + p % 89 + (i % 3)}."
            ranks[i % 4].append(json.dumps({"step": step, "prompt": PAD * (i % 3) + prompt,
                                            "response": response + PAD, "reward": reward}))
            by_step.setdefault(step, []).append(json.dumps(
                {"input": CHATML.format(prompt) if template else prompt, "output": response, "gts": "x", "score": round(1 - reward, 3) if changed else reward,
                 "step": step}, ensure_ascii=False))
    for r, lines in enumerate(ranks):
        (a / f"rollout_data_rank{r}.jsonl").write_text("\n".join(lines) + "\n")
    for step, lines in by_step.items():
        rng.shuffle(lines)
        (b / f"{step}.jsonl").write_text("\n".join(lines) + "\n")
    return a, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the samples")
    parser.add_argument("--samples", type=int, default=256_000)
    parser.add_argument("--prompts", type=int, default=16_000)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--template", action="store_true", help="B's prompts in the ChatML template (verl's input)")
    args = parser.parse_args()
    samples, prompts = (args.samples // 10, args.prompts // 10) if args.quick else (args.samples, args.prompts)
    with tempfile.TemporaryDirectory() as tmp:
        a, b = write_runs(Path(tmp) / "runs", samples, prompts, template=args.template)
        env = {"RL_BOARD_CACHE_DIR": str(Path(tmp) / "cache")}
        import os

        env = {**os.environ, **env}
        for run in (a, b):  # into the cache (a command, as a user would)
            subprocess.run([sys.executable, "-m", "rl_board", "index", str(run)], check=True, cwd=REPO, env=env,
                           capture_output=True)
        time.sleep(2.5)  # a file the cache saw settle is trusted (cache.SETTLED_NS)
        probe = _PROBE.format(repo=str(REPO), a=str(a), b=str(b))
        got = json.loads(subprocess.run([sys.executable, "-c", probe], check=True, cwd=REPO, env=env,
                                        capture_output=True, text=True).stdout)
    got["samples_each"] = samples
    print(f"two runs of {samples:,} samples, {prompts:,} prompts each (B: verl dumps, shuffled; 1 prompt in 8 "
          "changed), opened from the cache")
    print("| step | seconds | × floor |")
    print("|---|---|---|")
    print(f"| open both from the cache ({sum(got['files_read'])} files read again) | {got['open_s']:.3f} | |")
    print(f"| floor: pandas groupby means + merge | {got['floor_s']:.3f} | 1.00 |")
    print(f"| compute_diff (join, means, texts) | {got['diff_s']:.3f} | {got['diff_s'] / got['floor_s']:.2f} |")
    print(f"| build_diff_json | {got['json_s']:.3f} | {got['json_s'] / got['floor_s']:.2f} |")
    print(f"| B's findings + compute_finding_marks | {got['marks_s']:.3f} | |")
    print(f"matched on the prompts' {got['prompt_match']}")
    print(f"matched {got['matched']:,} (floor {got['floor_matched']:,}): {got['regressions']:,} worse, "
          f"{got['improvements']:,} better, {got['unchanged']:,} unchanged")
    if args.json:
        args.json.write_text(json.dumps(got, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
