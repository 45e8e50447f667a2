"""prime-rl's output folder of June 23 to July 9, 2026: rollouts/step_N/{train_rollouts,eval_rollouts_ENV}.jsonl
holding one verifiers v1 trace a line (tests/data/prime_rl_v1_run, written by tests/make_prime_rl_v1_fixtures.py)
opens as one prime-rl run, each trace a sample as readers/prime_rl.py makes it; the v0 months stay verifiers-v0's."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from agent_writers import prime_rl_rollout, v0_rollout_output, write_prime_rl_rollouts
from conftest import REPO, command, docs_example, step_rows

from rl_board.analysis.source import load_run
from rl_board.readers import detect, prime_rl
from rl_board.store.discovery import discover_runs

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_prime_rl_v1_fixtures  # noqa: E402

FIXTURE = REPO / "tests" / "data" / make_prime_rl_v1_fixtures.NAME


def _cli(*argv) -> str:
    proc = command(*argv)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def run_dir(tmp_path):
    """The fixture as an output folder under a root: outputs/run_default."""
    out = tmp_path / "outputs" / "run_default"
    shutil.copytree(FIXTURE, out)
    return out


def test_fixture_is_what_its_script_writes(tmp_path):
    """The committed folder is byte for byte what make_prime_rl_v1_fixtures.py writes."""
    made = make_prime_rl_v1_fixtures.main(tmp_path)
    names = sorted(p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(made).as_posix() for p in made.rglob("*") if p.is_file())
    assert all((FIXTURE / name).read_bytes() == (made / name).read_bytes() for name in names)


@pytest.mark.slow
def test_detect_names_prime_rl_its_files_splits_and_steps(run_dir):
    """detect: the prime-rl reader, the 5 .jsonl files (not the trainer's .bin), splits eval/gsm8k,
    eval/math500 and train, steps 0..1; the runs list holds the folder once."""
    assert detect(run_dir) is prime_rl
    lines = _cli("detect", str(run_dir)).splitlines()
    assert "reader: prime-rl" in lines and "splits: eval/gsm8k, eval/math500, train" in lines
    assert "steps: 0..1" in lines
    assert next(line for line in lines if line.startswith("files: ")).startswith("files: 5 (")
    found = discover_runs(run_dir.parent.parent, cache_root=run_dir.parent.parent / "cache")
    assert found.names() == ["outputs/run_default"] and not found.unclaimed
    assert (found.runs[0].format, found.runs[0].splits, found.runs[0].steps) == (
        "prime-rl", ("eval/gsm8k", "eval/math500", "train"), 2)


@pytest.mark.slow
def test_summary_per_step_of_train_and_eval(run_dir):
    """summary --json, by hand from the fixture: train (the default) step 0 has 3 traces, rewards 1.0 + 0.2,
    0.0 + 0.2 and 0.5, 4 sampled turns, 1 tool call, 5 + 2 + 2 trained tokens; step 1 has rewards 1.2 and 0;
    gsm8k's eval of step 0 has 2 samples (the cancelled trace is a rejected line), rewards 1 and 0."""
    train = json.loads(_cli("summary", str(run_dir), "--json", "--no-cache"))
    assert train["format"] == "prime-rl" and train["settings"]["split"] == "train"
    rows = step_rows(train)
    assert rows[0] == pytest.approx((3, (1.2 + 0.2 + 0.5) / 3, 4 / 3, 1 / 3))
    assert rows[1] == pytest.approx((2, 0.6, 1.0, 0.0))
    assert [s["response_len_mean"] for s in train["steps"]] == pytest.approx([3.0, 2.0])
    assert train["steps"][0]["extras"]["reward/format"] == pytest.approx(0.2)
    assert train["steps"][0]["tool_calls"] == {"calc": 1}
    gsm8k = json.loads(_cli("summary", str(run_dir), "--json", "--no-cache", "--split", "eval/gsm8k"))
    assert step_rows(gsm8k) == {0: (2, 0.5, 1.0, 0.5), 1: (1, 1.0, 1.0, 0.0)}
    assert (gsm8k["lines_ok"], gsm8k["lines_bad"]) == (3, 1)


def test_a_sample_turns_tokens_and_record(run_dir):
    """The tool-call trace: system, user, assistant (calc), tool, assistant; trainable = sampled; positions
    3, 2, 4, 2, 3; the sampler's log-probs on the sampled positions; its record shows the trace's task and
    timing; the compacted trace is its final branch only (two roots: the summary's)."""
    run = load_run(run_dir, cache_root=False)
    assert run.samples["step"].tolist() == [0, 0, 0, 1, 1]
    canonical, others = run.record_parts(0)
    turns = canonical["messages"]
    assert [(t["role"], t["trainable"], t["num_tokens"]) for t in turns] == [
        ("system", False, 3), ("user", False, 2), ("assistant", True, 4), ("tool", False, 2), ("assistant", True, 3)]
    assert turns[2]["tool_calls"] == [{"id": "call_0", "name": "calc", "arguments": '{"expr": "2+3"}'}]
    assert turns[3]["content"] == "5" and turns[4]["content"] == "It is 5."
    assert canonical["token_ids"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 6, 12, 13]
    assert canonical["rollout_logprobs"] == [None] * 6 + [-0.1, -0.2, -0.3] + [None] * 3 + [-0.4, -0.5]
    assert (canonical["step"], canonical["reward"]) == (0, 1.2)
    assert others["trace"]["task"]["answer"] == "5" and others["trace"]["id"] == "a0"
    assert others["reward/correct"] == 1.0 and others["num_tool_calls"] == 1.0
    assert run.record_parts(1)[0]["messages"][1]["reasoning"] == "2+3 is 6?"
    compacted = run.record_parts(2)[0]
    assert [(t["role"], t["content"]) for t in compacted["messages"]] == [("user", "Summary: part 1"),
                                                                         ("assistant", "done")]
    assert compacted["token_ids"] == [23, 6, 24, 25]


def test_a_trace_cancelled_before_any_message_is_named(run_dir):
    """The eval's cancelled trace (no nodes, one error) is a rejected line with its error; the trace that
    failed after a turn is a sample with reward 0."""
    run = load_run(run_dir, cache_root=False, split="eval/gsm8k")
    assert run.report.errors == (("rollouts/step_0/eval_rollouts_gsm8k.jsonl", 2,
                                  "trace has no messages (it failed before any): Cancelled: rollout cancelled"),)
    assert run.samples["reward"].tolist() == [1.0, 0.0, 1.0]


def test_the_rollouts_folder_opens_alike(run_dir):
    """OUT/rollouts opened alone is the same run."""
    run = load_run(run_dir / "rollouts", cache_root=False, split="eval/math500")
    assert (run.samples["step"].tolist(), run.samples["reward"].tolist()) == ([1], [0.0])


def test_v0_months_stay_verifiers_v0_and_a_run_that_crossed_june_23_is_one_prime_rl_run(tmp_path):
    """A folder of v0 rows alone is verifiers-v0's. A run whose step 0 holds v0 rows and whose step 5 holds
    the fixture's step 1 traces is prime-rl's (its latest file is a v1 trace): the v0 file read as verifiers
    v0 reads it (reward 0.75, advantage an extra, its record the row's), the traces as above."""
    raw = v0_rollout_output(0, [{"role": "user", "content": "2+2?"}], [{"role": "assistant", "content": "4"}],
                            0.75, {"correct": 0.75}, answer="4")
    crossed = tmp_path / "crossed"
    write_prime_rl_rollouts(crossed, 0, "train_rollouts.jsonl", [prime_rl_rollout(raw, "gsm8k", 0, advantage=0.25)])
    assert detect(crossed).NAME == "verifiers-v0"
    shutil.copytree(FIXTURE / "rollouts" / "step_1", crossed / "rollouts" / "step_5")
    assert detect(crossed) is prime_rl
    run = load_run(crossed, cache_root=False)
    assert (run.samples["step"].tolist(), run.samples["reward"].tolist()) == ([0, 5, 5], [0.75, 1.2, 0.0])
    assert run.samples["extra:advantage"].tolist()[0] == 0.25
    canonical, others = run.record_parts(0)
    assert (canonical["step"], canonical["messages"][-1]["content"], others["env_name"]) == (0, "4", "gsm8k")
    assert run.record_parts(1)[1]["trace"]["id"] == "b0"


def test_split_of_each_layout():
    """The window's file names give train, eval or eval/ENV (compressed too); traces.jsonl keeps KIND/SUBSET."""
    names = ("rollouts/step_3/train_rollouts.jsonl", "step_4/eval_rollouts_math-500.jsonl.gz",
             "rollouts/step_4/eval_rollouts.jsonl", "rollouts/step_3/train/all/traces.jsonl")
    assert [prime_rl.split_of(n) for n in names] == ["train", "eval/math-500", "eval", "train/all"]
    assert [prime_rl.in_window(n) for n in names] == [True, True, True, False]


def test_the_docs_example_line_reads_as_the_docs_say(tmp_path):
    """docs/formats/prime-rl.md's line of those weeks at step 3: reward 1.2, its components and metric as
    extras, turns of 2 and 2 positions, 1 counted position."""
    block = docs_example("prime-rl", '"rewards": {"correct": 1.0')
    trace = json.loads(" ".join(line.strip() for line in block.strip().splitlines()))
    path = tmp_path / "out" / "rollouts" / "step_3" / "train_rollouts.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(json.dumps(trace).encode() + b"\n")
    run = load_run(tmp_path / "out", cache_root=False)
    assert (run.split, run.samples["step"].tolist(), run.samples["reward"].tolist()) == ("train", [3], [1.2])
    assert run.samples["extra:reward/format"].tolist() == [0.2] and run.samples["response_len"].tolist() == [1]
    assert run.samples["extra:num_tool_calls"].tolist() == [0.0]
    assert [t["num_tokens"] for t in run.record_parts(0)[0]["messages"]] == [2, 2]


@pytest.mark.slow
def test_page_lists_the_folder_once_and_loads_the_train_split(run_dir):
    """The page's runs list offers the output folder once (no step folder); loaded, it is the train split's
    2 files of 5 samples, none rejected."""
    from page_steps import load, open_page

    from rl_board.views import keys

    at = open_page(run_dir.parent.parent)
    assert at.sidebar.selectbox(key=keys.RUN).options == ["outputs/run_default"]
    at = load(at, area=None)
    assert any("2 files · 5 samples loaded · 0 lines rejected" in t.value for t in at.text), [t.value for t in at.text]
