"""How fast the page opens a run and redraws, against the floor of parsing the same bytes.

Usage:  python benchmarks/bench_load.py [--size small|full|grpo|10x|verl|verl200k|verl10m|trl|primerl] [--workers N]
        [--json FILE]

It writes its own run with the demo generator (``full``: 100 steps x 256 samples
x 225 tokens over 4 rank files, about 540 MB, long lines and no extra fields;
``grpo``: 160 steps x 128 samples in groups of 8, 48-position lists padded with the
EOS, sampler log-probs, entropy and three extra fields, about 95 MB of short lines;
``10x``: ten times ``full``'s steps; ``small``: a few MB, for CI), then measures,
each in a fresh process:

(``verl``: 250 steps x 8,192 short samples, 2,048,000 in all, about 720 MB, as verl's
``_dump_generations`` writes them, ``write_verl_dump``; ``verl200k``: its first 25 steps' shape,
for quick work; ``verl10m``: 1,250 such steps, 10,240,000 samples, measured once by hand; ``trl``: 250 logged steps x 4,096 rows, 1,024,000 in all, TRL's
``completions_{step:05d}.parquet``, ``write_trl_completions``, its floor Arrow reading every
Parquet file; ``primerl``: 100 steps x 2,048 multi-turn tool-calling episodes (128 prompts x 16),
204,800 in all, about 1.8 GB, as prime-rl's file monitor writes them (``rollouts/step_N/train/
{all,effective}/traces.jsonl``, one verifiers v1 episode a line with its nodes' token ids, masks and
sampler log-probs, the trained batch's advantages in ``effective``; ``write_prime_rl_run``, the
bundled demo's writer), its floor orjson parsing every line of both files of each step (the default
split, ``train/all``, reads its ``effective`` file for ``trained``). For these only the floor and
``summary`` cold and warm are measured, with the command's peak RSS; the page's Load, reruns and
search are not timed on them.)


- floor: orjson.loads of every line of the same files (the bytes must be parsed);
- summary, cold and warm: ``rl-board summary RUN --json`` as a whole command, with an
  empty cache and then with the cache it left;
- cold open: the page's Load in Streamlit's AppTest, with an empty cache, pressed a second after
  the page first drew (the parsing workers it starts then are ready, as they are for a person);
- re-open: the same in a new process (an app restart) with the cache left by the cold open;
- redraws: the page's rerun after moving the step slider, changing the sort and picking a sample;
- search: a regular expression over every response, in a new process opening the run from the cache;
- peak RSS of the app process (and of its parsing workers);
- where a cold read's time goes, for ``summary`` and the page's Load: before the first byte range is
  handed to a worker (start-up, imports, listing, hashing), while workers parse, and after the last
  range returns (merge, snapshot, aggregates, output, first draw), with the worker count used.

``--workers N`` runs every phase with N parsing workers on N cores (``RL_BOARD_WORKERS`` and the
affinity set to the first N CPUs); by default a read uses one worker per CPU it may use.

Ratios are to numbers measured in the same run, never to constants. Nothing is
asserted here: the printed table goes in docs/speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIZES = {  # steps, samples per step, tokens, ranks
    "small": (10, 64, 64, 2),
    "full": (100, 256, 225, 4),
    "grpo": (160, 128, 48, 4),
    "10x": (1000, 256, 225, 4),
}
VERL_SIZES = {  # steps, samples per step (verl's rollout_data_dir: one {step}.jsonl a step)
    "verl200k": (25, 8_192),
    "verl": (250, 8_192),
    "verl10m": (1_250, 8_192),  # 10,240,000 samples, about 3.6 GB: measured once by hand, never in CI
}
TRL_SIZES = {"trl": (250, 4_096)}  # logged steps, rows per step (TRL's completions_{step:05d}.parquet)
PRIME_SIZES = {"primerl": (100, 128, 16)}  # steps, prompts a step, episodes a prompt (rollouts/step_N/...)
SHORT_SIZES = {**VERL_SIZES, **TRL_SIZES, **PRIME_SIZES}  # the floor and `summary` only
PAD = "<|endoftext|>"
REDRAWS = 5  # step changes timed; the median is reported
SORT = "KL mean"  # the sort the page's rerun is timed after (a run without KL: ``reward``)
PAUSE_BEFORE_LOAD = 1.0  # seconds the page is open before Load is pressed (a person takes longer), as the
# parsing workers it starts as it first draws get ready


def compile_package(release: Path = REPO) -> None:
    """Compile ``release``'s ``rl_board`` package to bytecode, as ``pip install`` leaves an installed copy.
    The processes a benchmark times then read it instead of compiling each module from source, which an
    installed board never does: on a machine or in a container with ``PYTHONDONTWRITEBYTECODE`` set (this
    repository's machine has it), a checkout's modules are compiled again by every process, about 0.07 s
    of a `summary`'s start and again in every spawned worker. Python reads the bytecode with that
    variable set; it only never writes it."""
    import compileall

    compileall.compile_dir(str(release / "rl_board"), quiet=1)


def write_verl_dump(run: Path, steps: int, samples: int) -> None:
    """What verl's ``_dump_generations`` (trainer/ppo/ray_trainer.py) writes into ``rollout_data_dir``:
    ``{step}.jsonl`` per step, one ``json.dumps(entry, ensure_ascii=False)`` line a sample with
    ``input``, ``output``, ``gts``, ``score``, ``step`` and then the reward function's extra info of
    the same length (here ``acc`` bool, ``pred`` str, ``format_score`` float), the lines joined by
    newlines. A batch of 512 prompts x 16 samples is 8,192 lines a step. The texts vary by prompt and
    sample through arithmetic on their numbers (no random generator), so the run is the same bytes
    every time and quick to write: about 2 s a million lines."""
    run.mkdir(parents=True, exist_ok=True)
    group = 16
    for step in range(1, steps + 1):
        lines = []
        for i in range(samples):
            p, k = (step * samples + i) // group, i % group
            a, b = p * 7919 % 997, p * 104729 % 991
            answer = a + b + (k * 37 + step) % 5 // 4 * (k % 3 + 1)  # about 1 in 5 wrong
            formatted = (p + k) % 7 != 0
            output = (f"Let me add {a} and {b} step by step. {a} + {b}: the units give {(a + b) % 10}, "
                      f"carry the rest. So {a} + {b} = {answer}. The answer is \\boxed{{{answer}}}." if formatted
                      else f"I think the sum of {a} and {b} is {answer}, but I am not sure.")
            correct = answer == a + b
            fmt = 0.1 if formatted else 0.0
            lines.append(json.dumps({
                "input": f"system\nYou are a helpful assistant.\nuser\nWhat is {a} + {b}? Think step by step "
                         f"and put the final answer in \\boxed{{}}.\nassistant\n",
                "output": output, "gts": str(a + b), "score": float(correct) + fmt, "step": step,
                "acc": correct, "pred": str(answer) if formatted else "", "format_score": fmt,
            }, ensure_ascii=False))
        (run / f"{step}.jsonl").write_text("\n".join(lines) + "\n")


def write_trl_completions(run: Path, steps: int, rows: int) -> None:
    """What TRL's ``GRPOTrainer(log_completions=True)`` leaves in ``OUTPUT_DIR/completions/``, as the
    bundled demo (``rl_board.demo.trl``) writes it: ``completions_{step:05d}.parquet`` per logged step,
    columns ``step``, ``prompt``, ``completion``, one float column per reward function
    (``accuracy_reward``, NaN for one prompt in four, ``format_reward``) and ``advantage`` (reward minus
    its group of 16's mean). Arithmetic on the numbers, no random generator: the same bytes every time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    run.mkdir(parents=True, exist_ok=True)
    group = 16
    for step in range(1, steps + 1):
        i = np.arange(rows) + step * rows
        p, k = i // group, i % group
        a, b = p * 7919 % 997, p * 104729 % 991
        answer = a + b + (k * 37 + step) % 5 // 4 * (k % 3 + 1)
        tagged = (p + k) % 7 != 0
        graded = p % 4 != 3
        accuracy = np.where(graded, (answer == a + b).astype(float), np.nan)
        formatting = tagged.astype(float)
        reward = np.nan_to_num(accuracy) + formatting
        advantage = (reward - reward.reshape(-1, group).mean(axis=1).repeat(group)).round(6)
        prompts = [f"What is {x} + {y}?" if g else f"Say something about {x} and {y}."
                   for x, y, g in zip(a.tolist(), b.tolist(), graded.tolist())]
        completions = [f"<think>{x} plus {y}</think><answer>{z}</answer>" if t else f"The answer is {z}."
                       for x, y, z, t in zip(a.tolist(), b.tolist(), answer.tolist(), tagged.tolist())]
        pq.write_table(pa.table({"step": pa.array(np.full(rows, step), pa.int64()), "prompt": prompts,
                                 "completion": completions, "accuracy_reward": accuracy,
                                 "format_reward": formatting, "advantage": advantage}),
                       run / f"completions_{step:05d}.parquet")


def _data_files(run: Path) -> list[Path]:
    """The files a benchmark run's samples are in: its JSON lines, its Parquet files, or (prime-rl) the
    ``all`` and ``effective`` traces of every step's ``train`` split, which its default read parses."""
    return (sorted(run.glob("*.jsonl")) or sorted(run.glob("*.parquet"))
            or sorted(run.glob("rollouts/step_*/train/*/traces.jsonl")))


def ensure_run(size: str) -> Path:
    """The benchmark run for ``size``, generated once and kept under benchmarks/data/."""
    if size in VERL_SIZES or size in TRL_SIZES:
        steps, samples = SHORT_SIZES[size]
        folder = REPO / "benchmarks" / "data" / size
        run, stamp = folder / "run", folder / "params.json"
        shape = "verl" if size in VERL_SIZES else "trl"
        params = {"shape": shape, "steps": steps, "samples": samples, "version": 1}
        if not (stamp.exists() and json.loads(stamp.read_text()) == params):
            shutil.rmtree(folder, ignore_errors=True)
            (write_verl_dump if shape == "verl" else write_trl_completions)(run, steps, samples)
            stamp.write_text(json.dumps(params))
        return run
    if size in PRIME_SIZES:
        steps, prompts, group = PRIME_SIZES[size]
        folder = REPO / "benchmarks" / "data" / size
        run, stamp = folder / "run", folder / "params.json"
        params = {"shape": "prime-rl", "steps": steps, "prompts": prompts, "group": group, "version": 1}
        if not (stamp.exists() and json.loads(stamp.read_text()) == params):
            shutil.rmtree(folder, ignore_errors=True)
            sys.path.insert(0, str(REPO))
            from rl_board.demo.prime_rl import write_prime_rl_run

            write_prime_rl_run(run, steps=steps, prompts=prompts, group=group)
            stamp.write_text(json.dumps(params))
        return run
    steps, samples, tokens, ranks = SIZES[size]
    folder = REPO / "benchmarks" / "data" / size
    run = folder / "run"
    stamp = folder / "params.json"
    params = {"steps": steps, "samples": samples, "tokens": tokens, "ranks": ranks, "version": 2 if size == "grpo" else 1}
    if stamp.exists() and json.loads(stamp.read_text()) == params:
        return run
    shutil.rmtree(folder, ignore_errors=True)
    sys.path.insert(0, str(REPO))
    from rl_board.demo import write_grpo_run, write_train_run

    if size == "grpo":
        write_grpo_run(run, steps=steps, samples_per_step=samples, positions=tokens, ranks=ranks)
    else:
        write_train_run(run, steps=steps, samples_per_step=samples, max_tokens=tokens, ranks=ranks, digits=None)
    stamp.write_text(json.dumps(params))
    return run


def _peak_rss_mb() -> tuple[float, float]:
    """(this process's peak RSS, its largest child's), in MiB (Linux reports KiB)."""
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def _worker_peak_mb(proc) -> float:
    """A live (pooled) worker's peak RSS in MiB, from /proc: it is never waited for, so
    getrusage's children's figure does not see it."""
    try:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def phase_floor(run: Path) -> dict:
    import orjson
    import pyarrow.parquet as pq

    start = time.perf_counter()
    lines = 0
    files = _data_files(run)
    if files[0].suffix == ".parquet":  # the floor is Arrow decoding every column of every file
        for path in files:
            lines += pq.read_table(path).num_rows
        return {"seconds": time.perf_counter() - start, "lines": lines, "samples": lines}
    samples = 0  # prime-rl: the lines of the ``all`` files (``effective`` holds the trained ones again)
    for path in files:
        count = 0
        with open(path, "rb") as fh:
            for line in fh:
                orjson.loads(line)
                count += 1
        lines += count
        samples += 0 if path.parent.name == "effective" else count
    return {"seconds": time.perf_counter() - start, "lines": lines, "samples": samples}


def phase_app(run: Path, timeout: float) -> dict:
    """Open the run through the page as a user does; time Load and the reruns after it."""
    sys.path.insert(0, str(REPO))
    from streamlit.testing.v1 import AppTest

    from rl_board.views import keys

    try:
        from rl_board.store import workers
    except ImportError:  # a release before the warm pool: its workers are waited for, getrusage sees them
        workers = None

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=timeout).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(run.parent)).run()
    at.sidebar.selectbox(key=keys.RUN).select(run.name).run()
    time.sleep(PAUSE_BEFORE_LOAD)
    start = time.perf_counter()
    clicked = time.time()
    at.sidebar.button(key=keys.LOAD).click().run()
    load = time.perf_counter() - start
    drawn = time.time()
    phases = _phases(clicked, drawn)
    if at.exception:
        raise RuntimeError(at.exception[0].message)
    if hasattr(keys, "AREA"):  # a page in areas opens on the run overview: open the batch (not timed)
        at.session_state[keys.AREA] = keys.BATCH
        at.run()
    steps = at.slider(key=keys.STEP)
    grid = list(range(int(steps.min), int(steps.max) + 1, int(steps.step)))
    redraws = []
    for step in grid[:: max(1, len(grid) // REDRAWS)][:REDRAWS]:
        start = time.perf_counter()
        at.slider(key=keys.STEP).set_value(step).run()
        redraws.append(time.perf_counter() - start)
    start = time.perf_counter()
    at.selectbox(key=keys.SORT_BY).select(SORT).run()
    sort = time.perf_counter() - start
    start = time.perf_counter()
    at.selectbox(key=keys.SAMPLE).select_index(3).run()
    sample = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(at.exception[0].message)
    rss, child_rss = _peak_rss_mb()
    child_rss = max([child_rss, *map(_worker_peak_mb, workers._pool if workers else [])])
    return {"load": load, "phases": phases, "step": statistics.median(redraws), "sort": sort, "sample": sample,
            "rss_mb": rss, "worker_rss_mb": child_rss,
            "samples": int(at.dataframe[0].value.shape[0])}


SEARCH_PATTERN = r"(?i)\bthe (answer|result)\b|^\W*$"  # a phrase, or an empty or punctuation-only response


def phase_search(run: Path) -> dict:
    """A regex over every response of the run, opened (from the cache the page left) as the page opens it."""
    sys.path.insert(0, str(REPO))
    from rl_board.analysis.search import Query, compute_matches
    from rl_board.analysis.source import RunSource

    loaded = RunSource(run, PAD, eos_token=PAD).refresh()
    start = time.perf_counter()
    matches = compute_matches(loaded, Query(SEARCH_PATTERN, "response", PAD))
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "matches": int(len(matches)), "samples": int(len(loaded._samples)),
            "rss_mb": _peak_rss_mb()[0]}


def _phases(started: float, ended: float, marks: dict | None = None) -> dict | None:
    """Seconds before the first range was handed out, while workers parsed and after the last range
    returned, from the read's marks (``ingest.LAST_READ``; None for a read without workers)."""
    if marks is None:
        try:
            from rl_board.store.ingest import LAST_READ as marks
        except ImportError:  # a release before the marks
            return None
    if "first_task" not in marks or "last_result" not in marks:
        return None
    return {"before": marks["first_task"] - started, "parse": marks["last_result"] - marks["first_task"],
            "after": ended - marks["last_result"], "workers": marks.get("workers"), "ranges": marks.get("ranges")}


def phase_summary(run: Path, cache: Path, phases: dict | None = None) -> float:
    """Wall seconds of ``rl-board summary RUN --json`` as a whole command (a new interpreter); its
    phases (``_phases``) go into ``phases`` when given."""
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO), "RL_BOARD_PHASES": "1"}
    started, start = time.time(), time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "rl_board", "summary", str(run), "--json", "--pad-token", PAD,
                                 "--eos-token", PAD], env=env, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)  # its own peak RSS (and that of the workers it waited for)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds, ended = time.perf_counter() - start, time.time()
        err.seek(0)
        stderr = err.read()
    if proc.returncode:
        raise RuntimeError(f"summary failed:\n{stderr[-3000:]}")
    marks = [line[len("phases: "):] for line in stderr.splitlines() if line.startswith("phases: ")]
    if phases is not None:
        phases["rss_mb"] = usage.ru_maxrss / 1024
        if marks:
            phases.update(_phases(started, ended, json.loads(marks[-1])) or {})
    return seconds


def _child(phase: str, run: Path, cache: Path, timeout: float) -> dict:
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, __file__, "--phase", phase, "--run", str(run), "--timeout", str(timeout)],
                         env=env, capture_output=True, text=True, cwd=REPO)
    if out.returncode:
        raise RuntimeError(f"{phase} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _report_summary(args, run: Path, size_mb: float, lines: int, floor: float, cold: float, warm: float,
                    phases: dict) -> int:
    """The table of a run of millions of short samples: the floor and ``summary``, cold and warm."""
    results = {"size": args.size, "run_mb": size_mb, "samples": lines, "floor_s": floor, "summary_cold_s": cold,
               "summary_warm_s": warm, "summary_phases": phases,
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}
    print(f"Run: {args.size}, {size_mb:.0f} MiB in {len(_data_files(run))} files, {lines:,} samples; "
          f"machine: {results['machine']}\n")
    print("| measure | value | ratio | target |\n|---|---|---|---|")
    what = ("orjson floor (parse every line)" if _data_files(run)[0].suffix == ".jsonl"
            else "Arrow floor (read every Parquet file)")
    print(f"| {what} | {floor:.2f} s | 1.00 × floor | |")
    print(f"| `summary` cold (whole command, empty cache) | {cold:.2f} s | {cold / floor:.2f} × floor | ≤ 1.5 × floor |")
    print(f"| `summary` warm (whole command, cache) | {warm:.2f} s | {warm / cold:.3f} × cold | ≤ 0.1 × cold |")
    print(f"| peak RSS, `summary` cold | {phases.get('rss_mb', 0):.0f} MiB | | ≤ 1 GiB |")
    if "parse" in phases:
        print(f"\nWhere the cold `summary` goes: {phases['before']:.2f} s before the first range, "
              f"{phases['parse']:.2f} s while {phases['workers']} workers parse {phases['ranges']} ranges, "
              f"{phases['after']:.2f} s after the last range.")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=[*SIZES, *SHORT_SIZES], default="full")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--workers", type=int, help="N parsing workers on the first N CPUs (default: one per CPU)")
    parser.add_argument("--phase", choices=("floor", "app", "search"), help=argparse.SUPPRESS)
    parser.add_argument("--run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=600, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "floor":
        print(json.dumps(phase_floor(args.run)))
        return 0
    if args.phase == "app":
        print(json.dumps(phase_app(args.run, args.timeout)))
        return 0
    if args.phase == "search":
        print(json.dumps(phase_search(args.run)))
        return 0

    if args.workers:
        os.environ["RL_BOARD_WORKERS"] = str(args.workers)
        cpus = sorted(os.sched_getaffinity(0))[:args.workers]
        os.sched_setaffinity(0, cpus)  # children inherit it
    compile_package()
    run = ensure_run(args.size)
    size_mb = sum(p.stat().st_size for p in _data_files(run)) / 2**20
    with tempfile.TemporaryDirectory(prefix="rl_board-bench-cache-") as cache:
        floors = [_child("floor", run, Path(cache), args.timeout) for _ in range(2)]
        floor = min(f["seconds"] for f in floors)
        with tempfile.TemporaryDirectory(prefix="rl_board-bench-cli-") as cli_cache:
            summary_phases: dict = {}
            summary_cold = phase_summary(run, Path(cli_cache), summary_phases)
            summary_warm = statistics.median(phase_summary(run, Path(cli_cache)) for _ in range(3))
        if args.size in SHORT_SIZES:  # millions of samples: the command, not the page (issue 43)
            return _report_summary(args, run, size_mb, floors[0]["samples"], floor, summary_cold, summary_warm,
                                   summary_phases)
        cold = _child("app", run, Path(cache), args.timeout)
        warm = _child("app", run, Path(cache), args.timeout)
        search = _child("search", run, Path(cache), args.timeout)
    results = {"size": args.size, "run_mb": size_mb, "floor_s": floor, "cold": cold, "reopen": warm, "search": search,
               "summary_cold_s": summary_cold, "summary_warm_s": summary_warm, "summary_phases": summary_phases,
               "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"}
    rows = [
        ("orjson floor (parse every line)", f"{floor:.2f} s", "1.00 × floor", ""),
        ("cold open (page Load, empty cache)", f"{cold['load']:.2f} s", f"{cold['load'] / floor:.2f} × floor",
         "≤ 1.0 × floor (aim 0.7)"),
        ("`summary` cold (whole command, empty cache)", f"{summary_cold:.2f} s",
         f"floor + {summary_cold - floor:.2f} s", "≤ floor + 0.5 s"),
        ("`summary` warm (whole command, cache)", f"{summary_warm:.2f} s", "", "≤ 0.3 s on full"),
        ("re-open after app restart (cache)", f"{warm['load']:.3f} s", f"{warm['load'] / cold['load']:.3f} × cold",
         "≤ 0.1 × cold"),
        ("rerun after step change (median)", f"{cold['step']:.3f} s", "", "≤ 0.25 s"),
        ("rerun after sort change", f"{cold['sort']:.3f} s", "", "≤ 0.25 s"),
        ("rerun after picking a sample", f"{cold['sample']:.3f} s", "", "≤ 0.25 s"),
        ("peak RSS, app process", f"{cold['rss_mb']:.0f} MiB", "", "≤ 1.2 GB (10×: ≤ 3 GB)"),
        ("peak RSS, one parsing worker", f"{cold['worker_rss_mb']:.0f} MiB", "", ""),
        (f"regex over every response ({search['samples']:,}; {search['matches']:,} match)",
         f"{search['seconds']:.3f} s", f"{search['seconds'] / floor:.3f} × floor", "≤ 1 s (10×: ≤ 5 s)"),
        ("peak RSS, search process (run opened from the cache)", f"{search['rss_mb']:.0f} MiB", "", ""),
    ]
    print(f"Run: {args.size}, {size_mb:.0f} MiB in {len(list(run.glob('*.jsonl')))} files, "
          f"{cold['samples']} samples in the last step shown; machine: {results['machine']}\n")
    print("| measure | value | ratio | target |\n|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("\nWhere a cold read's time goes (seconds):\n\n| read | workers | ranges | before the first range | "
          "workers parsing | after the last range | serial (before + after) |\n|---|---|---|---|---|---|---|")
    for name, phases in (("`summary` cold", summary_phases), ("page Load", cold.get("phases"))):
        if phases and "parse" in phases:
            print(f"| {name} | {phases['workers']} | {phases['ranges']} | {phases['before']:.2f} | {phases['parse']:.2f} "
                  f"| {phases['after']:.2f} | {phases['before'] + phases['after']:.2f} |")
        else:
            print(f"| {name} | read in one process (no workers) | | | | | |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
