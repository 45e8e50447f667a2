"""Write tests/data/prime_rl_v1_run the way prime-rl's orchestrator wrote its output folder from June 23 to
July 9, 2026 (``python tests/make_prime_rl_v1_fixtures.py tests/data``): ``rollouts/step_N/train_rollouts.jsonl``
(the batch shipped at step N) and ``eval_rollouts_{env}.jsonl`` (the eval of step N's checkpoint), each line one
verifiers v1 ``Trace`` (``agent_writers.write_prime_rl_window``), and the trainer's ``train_rollouts.bin`` beside
them. Step 0 has the trace of verifiers 7c347f6 (June 23: no ``is_content``, no ``extra_usage``), step 1 that of
verifiers 9c6b155 (July 8). test_prime_rl_v1 checks that this script writes the committed bytes."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agent_writers import (  # noqa: E402
    v1_window_message,
    v1_window_node,
    v1_window_task,
    v1_window_trace,
    v1_window_usage,
    write_prime_rl_window,
)

NAME = "prime_rl_v1_run"
message = v1_window_message
GEN = [6]  # the generation prompt's scaffold, on every assistant node (not trained)
CALL = {"id": "call_0", "name": "calc", "arguments": '{"expr": "2+3"}'}
T0 = 1782259200.0  # 2026-06-24 00:00 UTC


def sampled(msg: dict, parent: int | None, completion: list[int], logprobs: list[float], finish: str,
            june_23: bool) -> dict:
    """An assistant node: the generation prompt then the sampled completion (trained), its log-probs compact."""
    return v1_window_node(msg, parent, GEN + completion, [False] * len(GEN) + [True] * len(completion), logprobs,
                          sampled=True, finish_reason=finish, usage=v1_window_usage(10, len(completion)),
                          with_is_content=not june_23)


def given(msg: dict, parent: int | None, token_ids: list[int], june_23: bool) -> dict:
    """An input message's node: its span of the prompt, nothing trained."""
    return v1_window_node(msg, parent, token_ids, [False] * len(token_ids), [], with_is_content=not june_23)


def step_0(out: Path) -> None:
    """Three train traces (a tool call; a wrong answer; a compacted conversation of two branches) and a
    gsm8k eval of three (right; cancelled before any message; failed after one turn)."""
    old = dict(june_23=True)
    task = v1_window_task(0, "What is 2+3?", answer="5")
    tool_call = [
        given(message("system", "Use the calculator."), None, [1, 2, 3], **old),
        given(message("user", "What is 2+3?"), 0, [4, 5], **old),
        sampled(message("assistant", "", tool_calls=[CALL]), 1, [7, 8, 9], [-0.1, -0.2, -0.3], "tool_calls", **old),
        given(message("tool", "5", tool_call_id="call_0", name="calc"), 2, [10, 11], **old),
        sampled(message("assistant", "It is 5."), 3, [12, 13], [-0.4, -0.5], "stop", **old),
    ]
    wrong = [given(message("user", "What is 2+3?"), None, [4, 5], **old),
             sampled(message("assistant", "6", reasoning_content="2+3 is 6?"), 0, [14, 15], [-1.0, -2.0], "stop",
                     **old)]
    compacted = [given(message("user", "Long task"), None, [20, 21], **old),
                 sampled(message("assistant", "part 1"), 0, [22], [-0.5], "length", **old),
                 given(message("user", "Summary: part 1"), None, [23], **old),
                 sampled(message("assistant", "done"), 2, [24, 25], [-0.25, -0.75], "stop", **old)]
    write_prime_rl_window(out, 0, "train_rollouts.jsonl", [
        v1_window_trace("a0", task, tool_call, {"correct": 1.0, "format": 0.2}, {"num_tool_calls": 1.0},
                        start=T0, extra_usage=False),
        v1_window_trace("a1", task, wrong, {"correct": 0.0, "format": 0.2}, {"num_tool_calls": 0.0},
                        start=T0, extra_usage=False),
        v1_window_trace("a2", v1_window_task(1, "Long task"), compacted, {"correct": 0.5}, {},
                        start=T0, extra_usage=False),
    ])
    (out / "rollouts" / "step_0" / "train_rollouts.bin").write_bytes(b"\x93\x01\x02")
    right = [given(message("user", "What is 2+3?"), None, [4, 5], **old),
             sampled(message("assistant", "5"), 0, [16], [-0.05], "stop", **old)]
    cancelled = {"type": "Cancelled", "message": "rollout cancelled", "traceback": None}
    failed = {"type": "ToolError", "message": "calc crashed", "traceback": "Traceback (most recent call last): ..."}
    write_prime_rl_window(out, 0, "eval_rollouts_gsm8k.jsonl", [
        v1_window_trace("e0", task, right, {"correct": 1.0}, {}, start=T0, extra_usage=False),
        v1_window_trace("e1", task, [], {}, {}, start=T0, errors=[cancelled], extra_usage=False),
        v1_window_trace("e2", task, tool_call[:3], {}, {"num_tool_calls": 1.0}, start=T0, errors=[failed],
                        extra_usage=False),
    ])


def step_1(out: Path) -> None:
    """Two train traces of one task, and one eval trace each of gsm8k and math500 (verifiers of July 8)."""
    task = v1_window_task(2, "What is 7*6?", answer="42")
    ask = given(message("user", "What is 7*6?"), None, [30, 31], june_23=False)
    write_prime_rl_window(out, 1, "train_rollouts.jsonl", [
        v1_window_trace("b0", task, [ask, sampled(message("assistant", "42"), 0, [32, 33], [-0.1, -0.1], "stop",
                                                  june_23=False)],
                        {"correct": 1.0, "format": 0.2}, {"num_tool_calls": 0.0}, start=T0 + 60),
        v1_window_trace("b1", task, [ask, sampled(message("assistant", "41"), 0, [34, 35], [-0.3, -0.9], "stop",
                                                  june_23=False)],
                        {"correct": 0.0, "format": 0.0}, {"num_tool_calls": 0.0}, start=T0 + 60),
    ])
    (out / "rollouts" / "step_1" / "train_rollouts.bin").write_bytes(b"\x93\x01\x02")
    write_prime_rl_window(out, 1, "eval_rollouts_gsm8k.jsonl", [
        v1_window_trace("f0", task, [ask, sampled(message("assistant", "42"), 0, [32, 33], [-0.2, -0.2], "stop",
                                                  june_23=False)], {"correct": 1.0}, {}, start=T0 + 90)])
    write_prime_rl_window(out, 1, "eval_rollouts_math500.jsonl", [
        v1_window_trace("g0", v1_window_task(0, "Solve x+1=3.", answer="2"),
                        [given(message("user", "Solve x+1=3."), None, [40, 41], june_23=False),
                         sampled(message("assistant", "x = 3"), 0, [42], [-0.7], "stop", june_23=False)],
                        {"correct": 0.0}, {}, start=T0 + 90)])


def main(root: Path) -> Path:
    out = root / NAME
    step_0(out)
    step_1(out)
    return out


if __name__ == "__main__":
    main(Path(sys.argv[1]))
