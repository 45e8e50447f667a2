"""What opening slime's debug rollout files costs (``.pt`` pickles, read by torch's restricted loader
in a worker process): ``rl-board summary`` of 10 small files against one ``import torch``.

Usage:  python benchmarks/bench_slime.py [--files N] [--json FILE]     (needs torch)

Writes N (default 10) ``rollout_data/{id}.pt`` files of 8 samples each the way slime's
``save_debug_rollout_data`` does (``tests/ray_writers.py``), then times, each in a fresh process:

- the floor: ``python -c "import torch"`` (what a worker pays once before it loads any file);
- one worker per file, as the reader did before it kept its worker: ``torch_load.py FILE`` for each;
- ``rl-board summary RUN --json`` with no cache (the reader as it is now).

Nothing is asserted: the printed table goes in the docs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def _write(run: Path, files: int) -> None:
    from ray_writers import slime_sample_dict, slime_save_debug_rollout_data

    template = str(run / "rollout_data" / "{rollout_id}.pt")
    for rollout in range(files):
        samples = [slime_sample_dict(index=i, prompt=f"What is {i}+{rollout}?", tokens=list(range(40)),
                                     response=f"It is {i + rollout}.", response_length=8,
                                     loss_mask=[1] * 8, rollout_log_probs=[-0.5] * 8, reward=float(i % 2),
                                     status="completed") for i in range(8)]
        slime_save_debug_rollout_data(template, samples, rollout_id=rollout, evaluation=False)


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "dump"
        _write(run, args.files)
        floor = _seconds([sys.executable, "-c", "import torch"])
        worker = str(REPO / "rl_board" / "readers" / "torch_load.py")
        start = time.perf_counter()
        for path in sorted((run / "rollout_data").glob("*.pt")):
            subprocess.run([sys.executable, worker, str(path)], check=True, capture_output=True)
        per_file = time.perf_counter() - start
        summary = _seconds([sys.executable, "-m", "rl_board", "summary", str(run), "--json", "--no-cache"])
    rows = {"import torch (floor)": floor, f"a worker per file ({args.files} files)": per_file,
            f"rl-board summary, no cache ({args.files} files)": summary}
    print(f"{'':45} {'seconds':>8} {'x floor':>8}")
    for name, seconds in rows.items():
        print(f"{name:45} {seconds:8.2f} {seconds / floor:8.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
