"""Where a parsing worker's time goes, a line at a time, against the orjson floor (issue 43).

Usage:  python benchmarks/bench_worker.py [--size verl|verl200k|small] [--files N] [--repeat K] [--json FILE]

In one fresh process with the workers' settings (``workers.WORKER_ENVIRONMENT``: Arrow's system
allocator, glibc's mmap and trim thresholds), reads the first N files of ``bench_load``'s run of that
size as a worker reads a range (``ingest_range``: the bytes read, parsed, derived and written as a
segment to a scratch folder), then each stage alone on the same bytes:

- read: the files' bytes read;
- parse: ``parse_block`` (for a verl dump, Arrow's JSON reader straight into columns);
- derive: ``derive`` of the parsed rows, and inside it what the summary's ``repeat_4gram_share``
  needs from a response without tokens: its words found (``TextWords``: split, the words encoded)
  and their 4-grams counted (``_distinct_4gram_share``);
- write: the derived rows written as a segment;
- the page's read: ``derive`` and a whole range with ``ReadOptions.keep_words`` (the words kept beside the
  segment at once, issue 52), where the release has it;
- floor: ``orjson.loads`` of every line (what ``bench_load`` calls the floor, in this process).

Each is process time, the best of K, in µs a line. The budget line says what a line may cost in a
worker for the whole command to take 1.5 × the floor on 2 cores, with the command's start (measured
by ``bench_load`` as the time before the first range is handed out) and the parent's work after the
last range taken out. Nothing is asserted: the printed table goes in docs/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _best(function, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def _floor(path: Path) -> None:
    """``bench_load``'s floor for one file: each line parsed by orjson as the file is read."""
    import orjson

    with open(path, "rb") as fh:
        for line in fh:
            orjson.loads(line)


def _text_words():
    from rl_board.derive.text_words import TextWords

    return TextWords


def measure(run: Path, files: int, repeat: int) -> dict:
    import numpy as np

    from rl_board.derive import samples as derived
    from rl_board.readers import ReadOptions
    from rl_board.readers.registry import detect
    from rl_board.store.ranges import ingest_range
    from rl_board.store.segments import write_segment

    reader = detect(run)
    paths = sorted((p for p in run.rglob("*.jsonl") if p.is_file()), key=lambda p: p.as_posix())[:files]
    options = ReadOptions(pad_token="<|endoftext|>", eos_token="<|endoftext|>")
    blobs = [p.read_bytes() for p in paths]
    lines = sum(blob.count(b"\n") for blob in blobs)
    scratch = tempfile.mkdtemp(prefix="rl_board-bench-worker-")
    parsed = [reader.parse_block(blob, 1, 0, options).table for blob in blobs]
    rows = [derived.derive(table, options) for table in parsed]
    responses = [table["response"].combine_chunks() for table in parsed]
    text_words = getattr(derived, "_TextWords", None) or _text_words()  # (a release before: in samples.py)
    texts = [text_words(np.ones(len(r), bool), r) for r in responses]

    def each(function, items):
        return lambda: [function(item) for item in items]

    stages = {
        "read": each(lambda p: p.read_bytes(), paths),
        "parse": each(lambda blob: reader.parse_block(blob, 1, 0, options), blobs),
        "derive": each(lambda table: derived.derive(table, options), parsed),
        "of which: words found and encoded": each(lambda r: text_words(np.ones(len(r), bool), r), responses),
        "of which: 4-grams counted": each(lambda w: derived._distinct_4gram_share(w.ids, w.owner, len(w.rows)),
                                          texts),
        "write": each(lambda table: write_segment(table, scratch), rows),
        "whole range (ingest_range)": each(lambda p: ingest_range(reader, str(p), 0, p.stat().st_size, scratch,
                                                                  options), paths),
        "floor (orjson.loads a line)": each(_floor, paths),
    }
    if "keep_words" in ReadOptions.__dataclass_fields__:  # the page's read (issue 52)
        from dataclasses import replace

        page = replace(options, keep_words=True)
        stages["page: derive, words kept"] = each(lambda table: derived.derive(table, page), parsed)
        stages["page: whole range, words kept"] = each(
            lambda p: ingest_range(reader, str(p), 0, p.stat().st_size, scratch, page), paths)
    out = {name: _best(stage, repeat) / lines * 1e6 for name, stage in stages.items()}
    return {"files": len(paths), "lines": lines, "us_per_line": out}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="verl")
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_load

    run = bench_load.ensure_run(args.size)
    if not args.child:  # a fresh process with the workers' settings (they are read at its start)
        import subprocess

        from rl_board.store.workers import WORKER_ENVIRONMENT

        env = {**os.environ, **WORKER_ENVIRONMENT, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, __file__, "--child", "--size", args.size, "--files", str(args.files),
                "--repeat", str(args.repeat)] + (["--json", str(args.json)] if args.json else [])
        return subprocess.run(argv, env=env).returncode
    results = {"size": args.size, **measure(run, args.files, args.repeat), "load": os.getloadavg()[0]}
    per_line = results["us_per_line"]
    floor = per_line["floor (orjson.loads a line)"]
    print(f"{results['files']} files of `{args.size}`, {results['lines']:,} lines, best of {args.repeat}, "
          f"load {results['load']:.1f}\n")
    print("| stage | µs a line | × the floor's line |")
    print("|---|---|---|")
    for name, value in per_line.items():
        print(f"| {name} | {value:.2f} | {value / floor:.2f} × |")
    print(f"\nBudget: on 2 cores, 1.5 × the floor leaves a worker 2 × 1.5 × {floor:.2f} = {3 * floor:.2f} µs a "
          "line, less the command's start and the parent's work after the last range.")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
