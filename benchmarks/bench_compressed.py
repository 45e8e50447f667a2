"""A compressed run against the same run uncompressed: ``findings``, ``search`` and ``summary`` (issue 38).

Usage:  python benchmarks/bench_compressed.py [--size small|full] [--json FILE]

It writes one run of the board's JSON lines with per-token lists (the findings benchmark's KL-runaway
run, larger: ``small`` 40 steps x 128 samples, about 12 MB; ``full`` 60 steps x 1024 samples, about
110 MB), whose ``kl_runaway`` finding reads the late window's token lists again from the file, then
the same file as ``.jsonl.gz``, ``.jsonl.xz`` and ``.jsonl.zst``, and times, each as a whole
``rl-board`` command in a fresh process, on each of the four:

- ``findings`` cold: an empty cache (the read, the checks, the token lists read again);
- ``findings --no-cache``: no cache at all (the token lists are read in one pass over the file);
- ``summary`` cold (empty cache) and warm (the cache the cold one left);
- ``search`` with a regular expression over every response, warm;
- ``findings`` warm segments: the cache a ``summary`` left, without the findings kept in it (the
  checks and the seekable copy of a compressed file: what the page does after a cold open);
- the page (Streamlit's AppTest, in a process of its own, on the cache a ``summary`` left): Load with
  its findings, the batch area, a first sample picked (its record read again: a compressed file's
  seekable copy is made then) and another.

Each row gives the seconds for the plain file and, for each codec, the ratio to it (the target of
issue 38: at most 1.5). Ratios are to numbers measured in the same run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIZES = {"small": (40, 32), "full": (60, 256)}  # steps, prompts (each a group of 4 samples)
CODECS = ("gz", "xz", "zst")


def write_run(folder: Path, size: str) -> Path:
    """The plain run: the findings benchmark's KL-runaway run in the board's layout, larger."""
    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_findings as bf

    steps, prompts = SIZES[size]
    bf.STEPS, bf.PROMPTS = steps, prompts
    rng = np.random.default_rng(38)
    samples = bf.make_samples("kl_runaway", rng, steps // 2, False)
    return bf.write_run(samples, "board", folder, "kl_runaway")


def compress(plain: Path, codec: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = plain.read_bytes()
    if codec == "gz":
        packed = gzip.compress(data, compresslevel=6)
    elif codec == "xz":
        packed = lzma.compress(data, preset=6)
    else:
        import zstandard

        packed = zstandard.ZstdCompressor(level=3).compress(data)
    (folder / f"rank0.jsonl.{codec}").write_bytes(packed)
    return folder


def timed(args: list[str], cache: Path) -> float:
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rl_board", *args], cwd=REPO, env=env, capture_output=True,
                          check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"rl-board {' '.join(args)} failed: {proc.stderr.decode()[-2000:]}")
    return seconds


def page(run: Path) -> dict:
    """The page in Streamlit's AppTest on ``run`` (the cache ``RL_BOARD_CACHE_DIR`` names, warm): Load (with
    its findings: the panel waits for them), the batch area, then a sample picked (its record read again
    from the file: for a compressed one, the first read makes its seekable copy) and another."""
    sys.path.insert(0, str(REPO))
    from streamlit.testing.v1 import AppTest

    from rl_board.views import keys

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(run.parent)).run()
    at.sidebar.selectbox(key=keys.RUN).select(run.name).run()
    out = {}
    start = time.perf_counter()
    at.sidebar.button(key=keys.LOAD).click().run()
    out["page Load with findings"] = time.perf_counter() - start
    at.session_state[keys.AREA] = keys.BATCH
    start = time.perf_counter()
    at.run()
    out["page batch area"] = time.perf_counter() - start
    for name, index in (("page first sample", 3), ("page next sample", 7)):
        start = time.perf_counter()
        at.selectbox(key=keys.SAMPLE).select_index(index).run()
        out[name] = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(at.exception[0].message)
    return out


def measure(run: Path, work: Path) -> dict:
    """Seconds of each command on ``run``, each with the cache state it names."""
    out = {}
    cache = work / "cache-cold-findings"
    out["findings cold"] = timed(["findings", str(run), "--json"], cache)
    out["findings --no-cache"] = timed(["findings", str(run), "--json", "--no-cache"], work / "unused")
    cache = work / "cache-summary"
    out["summary cold"] = timed(["summary", str(run), "--json"], cache)
    out["summary warm"] = timed(["summary", str(run), "--json"], cache)
    out["search warm"] = timed(["search", str(run), "--regex", "(?i)ka[ln]o", "--json"], cache)
    cache = work / "cache-page"
    timed(["summary", str(run), "--json"], cache)  # the page opens a run whose segments are cached
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache), "RL_BOARD_FINDINGS_WAIT": "600"}
    got = subprocess.run([sys.executable, str(Path(__file__)), "--page", str(run)], cwd=REPO, env=env,
                         capture_output=True, check=True, text=True).stdout
    out.update(json.loads(got.splitlines()[-1]))
    out["findings warm segments"] = timed(["findings", str(run), "--json"], work / "cache-summary")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--page", type=Path, help=argparse.SUPPRESS)  # one page phase, in a process of its own
    args = parser.parse_args()
    if args.page:
        print(json.dumps(page(args.page)))
        return
    root = Path(tempfile.mkdtemp(prefix="rlb-compressed-"))
    try:
        plain = write_run(root / "plain", args.size)
        runs = {"plain": plain, **{c: compress(plain / "rank0.jsonl", c, root / c) for c in CODECS}}
        sizes = {name: sum(p.stat().st_size for p in run.iterdir()) for name, run in runs.items()}
        found = {}
        times = {}
        for name, run in runs.items():
            times[name] = measure(run, root / f"work-{name}")
            env = {**os.environ, "RL_BOARD_CACHE_DIR": str(root / f"work-{name}" / "cache-summary")}
            got = subprocess.run([sys.executable, "-m", "rl_board", "findings", str(run), "--json"], cwd=REPO,
                                 env=env, capture_output=True, check=True).stdout
            found[name] = [f["kind"] for f in json.loads(got)["findings"]]
        print(f"run: {args.size}, {sizes['plain'] / 1e6:.1f} MB plain; "
              + ", ".join(f".{c} {sizes[c] / 1e6:.1f} MB" for c in CODECS))
        print(f"findings (plain): {found['plain']}; the same on every codec: "
              f"{all(found[c] == found['plain'] for c in CODECS)}\n")
        print("| command | plain (s) | " + " | ".join(f".jsonl.{c} ÷ plain" for c in CODECS) + " |")
        print("|---|---|" + "---|" * len(CODECS))
        for row in times["plain"]:
            base = times["plain"][row]
            print(f"| {row} | {base:.2f} | " + " | ".join(f"{times[c][row] / base:.2f}" for c in CODECS) + " |")
        if args.json:
            args.json.write_text(json.dumps({"sizes": sizes, "seconds": times, "findings": found}, indent=1))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
