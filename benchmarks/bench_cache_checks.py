"""What the cache's checks cost when a run is opened again from it (issue 50, items 9 and 15).

Usage:  python benchmarks/bench_cache_checks.py [--size verl200k|verl|grpo|full|...] [--against CHECKOUT]
        [--repeat N]

It reads a benchmark run (``bench_load.ensure_run``: the same runs, kept under benchmarks/data/) into a
fresh cache, then measures, in this process, alternating the two sides N times and keeping each one's
fastest:

- segments: every segment of the run's cache opened as a re-open does, with the digest check (the
  segment's bytes hashed, xxh3-128, against the digest its name carries, and its structure validated)
  and without it (mapped only);
- fingerprints: every file's manifest entry checked against the file with the first and last blocks
  hashed (``FileEntry.status(..., ends=True)``) and on its size and time alone.

With ``--against CHECKOUT`` (another checkout of the board, e.g. ``git archive main | tar -x -C DIR``), it
also times the whole re-open (``RunSource(run).refresh()`` with the cache the cold read left, in a fresh
process for each, excluding imports) of this checkout and of CHECKOUT, alternating, each with its own
cache: the ratio of the two is what the checks add to a re-open. Nothing is asserted; ratios are to
numbers measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

_REOPEN = """
import json, sys, time
from rl_board.analysis.source import RunSource
source = RunSource(sys.argv[1], sys.argv[2] or None)
start = time.perf_counter()
source.refresh()
print(json.dumps({"seconds": time.perf_counter() - start, "status": sorted(set(source.last_status.values()))}))
"""


def _reopen(checkout: Path, run: Path, cache: Path, pad: str) -> dict:
    """The re-open of ``run`` by ``checkout``'s board in a fresh process, with ``cache`` as its cache."""
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache), "PYTHONPATH": str(checkout)}
    proc = subprocess.run([sys.executable, "-c", _REOPEN, str(run), pad], capture_output=True, text=True,
                          env=env, cwd=checkout, check=True)
    return json.loads(proc.stdout)


def _fastest(repeat: int, **sides) -> dict:
    """name -> the fastest of ``repeat`` calls of each side's function, the sides alternating."""
    best = {name: float("inf") for name in sides}
    for _ in range(repeat):
        for name, fn in sides.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> int:
    from bench_load import PAD, ensure_run

    from rl_board.analysis.source import RunSource
    from rl_board.store.cache import list_caches

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="verl200k")
    parser.add_argument("--against", type=Path, help="another checkout whose re-open is timed alongside")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    run = ensure_run(args.size)
    with tempfile.TemporaryDirectory(prefix="rl_board-bench-checks-") as tmp:
        cache_root = Path(tmp) / "this"
        os.environ["RL_BOARD_CACHE_DIR"] = str(cache_root)
        source = RunSource(run, PAD)
        source.refresh()
        [cache] = list_caches(cache_root)
        names = sorted(p.name for p in cache.folder.glob("seg-*.arrow"))
        entries = cache.read_manifest(source._cache_key())
        paths = {name: run / name for name in entries}
        segment_bytes = sum((cache.folder / n).stat().st_size for n in names)
        segments = _fastest(args.repeat, checked=lambda: [cache.open_segment(n, check=True) for n in names],
                            mapped=lambda: [cache.open_segment(n) for n in names])
        prints = _fastest(args.repeat, ends=lambda: [e.status(paths[n], True, ends=True) for n, e in entries.items()],
                          stat=lambda: [e.status(paths[n], True) for n, e in entries.items()])
        out = {"size": args.size, "files": len(entries), "segments": len(names), "segment_mb": segment_bytes / 2**20,
               "open_checked_s": segments["checked"], "open_mapped_s": segments["mapped"],
               "open_ratio": segments["checked"] / segments["mapped"],
               "status_ends_s": prints["ends"], "status_stat_s": prints["stat"],
               "status_ratio": prints["ends"] / prints["stat"]}
        if args.against:
            other_root = Path(tmp) / "other"
            _reopen(args.against, run, other_root, PAD)  # its cold read: its own cache
            times = {"this": float("inf"), "other": float("inf")}
            for _ in range(args.repeat):
                for name, checkout, root in (("this", REPO, cache_root), ("other", args.against, other_root)):
                    got = _reopen(checkout, run, root, PAD)
                    assert got["status"] == ["cached"], got
                    times[name] = min(times[name], got["seconds"])
            out.update(reopen_this_s=times["this"], reopen_other_s=times["other"],
                       reopen_ratio=times["this"] / times["other"])
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
