"""verifiers v0 results.jsonl (vf-eval -s): prompt and completion as messages, reward and metrics, step 0."""

from agent_writers import v0_output, write_v0

from rl_board.analysis.source import load_run
from rl_board.analysis.summary import build_summary
from rl_board.readers import detect, jsonl, verifiers_v0

PROMPT = [{"role": "system", "content": "Think, then answer."}, {"role": "user", "content": "2+2?"}]


def test_v0_results(tmp_path):
    """Two rollouts at step 0; tool calls written as JSON text are read; metrics are extras, the
    example id is not; a broken line is named and the others load."""
    completion = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "calc", "arguments": '{"x": "2+2"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "4"}, {"role": "assistant", "content": "4 ✓"}]
    path = write_v0(tmp_path / "evals" / "env--m" / "abc123", [
        v0_output(0, PROMPT, completion, 1.0, {"correct": 1.0}, answer="4"),
        v0_output(0, PROMPT, [{"role": "assistant", "content": ""}], 0.0, {"correct": 0.0}, answer="4")])
    with open(path, "a") as f:
        f.write('{"example_id": 1, "prompt": [\n')
    run_dir = path.parent
    assert detect(run_dir) is verifiers_v0
    assert detect(tmp_path) is jsonl  # a plain folder of lines is not mistaken for it
    run = load_run(run_dir, cache_root=False)
    assert run.samples["step"].tolist() == [0, 0]
    assert run.samples["reward"].tolist() == [1.0, 0.0]
    assert run.samples["extra:correct"].tolist() == [1.0, 0.0]
    assert "extra:example_id" not in run.samples and run.samples["extra:is_truncated"].tolist() == [0.0, 0.0]
    assert [e[1] for e in run.report.errors] == [3]
    texts = run.with_text(run.samples)
    assert texts["prompt"][0] == "Think, then answer.\n\n2+2?" and texts["response"].tolist() == ["4 ✓", ""]
    assert texts["ground_truth"].tolist() == ["4", "4"]
    turns = run.record(0)[0]["messages"]
    assert turns[2]["tool_calls"] == [{"id": "a", "name": "calc", "arguments": '{"x": "2+2"}'}]
    step = build_summary(run)["steps"][0]
    assert (step["samples"], step["reward_mean"], step["turns_mean"], step["tool_calls_mean"], step["tool_calls"]) == (
        2, 0.5, 1.5, 0.5, {"calc": 1})
