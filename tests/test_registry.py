"""The lazy registry: detection imports a reader only when its signature says the folder might be its run,
and picks exactly the reader the eager registry (every reader imported, each asked in turn) picks."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

from rl_board.readers import layout
from rl_board.readers.signatures import BUILTIN

#: The registry as it was before it was lazy, run in a fresh process: every reader module imported first,
#: each asked in detection order with its own check (a tree layout or ``matches``), else by a file's suffix.
EAGER = r"""
import importlib, json, os, sys
from rl_board.readers import layout
from rl_board.readers.formats import (prime_rl, prime_rl_tokens, nemo_rl, art, rllm, skyrl, roll, areal, tinker,
                                      slime, wandb_tables, verifiers_v0, trackio, verl, jsonl, parquet,
                                      tensorboard_text)
ORDER = (prime_rl, prime_rl_tokens, nemo_rl, art, rllm, skyrl, roll, areal, tinker, slime, wandb_tables,
         verifiers_v0, trackio, verl, jsonl, parquet, tensorboard_text)

def eager(folder):
    try:
        suffixes = {os.path.splitext(e.name)[1] for e in os.scandir(folder)
                    if not e.name.startswith(".") and e.is_file()}
    except OSError:
        suffixes = set()
    for reader in ORDER:
        if hasattr(reader, "GLOBS") or hasattr(reader, "matches") or hasattr(reader, "other_kind"):
            if layout.holds(reader, folder):
                return reader.NAME
        elif reader.SUFFIX in suffixes:
            return reader.NAME
    return "jsonl"

from pathlib import Path
folders = [Path(f) for f in json.loads(sys.stdin.read())]
print(json.dumps([[eager(f), any(layout.holds(r, f) for r in ORDER)] for f in folders]))
"""

LAZY = r"""
import json, sys
from pathlib import Path
from rl_board.readers import detect, holds_run
folders = [Path(f) for f in json.loads(sys.stdin.read())]
print(json.dumps([[detect(f).NAME, holds_run(f)] for f in folders]))
"""


def _run(code: str, folders: list[Path]) -> list:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps([str(f) for f in folders]),
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _lines(path: Path, records: list[dict], opener=open) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with opener(path, "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in records))


def _shapes(root: Path) -> list[Path]:
    """Folders in each format's layout, and ones that look like a format's but are not, written here."""
    verl_line = {"input": "user\nq", "output": "a", "gts": "1", "score": 1.0, "step": 1}
    marked = {**verl_line, "output": "<|im_start|>assistant\nhi<|im_end|>"}
    made = {
        "verl_plain": lambda d: _lines(d / "1.jsonl", [verl_line]),
        "verl_marked": lambda d: _lines(d / "1.jsonl", [marked]),
        "verl_experiment": lambda d: (_lines(d / "rollout" / "1.jsonl", [verl_line]),
                                      _lines(d / "val" / "1.jsonl", [verl_line])),
        "verl_one_subfolder": lambda d: _lines(d / "rollout" / "1.jsonl", [verl_line]),
        "verl_long_first_line": lambda d: _lines(d / "2.jsonl", [{**verl_line, "output": "x" * 70_000}]),
        "areal": lambda d: _lines(d / "rollout" / "0" / "7.jsonl", [
            {"task_id": 7, "sample_idx": 0, "prompt": "p", "completion": "c", "reward": 1.0, "tail_version": 0}]),
        "skyrl": lambda d: _lines(d / "dumped_evals" / "global_step_2_evals" / "gsm8k.jsonl", [
            {"input_prompt": "p", "output_response": "r", "score": 1.0}]),
        "nemo": lambda d: _lines(d / "train_data_step3.jsonl", [{"content": ["a"], "rewards": [1.0]}]),
        "roll": lambda d: _lines(d / "rollout_dump_data.step_1.jsonl", [{"trajectory_data": "[]"}]),
        "tinker": lambda d: _lines(d / "iteration_000001" / "train_rollout_summaries.jsonl", [
            {"total_reward": 1.0, "steps": []}]),
        "verifiers": lambda d: _lines(d / "results.jsonl", [{"prompt": "p", "completion": "c", "reward": 1.0}]),
        "verifiers_gz": lambda d: _lines(d / "results.jsonl.gz", [{"prompt": "p", "completion": "c", "reward": 1.0}],
                                         gzip.open),
        "prime_traces": lambda d: _lines(d / "rollouts" / "step_1" / "train" / "all" / "traces.jsonl", [{"nodes": []}]),
        "prime_tokens": lambda d: _lines(d / "token_exports" / "step_1" / "rank_0.jsonl", [{"rank": 0}]),
        "rllm": lambda d: _lines(d / "episodes" / "train_step_1_epoch_0" / "episode_0.json", [{"id": "e"}]),
        "wandb": lambda d: _lines(d / "files" / "media" / "table" / "samples_1_0123456789abcdef0123.table.json",
                                  [{"columns": [], "data": []}]),
        "trackio": lambda d: (d.mkdir(), (d / "p.db").write_bytes(b"SQLite format 3\x00" + bytes(84))),
        "not_trackio": lambda d: (d.mkdir(), (d / "p.db").write_bytes(b"not a database")),
        "slime": lambda d: (d.mkdir(), (d / "0.pt").write_bytes(b"\x80\x02")),
        "tensorboard_junk": lambda d: (d.mkdir(), (d / "events.out.tfevents.1.host").write_bytes(b"junk")),
        "metrics_beside": lambda d: (_lines(d / "train_metrics.jsonl", [{"step": 1, "loss": 0.5}]),
                                     _lines(d / "rank0.jsonl", [{"step": 1, "reward": 1.0}])),
        "metrics_only": lambda d: _lines(d / "train_metrics.jsonl", [{"step": 1, "loss": 0.5}]),
        "parquet_flat": lambda d: (d.mkdir(), (d / "completions_00001.parquet").write_bytes(b"PAR1")),
        "art_tree": lambda d: (d.mkdir(parents=True), (d / "trajectories").mkdir(),
                               (d / "trajectories" / "train").mkdir(),
                               (d / "trajectories" / "train" / "0001.parquet").write_bytes(b"PAR1")),
        "hidden_only": lambda d: _lines(d / ".hidden" / "1.jsonl", [verl_line]),
        "empty": lambda d: d.mkdir(),
    }
    folders = []
    for name, make in made.items():
        make(root / name)
        folders.append(root / name)
    return folders


def test_detect_gives_the_eager_registrys_answer_on_every_bundled_run_and_fixture(tmp_path):
    """On every folder of rollout_samples/ and tests/data/ (each subfolder too) and a folder in each format's
    layout, the lazy ``detect`` and ``holds_run`` answer as every reader imported and asked in turn does."""
    folders = sorted({Path(d) for top in (REPO / "rollout_samples", REPO / "tests" / "data")
                      for d, _, _ in os.walk(top)})
    folders += _shapes(tmp_path)
    eager = _run(EAGER, folders)
    lazy = _run(LAZY, folders)
    assert [(str(f), *got) for f, got in zip(folders, lazy)] == [(str(f), *got) for f, got in zip(folders, eager)]
    picked = {name for name, _ in eager}  # the comparison covers the formats, not only the fallback
    assert {"jsonl", "verl", "prime-rl", "prime-rl-tokens", "parquet", "areal", "skyrl", "trackio",
            "verifiers-v0"} <= picked


def test_detecting_a_verl_dump_imports_the_jsonl_reader_alone(tmp_path):
    """Detecting the bundled verl run (a folder of ``{step}.jsonl`` without turn markers, read as the board's
    own lines) imports the ``jsonl`` reader and no other reader module, in a fresh process."""
    code = ("import json, sys\nfrom rl_board.readers import detect\nreader = detect(sys.argv[1])\n"
            "print(json.dumps([reader.NAME, sorted(m for m in sys.modules "
            "if m.startswith('rl_board.readers.formats.'))]))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "rollout_samples" / "verl_grpo_demo")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == ["jsonl", ["rl_board.readers.formats.jsonl"]]


def test_each_signature_declares_its_readers_name_suffix_and_patterns():
    """A built-in reader's signature holds the NAME, SUFFIX and GLOBS its module has (the module's own
    patterns, with their compressed variants, are what ``layout.holds`` globs: a signature that drifted would
    skip a reader)."""
    import importlib

    for signature in BUILTIN:
        module = importlib.import_module(signature.module)
        assert (signature.name, signature.suffix) == (module.NAME, module.SUFFIX)
        assert (signature.globs or ("*" + module.SUFFIX,)) == layout.globs(module), signature.name
        assert signature.patterns() == tuple(v for p in layout.globs(module) for v in layout.patterns(module, p))
