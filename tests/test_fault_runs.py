"""Turn faults on agent runs written by each trainer's writer code (verl's agent loop, SkyRL, rLLM, prime-rl):
``search --fault`` finds exactly the planted trajectories and names the failing turn; no look-alike is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_writers import (
    v1_window_message,
    v1_window_node,
    v1_window_trace,
    v1_window_usage,
    write_prime_rl_window,
    write_rllm,
)
from conftest import command
from ray_writers import call, skyrl_dump_evals, skyrl_prompt, skyrl_response, verl_dump, verl_sample

from rl_board.analysis.search import Query, compute_faults, compute_match_mask
from rl_board.analysis.source import load_run

# Rounds as the ray writers take them: [assistant message] or [tool messages...]. Every conversation starts with a
# system and a user message (0 and 1), so the response's first turn is message 2.
SEARCH = [{"role": "assistant", "content": "Let me search.", "tool_calls": [call("search", query="Zürich")]}]
CALC = [{"role": "assistant", "content": "", "tool_calls": [call("calc", expr="2+2")]}]
BROKEN = [{"role": "assistant", "content": '<tool_call>\n{"name": "search", "arguments": {"query": }\n</tool_call>'}]
FOUND = [{"role": "tool", "content": "443037"}]
FAILED = [{"role": "tool", "content": "Error: connection refused"}]
WORDY = [{"role": "tool", "content": "No error found; the error margin of the census is 2%."}]
ANSWER = [{"role": "assistant", "content": "About 443 000."}]
LONG = [{"role": "assistant", "content": "Zürich has about 443 000 people. " * 300}]
THINKING = [{"role": "assistant", "content": "<think>I am not sure what to answer.</think>"}]
PARTIAL = [{"role": "assistant", "content": "The population of Zürich is"}]

# name -> (rounds, the faults planted: (kind, message index, assistant turn), counted by hand)
CASES = {
    "tool_error": ([SEARCH, FAILED, ANSWER], [("tool_error", 3, 0)]),
    "error_word": ([SEARCH, WORDY, ANSWER], []),
    "loop": ([SEARCH, FOUND, SEARCH, FOUND, SEARCH, FOUND, ANSWER], [("tool_loop", 2, 0)]),
    "twice": ([SEARCH, FOUND, SEARCH, FOUND, ANSWER], []),
    "apart": ([SEARCH, FOUND, SEARCH, FOUND, CALC, FOUND, SEARCH, FOUND, ANSWER], []),
    "malformed": ([BROKEN, FOUND, ANSWER], [("malformed_tool_call", 2, 0)]),
    "empty": ([SEARCH, FOUND, THINKING], [("empty_final_answer", 4, 1)]),
    "long": ([SEARCH, FOUND, LONG], []),
}
ORDER = list(CASES)
TRUNCATED = ([SEARCH, FOUND, PARTIAL], [("truncated", 4, 1)])  # where the trainer records the stop


def _expected(names) -> dict[int, list[dict]]:
    """Line (1-based, in the order written) -> the faults planted there, for the faulted lines only."""
    return {i + 1: [{"kind": k, "message_index": m, "assistant_turn": t} for k, m, t in CASES[name][1]]
            for i, name in enumerate(names) if CASES[name][1]}


def _search(run: Path, kind: str = "any") -> dict:
    proc = command("search", str(run), "--fault", kind, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _by_line(result: dict) -> dict[int, list[dict]]:
    return {s["line"]: s["faults"] for s in result["samples"]}


def _openai(rounds) -> list[dict]:
    """The rounds as OpenAI chat messages with call ids (rLLM's chat completions, prime-rl's messages)."""
    out, ids = [], 0
    for group in rounds:
        for message in group:
            message = dict(message)
            if message.get("tool_calls"):
                message["tool_calls"] = [{"id": f"c{ids + k}", "type": "function", "function": {
                    "name": c["name"], "arguments": json.dumps(c["arguments"])}} for k, c in enumerate(message["tool_calls"])]
                ids += len(message["tool_calls"])
            elif message["role"] == "assistant" and "<tool_call>" in message["content"]:  # a call that didn't parse
                message = {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{ids}", "type": "function",
                           "function": {"name": "search", "arguments": '{"query": }'}}]}
                ids += 1
            if message["role"] == "tool":
                message["tool_call_id"] = f"c{ids - 1}"
            out.append(message)
    return out


SYSTEM = {"role": "system", "content": "Answer with tools."}


def test_verl_agent_loop_faults(tmp_path):
    """verl's tool agent loop dumps (glued text, no stop reason recorded): each planted fault found at its turn."""
    pairs = [verl_sample(f"Q{i}", CASES[name][0]) for i, name in enumerate(ORDER)]
    verl_dump(tmp_path / "exp" / "rollout_data", 1, [p[0] for p in pairs], [p[1] for p in pairs], ["gt"] * len(pairs),
              [0.0] * len(pairs), {})
    result = _search(tmp_path / "exp" / "rollout_data")
    assert _by_line(result) == _expected(ORDER)


def test_skyrl_faults_and_recorded_length_stop(tmp_path):
    """SkyRL's eval dumps: the planted faults, and stop_reason "length" as a truncation at the last assistant turn."""
    names = [*ORDER, "truncated"]
    rounds = [CASES[n][0] for n in ORDER] + [TRUNCATED[0]]
    outputs = {"prompt_token_ids": [skyrl_prompt(f"Q{i}") for i in range(len(names))],
               "response_ids": [skyrl_response(r) for r in rounds], "rewards": [0.0] * len(names),
               "stop_reasons": ["stop"] * len(ORDER) + ["length"]}
    skyrl_dump_evals(tmp_path / "export", 10, outputs, ["search"] * len(names), ["search"] * len(names),
                     [{}] * len(names), {})
    expected = {**_expected(ORDER), len(names): [{"kind": "truncated", "message_index": 4, "assistant_turn": 1}]}
    assert _by_line(_search(tmp_path / "export")) == expected


def test_rllm_faults_and_termination_reason(tmp_path):
    """rLLM episodes (cumulative chat completions, call ids): the planted faults, and an episode ended with
    max_response_length_exceeded as a truncation; one kind filters to its own trajectories."""
    episodes = tmp_path / "logs" / "episodes"
    for i, name in enumerate(ORDER):
        messages = [SYSTEM, {"role": "user", "content": f"Q{i}"}, *_openai(CASES[name][0])]
        write_rllm(episodes, 1, "train", f"e{i}", [{"reward": 0.0, "steps": [{"chat_completions": messages}]}],
                   False, {})
    messages = [SYSTEM, {"role": "user", "content": "Q"}, *_openai(TRUNCATED[0])]
    write_rllm(episodes, 1, "train", "t", [{"reward": 0.0, "steps": [{"chat_completions": messages}]}], False, {},
               termination_reason="max_response_length_exceeded")
    run = load_run(episodes, cache_root=False)
    names = {Path(run.files[f]).name: f for f in range(len(run.files))}
    keep = compute_match_mask(run, Query(fault="any"))
    found = run.samples[keep]
    got = {run.files[int(f)]: faults for f, faults in zip(found["file"], compute_faults(run, found))}
    expected = {next(n for n in names if n.endswith(f"_ide{i}.json")): _expected([name])[1]
                for i, name in enumerate(ORDER) if CASES[name][1]}
    expected[next(n for n in names if n.endswith("_idt.json"))] = [
        {"kind": "truncated", "message_index": 4, "assistant_turn": 1}]
    assert {Path(k).name: v for k, v in got.items()} == expected
    frame = run.to_pandas()
    assert {i.split(":")[0].rsplit("/", 1)[-1]: kinds for i, kinds in frame["faults"].items() if kinds} == {
        name: [f["kind"] for f in faults] for name, faults in expected.items()}
    sample_id = next(i for i in frame.index if i.startswith(f"train_step_1_epoch_0/{next(iter(expected))}"))
    assert run.sample_faults(sample_id) == expected[next(iter(expected))]
    loops = run.samples[compute_match_mask(run, Query(fault="tool_loop"))]
    assert [Path(run.files[int(f)]).name for f in loops["file"]] == [
        next(n for n in names if n.endswith(f"_ide{ORDER.index('loop')}.json"))]


def _window_trace(i: int, rounds, finish_last: str = "stop") -> dict:
    messages = [SYSTEM, {"role": "user", "content": f"Q{i}"}, *_openai(rounds)]
    nodes = []
    for k, m in enumerate(messages):
        parent = None if k == 0 else k - 1
        if m["role"] == "assistant":
            calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                     for c in m.get("tool_calls") or []] or None
            finish = finish_last if k == len(messages) - 1 else "tool_calls"
            nodes.append(v1_window_node(v1_window_message("assistant", m["content"], tool_calls=calls), parent,
                                        [6, 7, 8], [False, True, True], [-0.1, -0.2], sampled=True,
                                        finish_reason=finish, usage=v1_window_usage(10, 2)))
        elif m["role"] == "tool":
            nodes.append(v1_window_node(v1_window_message("tool", m["content"], tool_call_id=m["tool_call_id"],
                                                          name="search"), parent, [9], [False], []))
        else:
            nodes.append(v1_window_node(v1_window_message(m["role"], m["content"]), parent, [1, 2], [False, False], []))
    return v1_window_trace(f"t{i}", {"idx": i, "prompt": f"Q{i}"}, nodes, {"correct": 0.0}, {}, start=1782259200.0)


def test_prime_rl_faults_and_length_finish(tmp_path):
    """prime-rl's saved v1 traces: the planted faults, and a last node whose finish_reason is "length" as a
    truncation at that turn."""
    traces = [_window_trace(i, CASES[name][0]) for i, name in enumerate(ORDER)]
    traces.append(_window_trace(len(ORDER), TRUNCATED[0], finish_last="length"))
    write_prime_rl_window(tmp_path / "out", 1, "train_rollouts.jsonl", traces)
    expected = {**_expected(ORDER), len(traces): [{"kind": "truncated", "message_index": 4, "assistant_turn": 1}]}
    assert _by_line(_search(tmp_path / "out")) == expected


@pytest.mark.parametrize("kind", ["tool_error", "empty_final_answer"])
def test_one_kind_lists_only_its_trajectories(tmp_path, kind):
    """--fault KIND keeps only the trajectories with that kind (verl dumps)."""
    pairs = [verl_sample(f"Q{i}", CASES[name][0]) for i, name in enumerate(ORDER)]
    verl_dump(tmp_path / "exp" / "rollout_data", 1, [p[0] for p in pairs], [p[1] for p in pairs], ["gt"] * len(pairs),
              [0.0] * len(pairs), {})
    run = load_run(tmp_path / "exp" / "rollout_data", cache_root=False)
    keep = compute_match_mask(run, Query(fault=kind))
    assert run.samples.loc[keep, "line"].tolist() == [i + 1 for i, name in enumerate(ORDER)
                                                      if any(f[0] == kind for f in CASES[name][1])]


def test_fault_filter_on_a_run_without_turns_says_so():
    """--fault on a run whose samples have no turns matches nothing and says why on stderr."""
    proc = command("search", "rollout_samples/ppo_demo", "--fault", "any", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["matches"] == 0
    assert "no sample of this run has turns" in proc.stderr
