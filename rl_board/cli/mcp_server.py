"""``rl-board mcp``: the board as a Model Context Protocol server on stdio, for coding agents.

Its tools are the commands' ``--json`` outputs: each tool calls the function that gives the command's
``--json`` dict (``cli.JSON_FUNCTIONS``) with the command's own arguments, by the same names and with the
same defaults (``parser.command_args``; ``NOT_OFFERED`` names those no tool takes and why), so a tool
returns exactly what the command prints, under the same limits, and a bad argument is a tool error
carrying the command's message (never the end of the server). Nothing is parsed from a command line and
no output is captured. The allowed folders are the page's
and the commands' (``RL_BOARD_ROOTS``, or ``--roots``): a run outside them is a tool error.

Each call runs in a worker process of its own (``run_in_worker``): calls never wait for each other, a
call past its time limit (``RL_BOARD_MCP_SECONDS``) or one the client abandons (``notifications/cancelled``,
which the SDK turns into a cancellation of the call's task) has its process ended, and a call that crashes
its process is a tool error while the server goes on.

Needs the ``mcp`` extra (``pip install 'rl-board[mcp]'``); without it the command says so and exits 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..base.defaults import (
    AUTO,
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

MAX_WORKER_STDERR = 64 << 10  # bytes of a worker's stderr kept (its last ones), for the message of a crash

#: The command line's arguments no tool takes, and why: a tool's other parameters are the command's, by the
#: names its ``args`` have (``pad_token``, ``field``, ``text_field``…) and with its defaults (tests/test_mcp.py)
NOT_OFFERED = {"json": "a tool always answers the command's JSON",
               "no_cache": "the server's calls share the columnar cache; `rl-board cache clear RUN` clears a run's",
               "max_extra_fields": "a setting of the process (RL_BOARD_MAX_EXTRA_FIELDS), set where the server starts",
               "tokenizer": "a path outside the run folder, which the allowed folders do not check; the server "
                            "decodes with a tokenizer.json found in or above the run folder"}
#: A tool's parameter -> the command's argument it is, where the names differ (a run is a tool's ``run``)
POSITIONAL = {"run": "run_dir", "run_a": "run_dir", "run_b": "run_b", "path": "path", "root": "root"}


class CommandFailed(Exception):
    """A command could not do what a tool asked: the message, as the command line prints it (``error: …``)."""


def run_json(command: str, values: dict) -> dict:
    """What ``rl-board COMMAND … --json`` prints, from the command's own function (``cli.JSON_FUNCTIONS``) and
    ``values`` ({argument: value}, the names of its ``args``; the rest its defaults); ``CommandFailed`` with
    the command's message when it can't. Its notes go to stderr, as the command's do."""
    from . import json_function
    from .common import CommandError
    from .parser import command_args

    try:
        return json_function(command)(command_args(command, values))
    except (CommandError, ValueError) as exc:  # ValueError: an argument command_args refused
        raise CommandFailed(f"error: {exc}") from None
    except Exception as exc:  # a fault of ours or of a file: the tool says so, the server goes on
        raise CommandFailed(f"error: {type(exc).__name__}: {exc}") from None


def list_runs(root: str | None) -> dict:
    """The runs under ``root`` (default: every allowed folder), as ``rl-board runs ROOT --json`` lists them."""
    return run_json("runs", {"root": root})


def sample_json(run_dir: str, address: str, max_tokens: int, max_turns: int, options: dict) -> tuple[dict, list]:
    """``analysis.address``'s JSON of one sample and its pictures ([mime, base64 of the bytes] each), the run
    read as the commands read it (``options``: the read's arguments, {dest: value})."""
    import base64

    from ..analysis.address import AddressError, build_sample_images, build_sample_json, find_sample
    from ..analysis.provider import SourceChanged, TokenizerError
    from .common import CommandError, load_run_for
    from .parser import command_args

    try:
        run = load_run_for(command_args("summary", {"run_dir": run_dir, **options}))
        label = find_sample(run, address)
        pictures = [[mime, base64.b64encode(data).decode()] for mime, data in build_sample_images(run, label)]
        return build_sample_json(run, label, max_tokens, max_turns), pictures
    except (CommandError, ValueError, AddressError, SourceChanged, TokenizerError, OSError) as exc:
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
_WORK = {"runs": "list_runs", "command": "run_json", "sample": "sample_json"}
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
    two, ``metrics``' path), the ``sample`` tool's run."""
    if work == "command":
        command, values = args
        return [command, {name: resolve_run(value) if name in ("run_dir", "run_b", "path") and value else value
                          for name, value in values.items()}]
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
        return await run_in_worker(work, list(args), args[0] if work == "command" else work, limit)
    except CommandFailed as exc:
        raise tool_error(str(exc)) from None


READING = ("pad_token", "eos_token", "split", "field", "max_samples_per_step")  # how a tool's run is read


def _reading(given: dict) -> dict:
    """The arguments of ``READING`` among a tool's parameters (``locals()``), as the command takes them."""
    return {name: given[name] for name in READING if name in given}


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
    async def summary(run: str, limit: int | None = None, pad_token: str = AUTO, eos_token: str = AUTO,
                      split: str | None = None, field: list[str] = [],  # noqa: B006 (the CLI's default; never changed)
                      max_samples_per_step: int | None = None) -> dict[str, Any]:
        return await call("command", "summary", {"run_dir": run, **_reading(locals())}, limit=limit)

    @server.tool()
    async def findings(run: str, pad_token: str = AUTO, eos_token: str = AUTO, split: str | None = None,
                       field: list[str] = [],  # noqa: B006
                       max_samples_per_step: int | None = None) -> dict[str, Any]:
        """What went wrong in a run, most worrying first, each with its steps, evidence and sample addresses
        (FILE:LINE, for the `sample` tool), and `not_checked`: the kinds no check could run for on this run, each
        with the reason: `rl-board findings RUN --json`."""
        return await call("command", "findings", {"run_dir": run, **_reading(locals())})

    @server.tool(description=_DESCRIPTIONS["search"])
    async def search(run: str, regex: str | None = None, text_field: str = "response", truncated: bool = False,
                     has_images: bool = False, tag: str | None = None, fault: str | None = None,
                     steps: str | None = None, ranges: list[str] = [],  # noqa: B006
                     sort: str | None = None, ascending: bool = False, limit: int = SEARCH_SHOWN,
                     pad_token: str = AUTO, eos_token: str = AUTO, split: str | None = None,
                     field: list[str] = [],  # noqa: B006
                     max_samples_per_step: int | None = None) -> dict[str, Any]:
        values = {"run_dir": run, "regex": regex, "text_field": text_field, "truncated": truncated,
                  "has_images": has_images, "tag": tag, "fault": fault, "steps": steps, "ranges": ranges, "sort": sort,
                  "ascending": ascending, "limit": min(limit, MAX_SEARCH_RESULTS), **_reading(locals())}
        return await call("command", "search", values, limit=limit)

    @server.tool(description=_DESCRIPTIONS["sample"])
    async def sample(run: str, address: str, max_tokens: int = SAMPLE_TOKENS, max_turns: int = SAMPLE_TURNS,
                     pad_token: str = AUTO, eos_token: str = AUTO, split: str | None = None,
                     field: list[str] = []) -> dict[str, Any]:  # noqa: B006
        return await call("sample", run, address, max_tokens, max_turns, _reading(locals()))

    @server.tool(description=_DESCRIPTIONS["metrics"])
    async def metrics(path: str, warnings: bool = False, ratio_max: float | None = None, clip_max: float | None = None,
                      spike_k: float | None = None, entropy_fraction: float | None = None,
                      kl_noise_k: float | None = None, limit: int | None = None) -> dict[str, Any]:
        values = {"path": path, "warnings": warnings, "ratio_max": ratio_max, "clip_max": clip_max, "spike_k": spike_k,
                  "entropy_fraction": entropy_fraction, "kl_noise_k": kl_noise_k}
        return await call("command", "metrics", values, limit=limit)

    @server.tool(description=_DESCRIPTIONS["diff"])
    async def diff(run_a: str, run_b: str, steps: str | None = None, steps_b: str | None = None, by: str = "prompt",
                   min_samples: int = 1, limit: int | None = None, pad_token: str = AUTO,
                   eos_token: str = AUTO, split: str | None = None, field: list[str] = [],  # noqa: B006
                   max_samples_per_step: int | None = None) -> dict[str, Any]:
        values = {"run_dir": run_a, "run_b": run_b, "steps": steps, "steps_b": steps_b, "by": by,
                  "min_samples": min_samples, **_reading(locals())}
        return await call("command", "diff", values, limit=limit)

    return server


_BOUNDED = (f" The answer is at most {MAX_ANSWER_CHARS:,} characters: `left_out` says how many items of each list "
            "were left out to fit.")
_DESCRIPTIONS = {
    "summary": "Per-step statistics of a run: `rl-board summary RUN --json` (docs: Using the commands). `run` is a "
               "run folder (or URL); `field` maps your keys (CANONICAL=SOURCE, e.g. reward=my_score). `limit`: "
               f"the steps given, spread evenly over the run, its first and last among them (default "
               f"{DEFAULT_LIMITS['summary']}, at most {MAX_LIMIT:,})." + _BOUNDED,
    "metrics": "The trainer's own scalars next to a run (TRL, verl, TensorBoard or a metrics JSONL), and with "
               "`warnings` (default false, as the command's --warnings) the warning signs (ratio, clip fraction, spikes, "
               "entropy collapse, negative KL) and the `thresholds` they were checked against (`warnings: []`: none "
               "fired); `ratio_max`, `clip_max`, `spike_k`, `entropy_fraction`, `kl_noise_k` move them: "
               "`rl-board metrics PATH --json [--warnings]`. `limit`: the points given of each series, spread evenly "
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
    "sample": "One sample by its address FILE:LINE, or FILE:LINE#K for the K-th of a line's samples (as findings "
              "give it and a search hit's `address`; the answer's `address`, `file`, `line`, `position` and `step` "
              "are the hit's), its images attached as "
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
