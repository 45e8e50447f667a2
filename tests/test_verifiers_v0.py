"""verifiers v0 results.jsonl (vf-eval -s): prompt and completion as messages, reward and metrics, step 0;
prime-rl's online evals of checkpoints (evals/step_N/{env}/) and its rollouts/step_N/{train,eval}_rollouts*.jsonl
as one run whose steps are the step folders."""

import json

import pytest
from agent_writers import (
    prime_rl_rollout,
    v0_output,
    v0_rollout_output,
    write_prime_rl_eval,
    write_prime_rl_rollouts,
    write_v0,
)
from conftest import command

from rl_board.analysis.source import load_run
from rl_board.analysis.summary import build_summary
from rl_board.readers import detect, jsonl, verifiers_v0
from rl_board.store.discovery import discover_runs

PROMPT = [{"role": "system", "content": "Think, then answer."}, {"role": "user", "content": "2+2?"}]


def test_v0_results(tmp_path):
    """Two rollouts at step 0; tool calls written as JSON text are read; metrics are extras, and so is
    the example id (``diff --by id`` matches on it); a broken line is named and the others load."""
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
    assert run.samples["extra:example_id"].tolist() == [0.0, 0.0]
    assert run.samples["extra:is_truncated"].tolist() == [0.0, 0.0]
    assert [e[1] for e in run.report.errors] == [3]
    texts = run.with_text(run.samples)
    assert texts["prompt"][0] == "Think, then answer.\n\n2+2?" and texts["response"].tolist() == ["4 ✓", ""]
    assert texts["ground_truth"].tolist() == ["4", "4"]
    turns = run.record_parts(0)[0]["messages"]
    assert turns[2]["tool_calls"] == [{"id": "a", "name": "calc", "arguments": '{"x": "2+2"}'}]
    step = build_summary(run)["steps"][0]
    assert (step["samples"], step["reward_mean"], step["turns_mean"], step["tool_calls_mean"], step["tool_calls"]) == (
        2, 0.5, 1.5, 0.5, {"calc": 1})


#: Each checkpoint's gsm8k rewards (2 examples x 2 rollouts), as the fixture writes them.
GSM8K = {0: [0.0, 0.0, 1.0, 0.0], 10: [1.0, 0.0, 1.0, 0.0], 20: [1.0, 1.0, 1.0, 0.0]}


def _checkpoint_evals(out):
    """prime-rl's orchestrator output folder after online evals at steps 0, 10 and 20 of gsm8k, and at step
    20 of math500 too; the second gsm8k rollout of each example calls a tool."""
    for step, rewards in GSM8K.items():
        rollouts = []
        for i, reward in enumerate(rewards):
            answer = [{"role": "assistant", "content": "4 ✓" if reward else "5"}]
            if i % 2:
                answer = [{"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"e": "2/2+3"}'}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "4"}, *answer]
            rollouts.append((i // 2, PROMPT, answer, reward, {"correct": reward}))
        write_prime_rl_eval(out, step, "gsm8k", rollouts)
    write_prime_rl_eval(out, 20, "math500", [(0, PROMPT, [{"role": "assistant", "content": "x"}], r, {"correct": r})
                                             for r in (1.0, 0.5)], answer="")
    return out / "evals"


def _cli(*argv):
    proc = command(*argv)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_checkpoint_evals_are_one_run_in_the_runs_list(tmp_path):
    """The evals folder is one verifiers-v0 run, its environments the splits and its 3 step folders the
    steps; no step folder or environment is listed as a run of its own."""
    evals = _checkpoint_evals(tmp_path / "outputs" / "run_default")
    found = discover_runs(tmp_path, cache_root=tmp_path / "cache")
    assert found.names() == ["outputs/run_default/evals"] and not found.unclaimed
    run = found.runs[0]
    assert (run.format, run.splits, run.files, run.steps, run.counted_from) == (
        "verifiers-v0", ("gsm8k", "math500"), 4, 3, "file names")
    assert detect(evals) is verifiers_v0
    got = _cli("detect", str(evals), "--json")
    assert got["reader"] == "verifiers-v0" and sorted(got["splits"]) == ["gsm8k", "math500"]


@pytest.mark.slow
def test_checkpoint_evals_summary_per_step(tmp_path):
    """summary --json of the evals folder: per checkpoint 4 samples, the mean of that step's rewards
    (0.25, 0.5, 0.75), 1 tool call in every other sample (0.5 a sample) and 1.5 assistant turns; the
    other environment is a split of its own (one step, 2 samples, mean 0.75); a sample read again keeps
    its step."""
    evals = _checkpoint_evals(tmp_path / "run_default")
    summary = _cli("summary", str(evals), "--json", "--no-cache")
    assert summary["format"] == "verifiers-v0"
    assert [(s["step"], s["samples"], s["reward_mean"], s["tool_calls_mean"], s["turns_mean"])
            for s in summary["steps"]] == [(0, 4, 0.25, 0.5, 1.5), (10, 4, 0.5, 0.5, 1.5), (20, 4, 0.75, 0.5, 1.5)]
    other = _cli("summary", str(evals), "--json", "--no-cache", "--split", "math500")
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in other["steps"]] == [(20, 2, 0.75)]
    run = load_run(evals, cache_root=False)
    canonical, _ = run.record_parts(run.samples.index[run.samples["step"] == 20][1])  # the tool call, rewarded 1
    assert canonical["step"] == 20 and canonical["messages"][-1]["content"] == "4 ✓"  # written as \\u2713
    assert canonical["messages"][2]["tool_calls"] == [{"id": "c1", "name": "calc", "arguments": '{"e": "2/2+3"}'}]


def test_one_checkpoint_eval_opened_alone_keeps_its_step(tmp_path):
    """One step's environment folder opened by itself is the eval of that checkpoint: step 10, and its
    samples open (the step a sample is read again with is the same)."""
    evals = _checkpoint_evals(tmp_path / "run_default")
    run = load_run(evals / "step_10" / "gsm8k", cache_root=False)
    assert set(run.samples["step"]) == {10} and run.samples["reward"].tolist() == GSM8K[10]
    assert run.record_parts(run.samples.index[0])[0]["step"] == 10


def test_plain_evals_without_a_step_stay_separate_runs_at_step_0(tmp_path):
    """vf-eval's own layout ({env}--{model}/{uuid}) names no step: each eval is a run of its own, step 0."""
    for run_id, reward in (("1a2b3c4d", 1.0), ("12345678", 0.0)):  # a uuid of digits is no step either
        write_v0(tmp_path / "evals" / "gsm8k--m" / run_id, [v0_output(0, PROMPT, [], reward, {})])
    found = discover_runs(tmp_path, cache_root=tmp_path / "cache")
    assert found.names() == ["evals/gsm8k--m/1a2b3c4d", "evals/gsm8k--m/12345678"]  # natural order
    assert [load_run(run.path, cache_root=False).samples["step"].tolist() for run in found.runs] == [[0], [0]]


#: The train batch's rewards at steps 1 and 2 (2 examples x 2 rollouts), and step 2's gsm8k eval.
TRAIN = {1: [1.0, 0.0, 0.0, 0.0], 2: [1.0, 1.0, 0.0, 1.0]}
EVAL = [1.0, 0.0]


def _rollouts_run(out):
    """prime-rl's orchestrator folder of June 2026: rollouts/step_N/ holding the train batch it shipped
    (train_rollouts.jsonl, advantage = reward - its group's mean), the binary batch the trainer reads, and
    at step 2 the checkpoint's evals of gsm8k and math500."""
    for step, rewards in TRAIN.items():
        rows = []
        for i, reward in enumerate(rewards):
            mean = sum(rewards[i - i % 2:i - i % 2 + 2]) / 2
            raw = v0_rollout_output(i // 2, PROMPT, [{"role": "assistant", "content": "4" if reward else "5"}],
                                    reward, {"correct": reward}, answer="4")
            rows.append(prime_rl_rollout(raw, "gsm8k", step - 1, advantage=reward - mean))
        write_prime_rl_rollouts(out, step, "train_rollouts.jsonl", rows)
        (out / "rollouts" / f"step_{step}" / "train_rollouts.bin").write_bytes(b"\x93\x01")
    write_prime_rl_rollouts(out, 2, "eval_rollouts_gsm8k.jsonl", [
        prime_rl_rollout(v0_rollout_output(0, PROMPT, [{"role": "assistant", "content": "x"}], r, {"correct": r}),
                         "gsm8k", 2, eval_step=2) for r in EVAL])
    write_prime_rl_rollouts(out, 2, "eval_rollouts_math500.jsonl", [
        prime_rl_rollout(v0_rollout_output(0, PROMPT, [{"role": "assistant", "content": "y"}], 0.5, {}),
                         "math500", 2, eval_step=2)])
    return out


@pytest.mark.slow
def test_prime_rl_rollouts_folder_is_one_run(tmp_path):
    """prime-rl's output folder holding rollouts/step_N/*_rollouts*.jsonl is one run (not one per step
    folder): splits train (read first), eval/gsm8k and eval/math500, 2 steps; summary --json per step:
    4 samples, mean reward 0.25 then 0.75; step 2's gsm8k eval 2 samples, mean 0.5; prime-rl's advantage
    and policy version are extras; a sample read again keeps its step; the rollouts/ folder opens alike."""
    out = _rollouts_run(tmp_path / "outputs" / "run_default")
    found = discover_runs(tmp_path, cache_root=tmp_path / "cache")
    assert found.names() == ["outputs/run_default"] and not found.unclaimed
    run = found.runs[0]
    assert (run.format, run.splits, run.steps) == ("verifiers-v0", ("eval/gsm8k", "eval/math500", "train"), 2)
    summary = _cli("summary", str(out), "--json", "--no-cache")
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in summary["steps"]] == [(1, 4, 0.25), (2, 4, 0.75)]
    evals = _cli("summary", str(out), "--json", "--no-cache", "--split", "eval/gsm8k")
    assert [(s["step"], s["samples"], s["reward_mean"]) for s in evals["steps"]] == [(2, 2, 0.5)]
    loaded = load_run(out, cache_root=False)
    assert loaded.split == "train" and loaded.samples["extra:advantage"].tolist()[:4] == [0.5, -0.5, 0.0, 0.0]
    assert loaded.samples["extra:policy_version"].tolist() == [0.0] * 4 + [1.0] * 4
    assert loaded.record_parts(loaded.samples.index[-1])[0]["step"] == 2
    alone = load_run(out / "rollouts", cache_root=False, split="eval/math500")  # its rollouts/ opens alike
    assert alone.samples["step"].tolist() == [2] and alone.samples["reward"].tolist() == [0.5]


@pytest.mark.slow
def test_page_lists_checkpoint_evals_as_one_run_and_loads_its_steps(tmp_path):
    """The page's runs list offers the evals folder once (no step folder, no environment); loaded, it is
    3 files of 4 samples each (the gsm8k split), none rejected."""
    from page_steps import load, open_page

    from rl_board.views import keys

    _checkpoint_evals(tmp_path / "outputs" / "run_default")
    at = open_page(tmp_path)
    assert at.sidebar.selectbox(key=keys.RUN).options == ["outputs/run_default/evals"]
    at = load(at, area=None)
    assert any("3 files · 12 samples loaded · 0 lines rejected" in t.value for t in at.text), [t.value for t in at.text]


def test_split_and_step_of_each_layout():
    """A plain eval's results.jsonl has neither; an evals/ tree's is its environment and step folder;
    prime-rl's rollouts files give train, eval (April) or eval/ENV (June on), compressed too."""
    names = ("results.jsonl", "step_3/gsm8k/results.jsonl", "rollouts/step_3/train_rollouts.jsonl",
             "rollouts/step_4/eval_rollouts.jsonl", "step_5/eval_rollouts_math-500.jsonl.gz", "abc/results.jsonl",
             "gsm8k--Qwen--Qwen3-0.6B-step50/1a2b/results.jsonl", "gsm8k--ckpts--checkpoint-500/9f/results.jsonl",
             "gsm8k--out--global_step_7/u/results.jsonl", "gsm8k--m/1234/results.jsonl")
    assert [verifiers_v0.split_of(n) for n in names] == [
        None, "gsm8k", "train", "eval", "eval/math-500", None, "gsm8k--Qwen--Qwen3-0.6B", "gsm8k--ckpts",
        "gsm8k--out", "gsm8k--m"]
    assert [verifiers_v0.step_of(n) for n in names] == [None, 3, 3, 4, 5, None, 50, 500, 7, None]


def test_a_first_line_over_a_mebibyte_is_still_verifiers(tmp_path):
    """A results.jsonl whose first rollout holds a 1.5 MB completion (past the 1 MiB the sniff read
    before) is recognised as verifiers v0, and its two samples load."""
    long = [{"role": "assistant", "content": "x" * 1_500_000}]
    path = write_v0(tmp_path / "evals" / "env--m" / "abc123", [
        v0_output(0, PROMPT, long, 1.0, {"correct": 1.0}, answer="4"),
        v0_output(0, PROMPT, [{"role": "assistant", "content": "4"}], 0.0, {"correct": 0.0}, answer="4")])
    assert len(path.read_bytes().split(b"\n", 1)[0]) > 1 << 20
    assert detect(path.parent) is verifiers_v0
    assert len(load_run(path.parent, cache_root=False).samples) == 2


#: Each checkpoint's rewards of examples 0, 1 and 2 (one rollout each); examples 0 and 1 ask the same question.
CHECKPOINTS = {50: [0.0, 1.0, 0.0], 100: [1.0, 1.0, 0.0]}


def _checkpoint_named_evals(evals):
    """``vf-eval -s`` of two checkpoints served under their own names (``Qwen/Qwen3-0.6B-step50``, ``…-step100``):
    one folder each, as verifiers' ``get_results_path`` (verifiers/utils/path_utils.py) names it:
    ``outputs/evals/{env_id}--{model.replace('/', '--')}/{str(uuid.uuid4())[:8]}``."""
    for step, rewards in CHECKPOINTS.items():
        prompts = [PROMPT, PROMPT, [{"role": "user", "content": "3+3?"}]]
        run_id = {50: "3f2a9c1e", 100: "b7d04e6a"}[step]  # two uuid4()[:8]
        write_v0(evals / f"gsm8k--{'Qwen/Qwen3-0.6B-step' + str(step)}".replace("/", "--") / run_id,
                 [v0_output(k, prompts[k], [{"role": "assistant", "content": "4"}], r, {"correct": r})
                  for k, r in enumerate(rewards)])
    return evals


def test_checkpoint_named_evals_are_one_run_with_steps_and_diff_by_example_id(tmp_path):
    """Evals written as one ``{env}--{model}-stepN`` folder per checkpoint: the evals folder is one run
    (split gsm8k--Qwen--Qwen3-0.6B, steps 50 and 100); diff --by id of step 50 against 100 matches on
    ``example_id``: 3 examples (by prompt, 2: examples 0 and 1 share their text), example 0 up by 1."""
    from rl_board.analysis.diff import compute_diff

    evals = _checkpoint_named_evals(tmp_path / "outputs" / "evals")
    found = discover_runs(tmp_path, cache_root=tmp_path / "cache")
    assert found.names() == ["outputs/evals"] and not found.unclaimed
    assert (found.runs[0].format, found.runs[0].splits, found.runs[0].steps) == (
        "verifiers-v0", ("gsm8k--Qwen--Qwen3-0.6B",), 2)
    run = load_run(evals, cache_root=False)
    assert run.samples["step"].tolist() == [50] * 3 + [100] * 3
    assert run.samples["reward"].tolist() == CHECKPOINTS[50] + CHECKPOINTS[100]
    by_id = compute_diff(run, run, (50, 50), (100, 100), by="id")
    assert (by_id.key_a, by_id.matched) == ("example_id", 3)
    assert by_id.table["delta"].tolist() == [0.0, 0.0, 1.0]  # examples 2 and 1 the same, then 0 (ties by text)
    assert by_id.table.index.tolist() == [2.0, 1.0, 0.0]
    assert compute_diff(run, run, (50, 50), (100, 100)).matched == 2
    alone = load_run(evals / "gsm8k--Qwen--Qwen3-0.6B-step100" / "b7d04e6a", cache_root=False)
    assert alone.samples["step"].tolist() == [100] * 3 and alone.record_parts(alone.samples.index[0])[0]["step"] == 100
