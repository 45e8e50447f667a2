"""The command line as a whole: every command survives a reader that goes away (``| head``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, command, sample, write_lines


@pytest.mark.parametrize("args", [
    ["cache", "list"], ["summary", "{run}"], ["search", "{run}", "--regex", "a"], ["findings", "{run}"],
    ["metrics", "{trl}"], ["tags", "{run}"], ["--help"], ["search", "--help"],
])
@pytest.mark.slow
def test_every_command_survives_a_closed_pipe(tmp_path, args):
    """With stdout a pipe whose reading end is already closed (``| head`` that has left), a command ends
    without a traceback or a BrokenPipe message: the pipe is closed before it starts, so nothing depends
    on timing."""
    write_lines(tmp_path / "run" / "r.jsonl", [sample(s, 1.0, response="a b") for s in range(1, 40)])
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "trainer_state.json").write_text('{"log_history": [{"step": 1, "loss": 0.5}]}')
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "rl_board",
                               *(a.format(run=tmp_path / "run", trl=tmp_path / "trl") for a in args)],
                              stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert proc.returncode == 0


def _helps():
    """(command, option, help) for every option of every command."""
    from rl_board.cli.parser import _parser

    parser = _parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in commands.items():
        for action in sub._actions:
            if action.help and action.option_strings:
                yield name, action.option_strings[-1], action.help


def test_help_texts_are_whole_phrases():
    """No option's help leaves a clause hanging ("it is (…"): with parentheses taken out, no clause ends
    on a word that needs another after it, and parentheses balance."""
    import re

    dangling = {"is", "are", "it", "the", "a", "an", "of", "to", "and", "or", "with", "by"}
    for name, option, text in _helps():
        assert text.count("(") == text.count(")"), (name, option, text)
        bare = re.sub(r"\([^()]*\)", "", text)
        for clause in re.split(r"[;:]", bare):
            words = clause.split()
            assert not words or words[-1].lower().strip(",.") not in dangling, (name, option, text)


_PROGRAM = """
import atexit, sys, threading, time
from pathlib import Path
out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
atexit.register(lambda: sys.stdout.write("said at exit"))  # buffered: the program must still flush it
def late():  # not a daemon: the program must wait for it
    time.sleep(0.5)
    (out / "thread").write_text("done")
if sys.argv[2] == "thread":
    threading.Thread(target=late).start()
sys.argv = ["rl-board", *sys.argv[3:]]
from rl_board.cli import run
run()
"""


@pytest.mark.slow
@pytest.mark.parametrize("thread", ["thread", "none"])
def test_the_program_ends_at_once_but_keeps_what_an_exit_must_do(tmp_path, thread):
    """``rl-board`` ends its process without taking its modules apart, yet the functions registered with
    ``atexit`` run (what they print arrives too), a thread that is not a daemon is waited for, the whole
    output arrives through a pipe (here more than a pipe holds), and the exit status is the command's."""
    lines = [sample(s, 1.0, response=f"answer {i} " + "word " * 40) for s in range(1, 51) for i in range(30)]
    write_lines(tmp_path / "run" / "r.jsonl", lines)
    proc = subprocess.run([sys.executable, "-c", _PROGRAM, str(tmp_path), thread, "search", str(tmp_path / "run"),
                           "--regex", "answer", "--limit", "2000"],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"})  # buffered, as usual
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").exists() == (thread == "thread")
    assert proc.stdout.endswith("\nsaid at exit")
    lines = proc.stdout.splitlines()[:-1]
    shown = [line for line in lines if "«answer»" in line]
    assert len(proc.stdout) > 65536 and len(shown) == 1500  # every sample matches once: 50 steps x 30
    assert "r.jsonl:1500 " in lines[-2] and "«answer» 29 " in lines[-1]
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(tmp_path / "nowhere")],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2 and "not found" in proc.stderr


@pytest.mark.slow
def test_generate_says_what_it_wrote(tmp_path):
    """``generate --format prime-rl`` names the run it wrote, its format and its files (counted here from
    the folder: prime-rl's traces.jsonl, one per step, split and kind)."""
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "rl_board", "generate", str(out), "--format", "prime-rl"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    written = list(out.rglob("traces.jsonl"))
    steps = {p.parts[-4] for p in written if p.parts[-3] == "train"}
    lines = proc.stdout.splitlines()
    assert lines[0] == f"wrote 1 run in {out}:" and written
    assert lines[1].split() == ["(the", "folder", "itself)", "(prime-rl,", f"{len(written)}", "files,",
                                f"{len(steps)}", "steps)"]


def _generate(out, *more) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rl_board", "generate", str(out), "--format", "verl", *more],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.slow
def test_generate_refuses_a_folder_of_someone_elses_files(tmp_path):
    """A folder holding a user's logs (one named as generate's own verl file would be, one not): generate
    exits 2 with one line naming a file it did not write, and both files keep their bytes; with --force it
    writes. Its own earlier output (generated twice) is written over without --force."""
    logs = tmp_path / "logs"
    first = _generate(tmp_path / "probe")  # the file names verl's demo writes, learnt from a fresh folder
    assert first.returncode == 0, first.stderr
    taken = sorted(p.name for p in (tmp_path / "probe").iterdir() if not p.name.startswith("."))[0]
    logs.mkdir()
    (logs / taken).write_bytes(b"my step log\n")
    (logs / "notes.txt").write_bytes(b"keep me\n")
    refused = _generate(logs)
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1 and "--force" in refused.stderr
    assert (logs / taken).read_bytes() == b"my step log\n" and (logs / "notes.txt").read_bytes() == b"keep me\n"
    assert sorted(p.name for p in logs.iterdir()) == sorted([taken, "notes.txt"])
    again = _generate(tmp_path / "probe")  # its own output, unchanged: no --force needed
    assert again.returncode == 0, again.stderr
    (tmp_path / "probe" / taken).write_bytes(b"edited by hand\n")  # no longer what generate wrote
    assert _generate(tmp_path / "probe").returncode == 2
    forced = _generate(logs, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (logs / "notes.txt").read_bytes() == b"keep me\n" and (logs / taken).read_bytes() != b"my step log\n"
    assert _generate(logs).returncode == 2  # notes.txt is still not generate's


def _steps_written(out) -> list[int]:
    """The distinct steps of the lines under ``out``, read with the standard library."""
    return sorted({json.loads(line)["step"] for path in out.glob("*.jsonl")
                   for line in path.read_text(encoding="utf-8").splitlines()})


def test_generate_takes_its_count_as_num_steps_and_the_old_steps_with_a_warning(tmp_path):
    """``generate --num-steps 3`` writes a PPO run of steps 1-3 and no warning; the old ``--steps 3`` writes
    the same run and warns on stderr that it is deprecated, naming --num-steps; both at once exit 2,
    writing nothing; ``--steps 2:4`` (a range, as in search) is refused."""
    small = ("--samples", "2", "--tokens", "4", "--ranks", "1")
    done = command("generate", str(tmp_path / "new"), "--num-steps", "3", *small)
    assert done.returncode == 0 and done.stderr == ""
    assert _steps_written(tmp_path / "new") == [1, 2, 3]
    old = command("generate", str(tmp_path / "old"), "--steps", "3", *small)
    assert old.returncode == 0 and "deprecated" in old.stderr and "--num-steps 3" in old.stderr
    assert _steps_written(tmp_path / "old") == [1, 2, 3]
    assert (tmp_path / "old" / "rollout_data_rank0.jsonl").read_bytes() == \
        (tmp_path / "new" / "rollout_data_rank0.jsonl").read_bytes()
    both = command("generate", str(tmp_path / "both"), "--steps", "3", "--num-steps", "3", *small)
    assert both.returncode == 2 and "not both" in both.stderr and not (tmp_path / "both").exists()
    refused = command("generate", str(tmp_path / "range"), "--steps", "2:4", *small)
    assert refused.returncode == 2 and "--num-steps N" in refused.stderr and not (tmp_path / "range").exists()


def test_names_with_terminal_controls_are_printed_escaped(tmp_path):
    """A run file named with ESC, BEL and a right-to-left override (a name that would retitle the terminal
    and reorder what it shows): ``summary`` and ``detect`` print it with those characters escaped
    (``\\x1b``, ``\\x07``, ``\\u202e``) and no raw control character but line ends."""
    import re as regex

    from conftest import command

    name = "a\x1b]0;pwned\x07b\u202ec.jsonl"
    write_lines(tmp_path / "run" / name, [sample(1, 1.0), "{broken"])
    for argv in (("summary", str(tmp_path / "run"), "--no-cache"), ("detect", str(tmp_path / "run"))):
        done = command(*argv)
        printed = done.stdout + done.stderr
        assert "a\\x1b]0;pwned\\x07b\\u202ec.jsonl" in printed, printed
        assert not regex.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e]", printed)


def test_json_output_keeps_a_name_with_controls_exact(tmp_path):
    """``detect --json`` of a run file named with a C1 control (U+009B, a terminal's CSI), DEL and a
    right-to-left override: the output holds none of them raw and still decodes to the name as it is."""
    import json
    import re as regex

    from conftest import command

    name = "a\x9b2Jb\x7fc\u202ed.jsonl"
    write_lines(tmp_path / "run" / name, [sample(1, 1.0)])
    done = command("detect", str(tmp_path / "run"), "--json")
    assert not regex.search(r"[\x7f-\x9f\u202a-\u202e]", done.stdout)
    assert json.loads(done.stdout)["files"] == [name]


def test_runs_lists_what_the_page_lists(tmp_path):
    """``rl-board runs ROOT --json`` names every bundled run with its reader (listed by hand from
    rollout_samples/), a run two folders down by its path, and refuses a root that holds no run (exit 2)."""
    got = json.loads(command("runs", str(REPO / "rollout_samples"), "--json").stdout)
    assert [(r["name"], r["format"]) for r in got["runs"]] == [
        ("eval_demo", "jsonl"), ("ppo_demo", "jsonl"), ("prime_rl_agent_demo", "prime-rl"),
        ("prime_rl_tokens_demo", "prime-rl-tokens"), ("trl_grpo_demo", "parquet"), ("verl_grpo_demo", "jsonl")]
    write_lines(tmp_path / "team" / "exp" / "rollout_data_rank0.jsonl", [{"step": 1, "reward": 1.0}])
    text = command("runs", str(tmp_path))
    assert text.returncode == 0 and text.stdout.splitlines()[1].split()[:2] == ["team/exp", "jsonl"]
    (tmp_path / "empty").mkdir()
    refused = command("runs", str(tmp_path / "empty"))
    assert refused.returncode == 2 and refused.stderr.startswith("error: No runs in")


@pytest.mark.slow
def test_the_parsing_workers_start_before_numpy_pyarrow_or_a_reader_is_imported(tmp_path):
    """When ``summary`` asks for its parsing workers (``workers.warm_up_for``), this process has imported
    neither numpy, pyarrow, pandas nor any reader: the workers' start waits on no heavy import (issue 52)."""
    code = (
        "import json, sys\n"
        "from rl_board.store import workers\n"
        "seen = []\n"
        "heavy = ('numpy', 'pyarrow', 'pandas', 'msgspec', 'rl_board.readers', 'rl_board.derive')\n"
        "workers.warm_up_for = lambda run_dir, cache_root=None: seen.append([m for m in heavy if m in sys.modules])\n"
        "from rl_board.cli import main\n"
        "status = main(['summary', sys.argv[1], '--json'])\n"
        "print(json.dumps([status, seen]))\n"
    )
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "rollout_samples" / "ppo_demo")],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [0, [[]]]


#: what only a read's tail needs (numpy, pyarrow, pandas, the snapshot, derive, the line parser) or another
#: format's reader
TAIL_ONLY = ("numpy", "pyarrow", "pandas", "msgspec", "rl_board.store.snapshot", "rl_board.derive.samples",
             "rl_board.readers.jsonlines", "rl_board.analysis.run")


@pytest.mark.slow
@pytest.mark.parametrize("workers_are", ["spawned", "forked"])
def test_the_first_range_is_handed_out_before_the_tail_s_modules_are_imported(tmp_path, workers_are):
    """When ``summary`` hands its first byte range of a JSON-lines run to a spawned worker (a long read), this
    process has imported neither numpy, pyarrow, pandas, the snapshot, ``derive`` nor the line parser, and no
    reader but ``jsonl`` (issue 52): listing the run's files and planning its ranges need none of them. Before
    it forks workers (a short read) it imports the parser's modules, which the forked workers then share."""
    code = (
        "import json, sys\n"
        "from rl_board.store import workers\n"
        "workers.MIN_BYTES = 0  # the bundled run is small: read it through workers all the same\n"
        + ("workers.EARLY_SPAWN_BYTES = 0  # and as a long read is: by spawned workers\n"
           if workers_are == "spawned" else "")
        +
        "seen, borrow = [], workers.borrow\n"
        f"tail = {TAIL_ONLY!r}\n"
        "def first(proc, start):\n"
        "    if not seen:\n"
        "        seen.append(sorted(m for m in sys.modules if m in tail or m.startswith('rl_board.readers.formats.')))\n"
        "    start(proc)\n"
        "workers.borrow = lambda count, start, size: borrow(count, lambda proc: first(proc, start), size)\n"
        "from rl_board.cli import main\n"
        "status = main(['summary', sys.argv[1], '--json'])\n"
        "print(json.dumps([status, seen]))\n"
    )
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(tmp_path / "cache"), "RL_BOARD_WORKERS": "2"}
    proc = subprocess.run([sys.executable, "-c", code, str(REPO / "rollout_samples" / "ppo_demo")],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    reading = ["numpy", "pyarrow", "rl_board.derive.samples", "rl_board.readers.jsonlines", "msgspec"]
    expected = ["rl_board.readers.formats.jsonl"] + (reading if workers_are == "forked" else [])
    assert json.loads(proc.stdout.splitlines()[-1]) == [0, [sorted(expected)]]
