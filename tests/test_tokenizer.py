"""A tokenizer that panics (the real ``tokenizers`` library's ``PanicException``, a ``BaseException``) costs
only the run's token texts: ids read ``#ID`` with one note, and the commands, the page and the MCP server go on."""

from __future__ import annotations

import json

import pytest
from conftest import command, write_lines
from page_steps import load as _load
from page_steps import open_page as _open
from token_writers import hostile_tokenizer

from rl_board.derive.tokenizer import decode_text, decode_texts, failure, load_tokenizer, token_strings

FAILED = "failed decoding (PanicException"


def _hostile_run(folder, files: int = 1):
    """A run of ``files`` files of 6 samples over 2 steps whose responses are token ids (with their log-probs);
    sample 1 of each step holds id 2, on which the run's own tokenizer.json panics."""
    hostile_tokenizer(folder)
    for k in range(files):
        _lines(folder / f"rollouts{k or ''}.jsonl")
    return folder


def _lines(path):
    write_lines(path, [{"step": s, "reward": 0.5 * k, "prompt": "p", "token_ids": [0, 1, 2] if k == 1 else [0, 1],
                        "logprobs": [-0.5, -0.25, -1.0] if k == 1 else [-0.5, -0.25]}
                       for s in (1, 2) for k in range(3)])


def test_the_fixture_panics_in_the_real_library(tmp_path):
    """The tokenizers library itself raises a BaseException that is no Exception decoding id 2 of the file."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(hostile_tokenizer(tmp_path)))
    assert tokenizer.decode([0, 1]) == "helloworld"  # the Replace decoder joins tokens as they are
    with pytest.raises(BaseException) as caught:
        tokenizer.decode([2])
    assert not isinstance(caught.value, Exception) and type(caught.value).__name__ == "PanicException"


def test_a_panic_reads_ids_as_hash_numbers_from_then_on(tmp_path):
    """Through load_tokenizer: ids 0 and 1 decode; the panic on id 2 gives #2 instead of raising, and
    from then on every id of that tokenizer reads #ID (one failure, not one per sample), failure naming the
    file; another tokenizer in the same process is untouched."""
    path = hostile_tokenizer(tmp_path / "bad")
    tokenizer = load_tokenizer(str(path))
    assert token_strings(tokenizer, [0, 1]) == ["hello", "world"] and failure(tokenizer) is None
    assert decode_text(tokenizer, [0, 2]) == "#0 #2"
    reason = failure(tokenizer)
    assert str(path) in reason and FAILED in reason
    assert token_strings(tokenizer, [0, 1]) == ["#0", "#1"]
    assert decode_texts(tokenizer, [[0], [1, 0]]) == ["#0", "#1 #0"]
    from token_writers import train_tokenizer

    good = load_tokenizer(str(train_tokenizer(tmp_path / "good")))
    assert decode_text(good, good.encode("hello").ids) == "hello" and failure(good) is None


def test_a_call_past_its_time_allowance_fails_the_tokenizer_and_ends_its_worker(tmp_path, monkeypatch):
    """With the allowance set to 0 s (every call takes longer than nothing; no clock is compared with a
    guess), a good tokenizer's first call reads its ids as #ID, the note says the limit and that the call
    was stopped, and its worker process is ended; no further call is made."""
    from token_writers import train_tokenizer

    from rl_board.derive import tokenizer as module

    monkeypatch.setattr(module, "DECODE_SECONDS", 0.0)
    monkeypatch.setattr(module, "DECODE_SECONDS_PER_ID", 0.0)
    module._load.cache_clear()
    good = load_tokenizer(str(train_tokenizer(tmp_path / "slow")))
    ids = good.encode("hello").ids
    assert decode_text(good, ids) == " ".join(f"#{i}" for i in ids)
    assert "took longer than the 0.0 s allowed decoding 1 ids, and was stopped: token ids are shown as #ID" in failure(good)
    assert good._worker is None
    module._load.cache_clear()


def _stuck_tokenizer(folder):
    """Save ``folder/tokenizer.json`` whose decoder is 600 Replace steps of ``(a|aa)+$`` over a token of 30 a's
    and a b: each step backtracks about 1 s inside the library's Rust code without reaching Oniguruma's
    retry limit (31 a's panic), so decoding id 2 takes some 10 minutes and never raises. Ids 0 and 1 decode
    at once."""
    from tokenizers import Regex, Tokenizer, decoders, models

    tokenizer = Tokenizer(models.WordLevel({"hello": 0, "world": 1, "a" * 30 + "b": 2, "<unk>": 3}, unk_token="<unk>"))
    tokenizer.decoder = decoders.Sequence([decoders.Replace(Regex("(a|aa)+$"), "")] * 600)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


@pytest.mark.slow
def test_a_decoder_stuck_in_the_library_is_stopped_at_the_limit(tmp_path):
    """A decoder that backtracks for minutes in Rust (no panic, no return): with the limit at 1 s, the call
    returns with id 2 read as #2 and the note that it was stopped; the worker process that ran it is gone
    (killed), ids decode as #ID from then on, and the process lives on. Run in a process of its own whose
    hang guard (120 s) would end a limit that is not hard."""
    import subprocess
    import sys

    from conftest import REPO

    path = _stuck_tokenizer(tmp_path)
    script = f"""
import json
from rl_board.derive import tokenizer as module
module.DECODE_SECONDS, module.DECODE_SECONDS_PER_ID = 1.0, 0.0
good = module.load_tokenizer({str(path)!r})
first = module.token_strings(good, [0, 1])
worker = good._worker.proc
stuck = module.token_strings(good, [2])
after = module.decode_text(good, [0, 1])
print(json.dumps([first, stuck, after, module.failure(good), worker.returncode]))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, stuck, after, why, returncode = json.loads(proc.stdout)
    assert first == ["hello", "world"] and stuck == ["#2"] and after == "#0 #1"
    assert why.endswith("took longer than the 1.0 s allowed decoding 1 ids, and was stopped: token ids are shown as "
                        "#ID. Replace it, or give another tokenizer.") and str(path) in why
    assert returncode == -9  # SIGKILL: ended by the board, not finished


@pytest.mark.slow
def test_threads_decoding_at_once_print_no_panic_and_keep_stderr(tmp_path):
    """Four threads, each loading the hostile tokenizer afresh and decoding id 2 twenty times (80 panics, the
    quieting of stderr overlapping between threads): the process's stderr holds only what it wrote after
    them, no Rust panic message, and is still the terminal's (not left at /dev/null)."""
    import subprocess
    import sys

    from conftest import REPO

    path = hostile_tokenizer(tmp_path)
    script = f"""
import os, threading
from rl_board.derive.tokenizer import _load, decode_text, load_tokenizer
def work():
    for _ in range(20):
        _load.cache_clear()
        assert decode_text(load_tokenizer({str(path)!r}), [0, 2]) == "#0 #2"
threads = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
os.write(2, b"after\\n")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**__import__("os").environ, "RUST_BACKTRACE": "1"})
    assert proc.returncode == 0 and proc.stderr == "after\n", proc.stderr[-2000:]


@pytest.mark.parametrize("argv", [("summary", "{run}", "--no-cache"), ("search", "{run}", "--steps", "1:2"),
                                  ("findings", "{run}"), ("report", "{run}", "-o", "{out}")])
def test_every_command_ends_well_with_one_note(tmp_path, argv):
    """summary, search, findings and report on the run: exit 0, no traceback and no Rust panic message on
    stderr, one note for the run's two files (however the workers shared them) naming the tokenizer file and
    its failure, and no note that
    ids were decoded with it."""
    run = _hostile_run(tmp_path / "run", files=2)
    proc = command(*(a.format(run=run, out=tmp_path / "r.html") for a in argv))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "panicked" not in proc.stderr
    notes = [line for line in proc.stderr.splitlines() if FAILED in line]
    assert len(notes) == 1 and str(run / "tokenizer.json") in notes[0]
    assert "Token ids decoded with" not in proc.stderr


@pytest.mark.slow
def test_the_page_lives_on(tmp_path):
    """The page loads the run: no exception, the batch is drawn, and the load report says the tokenizer failed."""
    _hostile_run(tmp_path / "run")
    at = _load(_open(tmp_path, "run"))
    assert not at.exception and not at.error
    said = [e.value for e in (*at.info, *at.warning, *at.caption, *at.text) if "failed decoding" in e.value]
    assert said and at.dataframe


@pytest.mark.slow
def test_the_mcp_server_lives_on(tmp_path):
    """The MCP server on the run: summary and sample answer (the sample's response reads #2), and the
    server answers the call after them."""
    pytest.importorskip("mcp", reason="the mcp extra is not installed (requirements-dev.txt pins it)")
    from test_mcp import _session

    run = _hostile_run(tmp_path / "run")
    _, results = _session([("summary", {"run": str(run)}), ("sample", {"run": str(run), "address": "rollouts.jsonl:2"}),
                           ("runs", {})], roots=tmp_path)
    summary, sample, listing = results
    assert not summary.is_error, summary.content
    assert not sample.is_error, sample.content
    assert "#2" in json.dumps(sample.structured_content)
    assert not listing.is_error


def test_the_worker_outlives_the_thread_that_started_it(tmp_path):
    """The page runs each script run in a thread of its own and keeps the tokenizer across runs: a tokenizer
    first used in a thread that has ended still decodes in the next one, with the same worker process (a
    worker tied to its starting thread, as Linux's PR_SET_PDEATHSIG ties it, died with the first run)."""
    import threading

    from token_writers import train_tokenizer

    from rl_board.derive import tokenizer as module

    module._load.cache_clear()
    good = load_tokenizer(str(train_tokenizer(tmp_path / "threads")))
    ids = good.encode("hello world").ids
    first = []
    runner = threading.Thread(target=lambda: first.append((token_strings(good, ids), good._worker.proc.pid)))
    runner.start()
    runner.join()
    assert token_strings(good, ids) == first[0][0] and "#" not in "".join(first[0][0])
    assert failure(good) is None and good._worker.proc.pid == first[0][1] and good._worker.proc.poll() is None
    module._load.cache_clear()


@pytest.mark.slow
def test_the_worker_ends_when_the_board_s_process_ends(tmp_path):
    """A process that decodes with a tokenizer and then dies without cleaning up (os._exit) leaves no worker
    behind: the worker notices its parent is gone and exits (polled for up to 30 s, never timed)."""
    import os
    import subprocess
    import sys
    import time

    from token_writers import train_tokenizer

    path = train_tokenizer(tmp_path / "orphan")
    script = ("import os, sys\nfrom rl_board.derive.tokenizer import load_tokenizer, token_strings\n"
              f"t = load_tokenizer({str(path)!r})\ntoken_strings(t, [0, 1])\n"
              "print(t._worker.proc.pid, flush=True)\nos._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parents[1])})
    worker = int(done.stdout.split()[0])
    for _ in range(300):
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        try:  # a zombie of ours would still answer kill 0: it is not ours (init reaps it)
            if open(f"/proc/{worker}/stat").read().split()[2] == "Z":
                break
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the worker {worker} outlived the process that started it")
