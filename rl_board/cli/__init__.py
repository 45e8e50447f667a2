"""Command line: ``rl-board`` (or ``python -m rl_board``) ``serve``, ``summary``, ``search``, ``findings``,
``metrics``, ``tags``, ``cache``, ``index``, ``diff``, ``generate``, ``report``, ``runs`` and ``mcp``: one module per command, the parser in ``parser``.

``summary`` prints per-step statistics of a run without the page (a contract
other tools rely on; see docs/commands.md). Exit status: 0 when at least one line
loaded, 1 when none did, 2 on a bad argument or path.

May import ``base``, ``analysis`` and ``demo``; nothing of ``store``, ``readers``, ``scalars``, ``derive`` or
``views`` (``serve`` starts the page as its own process): what is not a ``Run`` is read through
``analysis.provider``, as the page reads it.
"""

from __future__ import annotations

import importlib
import os
import sys

from ..analysis.provider import cluster, workers
from ..base.access import RootError
from ..base.defaults import MAX_EXTRA_FIELDS_ENV, setting_problems
from .parser import READS_A_RUN, _parser
from .serve import serve_command
from .terminal import escaping_output

__all__ = ["main", "run", "serve_command"]

# Heavy modules (pandas, pyarrow, the readers) are imported where used: a command that reads a run
# starts its parsing workers first, so their start overlaps this process's own imports.


#: command -> (module of this package, its function)
COMMANDS = {"summary": ("summary", "_summary"), "findings": ("findings", "_findings"), "tags": ("tags", "_tags"),
            "search": ("search", "_search"), "serve": ("serve", "_serve"), "cache": ("cache", "_cache"),
            "metrics": ("metrics", "_metrics"), "generate": ("generate", "_generate"), "detect": ("detect", "_detect"),
            "runs": ("runs", "_runs"),
            "index": ("index", "_index"), "diff": ("diff", "_diff"), "report": ("report", "_report"),
            "mcp": ("mcp_server", "_mcp")}


#: command -> (module of this package, the function that returns its ``--json`` dict from its ``args``;
#: ``common.CommandError`` with the message when it can't): what the command prints, what MCP returns
JSON_FUNCTIONS = {"summary": ("summary", "summary_json"), "findings": ("findings", "findings_json"),
                  "search": ("search", "search_json"), "metrics": ("metrics", "metrics_json"),
                  "diff": ("diff", "diff_json"), "detect": ("detect", "detect_json"), "runs": ("runs", "runs_json"),
                  "tags": ("tags", "tags_json"), "cache": ("cache", "cache_json"), "index": ("index", "index_json")}


def json_function(command: str):
    """The function of ``JSON_FUNCTIONS`` for ``command``, imported."""
    module, function = JSON_FUNCTIONS[command]
    return getattr(importlib.import_module(f"{__name__}.{module}"), function)


def run() -> None:
    """The ``rl-board`` program (and ``python -m rl_board``): ``main``, then the process ends at once.

    An interpreter's normal exit takes every module and object apart one at a time; once pandas and
    pyarrow are imported that is some 0.05 s of every command that reads a run, for memory the system
    frees at once anyway. What of that exit matters is kept: the functions registered with ``atexit``
    run (logging's, Ray's, temporary folders'), the output is flushed, and while a thread that is not a
    daemon still runs (a library's), the process exits the normal way, which waits for it. ``main``
    itself returns (tests and notebooks call it)."""
    import atexit
    import threading

    status = main()
    if any(thread is not threading.main_thread() and not thread.daemon and thread.is_alive()
           for thread in threading.enumerate()):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone away, a stream closed: nothing more can be said
            pass
    os._exit(status)


def main(argv: list[str] | None = None) -> int:
    """Every command behind one broken-pipe guard: ``rl-board cache list | head`` is not an error."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # here, not at exit: a reader gone away is found while we can still say nothing
        return status
    except BrokenPipeError:  # the reader went away (`| head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: list[str] | None) -> int:
    from ..base.access import check_roots

    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad arguments, 0 on --help
        return int(exc.code or 0)
    if getattr(args, "roots", None) is not None:
        os.environ["RL_BOARD_ROOTS"] = args.roots
    if getattr(args, "max_extra_fields", None) is not None:
        os.environ[MAX_EXTRA_FIELDS_ENV] = str(args.max_extra_fields)
    try:
        check_roots()  # a blank or unusable RL_BOARD_ROOTS must stop us, never mean "allow all"
    except RootError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bad, capped = setting_problems()  # a setting that can't be used stops us, one line each
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    if bad:
        return 2
    for line in capped:
        print(f"note: {line}", file=sys.stderr)
    if args.command in READS_A_RUN and args.max_samples_per_step is None and not cluster.address():
        # for a long read (or where this process can't fork), the parsing workers start now, as new
        # interpreters that import while this process does (workers.EARLY_SPAWN_BYTES says why); with
        # RL_BOARD_RAY set, the ranges go to Ray tasks instead
        workers.warm_up_for(args.run_dir)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what was typed (a report says how it was made)
    module, function = COMMANDS[args.command]
    command = getattr(importlib.import_module(f"{__name__}.{module}"), function)
    try:
        if args.command in RAW_OUTPUT:
            return command(args)
        with escaping_output():  # names and text from disk never reach the terminal as control characters
            return command(args)
    finally:
        if os.environ.get(PHASES_ENV):
            _print_phases()


RAW_OUTPUT = ("serve", "mcp")  # stdio handed to another program (Streamlit) or protocol (JSON-RPC)
PHASES_ENV = "RL_BOARD_PHASES"  # set: a command prints on stderr when its read's workers started and ended


def _print_phases() -> None:
    """One line on stderr: the last read's workers and ranges, and when (``time.time()``) its first range
    was handed out, its last result came back and the command ended (the benchmark's phase table)."""
    import json
    import time

    ingest = sys.modules.get(f"{__package__.rsplit('.', 1)[0]}.store.ingest")  # not imported: nothing was read
    marks = ingest.LAST_READ if ingest is not None else {}
    print("phases: " + json.dumps({**marks, "end": time.time()}), file=sys.stderr, flush=True)
