"""How a cold read scales with the cores it is given: ``rl-board summary RUN --json`` on an empty cache
with N parsing workers pinned to N cores, against the floor of parsing the same bytes in one process.

Usage:  python benchmarks/bench_scaling.py [--size full|10x|grpo|verl|verl200k|verl10m|small]
                                          [--workers 1,2,4,8,16] [--baseline DIR] [--reps 2] [--imports 15]
                                          [--json FILE]

For each N, the command runs with its affinity set to the first N CPUs and ``RL_BOARD_WORKERS=N``
(the releases interleaved, each repetition in the other order, after the run's files are synced to
disk, so neither pays for the other's place in the sequence)
(a release that ignores that variable starts the workers it always did). ``--baseline DIR`` times a
second release in the same run (DIR holds its ``rl_board`` package), so the two can be compared; its
rows are marked. Each row gives the best wall time of ``--reps`` runs and, where the release reports
it (``RL_BOARD_PHASES``), where the time went: before the first byte range was handed out, while the
workers parsed, and after the last range came back. The floor is one process ``orjson.loads``-ing
every line, pinned to one CPU. Then one more cold ``summary`` of each release on all N CPUs runs under
``python -X importtime``, and the ``--imports`` modules of the command's own process that took longest
(cumulative, with what they import) are printed: what the command's start costs before its first range.
``verl10m`` (10,240,000 samples, about 3.6 GB) is generated only when asked for. Nothing is asserted: the
printed tables go in docs/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from bench_load import PAD, compile_package, ensure_run  # noqa: E402  (the benchmark runs are written the same way)

FLOOR = """
import sys, time, orjson
from pathlib import Path
start = time.perf_counter()
for path in sorted(Path(sys.argv[1]).glob("*.jsonl")):
    with open(path, "rb") as fh:
        for line in fh:
            orjson.loads(line)
print(time.perf_counter() - start)
"""


def _pinned(cpus: list[int]):
    return lambda: os.sched_setaffinity(0, cpus)


def floor(run: Path, cpu: int) -> float:
    out = subprocess.run([sys.executable, "-c", FLOOR, str(run)], capture_output=True, text=True, check=True,
                         preexec_fn=_pinned([cpu]))
    return float(out.stdout.strip())


def summary(run: Path, release: Path, cpus: list[int]) -> dict:
    """One cold ``summary --json`` of ``release`` on ``cpus``: wall seconds and its phases."""
    cache = tempfile.mkdtemp(prefix="rl_board-scaling-")
    path = os.pathsep.join(filter(None, [str(release), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "RL_BOARD_CACHE_DIR": cache, "RL_BOARD_WORKERS": str(len(cpus)),
           "RL_BOARD_PHASES": "1"}
    try:
        started, start = time.time(), time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run), "--json", "--pad-token", PAD,
                              "--eos-token", PAD], env=env, capture_output=True, text=True, cwd=release,
                             preexec_fn=_pinned(cpus))
        wall, ended = time.perf_counter() - start, time.time()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if out.returncode:
        raise RuntimeError(f"summary failed ({out.returncode}):\n{out.stderr[-2000:]}")
    row = {"wall": wall, "lines": json.loads(out.stdout)["lines_ok"]}
    marks = [line[len("phases: "):] for line in out.stderr.splitlines() if line.startswith("phases: ")]
    if marks:
        phase = json.loads(marks[-1])
        if "first_task" in phase and "last_result" in phase:
            row.update(before=phase["first_task"] - started, parse=phase["last_result"] - phase["first_task"],
                       after=ended - phase["last_result"], workers=phase.get("workers"), ranges=phase.get("ranges"))
    return row


def imports(run: Path, release: Path, cpus: list[int], top: int) -> list[tuple[float, str]]:
    """The ``top`` imports of one cold ``summary --json`` of ``release`` by their cumulative seconds, from
    ``python -X importtime`` (the command's own process; its workers are started without the flag)."""
    cache = tempfile.mkdtemp(prefix="rl_board-imports-")
    path = os.pathsep.join(filter(None, [str(release), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "RL_BOARD_CACHE_DIR": cache, "RL_BOARD_WORKERS": str(len(cpus))}
    try:
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "rl_board", "summary", str(run), "--json",
                              "--pad-token", PAD, "--eos-token", PAD], env=env, capture_output=True, text=True,
                             cwd=release, preexec_fn=_pinned(cpus))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    rows = []
    for line in out.stderr.splitlines():  # "import time: self [us] | cumulative | imported package"
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line[len("import time:"):].split("|", 2)
            if cumulative.strip().isdigit():
                rows.append((int(cumulative) / 1e6, name.rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="full",
                        choices=("small", "full", "grpo", "10x", "verl200k", "verl", "verl10m"))
    parser.add_argument("--workers", default="1,2,4,8,16", help="comma-separated worker counts (at most the CPUs)")
    parser.add_argument("--baseline", type=Path, help="a folder holding another release's rl_board package")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--imports", type=int, default=15, help="how many of the command's imports to list (0: none)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    counts = [n for n in (int(x) for x in args.workers.split(",")) if n <= len(cpus)]
    run = ensure_run(args.size)
    os.sync()  # a run just written is still being written back: the first timings would pay for it
    size_mb = sum(p.stat().st_size for p in run.glob("*.jsonl")) / 2**20
    base = floor(run, cpus[0])
    releases = [("this release", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    for _, release in releases:
        compile_package(release)
    timings: dict[tuple[str, int], list[dict]] = {}
    for rep in range(args.reps):  # releases interleaved, their order alternating: no release always goes first
        for n in counts:
            for name, release in (releases if rep % 2 == 0 else releases[::-1]):
                timings.setdefault((name, n), []).append(summary(run, release, cpus[:n]))
                print(json.dumps({"release": name, "n": n, **timings[(name, n)][-1]}), file=sys.stderr, flush=True)
    rows = [{"release": name, "n": n, **min(timings[(name, n)], key=lambda r: r["wall"])}
            for name, _ in releases for n in counts]
    machine = f"{platform.machine()}, {len(cpus)} CPUs usable, Python {platform.python_version()}"
    print(f"Run: {args.size}, {size_mb:.0f} MiB; floor (orjson, one core) {base:.2f} s; machine: {machine}\n")
    print("| release | N | wall | × floor | before first range | workers parsing | after last range | "
          "serial (before + after) | ranges |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        phases = (f"{r['before']:.2f} s | {r['parse']:.2f} s | {r['after']:.2f} s | {r['before'] + r['after']:.2f} s | "
                  f"{r['ranges']}" if "parse" in r else "– | – | – | – | –")
        print(f"| {r['release']} | {r['n']} | {r['wall']:.2f} s | {r['wall'] / base:.2f} | {phases} |")
    listed = {name: imports(run, release, cpus[:max(counts)], args.imports) for name, release in releases
              if args.imports > 0}
    for name, top in listed.items():
        print(f"\n`python -X importtime` of `summary` ({name}, cold, {max(counts)} workers): the {len(top)} longest "
              "imports of the command's process, cumulative (depth 0: imported by the command itself)\n\n"
              "| module | depth | seconds |\n|---|---|---|")
        for seconds, module in top:
            depth = (len(module) - len(module.lstrip()) - 1) // 2  # importtime indents each level by two spaces
            print(f"| `{module.strip()}` | {depth} | {seconds:.3f} |")
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "run_mb": size_mb, "floor_s": base, "machine": machine,
                                         "rows": rows, "imports": listed}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
