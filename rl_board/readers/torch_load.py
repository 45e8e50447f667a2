"""Run as a script in a worker process: ``python torch_load.py --serve MEMORY SECONDS OUTPUT`` loads one
file per line of stdin (a JSON string, its path) and answers each with one line, ``{"data": …}`` or
``{"code": N, "error": …}``, so that torch is imported once for many files; it exits at the end of stdin
or after ``IDLE_SECONDS`` without one. ``python torch_load.py FILE [MEMORY SECONDS OUTPUT]`` prints one
file as JSON (exit status = the code).

The file is opened with ``torch.load(FILE, weights_only=True, map_location="cpu")``: torch's
restricted unpickler, which builds only tensors and plain containers and refuses any other
class. Tensors become nested lists, anything else JSON cannot hold its ``str``. This script
imports nothing of the board (it may run under another Python that has torch) and the
board's own process never unpickles anything.

Bounds: with MEMORY (bytes) the process limits its address space first (``RLIMIT_AS``): a small pickle
that builds 10^9 numbers (shared references) ends in a ``MemoryError`` answered as code 5, not in the
machine's memory; each file may use SECONDS of CPU (``RLIMIT_CPU``'s soft limit moved on before each
file; past it the kernel ends the process and the board names the bound); with OUTPUT (bytes of JSON),
the values the JSON would hold are counted first (a list shared a million times counts a million times,
but is looked at once) and the load stops when they can't fit (each takes two bytes at least).
Codes: 3 torch is missing; 4 the restricted loader refused the file (the class refused, never torch's
advice to load it unrestricted); 5 the memory limit was reached; 6 the values can't fit OUTPUT; 7 torch is
there but fails to import.
"""

import json
import re
import select
import sys

MISSING_TORCH = 3
REFUSED = 4
OUT_OF_MEMORY = 5
TOO_LARGE = 6
BROKEN_TORCH = 7
IDLE_SECONDS = 120  # a serving worker waits this long for its next file, then exits
_GLOBAL = re.compile(r"Unsupported global: GLOBAL (\S+)")


def limit_memory(memory: int) -> None:
    """Hold this process to ``memory`` bytes of address space (where the system has resource limits)."""
    try:
        import resource
    except ImportError:  # not POSIX: the board's wall-clock timeout still holds
        return
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


def limit_cpu(seconds: int) -> None:
    """Let the next file use ``seconds`` of CPU from now: the soft ``RLIMIT_CPU`` moved to the CPU time used
    so far plus ``seconds`` (past it the kernel sends SIGXCPU, which ends the process)."""
    try:
        import resource
    except ImportError:
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = int(used.ru_utime + used.ru_stime) + 1 + seconds
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


class TooLarge(Exception):
    """More values than the JSON output may hold."""


def count(value, seen: dict, budget: int) -> int:
    """How many values ``plain(value)`` would make, each shared container looked at once (``seen``: id ->
    its count, None while it is being counted: a cycle, which never ends as JSON); ``TooLarge`` past
    ``budget``."""
    if isinstance(value, (dict, list, tuple)):
        key = id(value)
        if key in seen:
            if seen[key] is None:
                raise TooLarge
            return seen[key]
        seen[key] = None
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        total = 1
        for item in items:
            total += count(item, seen, budget)
            if total > budget:
                raise TooLarge
        seen[key] = total
        return total
    numel = getattr(value, "numel", None)
    return 1 + (numel() if callable(numel) else 0)


def plain(value):
    """``value`` with tensors as lists and every other non-JSON value as its text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    return str(value)


def reason(text: str) -> str:
    """Why the restricted loader refused a file, in one line: the class it would not build when it
    names one, else the line that says why; never torch's advice to load it unrestricted."""
    text = text.replace("\x1b[1m", "").replace("\x1b[0m", "")
    refused = _GLOBAL.search(text)
    if refused:
        return f"it holds an object of the class {refused.group(1)}, which the restricted loader does not build"
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and "weights_only" not in line and "trust" not in line]
    why = next((line for line in lines if "WeightsUnpickler error" in line), None)
    return why or (lines[0] if lines else "refused by the restricted loader")


def import_torch():
    """(torch, None), or (None, (code, why)) when it is missing or fails to import."""
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            return None, (MISSING_TORCH, "torch is not installed")
        return None, (BROKEN_TORCH, f"torch fails to import: {exc}")
    except Exception as exc:
        return None, (BROKEN_TORCH, f"torch fails to import: {type(exc).__name__}: {exc}")
    return torch, None


def load(torch, path: str, output: int | None):
    """(the file as JSON-ready data, None), or (None, (code, why))."""
    try:
        data = torch.load(path, weights_only=True, map_location="cpu")
        if output:
            count(data, {}, output // 2)
        return plain(data), None
    except MemoryError:
        return None, (OUT_OF_MEMORY, "MemoryError")
    except TooLarge:
        return None, (TOO_LARGE, "too many values")
    except Exception as exc:
        return None, (REFUSED, f"{type(exc).__name__}: {reason(str(exc))}")


def main(path: str, memory: int | None = None, seconds: int | None = None, output: int | None = None) -> int:
    if memory:
        limit_memory(memory)
    if seconds:
        limit_cpu(seconds)
    torch, failed = import_torch()
    if failed:
        print(failed[1], file=sys.stderr)
        return failed[0]
    data, failed = load(torch, path, output)
    if failed:
        print(failed[1], file=sys.stderr)
        return failed[0]
    try:
        json.dump(data, sys.stdout, ensure_ascii=False, allow_nan=False)
    except MemoryError:
        return OUT_OF_MEMORY
    return 0


def serve(memory: int | None = None, seconds: int | None = None, output: int | None = None) -> int:
    """Answer one line per path read from stdin (see the module's docstring)."""
    if memory:
        limit_memory(memory)
    torch, failed = import_torch()
    while select.select([sys.stdin], [], [], IDLE_SECONDS)[0]:
        line = sys.stdin.readline()
        if not line:
            break
        if failed:  # answered, then gone: a worker started after torch is installed imports it
            sys.stdout.write(json.dumps({"code": failed[0], "error": failed[1]}) + "\n")
            break
        if seconds:
            limit_cpu(seconds)
        data, why = load(torch, json.loads(line), output)
        try:
            answer = json.dumps({"data": data} if why is None else {"code": why[0], "error": why[1]},
                                ensure_ascii=False, allow_nan=False)
        except MemoryError:
            answer = json.dumps({"code": OUT_OF_MEMORY, "error": "MemoryError"})
        data = None
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        sys.exit(serve(*(int(a) for a in sys.argv[2:5])))
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:5])))
