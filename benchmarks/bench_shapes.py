"""What names and shapes from disk cost: many distinct keys, one very wide line, many small files.

Usage:  python benchmarks/bench_shapes.py [--quick] [--json FILE]

Each case is measured in a fresh process (``load_run`` of a run folder written
here, with no cache unless said), reporting wall seconds and the peak RSS of that
process, against a baseline of the same kind measured in the same run:

- keys: 20,000 lines, each with a numeric key of its own (``k<i>``), against the same
  lines with one shared key (the same bytes, give or take a digit);
- wide: one line with 200,000 numeric keys, against the same bytes as lines with
  shared keys;
- files: 2,000, 8,000 and 100,000 one-line files (verl's ``{step}.jsonl``): a cold open
  with no cache, a cold open writing the cache, a re-open from it in a new process,
  and a refresh of the unchanged run in the process that opened it; against one file
  holding the same lines. The files are read 3 s after they are written: a file written
  moments before it was read is hashed again on refresh (``cache.SETTLED_NS``), which is
  not what a run's old files cost.

Each case also times a regular expression over every response (``Run.text_matches``), as
search does, after the refresh.

``--quick`` uses a tenth of each size (for the test that keeps this script working).
Nothing is asserted: the printed table goes in the README.
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
SETTLE_S = 3.0  # seconds after writing the files before they are read (the cache trusts a file 2 s old)

_PROBE = r"""
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from rl_board.analysis.source import RunSource
cache = {cache!r}
start = time.perf_counter()
source = RunSource({run!r}, cache_root=Path(cache) if cache else False)
run = source.refresh()
opened = time.perf_counter() - start
start = time.perf_counter()
again = source.refresh()
refresh = time.perf_counter() - start
start = time.perf_counter()
found = int(run.text_matches("response", "^r$").sum())
search = time.perf_counter() - start
print(json.dumps({{"seconds": opened, "refresh": refresh, "search": search, "found": found, "samples": run.report.lines_ok,
                  "extras": len(run.extras), "notes": len(run.report.notes),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def measure(run: Path, cache: Path | None = None) -> dict:
    """Open ``run`` in a fresh process: seconds, refresh seconds, search seconds, samples, extras, peak
    RSS (MB)."""
    code = _PROBE.format(repo=str(REPO), run=str(run), cache=str(cache) if cache else None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _line(i: int, key: str) -> str:
    return json.dumps({"step": i // 100, "prompt": "p", "response": "r", "reward": 1.0, key: float(i)}) + "\n"


def write_keys(folder: Path, lines: int) -> tuple[Path, Path]:
    """(distinct keys, shared keys) runs of ``lines`` lines."""
    distinct, shared = folder / "keys-distinct", folder / "keys-shared"
    for run, key in ((distinct, "k{}"), (shared, "k")):
        run.mkdir(parents=True)
        (run / "a.jsonl").write_text("".join(_line(i, key.format(i)) for i in range(lines)))
    return distinct, shared


def write_wide(folder: Path, keys: int) -> tuple[Path, Path]:
    """(one line of ``keys`` keys, the same bytes as lines of shared keys) runs."""
    wide, narrow = folder / "wide-line", folder / "wide-shared"
    wide.mkdir(parents=True)
    narrow.mkdir(parents=True)
    line = json.dumps({"step": 1, "prompt": "p", "response": "r", "reward": 1.0,
                       **{f"k{i}": i for i in range(keys)}}) + "\n"
    (wide / "a.jsonl").write_text(line)
    text, i = [], 0
    size = 0
    while size < len(line):
        text.append(_line(i, "k"))
        size += len(text[-1])
        i += 1
    (narrow / "a.jsonl").write_text("".join(text))
    return wide, narrow


def write_files(folder: Path, count: int) -> tuple[Path, Path]:
    """(``count`` one-line files, one file of the same lines) runs."""
    many, one = folder / f"files-{count}", folder / f"one-{count}"
    many.mkdir(parents=True)
    one.mkdir(parents=True)
    lines = [json.dumps({"step": i, "prompt": "p", "response": "r", "reward": 1.0}) + "\n" for i in range(count)]
    for i, line in enumerate(lines):
        (many / f"{i}.jsonl").write_text(line)
    (one / "0.jsonl").write_text("".join(lines))
    return many, one


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of each size")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-shapes-") as tmp:
        tmp = Path(tmp)
        distinct, shared = write_keys(tmp, 20_000 // scale)
        results["keys"] = {"distinct": measure(distinct), "shared": measure(shared)}
        wide, narrow = write_wide(tmp, 200_000 // scale)
        results["wide"] = {"one line": measure(wide), "shared": measure(narrow)}
        for count in (2_000 // scale, 8_000 // scale, 100_000 // scale):
            many, one = write_files(tmp, count)
            time.sleep(SETTLE_S)  # files written moments before a read are hashed again on refresh: not this
            cache = tmp / f"cache-{count}"
            results[f"files {count}"] = {"no cache": measure(many), "cold cache": measure(many, cache),
                                         "from cache": measure(many, cache), "one file": measure(one)}
    print(f"{'case':<14} {'run':<11} {'seconds':>8} {'ratio':>6} {'refresh s':>9} {'search s':>8} "
          f"{'peak RSS MB':>11} {'samples':>8} {'extras':>6}")
    for case, runs in results.items():
        base = list(runs.values())[-1]
        for name, got in runs.items():
            print(f"{case:<14} {name:<11} {got['seconds']:8.2f} {got['seconds'] / base['seconds']:6.1f} "
                  f"{got['refresh']:9.3f} {got['search']:8.3f} {got['peak_rss_mb']:11.0f} {got['samples']:8,} "
                  f"{got['extras']:6,}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
