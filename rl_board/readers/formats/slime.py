"""slime's debug rollout data: ``DIR/rollout_data/{rollout_id}.pt`` and ``eval_{rollout_id}.pt``.

With ``--save-debug-rollout-data`` (or ``--dump-details DIR``, which sets it to
``DIR/rollout_data/{rollout_id}.pt``) slime's ``save_debug_rollout_data``
(``slime/observability/rollout_data_utils.py``) writes ``torch.save({"rollout_id",
"samples": [Sample.to_dict(), …]})`` per rollout: ``prompt`` (text or chat messages),
``tokens`` (prompt and response ids), ``response``, ``response_length``, ``loss_mask`` and
``rollout_log_probs`` (one per response token), ``label``, ``reward`` (a number or a dict),
``status``, ``metadata``, ``group_index`` and ``index``.

These files are pickles. The board's process never unpickles anything: each file is
opened in a worker process by ``torch_load.py`` with ``torch.load(weights_only=True)``
(torch's restricted loader: tensors and plain containers only) and comes back as JSON. The worker
stays for the next file (torch, seconds to import, is imported once for a run's files, not per file).
torch is an optional extra (``pip install 'rl-board[torch]'``); without it each file is
named with what to install. A file the restricted loader refuses is named with its reason.

One sample per ``Sample``: step = the rollout id (the file name's), split ``train`` or
``eval`` (``eval_{id}.pt``); reward = ``reward``, or of a dict its ``score`` (else its
``reward``) entry, the dict's numbers also extras ``reward/{key}``; token ids the last
``response_length`` of ``tokens``; ``loss_mask`` and the sampler's log-probs as written (a
list whose length is not ``response_length`` rejects the sample, named); ``label`` the
ground truth; turns: the prompt's (its messages, or its text split at its markers) then the
response split as glued text (``chat_text``); extras ``truncated`` (status), ``group_index``,
``index`` and the numbers of ``metadata``. A sample's ``line`` is its place in the file (1-based).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.defaults import PT_MEMORY_ENV, PT_OUTPUT_ENV, PT_SECONDS_ENV, pt_limits
from ..base import FileError, MissingDependency, ReadOptions, SourceChanged
from ..chat_text import split_prompt, split_turns
from ..lines import file_path
from ..record_rows import is_number, json_type, short
from ..turns import number, numbers, sample_rows, turns

NAME = "slime"
SUFFIX = ".pt"
APPENDABLE = False
ALIASES: dict[str, str] = {}
GLOBS = ("rollout_data/*.pt", "*.pt")  # DIR of --dump-details, or its rollout_data/
DEFAULT_SPLIT = "train"
EXPECTS = "rollout_data/{rollout_id}.pt or eval_{rollout_id}.pt files written by slime's save_debug_rollout_data"
WORKER = Path(__file__).parent.parent / "torch_load.py"  # readers/torch_load.py
NEEDS = "torch"  # the optional module the files need: a file that failed for want of it is read again once it is there
INSTALL = ("reading slime's .pt files needs torch: pip install 'rl-board[torch]' (the board opens them with "
           "torch.load(weights_only=True) in a worker process; it never unpickles them itself)")
_NAME = re.compile(r"^(eval_)?(\d+)\.pt$")


def split_of(name: str) -> str | None:
    match = _NAME.match(PurePosixPath(name).name)
    return None if match is None else "eval" if match.group(1) else "train"


def step_of(name: str) -> int | None:
    match = _NAME.match(PurePosixPath(name).name)
    return int(match.group(2)) if match else None


def other_kind(path: Path) -> str | None:
    return None if _NAME.match(Path(path).name) else "not a rollout file of slime (rollout_data/{id}.pt)"


class _Worker:
    """One ``torch_load.py --serve`` process, started for the first file and kept for the next ones
    (it exits when idle; one that stopped or is stuck is replaced)."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._pid = 0  # the process that started it (a forked child starts its own)
        self._lock = threading.Lock()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._pid == os.getpid():
            proc.kill()
            proc.wait()

    def load(self, path: Path) -> dict:
        """The worker's answer for ``path``: ``{"data": …}`` or ``{"code": N, "error": …}``."""
        limits = pt_limits()
        with self._lock:
            for _ in range(2):  # a worker that exited while idle is started again, once
                started = self._proc is None or self._pid != os.getpid() or self._proc.poll() is not None
                if started:
                    self._proc = subprocess.Popen([sys.executable, str(WORKER), "--serve", *map(str, limits)],
                                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                  stderr=subprocess.DEVNULL)
                    self._pid = os.getpid()
                proc = self._proc
                try:
                    proc.stdin.write((json.dumps(str(path)) + "\n").encode())
                    proc.stdin.flush()
                    line = self._line(proc, limits)
                except OSError:
                    line = b""
                if line:
                    break
                self.stop()
                if proc.wait() == -getattr(signal, "SIGXCPU", 24):
                    raise FileError(f"not loaded within {limits[1]} s of CPU ({PT_SECONDS_ENV} raises the bound)")
                if started:  # a fresh worker that ended on this file: not tried again
                    break
            if not line:
                raise FileError("the worker loading it stopped without an answer")
        try:
            answer = json.loads(line)
        except ValueError as exc:
            self.stop()
            raise FileError(f"the worker's output is not JSON ({exc})") from exc
        if answer.get("code") in (3, 5, 7):  # a failed import is not kept (the next file may find torch
            self.stop()                      # installed), nor a worker that ran out of memory
        return answer

    def _line(self, proc: subprocess.Popen, limits: tuple[int, int, int]) -> bytes:
        """One line of the worker's output, read as it comes, b"" when it exited first; a worker that has
        not answered within ``limits``' seconds, or whose answer passes its output bytes, is stopped."""
        _, seconds, output = limits
        out, fd, deadline = bytearray(), proc.stdout.fileno(), time.monotonic() + seconds
        while not out.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.stop()
                raise FileError(f"not loaded in {seconds} s ({PT_SECONDS_ENV} raises the bound)")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b""
            out += chunk
            if len(out) > output + 64:  # the answer's own braces and key besides the data
                self.stop()
                raise FileError(f"its data is more than {output >> 20} MB as JSON ({PT_OUTPUT_ENV} raises the bound)")
        return bytes(out)


_WORKER = _Worker()
atexit.register(_WORKER.stop)


def load(path: Path) -> dict:
    """The file as JSON-ready data, loaded in the worker process (see the module's docstring) held to
    ``defaults.pt_limits``: its memory and each file's CPU time (resource limits it sets itself), the wall
    time a file is waited for and the JSON it may answer, read as it comes. Raises ``FileError`` naming the
    bound that bit, ``MissingDependency`` without torch."""
    memory, seconds, output = pt_limits()
    answer = _WORKER.load(path)
    code = answer.get("code")
    if code == 3:
        raise MissingDependency(NEEDS, INSTALL)
    if code == 5:
        raise FileError(f"loading it needs more than {memory / (1 << 30):g} GB of memory "
                        f"({PT_MEMORY_ENV} raises the bound)")
    if code == 6:
        raise FileError(f"its data is more than {output >> 20} MB as JSON ({PT_OUTPUT_ENV} raises the bound)")
    if code == 7:
        raise FileError(f"{answer.get('error')}: reinstall it, {INSTALL}")
    if code is not None:
        raise FileError("torch.load(weights_only=True) refused it: " + str(answer.get("error")))
    data = answer.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("samples"), list):
        raise FileError("not slime's rollout data: a dict with a 'samples' list was expected")
    return data


def _reward(value) -> tuple[float | None, dict] | str:
    if is_number(value):
        return float(value), {}
    if isinstance(value, dict):
        extras = numbers(value, "reward/")
        for key in ("score", "reward"):
            if is_number(value.get(key)):
                return float(value[key]), extras
        return None, extras
    if value is None:
        return "missing 'reward' (None)"
    return f"'reward' must be a number or a dict, got {json_type(value)} {short(value)}"


def sample_of(sample, step: int) -> dict | str:
    """One ``Sample.to_dict()`` as a sample dict, or why it is rejected."""
    if not isinstance(sample, dict):
        return f"a sample must be a dict, got {json_type(sample)}"
    got = _reward(sample.get("reward"))
    if isinstance(got, str):
        return got
    reward, extras = got
    length = sample.get("response_length")
    if type(length) is not int or length < 0:
        return f"'response_length' must be a non-negative integer, got {short(length)}"
    tokens = sample.get("tokens") or []
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        return "'tokens' must be a list of integers"
    if length > len(tokens):
        return f"'response_length' {length} is more than the {len(tokens)} tokens"
    out = {F.STEP: step, F.REWARD: reward, F.TOKEN_IDS: tokens[len(tokens) - length:]}
    for key, name in (("loss_mask", F.LOSS_MASK), ("rollout_log_probs", "rollout_logprobs")):
        values = sample.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or not all(is_number(v) for v in values):
            return f"'{key}' must be a list of numbers"
        if len(values) != length:
            return f"'{key}' has {len(values)} values for a response of {length} tokens (response_length)"
        out[name] = [bool(v) for v in values] if name == F.LOSS_MASK else [float(v) for v in values]
    prompt, response = sample.get("prompt"), sample.get("response")
    if not isinstance(response, str):
        return f"'response' must be a string, got {json_type(response)}"
    head = turns(prompt) if isinstance(prompt, list) else split_prompt(prompt if isinstance(prompt, str) else "")
    split = split_turns(response)
    out[F.MESSAGES] = head + split.turns
    out["response"] = response
    if isinstance(prompt, str):
        out["prompt"] = prompt
    if isinstance(sample.get("label"), str):
        out["ground_truth"] = sample["label"]
    extras.update(numbers(sample.get("metadata")))
    for key in ("group_index", "index"):
        if number(sample.get(key)) is not None:
            extras[key] = number(sample[key])
    extras["truncated"] = 1.0 if sample.get("status") == "truncated" else 0.0
    if split.note is not None:
        extras["turns_unsplit"] = 1.0
    out["extras"] = extras
    return out


def samples_from(data: dict, step: int) -> tuple[list[dict], list[tuple[int, str]]]:
    """(sample dicts with their place, (place, why) of each rejected sample) of a loaded file."""
    samples, errors = [], []
    for i, sample in enumerate(data["samples"]):
        got = sample_of(sample, step)
        if isinstance(got, str):
            errors.append((i + 1, got))
        else:
            samples.append({**got, "line": i + 1, "offset": i})
    return samples, errors


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, one per sample; (place, reason) of each rejected sample; samples in the file)."""
    path = Path(path)
    data = load(path)
    step = step_of(path.name)
    if step is None:
        raise FileError("its name is not {rollout_id}.pt or eval_{rollout_id}.pt: its step is unknown")
    samples, errors = samples_from(data, step)
    return sample_rows(samples), errors, len(data["samples"])


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """Sample ``offset`` of the file, loaded again in a worker: its fields and canonical values."""
    with file_path(fh) as path:
        data = load(path)
    if not 0 <= offset < len(data["samples"]):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    got = sample_of(data["samples"][offset], step_of(name) or 0)
    if isinstance(got, str):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    shown = {k: v for k, v in data["samples"][offset].items()
             if k not in ("tokens", "loss_mask", "rollout_log_probs", "prompt")}
    return {**shown, **got["extras"], **{k: v for k, v in got.items() if k != "extras"}}
