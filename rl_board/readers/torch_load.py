"""Run as a script in a worker process: ``python torch_load.py FILE`` prints FILE as JSON.

The file is opened with ``torch.load(FILE, weights_only=True, map_location="cpu")``: torch's
restricted unpickler, which builds only tensors and plain containers and refuses any other
class. Tensors become nested lists, anything else JSON cannot hold its ``str``. This script
imports nothing of the board (it may run under another Python that has torch) and the
board's own process never unpickles anything. Exit status: 0 and the JSON on stdout; 3 when
torch is missing; 4 when the restricted loader refused the file (the reason on stderr).
"""

import json
import sys

MISSING_TORCH = 3
REFUSED = 4


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


def main(path: str) -> int:
    try:
        import torch
    except ImportError:
        print("torch is not installed", file=sys.stderr)
        return MISSING_TORCH
    try:
        data = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:
        print(f"{type(exc).__name__}: {reason(str(exc))}", file=sys.stderr)
        return REFUSED
    json.dump(plain(data), sys.stdout, ensure_ascii=False, allow_nan=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
