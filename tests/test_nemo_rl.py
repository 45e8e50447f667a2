"""NeMo-RL's step files: logs/exp_NNN/train_data_step{N}.jsonl, written as NeMo-RL's logger writes them."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO
from token_writers import NemoSample, train_tokenizer, write_nemo_step
from tokenizers import Tokenizer

from rl_board.analysis.source import load_run
from rl_board.readers import detect, nemo_rl
from rl_board.store.loader import list_runs


def _sample(tok: Tokenizer, turns: list[tuple[str, bool]], reward: float, rng: np.random.Generator) -> NemoSample:
    """A GRPO sample of (text, trained) turns: the sampler's log-probs on generated tokens (0 elsewhere)."""
    ids, mask, content = [], [], []
    for text, trained in turns:
        got = tok.encode(text).ids
        ids += got
        mask += [int(trained)] * len(got)
        content.append(text)
    prev = (-np.abs(rng.normal(0, 0.7, len(ids))) - 0.02).tolist()
    prev[0] = 0.0
    generation = [p + float(rng.normal(0, 0.03)) if m else 0.0 for p, m in zip(prev, mask)]
    return NemoSample(content, reward, ids, mask, [reward - 0.5] * len(ids), generation, prev)


@pytest.fixture
def nemo_run(tmp_path):
    """logs/exp_001 with three steps; the tokenizer lies in logs/ (one folder above the run)."""
    tokenizer_path = train_tokenizer(tmp_path / "logs")
    tok = Tokenizer.from_file(str(tokenizer_path))
    run = tmp_path / "logs" / "exp_001"
    rng = np.random.default_rng(3)
    for step in (1, 2, 3):
        samples = [
            _sample(tok, [("<|im_start|>What is 5 + 39?", False), ("The answer is 44.<|im_end|>", True)], 1.0, rng),
            _sample(tok, [("<|im_start|>What is 5 + 39?", False), ("The answer is 45.<|im_end|>", True)], 0.0, rng),
            _sample(tok, [("Let me check", False), (" the weather tool first.", True),
                          ("The tool says: sunny, 21 degrees.", False), (" So the answer is correct!", True)],
                    float(step) / 2, rng),
        ]
        if step == 2:
            samples[1].prev_logprobs[5] = float("nan")  # Python's json writes NaN
        write_nemo_step(run, step, samples)
    (run / "tensorboard").mkdir()
    return run, tokenizer_path


def _independent(run) -> dict[int, dict]:
    """Per step, the summary's numbers read from the files by hand: one-element lists unwrapped, the
    step from the file name, the counted positions where token_loss_mask is 1."""
    import ujson  # reads NaN as Python's json writes it

    result = {}
    for path in run.glob("train_data_step*.jsonl"):
        step = int(path.stem[len("train_data_step"):])
        rewards, lengths, mismatch, untrained, positions = [], [], [], 0, 0
        for text in path.read_text().splitlines():
            line = ujson.loads(text)
            mask, prev, gen = line["token_loss_mask"][0], line["prev_logprobs"][0], line["generation_logprobs"][0]
            trained = [i for i, m in enumerate(mask) if m]
            rewards.append(line["rewards"][0])
            lengths.append(len(trained))
            untrained += len(mask) - len(trained)
            positions += len(mask)
            k3 = [math.exp(prev[i] - gen[i]) - 1 - (prev[i] - gen[i]) for i in trained
                  if math.isfinite(prev[i]) and math.isfinite(gen[i])]
            mismatch.append(sum(k3) / len(k3))
        mean = sum(rewards) / len(rewards)
        result[step] = {"samples": len(rewards), "reward_mean": mean,
                        "reward_std": math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards)),
                        "response_len_mean": sum(lengths) / len(lengths),
                        "mismatch_kl": sum(mismatch) / len(mismatch), "masked_share": untrained / positions}
    return result


@pytest.mark.slow
def test_summary_per_step_equals_an_independent_reading(nemo_run):
    """summary --json equals the files read by hand: rewards[0], the step from the file name, and the
    masked positions (right padding and the prompt untrained; a NaN log-prob skipped)."""
    run, tokenizer_path = nemo_run
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run), "--json", "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["format"] == "nemo-rl" and got["lines_ok"] == 9 and got["lines_bad"] == 0
    expected = _independent(run)
    assert [s["step"] for s in got["steps"]] == [1, 2, 3]
    for entry in got["steps"]:
        want = expected[entry["step"]]
        assert entry["samples"] == want["samples"]
        for key in ("reward_mean", "reward_std", "response_len_mean", "mismatch_kl", "masked_share"):
            assert entry[key] == pytest.approx(want[key], rel=1e-9), key
        assert entry["prompt_groups"] == 2  # two samples share the decoded prompt "What is 5 + 39?"
        assert set(entry["extras"]) == {"input_lengths", "sample_loss_mask"}  # idx is bookkeeping


def test_tokens_prompt_and_record_come_from_the_unwrapped_line(nemo_run):
    """The tokens are the ids decoded with the tokenizer found above the run; the prompt is the decoded
    text before the first trained position; the record has the step of its file name."""
    run, tokenizer_path = nemo_run
    tok = Tokenizer.from_file(str(tokenizer_path))
    loaded = load_run(run, cache_root=False)
    row = loaded.step_samples(3).iloc[2]
    canonical, others = loaded.record_parts(row.name)
    assert canonical["step"] == 3 and canonical["reward"] == 1.5
    assert others["content"][1] == " the weather tool first."
    ids, mask = canonical["token_ids"], canonical["loss_mask"]
    assert row["prompt"] == "Let me check" == tok.decode(ids[:mask.index(1)], skip_special_tokens=False)
    sample = loaded.sample_tokens(row.name)
    assert sample.tokens == [tok.decode([i], skip_special_tokens=False) for i in ids]
    assert list(~sample.is_pad) == [bool(m) for m in mask]  # holes: the tool result is not trained
    assert [k for k, _ in itertools.groupby(mask)] == [0, 1, 0, 1]


def test_detected_by_its_file_names_and_listed(nemo_run):
    """A folder of train_data_step{N}.jsonl files is a NeMo-RL run (not generic JSON lines)."""
    run, _ = nemo_run
    assert detect(run) is nemo_rl
    assert list_runs(run.parent) == ["exp_001"]


def test_a_bad_line_costs_only_itself(nemo_run):
    """A line that is not JSON, or lacks its reward, is one rejected line; the others load."""
    run, _ = nemo_run
    path = run / "train_data_step2.jsonl"
    lines = path.read_text().splitlines()
    broken = json.loads(lines[0])
    del broken["rewards"]
    path.write_text("\n".join([lines[0], "{oops", json.dumps(broken), *lines[1:]]) + "\n")
    rows, errors, count = nemo_rl.read_table(path)
    assert rows.num_rows == len(lines) and count == len(lines) + 2
    assert [line for line, _ in errors] == [2, 3] and "missing 'reward'" in errors[1][1]


def test_without_a_tokenizer_the_texts_are_the_messages_content(tmp_path):
    """With no tokenizer near the run, prompt and response are the messages' own text (content), split
    where the loss mask turns on and off, not "#ID" strings; a search finds a response's words."""
    from rl_board.analysis.search import Query, compute_matches

    tok = Tokenizer.from_file(str(train_tokenizer(tmp_path / "far" / "tok")))
    rng = np.random.default_rng(5)
    turns = [("<|im_start|>What is 5 + 39?", False), ("The answer is 44.<|im_end|>", True)]
    agent = [("Let me check", False), (" the weather tool first.", True),
             ("The tool says: sunny, 21 degrees.", False), (" So the answer is correct!", True)]
    run_dir = tmp_path / "logs" / "exp_001"
    write_nemo_step(run_dir, 1, [_sample(tok, turns, 1.0, rng), _sample(tok, agent, 0.5, rng)])
    run = load_run(run_dir)
    texts = run.with_text(run.samples)
    assert texts["prompt"].tolist() == ["<|im_start|>What is 5 + 39?", "Let me check"]
    assert texts["response"].tolist() == ["The answer is 44.<|im_end|>",
                                          " the weather tool first.The tool says: sunny, 21 degrees. So the answer is "
                                          "correct!"]
    assert len(compute_matches(run, Query("answer is 44"))) == 1


@pytest.mark.slow
def test_chat_template_messages_are_turns(tmp_path):
    """content as GRPO logs it (the first message the chat template's text of system and user with the
    generation prompt, each answer decoded with skip_special_tokens=True, the code env's observation as
    it writes it) is turns: the prompt is the turns before the first assistant turn."""
    from ray_writers import chatml, decode, generated

    tok = Tokenizer.from_file(str(train_tokenizer(tmp_path / "far" / "tok")))
    rng = np.random.default_rng(7)
    opening = chatml([{"role": "system", "content": "Use <code>."}, {"role": "user", "content": "What is 2**10?"}],
                     add_generation_prompt=True)
    answer = decode(generated({"role": "assistant", "content": "The answer is 1024."}), skip_special_tokens=True)
    code = [(opening, False), ("<code>2**10</code>", True), ("<result>1024</result>", False), (answer, True)]
    math = [(opening, False), (decode(generated({"role": "assistant", "content": "1000"}), True), True)]
    run_dir = tmp_path / "logs" / "exp_001"
    # by hand: 2 and 1 assistant turns, no calls, rewards 1.0 and 0.0
    write_nemo_step(run_dir, 1, [_sample(tok, code, 1.0, rng), _sample(tok, math, 0.0, rng)])
    got = json.loads(subprocess.run([sys.executable, "-m", "rl_board", "summary", "--json", str(run_dir)],
                                    capture_output=True, text=True, check=True, cwd=REPO).stdout)
    assert [(s["step"], s["samples"], s["reward_mean"], s["turns_mean"], s["tool_calls_mean"])
            for s in got["steps"]] == [(1, 2, 0.5, 1.5, 0.0)]
    run = load_run(run_dir, cache_root=False)
    texts = run.with_text(run.samples)
    assert texts["prompt"].tolist() == ["Use <code>.\n\nWhat is 2**10?"] * 2
    assert texts["response"].tolist() == ["The answer is 1024.", "1000"]
    turns = run.record_parts(0)[0]["messages"]
    assert [(t["role"], t["content"]) for t in turns] == [
        ("system", "Use <code>."), ("user", "What is 2**10?"), ("assistant", "<code>2**10</code>"),
        ("environment", "<result>1024</result>"), ("assistant", "The answer is 1024.")]


def test_the_docs_turns_example_reads_as_the_docs_say(tmp_path):
    """docs/formats/nemo-rl.md's ChatML line: step 4, reward 1.0, 2 assistant turns, no calls."""
    text = (REPO / "docs" / "formats" / "nemo-rl.md").read_text()
    block = next(b for b in text.split("```json")[1:] if "2**10" in b).split("```")[0]
    (tmp_path / "exp_001").mkdir()
    (tmp_path / "exp_001" / "train_data_step4.jsonl").write_text(block.strip() + "\n")
    run = load_run(tmp_path / "exp_001", cache_root=False)
    assert run.samples["step"].tolist() == [4] and run.samples["reward"].tolist() == [1.0]
    assert [t["role"] for t in run.record_parts(0)[0]["messages"]] == ["system", "user", "assistant", "environment", "assistant"]
    assert run.with_text(run.samples)["prompt"].tolist() == ["Use <code>.\n\nWhat is 2**10?"]
