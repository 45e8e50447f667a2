"""Run as a script in a worker process: ``python torch_load.py FILE`` prints FILE as JSON;
``python torch_load.py --serve`` loads one file per line of stdin (a JSON string, its path) and
answers each with one line, ``{"data": …}`` or ``{"code": N, "error": …}``, so that torch is
imported once for many files; it exits at the end of stdin or after ``IDLE_SECONDS`` without one.

The file is opened with ``torch.load(FILE, weights_only=True, map_location="cpu")``: torch's
restricted unpickler, which builds only tensors and plain containers and refuses any other
class. Tensors become nested lists, anything else JSON cannot hold its ``str``. This script
imports nothing of the board (it may run under another Python that has torch) and the
board's own process never unpickles anything. Exit status: 0 and the JSON on stdout; 3 when
torch is missing; 4 when the restricted loader refused the file (the reason on stderr); 5 when
torch is there but fails to import.
"""

import json
import select
import sys

MISSING_TORCH = 3
REFUSED = 4
BROKEN_TORCH = 5
IDLE_SECONDS = 120  # a serving worker waits this long for its next file, then exits


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
    """The line of a refusal that says why (torch's names the global it would not build), without
    terminal colour codes."""
    lines = [line.replace("\x1b[1m", "").replace("\x1b[0m", "").strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    why = next((line for line in lines if "Unsupported global" in line or "WeightsUnpickler error" in line), None)
    return why or (lines[0] if lines else "")


def import_torch():
    """(torch, None), or (None, (exit status, why)) when it is missing or fails to import."""
    try:
        import torch
    except ModuleNotFoundError as exc:
        if exc.name == "torch":
            return None, (MISSING_TORCH, "torch is not installed")
        return None, (BROKEN_TORCH, f"torch fails to import: {exc}")
    except Exception as exc:
        return None, (BROKEN_TORCH, f"torch fails to import: {type(exc).__name__}: {exc}")
    return torch, None


def load(torch, path: str):
    """(the file as JSON-ready data, None), or (None, why the restricted loader refused it)."""
    try:
        return plain(torch.load(path, weights_only=True, map_location="cpu")), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {reason(str(exc))}"


def main(path: str) -> int:
    torch, failed = import_torch()
    if failed:
        print(failed[1], file=sys.stderr)
        return failed[0]
    data, why = load(torch, path)
    if why is not None:
        print(why, file=sys.stderr)
        return REFUSED
    json.dump(data, sys.stdout, ensure_ascii=False, allow_nan=False)
    return 0


def serve() -> int:
    """Answer one line per path read from stdin (see the module's docstring)."""
    torch, failed = import_torch()
    while select.select([sys.stdin], [], [], IDLE_SECONDS)[0]:
        line = sys.stdin.readline()
        if not line:
            break
        if failed:  # answered, then gone: a worker started after torch is installed imports it
            sys.stdout.write(json.dumps({"code": failed[0], "error": failed[1]}) + "\n")
            break
        data, why = load(torch, json.loads(line))
        answer = {"data": data} if why is None else {"code": REFUSED, "error": why}
        sys.stdout.write(json.dumps(answer, ensure_ascii=False, allow_nan=False) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1] == "--serve" else main(sys.argv[1]))
