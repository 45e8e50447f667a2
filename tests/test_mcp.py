"""``rl-board mcp``: a real MCP session with the SDK's own client over stdio, against the server started as
a coding agent starts it (``python -m rl_board mcp --roots …``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, write_lines

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


@pytest.mark.slow
def test_tools_and_findings_are_the_commands():
    """The server lists its tools; its findings on ppo_demo are the kinds, steps and samples that
    ``rl-board findings --json`` prints, in the same order."""
    names, (result, diffed) = _session([("findings", {"run": str(PPO)}),
                                        ("diff", {"run_a": str(PPO), "run_b": str(PPO), "steps": "1:15",
                                                  "steps_b": "16:30"})])
    assert set(names) == {"runs", "summary", "findings", "search", "sample", "metrics", "diff"}
    assert not diffed.is_error, diffed.content
    whole = _cli_json("diff", str(PPO), str(PPO), "--steps", "1:15", "--steps-b", "16:30")
    left = len(whole["prompts"]) - 20  # the tool gives the first 20 prompts by default and counts the rest
    assert diffed.structured_content == {**whole, "prompts": whole["prompts"][:20],
                                         "left_out": {"prompts": left} if left > 0 else {}}
    assert not result.is_error, result.content
    expected = _cli_json("findings", str(PPO))
    assert [f["kind"] for f in result.structured_content["findings"]] == [f["kind"] for f in expected["findings"]]
    assert result.structured_content == expected


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_sample_gives_its_first_turns_and_counts_the_rest(tmp_path):
    """A sample of 2,000 turns: ``sample`` gives its first 50 (the default) or ``max_turns`` of them, each as
    written, with ``n_turns`` 2,000 and ``turns_left_out`` the rest."""
    run = tmp_path / "agent"
    run.mkdir()
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * (i % 7)}
             for i in range(2_000)]
    (run / "rank0.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5, "messages": turns}) + "\n")
    _, (default, seven) = _session([("sample", {"run": str(run), "address": "rank0.jsonl:1"}),
                                    ("sample", {"run": str(run), "address": "rank0.jsonl:1", "max_turns": 7})],
                                   roots=tmp_path)
    for result, shown in ((default, 50), (seven, 7)):
        assert not result.is_error, result.content
        sample = result.structured_content
        assert [(t["role"], t["content"]) for t in sample["turns"]] == [(t["role"], t["content"])
                                                                      for t in turns[:shown]]
        assert sample["n_turns"] == 2_000 and sample["turns_left_out"] == 2_000 - shown


def _write_small_run(folder, reward: float):
    folder.mkdir()
    (folder / "rank0.jsonl").write_text("".join(json.dumps({"step": step, "reward": reward, "prompt": "p",
                                                            "response": "a b"}) + "\n" for step in range(1, 5)))


def _workers_on(run) -> list[int]:
    """The ids of the processes that are the server's workers on ``run`` (their request names it)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = open(f"/proc/{entry}/cmdline", "rb").read().decode("utf-8", "replace")
            except OSError:
                continue
            if "_work()" in command and str(run) in command:
                found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the server's worker processes in /proc")
def test_a_blocked_call_waits_for_no_one_and_ends_when_abandoned_or_late(tmp_path):
    """While a call on run A waits (the test holds A's cache lock), a call on run B answers with what the command
    prints, A's worker still waiting; when the client abandons A's call its worker process is ended; a server
    whose calls may take 3 s ends A's call with an error naming the limit, its worker gone."""
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from rl_board.store.cache import RunCache

    run_a, run_b = tmp_path / "a", tmp_path / "b"
    _write_small_run(run_a, 0.0)
    _write_small_run(run_b, 1.0)
    cache = tmp_path / "cache"
    env = {**os.environ, "RL_BOARD_CACHE_DIR": str(cache)}
    subprocess.run([sys.executable, "-m", "rl_board", "index", str(run_a)], env=env, cwd=REPO, check=True,
                   capture_output=True, timeout=240)
    folder = next(p for p in cache.iterdir() if p.is_dir() and p.name.startswith("a-"))
    expected_b = _cli_json("summary", str(run_b))

    async def until(check, seconds=60):
        with anyio.fail_after(seconds):
            while not check():
                await anyio.sleep(0.1)

    async def talk(limit: str | None):
        server_env = {**env, **({"RL_BOARD_MCP_SECONDS": limit} if limit else {})}
        params = StdioServerParameters(command=sys.executable, args=["-m", "rl_board", "mcp", "--roots",
                                                                     str(tmp_path)], env=server_env, cwd=str(REPO))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            if limit:
                late = await session.call_tool("summary", {"run": str(run_a)})
                return late, _workers_on(run_a)
            async with anyio.create_task_group() as group:
                group.start_soon(session.call_tool, "summary", {"run": str(run_a)})
                await until(lambda: _workers_on(run_a))
                with anyio.fail_after(120):  # a server whose calls wait for each other never answers it
                    answered = await session.call_tool("summary", {"run": str(run_b)})
                waiting = _workers_on(run_a)
                group.cancel_scope.cancel()  # the client abandons A's call
            await until(lambda: not _workers_on(run_a))
            return answered, waiting

    with RunCache(folder).locked():
        answered, waiting = anyio.run(talk, None)
        late, left = anyio.run(talk, "3")
    assert not answered.is_error, answered.content
    assert answered.structured_content == {**expected_b, "left_out": {}} and waiting
    assert late.is_error and "took longer than 3 s" in late.content[0].text and "RL_BOARD_MCP_SECONDS" in late.content[0].text
    assert left == []


@pytest.mark.slow
def test_every_answer_fits_its_bound_and_counts_what_it_left_out(tmp_path):
    """Over a run of 160 steps (and a sample of 2,000 turns and 3,000 tokens, 100 prompts of 2,000
    characters): summary, search, diff, metrics and sample each return at most 20,000 characters of JSON by
    default; summary gives 20 steps spread evenly, first and last among them, each as the command prints it,
    search 50 per_step entries, and ``left_out`` counts the rest of every list cut."""
    import numpy as np

    for name, reward in (("a", 0.0), ("b", 1.0)):
        lines = [{"step": step, "reward": reward, "prompt": f"prompt {step % 100:03d} " + "q" * 2_000,
                  "response": "answer " + "w " * 20} for step in range(1, 161) for _ in range(2)]
        if name == "a":
            lines[0] = {**lines[0], "messages": [{"role": "user", "content": f"turn {i} " + "t" * 1_000}
                                                 for i in range(2_000)],
                        "response_tokens": [f"t{i}" for i in range(3_000)], "logprobs": [-0.5] * 3_000}
        (tmp_path / name).mkdir()
        (tmp_path / name / "rank0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "a" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, **{f"series_{k}/value": step * 0.001 + k for k in range(40)}}) + "\n"
        for step in range(1, 161)))
    run_a, run_b = str(tmp_path / "a"), str(tmp_path / "b")
    _, results = _session([("summary", {"run": run_a}), ("summary", {"run": run_a, "limit": 5}),
                           ("search", {"run": run_a, "regex": "answer"}), ("diff", {"run_a": run_a, "run_b": run_b}),
                           ("metrics", {"path": str(tmp_path / "a" / "metrics.jsonl")}),
                           ("sample", {"run": run_a, "address": "rank0.jsonl:1"})], roots=tmp_path)
    for result in results:
        assert not result.is_error, result.content
        assert len(json.dumps(result.structured_content, ensure_ascii=False)) <= 20_000
    summary, five, found, diffed, metrics, sample = (r.structured_content for r in results)
    whole = _cli_json("summary", run_a)
    by_step = {s["step"]: s for s in whole["steps"]}
    for answer, count in ((summary, 20), (five, 5)):
        spread = [int(i) + 1 for i in np.linspace(0, 159, count).round()]  # indices of the 160 steps
        assert [s["step"] for s in answer["steps"]] == spread
        assert all(s == by_step[s["step"]] for s in answer["steps"])
        assert answer["left_out"] == {"steps": 160 - count}
    assert found["matches"] == 320 and len(found["per_step"]) == 50 and found["left_out"]["per_step"] == 110
    assert diffed["matched"] == 100 and diffed["left_out"]["prompts"] == 100 - len(diffed["prompts"])
    assert sum(len(points) + metrics["left_out"].get(f"series.{name}", 0)
               for name, points in metrics["series"].items()) == 160 * len(metrics["series"])
    assert sample["n_turns"] == 2_000 and sample["turns"][0]["content"].startswith("turn 0 ")
    kept = len(sample["turns"]) + sample["left_out"].get("turns", 0)
    assert kept == 50 and sample["turns_left_out"] == 1_950  # the tool's max_turns, then the bound
    assert len(sample["tokens"]["token"]) + sample["left_out"].get("tokens", 0) == 256 and sample["n_tokens"] == 3_000


@pytest.mark.slow
def test_a_run_named_as_the_runs_tool_names_it_opens_under_the_roots(tmp_path):
    """The server runs in the repository's folder; ``team/exp``, the name the ``runs`` tool gives a run under
    the allowed folder, opens that run in ``summary`` and ``sample`` (not a folder of the working folder), and
    a name no allowed folder holds is refused."""
    write_lines(tmp_path / "team" / "exp" / "rollout_data_rank0.jsonl",
                [{"step": 1, "reward": 0.5, "response": "a"}, {"step": 2, "reward": 1.5, "response": "b"}])
    _, (listed, summary, one, missing) = _session([
        ("runs", {}), ("summary", {"run": "team/exp"}),
        ("sample", {"run": "team/exp", "address": "rollout_data_rank0.jsonl:2"}),
        ("summary", {"run": "team/nope"})], roots=tmp_path)
    assert [r["name"] for r in listed.structured_content["runs"]] == ["team/exp"]
    assert not summary.is_error, summary.content
    assert [(s["step"], s["reward_mean"]) for s in summary.structured_content["steps"]] == [(1, 0.5), (2, 1.5)]
    assert not one.is_error and (one.structured_content["step"], one.structured_content["response"]) == (2, "b")
    assert missing.is_error
@pytest.mark.slow
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


def test_each_tool_takes_the_command_s_arguments_by_their_names_and_defaults():
    """Every parameter of a tool that is a command (and the sample tool's read options, the summary's) is an
    argument of that command by the same name and with the same default, a required one for a required
    one; and every argument of the command is a parameter of its tool unless ``NOT_OFFERED`` says why not.
    Only ``limit`` (the answer's bound) and the sample tool's own ``address``, ``max_tokens`` and ``max_turns``
    are the tools' alone."""
    from mcp.server.mcpserver import MCPServer

    from rl_board.cli.mcp_server import NOT_OFFERED, POSITIONAL, build_server
    from rl_board.cli.parser import command_parser

    tools = asyncio.run(build_server(MCPServer).list_tools())
    assert {t.name for t in tools} == {"runs", "summary", "findings", "search", "sample", "metrics", "diff"}
    for tool in tools:
        command = "summary" if tool.name == "sample" else tool.name
        actions = {a.dest: a for a in command_parser(command)._actions if a.dest != "help"}
        schema = tool.input_schema
        own = {"limit"} | ({"address", "max_tokens", "max_turns"} if tool.name == "sample" else set())
        for name, spec in schema["properties"].items():
            if name in own:
                continue
            dest = POSITIONAL.get(name, name)
            assert dest in actions, (tool.name, name)
            action = actions[dest]
            required = action.required or (not action.option_strings and action.nargs is None)
            assert (name in schema.get("required", [])) == required, (tool.name, name)
            if not required:
                assert spec.get("default") == action.default, (tool.name, name, spec.get("default"), action.default)
        offered = {POSITIONAL.get(n, n) for n in schema["properties"]}
        # the sample tool opens one sample by its address: a per-step cap could only hide it
        left = set(actions) - offered - set(NOT_OFFERED) - ({"max_samples_per_step"} if tool.name == "sample" else set())
        assert left == set(), (tool.name, left)


def test_a_command_s_arguments_are_made_as_its_parser_makes_them():
    """``command_args`` gives a command's defaults for what is not given, puts a text or a number through the
    argument's type ('none' turns the pad token off, a limit of 0 is refused as on the command line) and
    refuses a name the command does not take and a value outside an argument's choices, naming the flag."""
    from pathlib import Path

    from rl_board.cli.parser import command_args

    args = command_args("search", {"run_dir": "runs/a", "pad_token": "none", "limit": 3})
    assert (args.run_dir, args.pad_token, args.eos_token, args.limit, args.field, args.json) == \
        (Path("runs/a"), None, "auto", 3, [], True)
    for values, flag in (({"limit": 0}, "--limit"), ({"fault": "nope"}, "--fault"), ({"min_samples": -1}, "--min-samples"),
                         ({"colour": "red"}, "colour")):
        command = "diff" if "min_samples" in values else "search"
        with pytest.raises(ValueError, match=flag):
            command_args(command, {"run_dir": "a", **values})
@pytest.mark.slow
def test_diff_tool_says_why_nothing_matches_and_how_far_apart(tmp_path):
    """The diff tool on two runs with no prompt in common gives the reason with each side's first prompt; on
    two that share one, the mean step distance (steps 1 and 3 against 10: 8)."""
    write_lines(tmp_path / "a" / "r.jsonl", [{"step": 1, "prompt": "Add 2 and 3.", "reward": 1.0},
                                             {"step": 3, "prompt": "Add 2 and 3.", "reward": 1.0}])
    write_lines(tmp_path / "b" / "r.jsonl", [{"step": 1, "prompt": "Question: add 2 and 3", "reward": 0.0}])
    write_lines(tmp_path / "c" / "r.jsonl", [{"step": 10, "prompt": "Add 2 and 3.", "reward": 0.0}])
    _, (none, apart) = _session([("diff", {"run_a": str(tmp_path / "a"), "run_b": str(tmp_path / "b")}),
                                 ("diff", {"run_a": str(tmp_path / "a"), "run_b": str(tmp_path / "c")})],
                                roots=tmp_path)
    assert not none.is_error and not apart.is_error, (none.content, apart.content)
    assert none.structured_content["no_match"] == {
        "why": "No prompt of A is a prompt of B, matched by their text (pads removed). A's first prompt: "
               "'Add 2 and 3.'; B's first prompt: 'Question: add 2 and 3'.",
        "a_first_prompt": "Add 2 and 3.", "b_first_prompt": "Question: add 2 and 3"}
    assert apart.structured_content["step_distance"] == 8.0
    assert apart.structured_content["prompts"][0]["step_distance"] == 8.0
