"""Run as a script in a worker process: ``python tokenizer_worker.py`` reads a tokenizer from its first line
of stdin (``{"path": FILE}`` or ``{"text": JSON}``) and then answers each line, a call
``{"op": NAME, "args": [...], "kwargs": {...}}``, with one line (and the tokenizer read, ``{"ok": "ready"}``): ``{"ok": VALUE}`` or ``{"error": "Type:
first line"}``. The board's process waits for each answer no longer than its time allowance and ends this
process past it: a decoder stuck in the ``tokenizers`` library's Rust code (a backtracking regular
expression), which no thread can interrupt, then costs only its run's token texts. A Rust panic
(``PanicException``) is answered as an error like any other; its message goes to stderr, which the board
sends to /dev/null. The process exits at the end of stdin, and within a second of the board's process ending.

Calls: ``decode``, ``decode_batch``, ``id_to_token``, ``get_vocab_size`` (the library's own), and
``known`` (ids -> whether the tokenizer has a token for each: one call, not one an id).
This script imports nothing of the board.
"""

import json
import sys

PARENT_POLL_SECONDS = 1.0  # how often the worker looks whether the board's process is still there


def _die_with_parent() -> None:
    """End this process soon after the board's process ends: a daemon thread looks at the parent's pid each
    second (``PARENT_POLL_SECONDS``). Not Linux's PR_SET_PDEATHSIG: that fires when the *thread* that started
    the worker ends, and the page runs each script run in a thread of its own, so the worker of a tokenizer
    kept across runs would be killed after the first one."""
    import os
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_SECONDS)
            if os.getppid() != parent:  # the board's process is gone (this one was handed to init)
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _call(tokenizer, op: str, args: list, kwargs: dict):
    if op == "known":
        return [0 <= i < 2**32 and tokenizer.id_to_token(i) is not None for i in args[0]]
    if op not in ("decode", "decode_batch", "id_to_token", "get_vocab_size"):
        raise ValueError(f"no call {op!r}")
    return getattr(tokenizer, op)(*args, **kwargs)


def main() -> int:
    _die_with_parent()
    from tokenizers import Tokenizer

    first = json.loads(sys.stdin.readline() or "{}")
    tokenizer = Tokenizer.from_file(first["path"]) if "path" in first else Tokenizer.from_str(first["text"])
    sys.stdout.write(json.dumps({"ok": "ready"}) + "\n")  # started: the calls' time limits count from here
    sys.stdout.flush()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"ok": _call(tokenizer, request["op"], request.get("args", []), request.get("kwargs", {}))}
        except BaseException as exc:  # a PanicException is a BaseException  # noqa: BLE001
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            answer = {"error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
