"""``rl-board mcp``: the board as a Model Context Protocol server on stdio, for coding agents.

Its tools are the commands' ``--json`` outputs: each tool builds the command line a person would type
(``findings RUN --json``), parses it with the commands' own parser and runs the command's own function,
so a tool returns exactly what the command prints, under the same limits, and a bad argument is a tool
error carrying the command's message (never the end of the server). The allowed folders are the page's
and the commands' (``RL_BOARD_ROOTS``, or ``--roots``): a run outside them is a tool error.

Needs the ``mcp`` extra (``pip install 'rl-board[mcp]'``); without it the command says so and exits 2.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import threading
from typing import Any

from ..base.defaults import MAX_SAMPLE_CHARS, MAX_SAMPLE_TOKENS, SAMPLE_TOKENS
from .parser import SEARCH_SHOWN

MAX_SEARCH_RESULTS = 500  # samples a search tool call lists at most (it still counts every match)
INSTRUCTIONS = ("Token-level views of RL training rollouts of language models. Start with `runs` to list the "
                "runs under the allowed folders, then `findings` (what went wrong, with sample addresses), "
                "`summary` (per-step statistics), `search`, `sample` (one sample by its FILE:LINE address) and "
                "`metrics` (the trainer's own scalars).")

_LOCK = threading.Lock()  # one command at a time: a command's output is read from this process's stdout


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
    """The runs under ``root`` (default: every allowed folder), as the page's runs list finds them."""
    from ..base.access import allowed_roots
    from ..store.discovery import discover_runs

    roots = [root] if root else [str(r) for r in (allowed_roots() or [])]
    if not roots:
        raise CommandFailed("error: give a root folder: this server allows every folder (no --roots, no "
                            "RL_BOARD_ROOTS), so it has none to list")
    out = {"roots": [], "runs": [], "unclaimed": [], "notes": []}
    for top in roots:
        try:
            found = discover_runs(top)
        except (ValueError, OSError) as exc:  # RootError, NoRunsError: their messages say why
            raise CommandFailed(f"error: {exc}") from None
        out["roots"].append(str(found.root))
        out["runs"] += [{"root": str(found.root), "name": run.name, "path": str(run.path), "format": run.format,
                         "splits": list(run.splits), "files": run.files, "size": run.size, "steps": run.steps,
                         "samples": run.samples} for run in found.runs]
        out["unclaimed"] += [{"root": str(found.root), "name": u.name, "reason": u.reason} for u in found.unclaimed]
        out["notes"] += found.notes
    return out


def sample_json(run_dir: str, address: str, max_tokens: int, options: list[str]) -> dict:
    """``analysis.address``'s JSON of one sample, the run read as the commands read it."""
    from ..analysis.address import AddressError, build_sample_json, find_sample
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
            return build_sample_json(run, find_sample(run, address), max_tokens)
        except (AddressError, SourceChanged, TokenizerError, OSError) as exc:
            raise CommandFailed(f"error: {exc}") from None


def build_server(mcp_server_class):
    """The server and its tools (``mcp_server_class``: the SDK's ``MCPServer``, imported by the caller)."""
    from mcp.server.mcpserver.exceptions import ToolError

    from ..analysis.report import board_version

    server = mcp_server_class("rl-board", instructions=INSTRUCTIONS, version=board_version())

    def call(work, *args) -> dict:
        try:
            return work(*args)
        except CommandFailed as exc:
            raise ToolError(str(exc)) from None

    @server.tool()
    def runs(root: str | None = None) -> dict[str, Any]:
        """The runs under a folder (default: every allowed folder): name, path, format, splits, files, size in
        bytes, steps and samples (null when not known without reading the run), and the folders of logs no
        reader opens."""
        return call(list_runs, root)

    @server.tool()
    def summary(run: str, pad_token: str | None = None, eos_token: str | None = None, split: str | None = None,
                fields: list[str] | None = None, max_samples_per_step: int | None = None) -> dict[str, Any]:
        """Per-step statistics of a run: `rl-board summary RUN --json` (docs: Using the commands). `run` is a
        run folder (or URL); `fields` maps your keys (CANONICAL=SOURCE, e.g. reward=my_score)."""
        options = _read_options(pad_token, eos_token, split, fields, max_samples_per_step)
        return call(run_command, ["summary", run, "--json", *options])

    @server.tool()
    def findings(run: str, pad_token: str | None = None, eos_token: str | None = None, split: str | None = None,
                 fields: list[str] | None = None, max_samples_per_step: int | None = None) -> dict[str, Any]:
        """What went wrong in a run, most worrying first, each with its steps, evidence and sample addresses
        (FILE:LINE, for the `sample` tool): `rl-board findings RUN --json`."""
        options = _read_options(pad_token, eos_token, split, fields, max_samples_per_step)
        return call(run_command, ["findings", run, "--json", *options])

    @server.tool(description=_DESCRIPTIONS["search"])
    def search(run: str, regex: str | None = None, text_field: str = "response", truncated: bool = False,
               tag: str | None = None, fault: str | None = None, steps: str | None = None,
               ranges: list[str] | None = None, sort: str | None = None, ascending: bool = False, limit: int = SEARCH_SHOWN,
               pad_token: str | None = None, eos_token: str | None = None, split: str | None = None,
               fields: list[str] | None = None, max_samples_per_step: int | None = None) -> dict[str, Any]:
        argv = ["search", run, "--json", "--in", text_field, "--limit", str(min(limit, MAX_SEARCH_RESULTS))]
        for flag, value in (("--regex", regex), ("--tag", tag), ("--fault", fault), ("--steps", steps), ("--sort", sort)):
            if value is not None:
                argv += [flag, value]
        argv += [f"--range={text}" for text in ranges or []]
        argv += ["--truncated"] * truncated + ["--ascending"] * ascending
        return call(run_command, argv + _read_options(pad_token, eos_token, split, fields, max_samples_per_step))

    @server.tool(description=_DESCRIPTIONS["sample"])
    def sample(run: str, address: str, max_tokens: int = SAMPLE_TOKENS, pad_token: str | None = None,
               eos_token: str | None = None, split: str | None = None, fields: list[str] | None = None
               ) -> dict[str, Any]:
        options = _read_options(pad_token, eos_token, split, fields, None)
        return call(sample_json, run, address, max_tokens, options)

    @server.tool()
    def metrics(path: str, warnings: bool = True) -> dict[str, Any]:
        """The trainer's own scalars next to a run (TRL, verl, TensorBoard or a metrics JSONL), and with
        `warnings` the warning signs (ratio, clip fraction, spikes, entropy collapse, negative KL):
        `rl-board metrics PATH --json --warnings`."""
        return call(run_command, ["metrics", path, "--json", *(["--warnings"] if warnings else [])])

    @server.tool()
    def diff(run_a: str, run_b: str, steps: str | None = None, steps_b: str | None = None, by: str = "prompt",
             min_samples: int = 1, pad_token: str | None = None, eos_token: str | None = None,
             split: str | None = None, fields: list[str] | None = None,
             max_samples_per_step: int | None = None) -> dict[str, Any]:
        """Two runs (or two step ranges of one run) prompt by prompt: each prompt's samples and mean reward in A
        and B, `delta` = mean B - mean A, most negative first: `rl-board diff RUN_A RUN_B --json`. `steps`: A:B
        of RUN_A (and of RUN_B unless `steps_b`); `by`: prompt (its text without pads) or id (a logged prompt id)."""
        argv = ["diff", run_a, run_b, "--json", "--by", by, "--min-samples", str(min_samples)]
        for flag, value in (("--steps", steps), ("--steps-b", steps_b)):
            if value is not None:
                argv += [flag, value]
        return call(run_command, argv + _read_options(pad_token, eos_token, split, fields, max_samples_per_step))

    return server


_DESCRIPTIONS = {
    "search": "The samples of a run whose text or numbers match: `rl-board search RUN --json`. `regex`: RE2, (?i) "
              "for case-insensitive; `text_field`: prompt, response, ref_response, ground_truth or messages; "
              "`steps`: A:B; `ranges`: NAME=LOW:HIGH each; `fault`: a turn fault kind (tool_error, tool_loop, "
              "malformed_tool_call, truncated, empty_final_answer) or any, each sample then listing its faults "
              "(kind, message_index, assistant_turn); `sort`: a number's name, highest first. `limit`: "
              f"samples listed (default {SEARCH_SHOWN}, at most {MAX_SEARCH_RESULTS}); `matches` counts them all.",
    "sample": "One sample by its address FILE:LINE (as findings and search give it): its numbers, prompt, "
              "response, turns (role, content, tool calls), turn faults (kind, message_index, assistant_turn) and "
              "its first `max_tokens` token positions with their "
              f"per-token numbers (default {SAMPLE_TOKENS}, at most {MAX_SAMPLE_TOKENS}); `n_tokens` counts them "
              f"all, `cut` names the texts cut (at {MAX_SAMPLE_CHARS:,} characters).",
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
