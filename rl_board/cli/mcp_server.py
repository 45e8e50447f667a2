"""``rl-board mcp``: the board as a Model Context Protocol server on stdio, for coding agents.

Its tools are the commands' ``--json`` outputs: each tool builds the command line a person would type
(``findings RUN --json``), parses it with the commands' own parser and runs the command's own function,
so a tool returns exactly what the command prints, under the same limits, and a bad argument is a tool
error carrying the command's message (never the end of the server). The allowed folders are the page's
and the commands' (``RL_BOARD_ROOTS``, or ``--roots``): a run outside them is a tool error.

Each call runs in a worker process of its own (``run_in_worker``): calls never wait for each other, a
call past its time limit (``RL_BOARD_MCP_SECONDS``) or one the client abandons (``notifications/cancelled``,
which the SDK turns into a cancellation of the call's task) has its process ended, and a call that crashes
its process is a tool error while the server goes on.

Needs the ``mcp`` extra (``pip install 'rl-board[mcp]'``); without it the command says so and exits 2.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from ..base.defaults import (
    MAX_SAMPLE_CHARS,
    MAX_SAMPLE_TOKENS,
    MAX_SAMPLE_TURNS,
    MCP_SECONDS_ENV,
    SAMPLE_IMAGE_SIDE,
    SAMPLE_IMAGES,
    SAMPLE_TOKENS,
    SAMPLE_TURNS,
    mcp_seconds,
)
from .answers import DEFAULT_LIMITS, MAX_ANSWER_CHARS, MAX_LIMIT, bound_answer
from .parser import SEARCH_SHOWN

MAX_SEARCH_RESULTS = 500  # samples a search tool call lists at most (it still counts every match)
INSTRUCTIONS = ("Token-level views of RL training rollouts of language models. Start with `runs` to list the "
                "runs under the allowed folders, then `findings` (what went wrong, with sample addresses), "
                "`summary` (per-step statistics), `search`, `sample` (one sample by its FILE:LINE address) and "
                "`metrics` (the trainer's own scalars).")

_LOCK = threading.Lock()  # one command at a time in a process: its output is read from the process's stdout
MAX_WORKER_STDERR = 64 << 10  # bytes of a worker's stderr kept (its last ones), for the message of a crash


class CommandFailed(Exception):
    """A command ended with an error; the message is what it printed on stderr."""


def run_command(argv: list[str]) -> dict:
    """The JSON a command prints for ``argv`` (``["findings", RUN, "--json"]``), parsed; ``CommandFailed``
    with its message when it exits 2 or prints no JSON."""
    import importlib

    from . import COMMANDS
    from .parser import _parser

    out, err = io.StringIO(), io.StringIO()
    with _LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = _parser().parse_args(argv)
        except SystemExit:  # argparse's message is on stderr
            args = None
        if args is not None:
            args.argv = argv
            module, function = COMMANDS[args.command]
            try:
                status = getattr(importlib.import_module(f"{__package__}.{module}"), function)(args)
            except Exception as exc:  # a fault of ours or of a file: the tool says so, the server goes on
                print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
                status = 2
    if args is None or status == 2:
        raise CommandFailed(_message(err.getvalue()))
    try:
        return json.loads(out.getvalue())
    except ValueError:
        raise CommandFailed(_message(err.getvalue()) or "the command printed no JSON") from None


def _message(stderr: str) -> str:
    """The error lines a command printed (``error: …``, argparse's ``rl-board …: error: …``), else all."""
    lines = [line for line in stderr.splitlines() if "error:" in line]
    return "\n".join(lines or stderr.strip().splitlines()[-3:])


def _read_options(pad_token: str | None, eos_token: str | None, split: str | None, fields: list[str] | None,
                  max_samples_per_step: int | None) -> list[str]:
    """The arguments every command that reads a run takes, as typed (None: the command's default)."""
    argv = []
    for flag, value in (("--pad-token", pad_token), ("--eos-token", eos_token), ("--split", split),
                        ("--max-samples-per-step", max_samples_per_step)):
        if value is not None:
            argv += [flag, str(value)]
    for mapping in fields or []:
        argv += ["--field", mapping]
    return argv


def list_runs(root: str | None) -> dict:
    """The runs under ``root`` (default: every allowed folder), as ``rl-board runs ROOT --json`` lists them."""
    from .runs import RunsError, build_runs_json

    try:
        return build_runs_json(root)
    except RunsError as exc:
        raise CommandFailed(f"error: {exc}") from None


def sample_json(run_dir: str, address: str, max_tokens: int, max_turns: int, options: list[str]) -> tuple[dict, list]:
    """``analysis.address``'s JSON of one sample and its pictures ([mime, base64 of the bytes] each), the run
    read as the commands read it."""
    import base64

    from ..analysis.address import AddressError, build_sample_images, build_sample_json, find_sample
    from ..readers import SourceChanged
    from ..store.loader import TokenizerError
    from .common import _load
    from .parser import _parser

    err = io.StringIO()
    with _LOCK, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            args = _parser().parse_args(["summary", run_dir, *options])
        except SystemExit:
            raise CommandFailed(_message(err.getvalue())) from None
        run = _load(args)
        if isinstance(run, int):
            raise CommandFailed(_message(err.getvalue()))
        try:
            label = find_sample(run, address)
            pictures = [[mime, base64.b64encode(data).decode()] for mime, data in build_sample_images(run, label)]
            return build_sample_json(run, label, max_tokens, max_turns), pictures
        except (AddressError, SourceChanged, TokenizerError, OSError) as exc:
            raise CommandFailed(f"error: {exc}") from None


def _with_pictures(out: dict, pictures: list | None):
    """A tool's JSON ``out`` as is without ``pictures``; with some ([mime, base64] each), a result whose content
    is the JSON as text then each picture as image content, so an agent that reads images sees them."""
    if not pictures:
        return out
    from mcp_types import CallToolResult, ImageContent, TextContent

    text = TextContent(type="text", text=json.dumps(out, indent=2, ensure_ascii=False))
    images = [ImageContent(type="image", data=data, mime_type=mime) for mime, data in pictures]
    return CallToolResult(content=[text, *images], structured_content=out)


#: What a worker process can be asked to do: the name a request gives -> the function, called with its args.
_WORK = {"runs": "list_runs", "command": "run_command", "sample": "sample_json"}
#: A worker's program: the package found where this one is, whatever the server's working folder.
_WORKER = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r}); "
           "from rl_board.cli.mcp_server import _work; _work()")


def _work() -> None:
    """A worker process (``run_in_worker``): does the request in ``sys.argv[1]`` (JSON: ``work``, ``args``)
    and writes ``{"result": …}`` or ``{"error": message}`` to the stdout it was started with; anything else
    written to stdout goes to stderr. It ends itself a few seconds past the time limit, should the server
    be gone and not end it."""
    import math
    import signal

    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    if hasattr(signal, "alarm"):
        signal.alarm(math.ceil(mcp_seconds()) + 5)  # SIGALRM's default action ends the process
    request = json.loads(sys.argv[1])
    request["args"] = _runs_named(request["work"], request["args"])
    try:
        result, pictures = globals()[_WORK[request["work"]]](*request["args"]), None
        if isinstance(result, tuple):  # the sample tool's (JSON, pictures): the pictures travel beside it
            result, pictures = result
        if request.get("tool") in DEFAULT_LIMITS:  # what a tool returns is bounded, and says what it left out
            result = bound_answer(request["tool"], result, request.get("limit"))
        reply = {"result": result, **({"pictures": pictures} if pictures else {})}
    except CommandFailed as exc:
        reply = {"error": str(exc)}
    answer.write(json.dumps(reply, ensure_ascii=False, allow_nan=False))
    answer.close()


def resolve_run(run: str) -> str:
    """A tool's ``run`` (or ``path``) as a folder: a run's name as the ``runs`` tool gives it (its path under an
    allowed folder, "." for the folder itself) is that folder under the first allowed folder that holds it, not
    under the server's working folder; an absolute path, a URL, or a name no allowed folder holds is as given
    (the door then says whether it may be read)."""
    from ..base.access import allowed_roots, is_url

    if not run or is_url(run) or Path(run).is_absolute():
        return run
    try:
        roots = allowed_roots() or []
    except ValueError:  # a misconfigured RL_BOARD_ROOTS: the command says so
        return run
    for root in roots:
        candidate = root if run in (".", "./") else root / run
        if candidate.exists():
            return str(candidate)
    return run


def _runs_named(work: str, args: list) -> list:
    """A request's ``args`` with the runs it names resolved (``resolve_run``): a command's run (``diff``'s
    two), the ``sample`` tool's run."""
    if work == "command":
        argv = list(args[0])
        count = 2 if argv[:1] == ["diff"] else 1 if argv[:1] and argv[0] != "runs" else 0
        for i in range(1, 1 + count):
            if i < len(argv):
                argv[i] = resolve_run(argv[i])
        return [argv, *args[1:]]
    if work == "sample":
        return [resolve_run(args[0]), *args[1:]]
    return args


async def run_in_worker(work: str, args: list, what: str, limit: int | None = None) -> dict:
    """``work`` (a key of ``_WORK``) done with ``args`` in a worker process of its own; its result, or
    ``CommandFailed`` with its message. Past ``mcp_seconds()``, or when the task is cancelled (the client
    abandoned the call), the process is killed (and waited for) before this returns or raises. ``what``
    names the call in messages and, where it is a bounded tool's name (``answers.DEFAULT_LIMITS``), the
    result is bounded by ``answers.bound_answer`` with ``limit``."""
    import anyio

    seconds = mcp_seconds()
    command = [sys.executable, "-c", _WORKER, json.dumps({"work": work, "args": args, "tool": what, "limit": limit})]
    process = await anyio.open_process(command, stdin=subprocess.DEVNULL)
    out, err = bytearray(), bytearray()

    async def drain(stream, into: bytearray, keep: int | None) -> None:
        async for chunk in stream:
            into += chunk
            if keep is not None and len(into) > keep:
                del into[:len(into) - keep]

    try:
        with anyio.move_on_after(seconds) as timer:
            async with anyio.create_task_group() as group:
                group.start_soon(drain, process.stdout, out, None)
                group.start_soon(drain, process.stderr, err, MAX_WORKER_STDERR)
                await process.wait()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:  # past the limit, or cancelled: the work ends with the call
                process.kill()
                await process.wait()
            await process.aclose()
    if timer.cancelled_caught:
        raise CommandFailed(f"error: {what} took longer than {seconds:g} s, the limit of a tool call "
                            f"({MCP_SECONDS_ENV}), and was ended (a large run not yet read: `rl-board index RUN` "
                            "reads it once, outside the server)")
    try:
        reply = json.loads(out.decode("utf-8"))
    except ValueError:
        last = err.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise CommandFailed(f"error: {what} ended its process (status {process.returncode}) without an answer"
                            + (": " + " / ".join(last) if last else "")) from None
    if "error" in reply:
        raise CommandFailed(reply["error"])
    return _with_pictures(reply["result"], reply.get("pictures"))


async def _tool_call(tool_error, limit: int | None, work: str, *args) -> dict:
    """``run_in_worker``'s result, or ``tool_error`` (the SDK's ``ToolError``) with its message."""
    try:
        return await run_in_worker(work, list(args), args[0][0] if work == "command" else work, limit)
    except CommandFailed as exc:
        raise tool_error(str(exc)) from None


def build_server(mcp_server_class):
    """The server and its tools (``mcp_server_class``: the SDK's ``MCPServer``, imported by the caller)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from ..analysis.report import board_version

    server = mcp_server_class("rl-board", instructions=INSTRUCTIONS, version=board_version())

    async def call(work: str, *args, limit: int | None = None) -> dict:
        return await _tool_call(ToolError, limit, work, *args)

    @server.tool()
    async def runs(root: str | None = None) -> dict[str, Any]:
        """The runs under a folder (default: every allowed folder): name, path, format, splits, files, size in
        bytes, steps and samples (null when not known without reading the run), and the folders of logs no
        reader opens."""
        return await call("runs", root)

    @server.tool(description=_DESCRIPTIONS["summary"])
    async def summary(run: str, limit: int | None = None, pad_token: str | None = None, eos_token: str | None = None,
                      split: str | None = None, fields: list[str] | None = None,
                      max_samples_per_step: int | None = None) -> dict[str, Any]:
        options = _read_options(pad_token, eos_token, split, fields, max_samples_per_step)
        return await call("command", ["summary", run, "--json", *options], limit=limit)

    @server.tool()
    async def findings(run: str, pad_token: str | None = None, eos_token: str | None = None, split: str | None = None,
                 fields: list[str] | None = None, max_samples_per_step: int | None = None) -> dict[str, Any]:
        """What went wrong in a run, most worrying first, each with its steps, evidence and sample addresses
        (FILE:LINE, for the `sample` tool): `rl-board findings RUN --json`."""
        options = _read_options(pad_token, eos_token, split, fields, max_samples_per_step)
        return await call("command", ["findings", run, "--json", *options])

    @server.tool(description=_DESCRIPTIONS["search"])
    async def search(run: str, regex: str | None = None, text_field: str = "response", truncated: bool = False,
                     has_images: bool = False, tag: str | None = None, fault: str | None = None,
                     steps: str | None = None, ranges: list[str] | None = None,
               sort: str | None = None, ascending: bool = False, limit: int = SEARCH_SHOWN,
               pad_token: str | None = None, eos_token: str | None = None, split: str | None = None,
               fields: list[str] | None = None, max_samples_per_step: int | None = None) -> dict[str, Any]:
        argv = ["search", run, "--json", "--in", text_field, "--limit", str(min(limit, MAX_SEARCH_RESULTS))]
        for flag, value in (("--regex", regex), ("--tag", tag), ("--fault", fault), ("--steps", steps), ("--sort", sort)):
            if value is not None:
                argv += [flag, value]
        argv += [f"--range={text}" for text in ranges or []]
        argv += ["--truncated"] * truncated + ["--has-images"] * has_images + ["--ascending"] * ascending
        return await call("command", argv + _read_options(pad_token, eos_token, split, fields, max_samples_per_step),
                          limit=limit)

    @server.tool(description=_DESCRIPTIONS["sample"])
    async def sample(run: str, address: str, max_tokens: int = SAMPLE_TOKENS, max_turns: int = SAMPLE_TURNS,
               pad_token: str | None = None, eos_token: str | None = None, split: str | None = None,
               fields: list[str] | None = None) -> dict[str, Any]:
        options = _read_options(pad_token, eos_token, split, fields, None)
        return await call("sample", run, address, max_tokens, max_turns, options)

    @server.tool(description=_DESCRIPTIONS["metrics"])
    async def metrics(path: str, warnings: bool = True, limit: int | None = None) -> dict[str, Any]:
        return await call("command", ["metrics", path, "--json", *(["--warnings"] if warnings else [])], limit=limit)

    @server.tool(description=_DESCRIPTIONS["diff"])
    async def diff(run_a: str, run_b: str, steps: str | None = None, steps_b: str | None = None, by: str = "prompt",
                   min_samples: int = 1, limit: int | None = None, pad_token: str | None = None,
                   eos_token: str | None = None, split: str | None = None, fields: list[str] | None = None,
                   max_samples_per_step: int | None = None) -> dict[str, Any]:
        argv = ["diff", run_a, run_b, "--json", "--by", by, "--min-samples", str(min_samples)]
        for flag, value in (("--steps", steps), ("--steps-b", steps_b)):
            if value is not None:
                argv += [flag, value]
        return await call("command", argv + _read_options(pad_token, eos_token, split, fields, max_samples_per_step),
                          limit=limit)

    return server


_BOUNDED = (f" The answer is at most {MAX_ANSWER_CHARS:,} characters: `left_out` says how many items of each list "
            "were left out to fit.")
_DESCRIPTIONS = {
    "summary": "Per-step statistics of a run: `rl-board summary RUN --json` (docs: Using the commands). `run` is a "
               "run folder (or URL); `fields` maps your keys (CANONICAL=SOURCE, e.g. reward=my_score). `limit`: "
               f"the steps given, spread evenly over the run, its first and last among them (default "
               f"{DEFAULT_LIMITS['summary']}, at most {MAX_LIMIT:,})." + _BOUNDED,
    "metrics": "The trainer's own scalars next to a run (TRL, verl, TensorBoard or a metrics JSONL), and with "
               "`warnings` the warning signs (ratio, clip fraction, spikes, entropy collapse, negative KL): "
               "`rl-board metrics PATH --json --warnings`. `limit`: the points given of each series, spread evenly "
               f"(default {DEFAULT_LIMITS['metrics']}), and the warnings given." + _BOUNDED,
    "diff": "Two runs (or two step ranges of one run) prompt by prompt: each prompt's samples and mean reward in A "
            "and B, `delta` = mean B - mean A, most negative first: `rl-board diff RUN_A RUN_B --json`. `steps`: A:B "
            "of RUN_A (and of RUN_B unless `steps_b`); `by`: prompt (its text without pads, or its chat template's "
            "user content when a side wraps prompts in one) or id (a logged prompt id); `step_distance`: how many "
            "steps apart A's and B's samples of a prompt are, on average; `no_match`: why no prompt is in both, with "
            f"each side's first prompt; `limit`: the prompts given, the first ones (default {DEFAULT_LIMITS['diff']})."
            + _BOUNDED,
    "search": "The samples of a run whose text or numbers match: `rl-board search RUN --json`. `regex`: RE2, (?i) "
              "for case-insensitive; `text_field`: prompt, response, ref_response, ground_truth, messages or a text "
              "field of the run (a judge's `judge_rationale`: a top-level string field, read again from the source); "
              "`steps`: A:B; `ranges`: NAME=LOW:HIGH each; `has_images`: only samples with an image; `fault`: a turn "
              "fault kind (tool_error, tool_loop, malformed_tool_call, truncated, empty_final_answer) or any, each "
              "sample then listing its faults (kind, message_index, assistant_turn); "
              "`sort`: a number's name, highest first. `limit`: "
              f"samples listed (default {SEARCH_SHOWN}, at most {MAX_SEARCH_RESULTS}), and the `per_step` entries "
              "given, spread evenly over the run; `matches` counts them all; `searched` says how far a regex got in "
              "its time budget." + _BOUNDED,
    "sample": "One sample by its address FILE:LINE (as findings and search give it), its images attached as "
              f"pictures (at most {SAMPLE_IMAGES}, each at most {SAMPLE_IMAGE_SIDE} pixels a side; `images` lists them "
              "all): its numbers, prompt, "
              f"response, its first `max_turns` turns (role, content, tool calls; default {SAMPLE_TURNS}, at most "
              f"{MAX_SAMPLE_TURNS:,}; `n_turns` counts them all, `turns_left_out` those not given), its turn faults "
              "(kind, message_index, assistant_turn) and its first "
              f"`max_tokens` token positions with their per-token numbers (default {SAMPLE_TOKENS}, at most "
              f"{MAX_SAMPLE_TOKENS:,}); `n_tokens` counts them all, `cut` names the texts cut (at "
              f"{MAX_SAMPLE_CHARS:,} characters, and shorter where the answer must fit)." + _BOUNDED,
}


def _mcp(args) -> int:
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        print("error: rl-board mcp needs the MCP SDK: pip install 'rl-board[mcp]' (or pip install mcp)",
              file=sys.stderr)
        return 2
    build_server(MCPServer).run("stdio")
    return 0
