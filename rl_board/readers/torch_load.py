"""Run as a script in a worker process: ``python torch_load.py FILE [MEMORY SECONDS OUTPUT]`` prints FILE as JSON.

The file is opened with ``torch.load(FILE, weights_only=True, map_location="cpu")``: torch's
restricted unpickler, which builds only tensors and plain containers and refuses any other
class. Tensors become nested lists, anything else JSON cannot hold its ``str``. This script
imports nothing of the board (it may run under another Python that has torch) and the
board's own process never unpickles anything. With MEMORY (bytes) and SECONDS, the process
limits itself first (``RLIMIT_AS``, ``RLIMIT_CPU``): a small pickle that builds 10^9 numbers
(shared references) ends in a ``MemoryError``, not the machine's memory; with OUTPUT (bytes of JSON),
the values the JSON would hold are counted first (a list shared a million times counts a million times,
but is looked at once) and the load stops when they can't fit (each takes two bytes at least). Exit status: 0 and the JSON on stdout; 3 when torch is missing; 4 when the
restricted loader refused the file (the reason on stderr: the class refused, never torch's advice
to load it unrestricted); 5 when the memory limit was reached; 6 when the values can't fit OUTPUT.
"""

import json
import re
import sys

MISSING_TORCH = 3
REFUSED = 4
OUT_OF_MEMORY = 5
TOO_LARGE = 6
_GLOBAL = re.compile(r"Unsupported global: GLOBAL (\S+)")


def limit(memory: int, seconds: int) -> None:
    """Hold this process to ``memory`` bytes of address space and ``seconds`` of CPU (where the
    system has resource limits)."""
    try:
        import resource
    except ImportError:  # not POSIX: the board's wall-clock timeout still holds
        return
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


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


def main(path: str, memory: int | None = None, seconds: int | None = None, output: int | None = None) -> int:
    if memory and seconds:
        limit(memory, seconds)
    try:
        import torch
    except ImportError:
        print("torch is not installed", file=sys.stderr)
        return MISSING_TORCH
    try:
        data = torch.load(path, weights_only=True, map_location="cpu")
        if output:
            count(data, {}, output // 2)
        data = plain(data)
        json.dump(data, sys.stdout, ensure_ascii=False, allow_nan=False)
    except MemoryError:
        print("MemoryError", file=sys.stderr)
        return OUT_OF_MEMORY
    except TooLarge:
        print("too many values", file=sys.stderr)
        return TOO_LARGE
    except Exception as exc:
        print(f"{type(exc).__name__}: {reason(str(exc))}", file=sys.stderr)
        return REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], *(int(a) for a in sys.argv[2:5])))
