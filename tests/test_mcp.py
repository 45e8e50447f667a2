"""``rl-board mcp``: a real MCP session with the SDK's own client over stdio, against the server started as
a coding agent starts it (``python -m rl_board mcp --roots …``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed (requirements-dev.txt pins it)")

SAMPLES = REPO / "rollout_samples"
PPO = SAMPLES / "ppo_demo"


def _session(calls, roots=SAMPLES):
    """Start the server on ``roots``, list its tools and make each call of ``calls`` ((name, arguments)) in
    one session; (tool names, [CallToolResult…])."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def talk():
        params = StdioServerParameters(command=sys.executable, args=["-m", "rl_board", "mcp", "--roots", str(roots)],
                                       env=dict(os.environ), cwd=str(REPO))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                results = [await session.call_tool(name, arguments) for name, arguments in calls]
        return [tool.name for tool in tools.tools], results

    return asyncio.run(asyncio.wait_for(talk(), 240))


def _cli_json(*args) -> dict:
    """What the command prints with ``--json``, run as its own process (the reference the tools must match)."""
    proc = subprocess.run([sys.executable, "-m", "rl_board", *args, "--json"], capture_output=True, text=True,
                          cwd=REPO, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_tools_and_findings_are_the_commands():
    """The server lists its tools; its findings on ppo_demo are the kinds, steps and samples that
    ``rl-board findings --json`` prints, in the same order."""
    names, (result, diffed) = _session([("findings", {"run": str(PPO)}),
                                        ("diff", {"run_a": str(PPO), "run_b": str(PPO), "steps": "1:15",
                                                  "steps_b": "16:30"})])
    assert set(names) == {"runs", "summary", "findings", "search", "sample", "metrics", "diff"}
    assert not diffed.is_error, diffed.content
    assert diffed.structured_content == _cli_json("diff", str(PPO), str(PPO), "--steps", "1:15", "--steps-b", "16:30")
    assert not result.is_error, result.content
    expected = _cli_json("findings", str(PPO))
    assert [f["kind"] for f in result.structured_content["findings"]] == [f["kind"] for f in expected["findings"]]
    assert result.structured_content == expected


def test_bad_input_is_a_tool_error_and_the_server_goes_on(tmp_path):
    """A run outside the roots, a bad regular expression and an unknown sample address are tool errors with
    the command's message; the call after them still answers."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "rank0.jsonl").write_text(json.dumps({"step": 1, "reward": 1.0, "response": "x"}) + "\n")
    _, results = _session([("findings", {"run": str(outside)}),
                           ("search", {"run": str(PPO), "regex": "("}),
                           ("sample", {"run": str(PPO), "address": "rollout_data_rank0.jsonl:999999"}),
                           ("runs", {})])
    outside_error, regex_error, address_error, listing = results
    assert outside_error.is_error and "outside the allowed folders" in outside_error.content[0].text
    assert regex_error.is_error and "not a valid RE2 regular expression" in regex_error.content[0].text
    assert address_error.is_error and "no sample rollout_data_rank0.jsonl:999999" in address_error.content[0].text
    assert not listing.is_error
    # every folder of rollout_samples is one run
    assert sorted(run["name"] for run in listing.structured_content["runs"]) == sorted(
        p.name for p in SAMPLES.iterdir() if p.is_dir())


def test_search_is_capped_and_sample_gives_its_tokens():
    """search lists at most ``limit`` samples and counts every match (as the command does); sample gives the
    first ``max_tokens`` tokens and log-probs of the line at its address, read here from the file itself."""
    line = 5
    raw = json.loads((PPO / "rollout_data_rank0.jsonl").read_text().splitlines()[line - 1])
    _, (found, one) = _session([("search", {"run": str(PPO), "regex": "correct", "limit": 2}),
                                ("sample", {"run": str(PPO), "address": f"rollout_data_rank0.jsonl:{line}",
                                            "max_tokens": 3})])
    expected = _cli_json("search", str(PPO), "--regex", "correct")
    assert found.structured_content["matches"] == expected["matches"] > 2
    assert found.structured_content["samples"] == expected["samples"][:2]
    sample = one.structured_content
    assert sample["address"] == f"rollout_data_rank0.jsonl:{line}" and sample["step"] == raw["step"]
    assert sample["prompt"] == raw["prompt"] and sample["reward"] == raw["reward"]
    assert sample["tokens"]["token"] == raw["response_tokens"][:3]
    assert sample["tokens"]["logp"] == raw["logprobs"][:3]
    assert sample["n_tokens"] == len(raw["response_tokens"])


def test_without_the_extra_the_command_says_what_to_install():
    """With the SDK not importable, ``rl-board mcp`` exits 2 naming the extra, and ``rl-board --help`` works."""
    program = ("import sys; sys.modules['mcp'] = None; from rl_board.cli import main; "
               "sys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", program, "mcp"], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert proc.returncode == 2 and "pip install 'rl-board[mcp]'" in proc.stderr
    proc = subprocess.run([sys.executable, "-c", program, "--help"], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert proc.returncode == 0 and "mcp" in proc.stdout and "report" in proc.stdout


def test_search_filters_by_fault_as_the_command_does():
    """search with ``fault`` lists the same samples, with their faults, as ``search --fault KIND --json``; sample
    gives the first one's faults."""
    agents = SAMPLES / "prime_rl_agent_demo"
    expected = _cli_json("search", str(agents), "--fault", "tool_loop")
    first = expected["samples"][0]
    _, (found, one) = _session([("search", {"run": str(agents), "fault": "tool_loop", "limit": 3}),
                                ("sample", {"run": str(agents), "address": f"{first['file']}:{first['line']}"})])
    assert found.structured_content["matches"] == expected["matches"] > 3
    assert found.structured_content["samples"] == expected["samples"][:3]
    assert one.structured_content["faults"] == first["faults"]
    assert all(any(f["kind"] == "tool_loop" for f in s["faults"]) for s in expected["samples"])
