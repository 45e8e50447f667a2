"""``rl-board index`` on a local Ray cluster against the local worker pool, in one run.

Usage:  python benchmarks/bench_ray.py [--size small|full|grpo|10x] [--cpus N] [--json FILE]

It writes the benchmark run of ``bench_load.ensure_run`` (``10x``: about 5.1 GB), joins a Ray cluster
of N CPUs started in this process (``ray.init(num_cpus=N)``, default: the CPUs this process may use),
and times in this process, each with an empty cache: ``index RUN`` with the local pool of N workers
(``RL_BOARD_WORKERS=N``), then ``index RUN --ray`` (the same byte ranges as Ray tasks on the cluster,
each writing its segment to the cache). Expect near parity on one machine: the point is that the same
read runs unchanged on a cluster. Ratios are to numbers measured in the same run; nothing is asserted.
Needs ``pip install "rl-board[ray]"``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
from bench_load import SIZES, ensure_run  # noqa: E402


def _index(run: Path, *extra: str) -> tuple[float, dict]:
    from rl_board.cli import main

    out = io.StringIO()
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RL_BOARD_CACHE_DIR"] = cache
        start = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            status = main(["index", str(run), "--json", *extra])
        seconds = time.perf_counter() - start
    if status:
        raise SystemExit(f"index {' '.join(extra)} failed ({status})")
    return seconds, json.loads(out.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="10x")
    parser.add_argument("--cpus", type=int, default=None)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    from rl_board.store import workers

    cpus = args.cpus or workers.count()
    os.environ["RL_BOARD_WORKERS"] = str(cpus)
    run = ensure_run(args.size)
    size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    import ray

    started = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level="ERROR", log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    cluster_s = time.perf_counter() - started
    try:
        pool_s, pool = _index(run)
        ray_s, on_ray = _index(run, "--ray")
    finally:
        ray.shutdown()
    results = {"size": args.size, "run_bytes": size, "cpus": cpus, "cluster_start_s": cluster_s, "pool_s": pool_s,
               "ray_s": ray_s, "ray_tasks": on_ray["ray_tasks"], "same_samples": pool["samples"] == on_ray["samples"],
               "machine": platform.platform()}
    print("| run | bytes | CPUs | local pool | Ray tasks | Ray | Ray / pool | same samples |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.size} | {size / 1e6:.0f} MB | {cpus} | {pool_s:.2f} s | {on_ray['ray_tasks']} | {ray_s:.2f} s | "
          f"{ray_s / pool_s:.2f} x | {results['same_samples']} |")
    print(f"(the cluster itself started in {cluster_s:.1f} s, not counted)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
