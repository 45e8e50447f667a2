"""Whether the page stays interactive on a run of millions of samples (issue 43, item 4).

Usage:  python benchmarks/bench_interactive.py [--size verl|verl200k|small] [--baseline DIR] [--no-page] [--json FILE]

On ``bench_load``'s run of that size (``verl``: 2,048,000 verl-dump samples), it measures, each in a
fresh process:

- the page (``bench_load``'s AppTest session, this release only): Load with an empty cache, then in a
  new process Load again from the cache it left (the re-open), and in that session the reruns after
  moving the step slider (median of five), changing the sort and picking a sample;
- the work the page does after Load, in a process that opens the run from that cache as the page does
  (``RunSource(run, PAD, eos_token=PAD)``), for this release and, with ``--baseline DIR`` (a checkout
  whose ``rl_board`` package is the release before), for that one in the same run:
  - the findings: ``compute_findings`` of the whole run (what the page's background check runs once
    the run is loaded; the findings file it keeps is not used);
  - a run-wide search: what the Explore area does with a regular expression over every response
    (``bench_load.SEARCH_PATTERN``): the matches, their count per step and the 200 listed, last
    first, with their texts.

Targets (issue 43): a step change and a sample opened ≤ 0.3 s, a run-wide search ≤ 1 s, the findings
≤ 10 s after Load. Ratios are to the baseline measured in the same run. Nothing is asserted: the
printed table goes in docs/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
import bench_load  # noqa: E402
from bench_load import PAD, SEARCH_PATTERN, compile_package, ensure_run  # noqa: E402

LISTED = 200  # the matches the Explore area lists by default (views.explore.SHOWN_DEFAULT)

_PROBE = r"""
import json, sys, time
sys.path.insert(0, {release!r})
from rl_board.analysis.source import RunSource
from rl_board.analysis import search
from rl_board.analysis.findings.compute import compute_findings

start = time.perf_counter()
run = RunSource({run!r}, {pad!r}, eos_token={pad!r}).refresh()
opened = time.perf_counter() - start
query = search.Query({pattern!r}, "response", {pad!r})
start = time.perf_counter()
if hasattr(search, "compute_match_mask"):  # this release: the mask, the rows listed copied alone
    keep = search.compute_match_mask(run, query)
    count, per_step = int(keep.sum()), search.compute_matches_per_step(run, keep)
    listed = search.compute_first_matches(run, keep, {listed}, last_first=True)
else:  # the release before: every match's row copied
    matches = search.compute_matches(run, query)
    count, per_step = len(matches), search.compute_matches_per_step(run, matches)
    listed = matches.iloc[::-1].head({listed})
texts = run.with_text(listed)
searched = time.perf_counter() - start
start = time.perf_counter()
found = compute_findings(run)
checked = time.perf_counter() - start
print(json.dumps({{"open": opened, "search": searched, "findings": checked, "matches": count,
                  "listed": [int(i) for i in texts.index], "per_step": int(per_step.sum()),
                  "kinds": [f.kind for f in found.findings], "samples": len(run._samples)}}))
"""


def probe(release: Path, run: Path, cache: Path) -> dict:
    """Open ``run`` from ``cache`` with ``release``'s package in a fresh process; time the search and the
    findings."""
    code = _PROBE.format(release=str(release), run=str(run), pad=PAD, pattern=SEARCH_PATTERN, listed=LISTED)
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache), "PYTHONPATH": str(release)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600, env=env,
                          cwd=release)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def phase_app(run: Path, timeout: float) -> dict:
    """``bench_load.phase_app`` (Load, step changes, a sort, a sample picked), sorting by reward: a verl
    dump has no KL to sort by."""
    bench_load.SORT = "reward"
    return bench_load.phase_app(run, timeout)


def _child(run: Path, cache: Path, timeout: float) -> dict:
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, __file__, "--phase-app", str(run), "--timeout", str(timeout)], env=env,
                         capture_output=True, text=True, cwd=REPO)
    if out.returncode:
        raise RuntimeError(f"the page failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=("verl", "verl200k", "small"), default="verl")  # small: the test's
    parser.add_argument("--baseline", type=Path, help="a checkout of the release to compare with")
    parser.add_argument("--no-page", action="store_true", help="only the findings and the search, not the page")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--phase-app", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase_app:
        print(json.dumps(phase_app(args.phase_app, args.timeout)))
        return 0
    compile_package()
    if args.baseline:
        compile_package(args.baseline.resolve())
    run = ensure_run(args.size)
    results: dict = {"size": args.size, "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                                                   f"Python {platform.python_version()}"}
    with tempfile.TemporaryDirectory(prefix="rl_board-bench-interactive-") as cache:
        cache = Path(cache)
        if not args.no_page:
            results["cold"] = _child(run, cache, args.timeout)
            results["reopen"] = _child(run, cache, args.timeout)
        releases = [("this release", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
        for name, release in releases * 2:  # twice each, interleaved: the machine's load swings
            results.setdefault(name, []).append(probe(release, run, cache))
    mine = results["this release"]
    if args.baseline and [p["listed"] for p in mine] != [p["listed"] for p in results["baseline"]]:
        print("warning: the releases listed different matches", file=sys.stderr)
    print(f"Run: {args.size}, {mine[0]['samples']:,} samples; machine: {results['machine']}\n")
    print("| measure | this release | baseline | ratio | target |\n|---|---|---|---|---|")
    for key, label, target in (("search", f"run-wide search ({mine[0]['matches']:,} matches, {LISTED} listed)",
                                "≤ 1 s"),
                               ("findings", "findings of the whole run", "≤ 10 s after Load"),
                               ("open", "open from the cache (the probe's)", "")):
        got = [p[key] for p in mine]
        base = [p[key] for p in results.get("baseline", [])]
        ratio = f"{min(got) / min(base):.2f} × (best of each)" if base else ""
        span = lambda values: f"{min(values):.2f}–{max(values):.2f} s"  # noqa: E731
        print(f"| {label} | {span(got)} | {span(base) if base else '–'} | {ratio} | {target} |")
    if not args.no_page:
        cold, reopen = results["cold"], results["reopen"]
        for label, value, target in (("page Load, empty cache", cold["load"], ""),
                                     ("page Load from the cache (re-open)", reopen["load"], "≤ 0.1 × cold"),
                                     ("rerun after a step change (median of 5)", reopen["step"], "≤ 0.3 s"),
                                     ("rerun after sorting by reward", reopen["sort"], ""),
                                     ("rerun after picking a sample", reopen["sample"], "≤ 0.3 s")):
            print(f"| {label} | {value:.2f} s | | | {target} |")
        print(f"| peak RSS, app process (re-open) | {reopen['rss_mb']:.0f} MiB | | | |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
