"""prime-rl / verifiers v1 episodes: traces as samples, reward components, trained from effective, splits."""

import json
import subprocess
import sys

import pytest
from agent_writers import (
    v1_chain,
    v1_episode,
    v1_input_node,
    v1_node,
    v1_sampled_node,
    v1_trace,
    write_prime_rl,
    write_prime_rl_logs,
    write_prime_rl_metrics,
)
from conftest import REPO, docs_example

from rl_board.analysis.source import load_run
from rl_board.analysis.summary import build_summary
from rl_board.readers import detect, prime_rl
from rl_board.scalars import discover, load_scalars
from rl_board.store.discovery import discover_runs
from rl_board.store.loader import list_runs

SYSTEM = {"role": "system", "content": "Use the calculator."}
IMAGE_USER = {"role": "user", "content": [{"type": "text", "text": "Wie viel ist 2+3? ✓"},
                                          {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]}


def _tool_trace(score: float, error: bool = False, final: str | None = "5") -> dict:
    call = {"role": "assistant", "reasoning_content": "I should add.",
            "tool_calls": [{"id": "c1", "name": "calc", "arguments": '{"expr": "2+3"}'}]}
    result = {"role": "tool", "tool_call_id": "c1",
              "content": "Error: <img src=x onerror=alert(1)>" if error else "<b>5</b>"}
    answer = {"role": "assistant"} if final is None else {"role": "assistant", "content": final}
    nodes = v1_chain([(SYSTEM, False), (IMAGE_USER, False), (call, True), (result, False), (answer, True)])
    return v1_trace(nodes, {"correct": {"score": score, "weight": 1.0}, "format": {"score": 1.0, "weight": 0.5},
                            "judge": None}, {"tool_errors": float(error), "broken": None})


@pytest.fixture
def run_dir(tmp_path):
    out = tmp_path / "runs" / "prime"
    write_prime_rl(out, 1, "train", "all", [v1_episode("e1", 1, [_tool_trace(1.0)]),
                                            v1_episode("e2", 1, [_tool_trace(0.0, error=True, final=None)]),
                                            v1_episode("e3", 1, [], errors=[{"type": "SandboxError", "message": "boom"}])])
    write_prime_rl(out, 1, "train", "effective", [v1_episode("e1", 1, [_tool_trace(1.0)])])
    write_prime_rl(out, 2, "train", "all", [v1_episode("e4", 2, [_tool_trace(1.0), _tool_trace(0.0)])])
    write_prime_rl(out, 2, "eval", "all", [v1_episode("v1", 2, [_tool_trace(1.0)])])
    return out


def test_detected_as_one_run_with_splits(run_dir):
    """The folder tree is one prime-rl run; its splits are the kind/subset folders, train/all read first."""
    assert detect(run_dir) is prime_rl
    assert list_runs(run_dir.parent) == ["prime"]
    run = load_run(run_dir, cache_root=False)
    assert run.splits == ("eval/all", "train/all", "train/effective") and run.split == "train/all"
    assert load_run(run_dir, cache_root=False, split="eval/all").samples["step"].tolist() == [2]


def _trainer_and_orchestrator_metrics(out):
    """metrics.jsonl as the rl entrypoint leaves it: per step, the orchestrator's line when it ships the
    batch, then the trainer's perf, optim, loss and time lines after training on it (a NaN grad norm
    dropped; both log a time/step)."""
    rows = []
    for step, (lr, loss, rollouts) in {1: (1e-6, 0.5, 3), 2: (2e-6, 0.25, 2)}.items():
        wall = 1760000000.0 + 60 * step
        rows += [(step, wall, {"progress/rollouts": rollouts, "time/step": 4.0 + step, "off_policy/dropped": 0.0,
                               "step": step}),
                 (step, wall + 20, {"perf/throughput": 1000.0 * step, "perf/mfu": 30.0, "step": step}),
                 (step, wall + 20, {"optim/lr": lr, "optim/grad_norm": float("nan") if step == 2 else 0.75,
                                    "step": step}),
                 (step, wall + 21, {"loss/mean": loss, "entropy/all/mean": 1.25, "step": step}),
                 (step, wall + 22, {"time/step": 20.0 + step, "time/forward_backward": 15.0, "step": step})]
    return write_prime_rl_metrics(out, rows)


@pytest.mark.slow
def test_run_folder_with_metrics_and_logs_is_one_run_with_its_scalars(run_dir):
    """prime-rl's run folder as the rl entrypoint leaves it (rollouts/, metrics.jsonl that the trainer and the
    orchestrator append to, logs/attempt_1/*.log and logs/latest): one prime-rl run in the runs list, no
    folder of unread logs; detect and summary read the episodes only; metrics.jsonl is the run's scalars,
    each series by step as the lines give it (a dropped NaN leaves its step out; of the orchestrator's and
    the trainer's time/step, the later line's)."""
    metrics = _trainer_and_orchestrator_metrics(run_dir)
    write_prime_rl_logs(run_dir)
    root = run_dir.parent.parent
    found = discover_runs(root, cache_root=root / "cache")
    assert found.names() == ["runs/prime"] and found.unclaimed == [] and found.runs[0].format == "prime-rl"
    got = json.loads(subprocess.run([sys.executable, "-m", "rl_board", "detect", str(run_dir), "--json"],
                                    capture_output=True, text=True, check=True, cwd=REPO).stdout)
    assert got["reader"] == "prime-rl" and "metrics.jsonl" not in json.dumps(got["files"])
    assert got["metrics"] == "metrics.jsonl"  # detect names the trainer's metrics it offers
    summary = json.loads(subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run_dir), "--json",
                                         "--no-cache"], capture_output=True, text=True, check=True, cwd=REPO).stdout)
    assert [(s["step"], s["samples"]) for s in summary["steps"]] == [(1, 2), (2, 2)]
    assert discover(run_dir) == metrics.resolve()
    series = load_scalars(metrics).series
    assert series["loss/mean"] == [(1, 0.5), (2, 0.25)] and series["optim/lr"] == [(1, 1e-6), (2, 2e-6)]
    assert series["progress/rollouts"] == [(1, 3.0), (2, 2.0)] and series["optim/grad_norm"] == [(1, 0.75)]
    assert series["time/step"] == [(1, 21.0), (2, 22.0)] and series["time"] == [(1, 1760000082.0), (2, 1760000142.0)]


def test_each_trace_is_a_sample_with_reward_components(run_dir):
    """reward = Σ score × weight over the scored rewards (1 + 0.5, 0 + 0.5); the components and metrics
    are extras; an episode without traces is named with its error."""
    run = load_run(run_dir, cache_root=False)
    s = run.samples
    assert s["step"].tolist() == [1, 1, 2, 2]
    assert s["reward"].tolist() == [1.5, 0.5, 1.5, 0.5]
    assert s["extra:reward/correct"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert s["extra:reward/format"].tolist() == [0.5] * 4
    assert "extra:reward/judge" not in s and "extra:broken" not in s
    assert s["extra:tool_errors"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert run.report.errors == (("rollouts/step_1/train/all/traces.jsonl", 3,
                                  "episode has no traces (it failed before any): SandboxError: boom"),)


def test_trained_marks_the_samples_of_the_effective_batch(run_dir):
    """A sample of all whose episode id is in effective has trained 1; others 0 (step 2 has no
    effective file yet: nothing trained)."""
    run = load_run(run_dir, cache_root=False)
    assert run.samples["extra:trained"].tolist() == [1.0, 0.0, 0.0, 0.0]


def test_trained_ids_are_read_as_a_whole_episode_gives_them(tmp_path):
    """Only the effective file's ids are decoded, with the same ids as each line parsed whole: a line with
    NaN (Python's json writes it; orjson and msgspec refuse it) and one with a lone surrogate escape
    (U+FFFD, as ``parse_line`` reads it) still mark their episodes; a repeated id key keeps its last
    value; an array line, broken JSON and a numeric id mark none."""
    out = tmp_path / "prime"
    ids = ["plain", "nan", "bad\ufffdid", "later", "first", "7"]
    write_prime_rl(out, 1, "train", "all", [v1_episode(i, 1, [_tool_trace(1.0)]) for i in ids])
    effective = out / "rollouts" / "step_1" / "train" / "effective" / "traces.jsonl"
    effective.parent.mkdir(parents=True)
    effective.write_bytes(b"\n".join([
        b'{"id":"plain","traces":[]}', b'{"id":"nan","x":NaN}', b'{"id":"bad\\ud800id"}',
        b'{"id":"first","id":"later"}', b'["first"]', b'{"id":"first"', b'{"id":7}']) + b"\n")
    run = load_run(out, cache_root=False)
    assert run.samples["extra:trained"].tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]


def test_turns_prompt_response_and_counts(run_dir):
    """Prompt from the system and image user turns, response the last assistant turn (empty when it
    has no content), 2 assistant turns and 1 tool call each; trainable = sampled."""
    run = load_run(run_dir, cache_root=False)
    texts = run.with_text(run.samples)
    assert texts["prompt"].tolist()[0] == "Use the calculator.\n\nWie viel ist 2+3? ✓\n[image]"
    assert texts["response"].tolist()[:2] == ["5", ""]
    assert run.samples["extra:num_turns"].tolist() == [2.0] * 4
    assert run.samples["extra:num_tool_calls"].tolist() == [1.0] * 4
    canonical, others = run.record_parts(1)
    turns = canonical["messages"]
    assert [t["role"] for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert [t["trainable"] for t in turns] == [False, False, True, False, True]
    assert turns[2]["tool_calls"] == [{"id": "c1", "name": "calc", "arguments": '{"expr": "2+3"}'}]
    assert turns[2]["reasoning"] == "I should add."
    assert turns[3]["content"] == "Error: <img src=x onerror=alert(1)>"
    assert others["id"] == "e2"


def test_final_branch_is_the_conversation():
    """With two leaves (a compacted branch), the turns are the path to the last leaf."""
    nodes = [v1_node({"role": "user", "content": "a"}), v1_node({"role": "assistant", "content": "old"}, True, 0),
             v1_node({"role": "assistant", "content": "new"}, True, 0)]
    assert [n["message"]["content"] for n in prime_rl.branch(nodes)] == ["a", "new"]


@pytest.mark.slow
def test_summary_and_search_over_turns(run_dir):
    """summary --json: per step samples, mean reward, turns_mean, tool_calls_mean and the tool_calls
    map; search --in messages finds text inside a tool result."""
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run_dir), "--json", "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    summary = json.loads(proc.stdout)
    assert summary["format"] == "prime-rl"
    got = [(s["step"], s["samples"], s["reward_mean"], s["turns_mean"], s["tool_calls_mean"], s["tool_calls"])
           for s in summary["steps"]]
    assert got == [(1, 2, 1.0, 2.0, 1.0, {"calc": 2}), (2, 2, 1.0, 2.0, 1.0, {"calc": 2})]
    proc = subprocess.run([sys.executable, "-m", "rl_board", "search", str(run_dir), "--regex", "onerror",
                           "--in", "messages", "--json", "--no-cache"], capture_output=True, text=True, cwd=REPO)
    found = json.loads(proc.stdout)
    assert found["matches"] == 1 and found["samples"][0]["line"] == 2
    eval_summary = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run_dir), "--json", "--no-cache",
                                   "--split", "eval/all"], capture_output=True, text=True, cwd=REPO)
    assert [s["step"] for s in json.loads(eval_summary.stdout)["steps"]] == [2]


def test_step_from_a_nested_field(run_dir, tmp_path):
    """step=run.work.step takes the step the episode was dispatched at instead of its folder's."""
    out = tmp_path / "late"
    write_prime_rl(out, 5, "train", "all", [v1_episode("e9", 4, [_tool_trace(1.0)])])
    assert load_run(out, cache_root=False).samples["step"].tolist() == [5]
    run = load_run(out, cache_root=False, fields=(("step", "run.work.step"),))
    assert run.samples["step"].tolist() == [4]
    assert run.record_parts(0)[0]["step"] == 4


def test_summary_has_no_turn_keys_for_runs_without_messages(tmp_path):
    """A run of plain lines keeps the summary's keys as they were."""
    (tmp_path / "r.jsonl").write_text('{"step": 1, "reward": 1.0}\n')
    step = build_summary(load_run(tmp_path, cache_root=False))["steps"][0]
    assert "turns_mean" not in step and "tool_calls" not in step


# -- per-token data: the nodes of the final branch, concatenated ------------------------------------

CALL = {"role": "assistant", "tool_calls": [{"id": "c1", "name": "calc", "arguments": '{"expr": "2+3"}'}]}


def _token_trace(advantages: tuple[float, float] | None = None, score: float = 1.0) -> dict:
    """system (ids 1-3), user (4-5), a tool call (scaffold 6, sampled 7-9), its result (10-11), the
    answer (scaffold 12, sampled 13-14): 14 positions, 5 trained."""
    first, last = advantages or (None, None)
    nodes = [v1_input_node(SYSTEM, None, [1, 2, 3]),
             v1_input_node({"role": "user", "content": "2+3?"}, 0, [4, 5]),
             v1_sampled_node(CALL, 1, [6], [7, 8, 9], [-0.1, -0.2, -0.3],
                             advantages=None if first is None else [first] * 3),
             v1_input_node({"role": "tool", "tool_call_id": "c1", "content": "5"}, 2, [10, 11]),
             v1_sampled_node({"role": "assistant", "content": "5"}, 3, [12], [13, 14], [-1.0, -2.0],
                             advantages=None if last is None else [last] * 2)]
    return v1_trace(nodes, {"correct": {"score": score, "weight": 1.0}}, {})


def _short_trace() -> dict:
    """user (ids 1-3), the answer (scaffold 4, sampled 5-6): 6 positions, 2 trained."""
    nodes = [v1_input_node({"role": "user", "content": "hi"}, None, [1, 2, 3]),
             v1_sampled_node({"role": "assistant", "content": "hello"}, 0, [4], [5, 6], [-0.5, -0.25])]
    return v1_trace(nodes, {"correct": {"score": 0.0, "weight": 1.0}}, {})


EMPTY = None  # an untrained position has no sampler log-prob


def test_branch_tokens_concatenate_the_nodes_and_spread_compact_lists():
    """token_ids and mask are the nodes' in order; the sampler's compact logprobs land on the sampled
    positions; each node's count is its number of ids."""
    nodes = _token_trace(advantages=(0.5, -1.0))["nodes"]
    lists, counts = prime_rl.branch_tokens(nodes)
    assert lists["token_ids"] == list(range(1, 15))
    assert lists["loss_mask"] == [False] * 6 + [True] * 3 + [False] * 3 + [True] * 2
    assert lists["rollout_logprobs"] == [EMPTY] * 6 + [-0.1, -0.2, -0.3] + [EMPTY] * 3 + [-1.0, -2.0]
    assert lists["advantages"] == [EMPTY] * 6 + [0.5] * 3 + [EMPTY] * 3 + [-1.0] * 2
    assert counts == [3, 2, 4, 2, 3]
    assert set(lists) == {"token_ids", "loss_mask", "rollout_logprobs", "advantages"}


def test_branch_tokens_map_the_trainer_reference_and_entropy_lists():
    """reference_logprobs (compact) -> ref_logprobs, trainer_logprobs and entropies aligned to the ids
    -> logprobs and entropy; a node whose list fits neither layout has no values there; a mask that
    is not one flag per id leaves the branch without token lists."""
    node = v1_sampled_node({"role": "assistant", "content": "ok"}, None, [1], [2, 3], [-0.5, -0.25],
                           reference_logprobs=[-0.75, -1.5])
    node.update({"trainer_logprobs": [0.0, -0.5, -0.5], "entropies": [1.0]})  # entropies: neither layout
    other = v1_sampled_node({"role": "assistant", "content": "more"}, 0, [], [4], [-3.0], entropies=[0.25])
    lists, counts = prime_rl.branch_tokens([node, other])
    assert lists["ref_logprobs"] == [EMPTY, -0.75, -1.5, EMPTY]
    assert lists["logprobs"] == [0.0, -0.5, -0.5, EMPTY]
    assert lists["entropy"] == [EMPTY, EMPTY, EMPTY, 0.25]
    assert counts == [3, 1]
    broken = dict(node, mask=[False, True])
    assert prime_rl.branch_tokens([broken, other]) is None
    assert prime_rl.branch_tokens([v1_input_node({"role": "user", "content": "x"}, None, [])]) is None


@pytest.fixture
def token_run(tmp_path):
    out = tmp_path / "runs" / "tokens"
    write_prime_rl(out, 1, "train", "all", [v1_episode("t1", 1, [_token_trace()]),
                                            v1_episode("t2", 1, [_short_trace()])])
    write_prime_rl(out, 1, "train", "effective", [v1_episode("t1", 1, [_token_trace(advantages=(0.5, -1.0))])])
    return out


def test_counted_positions_are_the_trained_tokens(token_run):
    """response_len counts the sampled tokens (5 and 2); summary --json: response_len_mean 3.5 and
    masked_share (9 + 4) / (14 + 6) untrained positions."""
    run = load_run(token_run, cache_root=False)
    assert run.samples["response_len"].tolist() == [5, 2]
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(token_run), "--json", "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    step = json.loads(proc.stdout)["steps"][0]
    assert step["response_len_mean"] == 3.5
    assert step["masked_share"] == pytest.approx(13 / 20)
    assert step["turns_mean"] == 1.5 and step["samples"] == 2


def test_record_carries_the_lists_and_each_turns_positions(token_run):
    """The sample read again has its canonical lists, each turn its number of positions; the token
    table counts the trained positions and reads the sampler's log-probs there."""
    from rl_board.analysis.tables import compute_token_table
    from rl_board.derive.metrics import compute_sample_tokens

    run = load_run(token_run, cache_root=False, split="train/effective")
    canonical, _ = run.record_parts(0)
    assert [t["num_tokens"] for t in canonical["messages"]] == [3, 2, 4, 2, 3]
    assert canonical["loss_mask"][6:9] == [True] * 3 and canonical["advantages"][12:] == [-1.0, -1.0]
    table = compute_token_table(compute_sample_tokens(canonical))
    assert table["counted"].sum() == 5
    assert table.loc[table["counted"], "rollout_logp"].tolist() == [-0.1, -0.2, -0.3, -1.0, -2.0]
    assert table.loc[table["counted"], "advantages"].tolist() == [0.5] * 3 + [-1.0] * 2
    assert table["token"].tolist()[:2] == ["#1", "#2"]  # no tokenizer beside the run


def test_a_trace_without_token_ids_has_turns_and_no_lists(run_dir, tmp_path):
    """An eval relay's nodes carry no token ids: the sample has turns, no token lists, no length."""
    out = tmp_path / "relay"
    nodes = [v1_input_node({"role": "user", "content": "q"}, None, []),
             v1_sampled_node({"role": "assistant", "content": "a"}, 0, [], [], [])]
    write_prime_rl(out, 1, "eval", "all", [v1_episode("r", 1, [v1_trace(nodes, {}, {})])])
    run = load_run(out, cache_root=False)
    assert run.samples["response_len"].tolist() == [-1]
    canonical, _ = run.record_parts(0)
    assert "token_ids" not in canonical and "num_tokens" not in canonical["messages"][0]


def test_the_docs_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/prime-rl.md's prime-rl episode, written as the file monitor writes it: 8 positions, the 3 sampled
    ones counted, the sampler's log-probs on them, turns of 2, 3, 1 and 2 positions."""
    block = docs_example("prime-rl", '"traces": [{"nodes"')
    episode = json.loads(" ".join(line.strip() for line in block.strip().splitlines()))
    write_prime_rl(tmp_path / "readme", 3, "train", "all", [episode])
    run = load_run(tmp_path / "readme", cache_root=False)
    assert run.samples["response_len"].tolist() == [3]
    canonical, _ = run.record_parts(0)
    assert canonical["token_ids"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [i for i, m in enumerate(canonical["loss_mask"]) if m] == [3, 4, 7]
    assert canonical["rollout_logprobs"] == [None, None, None, -0.1, -0.4, None, None, -0.02]
    assert [t["num_tokens"] for t in canonical["messages"]] == [2, 3, 1, 2]


def _looped_nodes() -> list:
    """Three nodes whose parents form a cycle (0 -> 2 -> 1 -> 0) and a leaf hanging from it."""
    return [v1_node({"role": "user", "content": "a"}, False, 2),
            v1_node({"role": "assistant", "content": "b"}, True, 0),
            v1_node({"role": "user", "content": "c"}, False, 1),
            v1_node({"role": "assistant", "content": "d"}, True, 2)]


def _dangling_nodes() -> list:
    """A chain whose second node's parent points past the list."""
    return [v1_node({"role": "user", "content": "a"}), v1_node({"role": "user", "content": "b"}, False, 7),
            v1_node({"role": "assistant", "content": "c"}, True, 1)]


def test_broken_trace_graphs_are_counted_per_file_and_named(tmp_path):
    """A trace whose parents form a cycle and one whose parent points past the list load as samples
    keeping the turns that can be ordered, and the load report names both, with the file."""
    out = tmp_path / "runs" / "prime"
    scored = {"correct": {"score": 1.0, "weight": 1.0}}
    write_prime_rl(out, 1, "train", "all", [
        v1_episode("e1", 1, [v1_trace(_looped_nodes(), scored, {})]),
        v1_episode("e2", 1, [_tool_trace(1.0), v1_trace(_dangling_nodes(), scored, {})])])
    run = load_run(out, cache_root=False)
    assert run.report.lines_ok == 3 and not run.report.errors
    name = "rollouts/step_1/train/all/traces.jsonl"
    note = next(n for n in run.report.notes if n.startswith(name))
    assert "2 trace(s) with a broken node graph" in note
    assert "line 1 trace 0 (a cycle of parent pointers)" in note
    assert "line 2 trace 1 (a parent past the node list)" in note
    looped = run.record_parts(0)[0]["messages"]
    assert [t["content"] for t in looped] == ["d"]  # the cycle a -> c -> b -> a can't be ordered
    dangling = run.record_parts(2)[0]["messages"]
    assert [t["content"] for t in dangling] == ["b", "c"]  # b's parent is missing: b is where it starts


def test_a_whole_graph_is_not_broken():
    """A forest of nodes (two leaves under one root) has no graph problem."""
    nodes = [v1_node({"role": "user", "content": "a"}), v1_node({"role": "assistant", "content": "old"}, True, 0),
             v1_node({"role": "assistant", "content": "new"}, True, 0)]
    assert prime_rl.graph_problems(nodes) == []


def test_a_chain_is_all_its_nodes_and_what_is_almost_one_is_read_as_a_graph():
    """A chain (each node's parent the one before) is the whole conversation, unbroken; a parent given as
    ``true`` (a bool, not the index 1), the root pointing at itself, or a second root are read as graphs."""
    user, mid, last = ({"role": r, "content": c} for r, c in (("user", "a"), ("assistant", "b"), ("user", "c")))
    chain = [v1_node(user), v1_node(mid, True, 0), v1_node(last, False, 1)]
    assert [n["message"]["content"] for n in prime_rl.branch(chain)] == ["a", "b", "c"]
    assert prime_rl.graph_problems(chain) == []
    flagged = [v1_node(user), v1_node(mid, True, 0), {**v1_node(last, False, 1), "parent": True}]
    # parents {0, True}: True is 1, so the leaf is node 2, whose parent is no index: the path starts there
    assert [n["message"]["content"] for n in prime_rl.branch(flagged)] == ["c"]
    assert prime_rl.graph_problems(flagged) == ["a parent past the node list"]
    looped = [{**v1_node(user), "parent": 0}, v1_node(mid, True, 0)]
    assert prime_rl.graph_problems(looped) == ["a cycle of parent pointers"]
    two_roots = [v1_node(user), v1_node(mid, True)]
    assert [n["message"]["content"] for n in prime_rl.branch(two_roots)] == ["b"]
