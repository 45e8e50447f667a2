"""rLLM episode files: one sample per trajectory, step and split from the folder name."""

from agent_writers import write_rllm

from rl_board.analysis.source import load_run
from rl_board.analysis.summary import build_summary
from rl_board.readers import detect, rllm

SYSTEM = {"role": "system", "content": "Solve with tools."}
USER = {"role": "user", "content": "Quelle est 6×7 ?"}
CALL = {"role": "assistant", "content": "", "reasoning": "multiply",
        "tool_calls": [{"id": "m", "type": "function", "function": {"name": "python", "arguments": {"code": "6*7"}}}]}
RESULT = {"role": "tool", "tool_call_id": "m", "content": "Traceback: <ZeroDivisionError>"}
ANSWER = {"role": "assistant", "content": "42"}


def _cumulative(reward):
    return {"reward": reward, "steps": [{"chat_completions": [SYSTEM, USER, CALL]},
                                        {"chat_completions": [SYSTEM, USER, CALL, RESULT, ANSWER]}]}


def test_rllm_run(tmp_path):
    """Cumulative chat completions give the last step's conversation; is_correct and metrics are
    extras; val is a second split."""
    episodes = tmp_path / "logs" / "episodes"
    write_rllm(episodes, 2, "train", "ep:1", [_cumulative(1.0), _cumulative(0.0)], True, {"steps": 2})
    write_rllm(episodes, 3, "train", "ep:2", [_cumulative(0.25)], False, {"steps": 2})
    write_rllm(episodes, 3, "val", "ep:3", [_cumulative(1.0)], True, {"steps": 2})
    assert detect(episodes) is rllm
    run = load_run(episodes, cache_root=False)
    assert run.splits == ("train", "val")
    assert run.samples["step"].tolist() == [2, 2, 3]
    assert run.samples["reward"].tolist() == [1.0, 0.0, 0.25]
    assert run.samples["extra:is_correct"].tolist() == [1.0, 1.0, 0.0]
    texts = run.with_text(run.samples)
    assert texts["response"].tolist() == ["42", "42", "42"]
    turns = run.record_parts(0)[0]["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert turns[2]["tool_calls"][0] == {"id": "m", "name": "python", "arguments": '{"code": "6*7"}'}
    assert turns[2]["reasoning"] == "multiply"
    steps = build_summary(run)["steps"]
    assert [(s["step"], s["samples"], s["reward_mean"], s["turns_mean"], s["tool_calls_mean"]) for s in steps] == [
        (2, 2, 0.5, 2.0, 1.0), (3, 1, 0.25, 2.0, 1.0)]


def test_steps_without_a_shared_history_are_joined():
    """Steps whose chat completions don't extend each other are read one after another; a step
    without them is its observation and model response."""
    trajectory = {"steps": [{"chat_completions": [USER, ANSWER]},
                            {"chat_completions": [], "observation": "next?", "model_response": "done"}]}
    assert [(t["role"], t["content"]) for t in rllm.messages_of(trajectory)] == [
        ("user", "Quelle est 6×7 ?"), ("assistant", "42"), ("user", "next?"), ("assistant", "done")]
