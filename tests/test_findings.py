"""Findings (issue 16): each of the six checks raised and not raised on tiny hand-made runs that sit
just on either side of its threshold; the words, windows and the ``findings`` command."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import sample, write_lines

from rl_board.analysis.findings import (
    _BLANK,
    compute_evidence,
    compute_findings,
    compute_window_ngrams,
    compute_windows,
    compute_words,
)
from rl_board.analysis.source import load_run
from rl_board.cli import main

EOS, PAD = "<eos>", "<pad>"


def _load(folder: Path, pad=None, eos=None):
    return load_run(folder, pad, cache_root=False, eos_token=eos)


def _found(folder: Path, pad=None, eos=None) -> dict:
    """kind -> the finding's JSON, for the run in ``folder``."""
    return {f["kind"]: f for f in compute_findings(_load(folder, pad, eos)).to_json()}


def _four_steps(folder: Path, early: list[dict], late: list[dict]) -> Path:
    """Steps 1 (early window), 2, 3 and 4 (late window), one file: the early samples on lines 1.., one
    filler sample for steps 2 and 3, then the late samples."""
    filler = [sample(2, 0.0, response="x"), sample(3, 0.0, response="x")]
    write_lines(folder / "rank0.jsonl", [sample(1, **s) for s in early] + filler + [sample(4, **s) for s in late])
    return folder


EARLY_TEXTS = ["the answer is 4", "the answer is 5", "so it is 6", "we get 7"]


def _hack(folder, late_texts, late_rewards, early_rewards=(0.0, 1.0, 0.0, 1.0)):
    early = [{"reward": r, "response": t} for r, t in zip(early_rewards, EARLY_TEXTS)]
    late = [{"reward": r, "response": t} for r, t in zip(late_rewards, late_texts)]
    return _four_steps(folder, early, late)


HACKED = ["copyright the answer is 4", "copyright so 5", "copyright 6", "we get 7"]


def test_windows_are_the_first_and_last_quarter_of_the_steps(tmp_path):
    """5 steps -> 2 per window; 3 irregular steps -> 1 per window."""
    write_lines(tmp_path / "a" / "r.jsonl", [sample(s, 0.0) for s in (5, 1, 2, 3, 4)])
    write_lines(tmp_path / "b" / "r.jsonl", [sample(s, 0.0) for s in (9, 3, 7)])
    assert compute_windows(_load(tmp_path / "a")) == ([1, 2], [4, 5])
    assert compute_windows(_load(tmp_path / "b")) == ([3], [9])


def test_spreading_phrase_raised_at_three_times_the_floor(tmp_path):
    """'copyright' in 3/4 late responses, none early (floor 1/4): 3/4 >= 3 x 1/4, reward +0.5 = std E."""
    late_rewards = [0.5, 1.5, 1.5, 0.5]  # mean 1.0; early mean 0.5, std 0.5
    got = _found(_hack(tmp_path, HACKED, late_rewards))["reward_with_spreading_phrases"]
    assert got == {"kind": "reward_with_spreading_phrases", "first_step": 4, "last_step": 4,
                   "evidence": {"reward_early": 0.5, "reward_late": 1.0,
                                "phrases": [{"tokens": ["copyright"], "share_early": 0.0, "share_late": 0.75}]},
                   # containing samples are lines 7, 8, 9 (rewards 0.5, 1.5, 1.5): reward first, then line
                   "samples": ["rank0.jsonl:8", "rank0.jsonl:9", "rank0.jsonl:7"]}


def test_spreading_phrase_not_raised_below_three_times_the_floor(tmp_path):
    """'copyright' in 2/4 late responses: 1/2 < 3 x 1/4, no other phrase spread: nothing."""
    texts = ["copyright the answer is 4", "copyright so 5", "it 6", "we get 7"]
    assert "reward_with_spreading_phrases" not in _found(_hack(tmp_path, texts, [0.5, 1.5, 1.5, 0.5]))


def test_spreading_phrase_not_raised_when_reward_rose_less_than_early_std(tmp_path):
    """Late mean 0.975: a rise of 0.475 < the early std 0.5, so the spreading phrase is not a finding."""
    assert "reward_with_spreading_phrases" not in _found(_hack(tmp_path, HACKED, [0.4, 1.5, 1.5, 0.5]))


def test_spreading_phrase_dropped_when_it_does_not_pay(tmp_path):
    """Containing and other late responses have the same mean reward (1.0): the phrase is dropped."""
    assert "reward_with_spreading_phrases" not in _found(_hack(tmp_path, HACKED, [1.0, 1.0, 1.0, 1.0]))


def test_spreading_phrase_kept_when_every_late_response_has_it(tmp_path):
    """Every late response contains 'copyright' (no response without it to compare with): kept."""
    texts = HACKED[:3] + ["copyright we get 7"]
    got = _found(_hack(tmp_path, texts, [1.0, 1.0, 1.0, 1.0]))["reward_with_spreading_phrases"]
    assert got["evidence"]["phrases"] == [{"tokens": ["copyright"], "share_early": 0.0, "share_late": 1.0}]
    assert got["samples"] == ["rank0.jsonl:7", "rank0.jsonl:8", "rank0.jsonl:9"]  # equal rewards: line order


def test_top_five_phrases_by_ratio_then_tokens(tmp_path):
    """'b' is in 2 of 8 early responses (ratio 4); the eight other 1-3-grams of 'a b c d' have ratio 8
    and share 1: the first five of those by token list; samples deduplicated."""
    early = [{"reward": 0.0, "response": t} for t in ["b", "b", "e1", "e2", "e3", "e4", "e5", "e6"]]
    late = [{"reward": 1.0, "response": "a b c d"} for _ in range(4)]
    got = _found(_four_steps(tmp_path, early, late))["reward_with_spreading_phrases"]
    assert [p["tokens"] for p in got["evidence"]["phrases"]] == [["a"], ["a", "b"], ["a", "b", "c"], ["b", "c"],
                                                                  ["b", "c", "d"]]
    assert {p["share_early"] for p in got["evidence"]["phrases"]} == {0.0}
    assert got["samples"] == ["rank0.jsonl:11", "rank0.jsonl:12", "rank0.jsonl:13"]


@pytest.mark.parametrize("lookup", ["table", "binary search"])
def test_phrases_counted_one_response_at_a_time_are_the_same(tmp_path, monkeypatch, lookup):
    """With every block of n-gram occurrences a single response, the top five of the test above are
    unchanged: a gram's responses are summed across blocks; the same when the candidates are found by a
    binary search (grams of a large vocabulary) instead of a table."""
    from rl_board.analysis.findings import phrases

    monkeypatch.setattr(phrases, "GRAM_BLOCK", 1)
    if lookup == "binary search":
        monkeypatch.setattr(phrases, "RANK_TABLE_MAX", 0)
    early = [{"reward": 0.0, "response": t} for t in ["b", "b", "e1", "e2", "e3", "e4", "e5", "e6"]]
    late = [{"reward": 1.0, "response": "a b c d"} for _ in range(4)]
    got = _found(_four_steps(tmp_path, early, late))["reward_with_spreading_phrases"]["evidence"]["phrases"]
    assert [(p["tokens"], p["share_early"], p["share_late"]) for p in got] == [
        (["a"], 0.0, 1.0), (["a", "b"], 0.0, 1.0), (["a", "b", "c"], 0.0, 1.0), (["b", "c"], 0.0, 1.0),
        (["b", "c", "d"], 0.0, 1.0)]


@pytest.mark.parametrize("lookup", ["table", "binary search"])
def test_phrases_ignore_words_that_are_not_candidates(tmp_path, monkeypatch, lookup):
    """Words in one late response only (x1, x2, met first, so their ids come before every candidate's)
    are no phrase's occurrence: the nine 1-3-grams of 'b c d a' all have ratio 8 and share 1, and the
    first five by token list, among them the candidates with the lowest and the highest id (b, a), are
    shown with their own words, whether the candidates are found by a table or by a binary search."""
    from rl_board.analysis.findings import phrases

    if lookup == "binary search":
        monkeypatch.setattr(phrases, "RANK_TABLE_MAX", 0)
    early = [{"reward": 0.0, "response": t} for t in ["x1", "x2", "e1", "e2", "e3", "e4", "e5", "e6"]]
    late = [{"reward": 1.0, "response": t} for t in ["b c d a", "b c d a", "b c d a x2", "b c d a x1"]]
    got = _found(_four_steps(tmp_path, early, late))["reward_with_spreading_phrases"]["evidence"]["phrases"]
    assert [(p["tokens"], p["share_early"], p["share_late"]) for p in got] == [
        (["a"], 0.0, 1.0), (["b"], 0.0, 1.0), (["b", "c"], 0.0, 1.0), (["b", "c", "d"], 0.0, 1.0),
        (["c"], 0.0, 1.0)]


def test_words_are_counted_tokens_without_pad_and_eos(tmp_path):
    """EOS ends the counted tokens and is dropped; a token list shorter than the numeric lists adds no
    words; without tokens, the text's words with pads removed."""
    write_lines(tmp_path / "r.jsonl", [
        sample(1, 0.0, response="ignored", response_tokens=["a", EOS, "b", PAD]),
        sample(1, 0.0, response_tokens=["a", "b", PAD, "c"], logprobs=[-1.0] * 4),
        sample(1, 0.0, response_tokens=["a"], logprobs=[-1.0, -1.0]),
        sample(1, 0.0, response=f"  hi {PAD}there{PAD} you"),
        sample(1, 0.0, response=EOS, response_tokens=[EOS, PAD]),
    ])
    run = _load(tmp_path, PAD, EOS)
    words, from_tokens = compute_words(run, run.samples)
    assert words == [["a"], ["a", "b"], ["a"], ["hi", "there", "you"], []]
    assert from_tokens == [True, True, True, False, True]


def test_pad_equal_to_eos_counts_the_first_as_eos(tmp_path):
    """With pad = EOS, the words stop before the first one."""
    end = "<|endoftext|>"
    write_lines(tmp_path / "r.jsonl", [sample(1, 0.0, response_tokens=["x", "y", end, end, "z"])])
    run = _load(tmp_path, end, end)
    assert compute_words(run, run.samples)[0] == [["x", "y"]]


def test_word_ids_are_the_words_as_ids_across_files_and_segments(tmp_path):
    """``Run.word_ids`` gives each row's words (``Run.words``) through one vocabulary, in the frame's
    order, across two files of two segments each (appended lines have a dictionary of their own);
    -1 words for a sample with neither tokens nor a response, 0 for a response that is only pads."""
    from rl_board.analysis.source import RunSource

    write_lines(tmp_path / "a.jsonl", [sample(1, 0.0, response="x y x"), sample(2, 0.0, response_tokens=["p", EOS])])
    write_lines(tmp_path / "b.jsonl", [sample(1, 0.0, response="y z"), sample(2, 0.0)])
    source = RunSource(tmp_path, PAD, cache_root=False, eos_token=EOS)
    source.refresh()
    appended = {"a.jsonl": [sample(3, 0.0, response="w x w"), sample(3, 0.0, response=f" {PAD} ")],
                "b.jsonl": [sample(3, 0.0, response_tokens=["z", "q", PAD])]}
    for name, lines in appended.items():
        with open(tmp_path / name, "a") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in lines)
    run = source.refresh()
    segments = set(map(tuple, run.samples[["file", "seg"]].drop_duplicates().to_numpy()))
    assert segments == {(0, 0), (0, 1), (1, 0), (1, 1)}
    frame = run.samples.iloc[[6, 0, 3, 4, 2, 1, 5]]  # segments interleaved
    ids, lengths, vocabulary = run.word_ids(frame)
    got, at = [], 0
    for n in lengths:
        got.append(None if n < 0 else [vocabulary[i] for i in ids[at:at + n]])
        at += max(n, 0)
    assert at == len(ids) and len(set(vocabulary)) == len(vocabulary)
    assert got == run.words(frame)
    assert got == [["z", "q"], ["x", "y", "x"], None, ["w", "x", "w"], ["p"], ["y", "z"], []]


def _lengths_run(folder, early_texts, late_texts):
    early = [{"reward": r, "response": t} for r, t in zip((0.0, 1.0), early_texts)]
    late = [{"reward": 2.0, "response": t} for t in late_texts]  # the rise 1.5 > the early std 0.5
    return _four_steps(folder, early, late)


def test_length_growth_raised_at_one_and_a_half_in_characters_without_pads(tmp_path):
    """No token lists: lengths are characters without pads, early 2, late 3: 3 / 2 = 1.5."""
    pads = PAD * 3
    got = _found(_lengths_run(tmp_path, ["ab" + pads, "cd"], ["abc", "def" + pads]), PAD)
    assert got["length_growth_with_reward"] == {"kind": "length_growth_with_reward", "first_step": 4,
                                                "last_step": 4, "evidence": {"length_early": 2.0,
                                                                             "length_late": 3.0},
                                                "samples": ["rank0.jsonl:5", "rank0.jsonl:6"]}


def test_length_growth_shows_the_late_samples_nearest_the_late_mean(tmp_path):
    """Late lengths 3, 6, 4, 5 (mean 4.5, 2.25x the early 2): the samples 0.5 from it first, the higher reward
    (3, line 8) before (2, line 7), then line 5 of the two 1.5 away."""
    folder = _four_steps(tmp_path, [{"reward": r, "response": t} for r, t in zip((0.0, 1.0), ("ab", "cd"))],
                         [{"reward": r, "response": "x" * n} for r, n in zip((2.0, 2.0, 2.0, 3.0), (3, 6, 4, 5))])
    got = _found(folder)["length_growth_with_reward"]
    assert got["evidence"] == {"length_early": 2.0, "length_late": 4.5}
    assert got["samples"] == ["rank0.jsonl:8", "rank0.jsonl:7", "rank0.jsonl:5"]


def test_length_growth_not_raised_below_one_and_a_half(tmp_path):
    """Early 2 characters, late (3 + 2) / 2 = 2.5: 1.25 < 1.5."""
    assert "length_growth_with_reward" not in _found(_lengths_run(tmp_path, ["ab", "cd"], ["abc", "de"]))


def test_length_growth_counts_tokens_with_the_eos_as_response_len_does(tmp_path):
    """Counted positions (EOS included): early 2, late (2 + 3) / 2 = 2.5, a ratio 1.25, not raised
    (words without the EOS would give 1 and 1.5, a ratio of 1.5)."""
    early = [{"reward": r, "response_tokens": ["a", EOS, PAD]} for r in (0.0, 1.0)]
    late = [{"reward": 2.0, "response_tokens": ["a", EOS]}, {"reward": 2.0, "response_tokens": ["a", "b", EOS]}]
    folder = _four_steps(tmp_path, early, late)
    assert "length_growth_with_reward" not in _found(folder, PAD, EOS)
    late[0] = {"reward": 2.0, "response_tokens": ["a", "b", EOS]}  # now 3 / 2 = 1.5
    got = _found(_four_steps(tmp_path, early, late), PAD, EOS)["length_growth_with_reward"]
    assert got["evidence"] == {"length_early": 2.0, "length_late": 3.0}


def test_length_growth_needs_the_reward_to_rise(tmp_path):
    """Lengths doubled but the reward did not rise: nothing."""
    early = [{"reward": r, "response": "ab"} for r in (0.0, 1.0)]
    late = [{"reward": r, "response": "abcd"} for r in (0.0, 1.0)]
    assert _found(_four_steps(tmp_path, early, late)) == {}


def _entropy_run(folder, late_entropies):
    early = [{"reward": 0.0, "entropy": [1.0, 1.0]}, {"reward": 0.0, "entropy": [0.5, 1.5]}]
    late = [{"reward": 0.0, "entropy": e} for e in late_entropies] + [{"reward": 0.0}]  # no entropy: ignored
    return _four_steps(folder, early, late)


def test_entropy_collapse_raised_at_half(tmp_path):
    """Early mean 1.0, late (0.25 + 0.75 + 0.5) / 3 = 0.5 <= 0.5 x 1.0; samples: the lowest entropy first."""
    got = _found(_entropy_run(tmp_path, [[0.25], [0.75], [0.5]]))["entropy_collapse"]
    assert got == {"kind": "entropy_collapse", "first_step": 4, "last_step": 4,
                   "evidence": {"entropy_early": 1.0, "entropy_late": 0.5},
                   "samples": ["rank0.jsonl:5", "rank0.jsonl:7", "rank0.jsonl:6"]}


def test_entropy_collapse_not_raised_above_half(tmp_path):
    """Late mean (0.5 + 0.52) / 2 = 0.51 > 0.5."""
    assert "entropy_collapse" not in _found(_entropy_run(tmp_path, [[0.5], [0.52]]))


def _k3(d: float) -> float:
    return math.exp(d) - 1 - d


def _mismatch(step, d):
    return sample(step, 0.0, logprobs=[-1.0], rollout_logprobs=[-1.0 - d])


def test_mismatch_flags_steps_above_1e3_and_picks_the_max_steps_samples(tmp_path):
    """k3(0.04) = 0.00081 is not flagged, k3(0.05) = 0.00127 is; the samples are step 3's three largest."""
    write_lines(tmp_path / "rank0.jsonl", [_mismatch(1, 0.04), _mismatch(1, 0.04), _mismatch(2, 0.05),
                                           _mismatch(3, 0.1), _mismatch(3, 0.1), sample(4, 0.0)])
    write_lines(tmp_path / "rank1.jsonl", [_mismatch(3, 0.12), _mismatch(3, 0.1), _mismatch(2, 0.05)])
    got = _found(tmp_path)["training_inference_mismatch"]
    assert got["evidence"]["steps"] == [2, 3]
    assert got["evidence"]["max"] == pytest.approx((3 * _k3(0.1) + _k3(0.12)) / 4, rel=1e-9)
    assert (got["first_step"], got["last_step"]) == (2, 3)
    assert got["samples"] == ["rank1.jsonl:1", "rank0.jsonl:4", "rank0.jsonl:5"]


def test_mismatch_not_raised_at_or_below_1e3(tmp_path):
    """Every step's mismatch KL is k3(0.04) = 0.00081 or missing: nothing."""
    write_lines(tmp_path / "r.jsonl", [_mismatch(1, 0.04), _mismatch(2, 0.04), sample(3, 0.0)])
    assert "training_inference_mismatch" not in _found(tmp_path)


def _grpo_step(step, dead: bool, extra_singles: int = 0):
    """Two groups of 2 (P and Q); P's rewards equal when ``dead``; Q's differ; then singles."""
    out = [sample(step, 1.0, prompt="P"), sample(step, 1.0 if dead else 0.0, prompt="P"),
           sample(step, 1.0, prompt="Q"), sample(step, 0.0, prompt="Q")]
    return out + [sample(step, 0.0, prompt=f"single {i}") for i in range(extra_singles)]


def test_dead_groups_raised_at_ten_percent_of_grpo_steps(tmp_path):
    """Step 1 has 1 of its 2 groups with equal rewards (dead); 9 live steps: 1 of 10 = 10 %."""
    lines = _grpo_step(1, True) + [line for step in range(2, 11) for line in _grpo_step(step, False)]
    write_lines(tmp_path / "r.jsonl", lines)
    assert _found(tmp_path)["dead_groups"] == {"kind": "dead_groups", "first_step": 1, "last_step": 1,
                                               "evidence": {"steps": [1]}, "samples": []}


def test_dead_groups_not_raised_below_ten_percent(tmp_path):
    """One dead step of 11 GRPO-shaped steps: 9 % < 10 %."""
    lines = _grpo_step(1, True) + [line for step in range(2, 12) for line in _grpo_step(step, False)]
    write_lines(tmp_path / "r.jsonl", lines)
    assert "dead_groups" not in _found(tmp_path)


def test_grpo_shape_needs_half_the_samples_in_groups(tmp_path):
    """Step 1: 4 of 8 samples in groups (shaped, dead); step 2: 4 of 9 (not shaped, though its groups
    are dead); steps 3-10 live: 1 dead of 9 shaped = 11 %, evidence step 1 only."""
    lines = (_grpo_step(1, True, extra_singles=4) + _grpo_step(2, True, extra_singles=5)
             + [line for step in range(3, 11) for line in _grpo_step(step, False)])
    write_lines(tmp_path / "r.jsonl", lines)
    assert _found(tmp_path)["dead_groups"]["evidence"] == {"steps": [1]}


def test_a_step_is_dead_only_when_half_its_groups_are(tmp_path):
    """Steps with 1 equal group of 3 are not dead; with 1 of 2 they are: raised only for the latter."""
    third = [sample(1, 0.0, prompt="R"), sample(1, 1.0, prompt="R")]
    write_lines(tmp_path / "a" / "r.jsonl", _grpo_step(1, True) + third)
    write_lines(tmp_path / "b" / "r.jsonl", _grpo_step(1, True))
    assert "dead_groups" not in _found(tmp_path / "a")
    assert _found(tmp_path / "b")["dead_groups"]["evidence"] == {"steps": [1]}


def _verl_groups(folder: Path, step: int, dead: bool):
    """One verl dump (``_dump_generations``) of prompts P and Q, two rollouts each; P's scores equal when
    ``dead``, Q's differ."""
    from ray_writers import verl_dump

    verl_dump(folder, step, ["P", "P", "Q", "Q"], ["a", "b", "c", "d"], ["4"] * 4,
              [1.0, 1.0 if dead else 0.0, 1.0, 0.0], {})


def test_dead_groups_not_raised_on_a_validation_split(tmp_path):
    """verl's experiment folder: the same dead group at step 1 of 2 raises dead_groups on the rollouts (1 of
    2 GRPO-shaped steps dead) and not on val_data, whose check names the split."""
    from rl_board.analysis.findings import compute_findings

    exp = tmp_path / "exp"
    for folder in ("rollout_data", "val_data"):
        _verl_groups(exp / folder, 1, True)
        _verl_groups(exp / folder, 2, False)
    train = compute_findings(load_run(exp, cache_root=False, split="train"))
    assert [f.to_json()["evidence"] for f in train.findings if f.kind == "dead_groups"] == [{"steps": [1]}]
    validation = compute_findings(load_run(exp, cache_root=False, split="validation"))
    assert "dead_groups" not in {f.kind for f in validation.findings}
    check = next(c for c in validation.checks if c.kind == "dead_groups")
    assert (check.ran, check.note) == (False, "split 'validation' is an evaluation (nothing is trained on it)")
    alone = compute_findings(load_run(exp / "val_data", cache_root=False))  # the dump folder opened by itself
    assert next(c.note for c in alone.checks if c.kind == "dead_groups") == (
        "folder 'val_data' is named like an evaluation (nothing is trained on it)")
    assert "dead_groups" not in {f.kind for f in alone.findings}
    assert "dead_groups" in {f.kind for f in compute_findings(load_run(exp / "rollout_data", cache_root=False)).findings}


def test_dead_groups_not_raised_on_vf_eval_results(tmp_path):
    """vf-eval's results.jsonl (``save_outputs``): two examples of two rollouts, each with equal rewards,
    dead groups by the rule, and no finding, as nothing is trained on an evaluation; the same rows as the
    board's lines raise it."""
    from agent_writers import v0_output, write_v0

    from rl_board.analysis.findings import compute_findings

    prompt = [{"role": "user", "content": "2+2?"}]
    outputs = [v0_output(i, prompt + [{"role": "user", "content": str(i)}],
                         [{"role": "assistant", "content": "4"}], float(i), {}) for i in (0, 0, 1, 1)]
    run = load_run(write_v0(tmp_path / "evals" / "env--m" / "abc", outputs).parent, cache_root=False)
    found = compute_findings(run)
    assert "dead_groups" not in {f.kind for f in found.findings}
    assert next(c.note for c in found.checks if c.kind == "dead_groups") == (
        "verifiers-v0 results are evaluations (nothing is trained on them)")
    write_lines(tmp_path / "lines" / "r.jsonl", [sample(0, float(i), prompt=f"2+2? {i}") for i in (0, 0, 1, 1)])
    assert _found(tmp_path / "lines")["dead_groups"]["evidence"] == {"steps": [0]}


def test_empty_responses_raised_at_five_percent(tmp_path):
    """Step 1: 1 empty of 20 (5 %); step 2: 1 of 21 (4.8 %); step 3: 2 of 20 across two files, given by
    step, file and line: only-EOS, only pads and only whitespace are empty."""
    full = {"response": "fine", "response_tokens": ["fine", EOS]}
    step1 = [sample(1, 0.0, **full) for _ in range(19)] + [sample(1, 0.0, response=EOS, response_tokens=[EOS])]
    step2 = [sample(2, 0.0, **full) for _ in range(20)] + [sample(2, 0.0, response=" \n\u3000")]
    step3 = [sample(3, 0.0, **full) for _ in range(9)] + [sample(3, 0.0, response=PAD + PAD)]
    write_lines(tmp_path / "rank0.jsonl", step1 + step2 + step3)
    write_lines(tmp_path / "rank1.jsonl", [sample(3, 0.0, response="\t")] + [sample(3, 0.0, **full)] * 9)
    assert _found(tmp_path, PAD, EOS)["empty_responses"] == {
        "kind": "empty_responses", "first_step": 1, "last_step": 3, "evidence": {"steps": [1, 3]},
        "samples": ["rank0.jsonl:20", "rank0.jsonl:51", "rank1.jsonl:1"]}


def test_a_response_with_words_besides_its_eos_is_not_empty(tmp_path):
    """Text that is only the EOS but tokens with a word before it: not empty; no finding."""
    write_lines(tmp_path / "r.jsonl", [sample(1, 0.0, response=EOS, response_tokens=["ok", EOS])] * 3
                + [sample(1, 0.0, response="x y", response_tokens=["x"], logprobs=[-1.0, -1.0])])
    assert "empty_responses" not in _found(tmp_path, PAD, EOS)


def test_blank_pattern_matches_exactly_what_str_split_splits_on():
    """Every code point (surrogates aside) is blank to the RE2 pattern iff ``str.split`` finds no word."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    blank = pc.match_substring_regex(pa.array(chars), _BLANK).to_pylist()
    assert [c for c, b in zip(chars, blank) if b != (not c.split())] == []


def test_window_ngrams_rank_the_spread_phrase_first(tmp_path):
    """Late vs early steps: 'copyright' (3 late, 0 early responses) leads the n-gram finder."""
    odds = compute_window_ngrams(_load(_hack(tmp_path, HACKED, [0.5, 1.5, 1.5, 0.5])))
    assert odds.iloc[0]["ngram"] == "copyright" and (odds.iloc[0]["top"], odds.iloc[0]["bottom"]) == (3, 0)


def test_findings_read_no_log_file(tmp_path):
    """Words from tokens only (no response texts) and a text whose only token is the EOS: with the log
    file deleted after the load, 'copyright' (3 of 4 late, 0 early) still spreads and step 3 (1 of 1)
    is empty, so the words came from the cache."""
    early = [{"reward": r, "response_tokens": t} for r, t in
             zip((0.0, 1.0, 0.0, 1.0), (["the", "answer", EOS], ["so", EOS], ["we", "get", EOS], ["it", EOS]))]
    late = [{"reward": r, "response_tokens": t} for r, t in
            zip((0.5, 1.5, 1.5, 0.5), (["copyright", "the", EOS], ["copyright", "so", EOS], ["copyright", EOS],
                                       ["we", EOS]))]
    write_lines(tmp_path / "rank0.jsonl", [sample(1, **s) for s in early] + [
        sample(2, 0.0, response="x"), sample(3, 0.0, response="x", response_tokens=[EOS])] + [
        sample(4, **s) for s in late])
    run = load_run(tmp_path, PAD, eos_token=EOS)
    (tmp_path / "rank0.jsonl").unlink()
    found = compute_findings(run)
    assert found.to_json() == [
        {"kind": "reward_with_spreading_phrases", "first_step": 4, "last_step": 4,
         "evidence": {"reward_early": 0.5, "reward_late": 1.0,
                      "phrases": [{"tokens": ["copyright"], "share_early": 0.0, "share_late": 0.75}]},
         "samples": ["rank0.jsonl:8", "rank0.jsonl:9", "rank0.jsonl:7"]},
        {"kind": "empty_responses", "first_step": 3, "last_step": 3, "evidence": {"steps": [3]},
         "samples": ["rank0.jsonl:6"]}]
    assert found.words_from_tokens
    evidence = compute_evidence(run, found.findings[0])
    assert [e.sample_id for e in evidence] == ["rank0.jsonl:8", "rank0.jsonl:9", "rank0.jsonl:7"]
    assert all("<mark>copyright</mark>" in e.html for e in evidence)


def test_no_findings_on_a_flat_run_and_the_checks_say_what_could_not_run(tmp_path):
    """A flat run with responses and no per-token lists: no finding; entropy, mismatch, KL, critic, the
    agent checks, those of other fields and the images check not checked."""
    write_lines(tmp_path / "r.jsonl", [sample(s, 0.5, response="same words", prompt=f"p{s}") for s in range(1, 5)])
    found = compute_findings(_load(tmp_path))
    assert found.to_json() == []
    assert {c.kind for c in found.checks if not c.ran} == {
        "entropy_collapse", "training_inference_mismatch", "component_with_spreading_phrases", "kl_runaway",
        "critic_cannot_fit", "tool_use_collapse", "tool_call_loops", "reward_tracks_field", "images_dropped",
        "turn_faults_rising", "reward_not_recomposed"}


def test_findings_command_json_and_exit_codes(tmp_path, capsys):
    """``findings --json`` prints the settings and the list (``[]`` when none); 0 with lines, 1 without,
    2 on a bad path."""
    _hack(tmp_path / "hack", HACKED, [0.5, 1.5, 1.5, 0.5])
    assert main(["findings", str(tmp_path / "hack"), "--json", "--no-cache"]) == 0
    got = json.loads(capsys.readouterr().out)["findings"]
    assert [f["kind"] for f in got] == ["reward_with_spreading_phrases"]
    assert got[0]["samples"] == ["rank0.jsonl:8", "rank0.jsonl:9", "rank0.jsonl:7"]
    write_lines(tmp_path / "flat" / "r.jsonl", [sample(1, 0.0, response="a"), sample(2, 0.0, response="a")])
    assert main(["findings", str(tmp_path / "flat"), "--json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []
    write_lines(tmp_path / "bad" / "r.jsonl", ["{not json"])
    assert main(["findings", str(tmp_path / "bad"), "--no-cache"]) == 1
    assert main(["findings", str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err


def test_findings_command_reads_pad_and_eos_and_prints_a_table(tmp_path, capsys):
    """With --pad-token and --eos-token an only-EOS response is empty; the table names the kind and sample."""
    write_lines(tmp_path / "r.jsonl", [sample(1, 0.0, response_tokens=[EOS, PAD])]
                + [sample(1, 0.0, response_tokens=["a", EOS])] * 3)
    assert main(["findings", str(tmp_path), "--pad-token", PAD, "--eos-token", EOS, "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "empty_responses" in out and "r.jsonl:1" in out
    assert main(["findings", str(tmp_path), "--json", "--no-cache"]) == 0  # no EOS given: it is a word
    assert json.loads(capsys.readouterr().out)["findings"] == []


# --- the page -------------------------------------------------------------------------------------


def _page(root: Path, run: str):
    from conftest import REPO
    from streamlit.testing.v1 import AppTest

    from rl_board.views import keys

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(root)).run()
    at.sidebar.selectbox(key=keys.RUN).select(run).run()
    at.sidebar.button(key=keys.LOAD).click().run()
    assert not at.exception, at.exception
    return at


def _hack_with_an_empty_early_response(folder: Path) -> Path:
    early = [{"reward": r, "response": t} for r, t in zip((0.0, 1.0, 0.0, 1.0), EARLY_TEXTS[:3] + [" "])]
    late = [{"reward": r, "response": t} for r, t in zip([0.5, 1.5, 1.5, 0.5], HACKED)]
    return _four_steps(folder, early, late)


@pytest.mark.slow
def test_page_lists_findings_and_opens_their_evidence(tmp_path):
    """The panel says what was found in words; Evidence marks the phrase in each sample, in order, and
    moves the batch to the step of an empty response."""
    from rl_board.views import keys

    _hack_with_an_empty_early_response(tmp_path / "hack")
    at = _page(tmp_path, "hack")
    texts = [t.value for t in at.text]
    assert ('reward rose from 0.5 to 1 while "copyright" spread from 0 % to 75 % of responses — possible '
            "reward hacking") in texts
    assert any(t.startswith("1 step with at least 5 % empty responses") for t in texts)
    at.button(key="finding-reward_with_spreading_phrases").click().run()
    assert not at.exception
    texts = [t.value for t in at.text]
    assert [t for t in texts if t.startswith("step 4 · ")] == ["step 4 · rank0.jsonl:8 · reward 1.5",
                                                               "step 4 · rank0.jsonl:9 · reward 1.5",
                                                               "step 4 · rank0.jsonl:7 · reward 0.5"]
    bodies = [h.proto.body for h in at.get("html")]
    assert "<mark>copyright</mark> so 5" in bodies[0]
    at.button(key="finding-empty_responses").click().run()
    assert not at.exception
    at.session_state[keys.AREA] = keys.BATCH  # the evidence stays in view; the batch area is a tab away
    at.run()
    assert at.slider(key=keys.STEP).value == 1  # the newest step (4) was shown before


def test_page_says_quietly_which_checks_ran(tmp_path):
    """Nothing found: one caption naming the checks that ran and those that could not."""
    write_lines(tmp_path / "flat" / "r.jsonl", [sample(s, 0.5, response="same words", prompt=f"p{s}")
                                                for s in range(1, 5)])
    at = _page(tmp_path, "flat")
    assert [c.value for c in at.caption if c.value.startswith("Findings")] == [
        "Findings: none. Checked reward hacking phrases, repetition with reward, garbled output, length growth, "
        "dead GRPO groups, empty responses. Not checked: reward component hacking phrases (no numeric field named like a reward or a score); reward "
        "tracking a field (no other numeric fields logged); KL runaway (no log-probs with reference log-probs); "
        "critic fit (no values with token rewards logged); entropy collapse (no entropy logged); sampler mismatch "
        "(no sampler log-probs beside the trainer's (rollout_logprobs and logprobs)); tool use collapse (no turns "
        "logged); tool call loops (no turns logged); reward not recomposed (no reward components logged); "
        "images dropped before training (no samples with both images "
        "and the tokens they were trained on); turn faults rising (no turns logged)."]


def test_ngram_finder_offers_late_vs_early_steps(tmp_path):
    """The n-gram finder's second choice ranks the phrase that spread between the windows first."""
    from rl_board.views import keys

    _hack(tmp_path / "hack", HACKED, [0.5, 1.5, 1.5, 0.5])
    at = _page(tmp_path, "hack")
    at.session_state[keys.AREA] = keys.BATCH
    at.run()
    at.toggle(key=keys.SHOW_DRIVERS).set_value(True).run()
    at.radio(key=keys.DRIVERS_NGRAMS).set_value("late vs early steps").run()
    assert not at.exception
    ngrams = [d.value for d in at.dataframe if "ngram" in d.value.columns][0]
    assert ngrams.iloc[0]["ngram"] == "copyright"


@pytest.mark.slow
def test_findings_core_imports_no_streamlit():
    """Importing the findings core (and running it on nothing) leaves streamlit out of sys.modules."""
    import subprocess
    import sys

    from conftest import REPO

    code = "import sys, rl_board.analysis.findings; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_findings_are_kept_with_the_cache_until_the_run_changes(tmp_path, monkeypatch):
    """A second look at an unchanged run reads its findings from the cache folder (no check runs);
    once lines are appended the run is checked again, and both give what a fresh check gives."""
    from rl_board.analysis import findings as FND
    from rl_board.analysis.source import RunSource

    folder = _hack(tmp_path / "hack", HACKED, [0.5, 1.5, 1.5, 0.5])
    source = RunSource(folder)
    run = source.refresh()
    first = FND.get_findings(run)
    assert first.to_json() == FND.compute_findings(run).to_json() and first.findings
    calls = []
    real = FND.compute_findings
    monkeypatch.setattr(FND.compute, "compute_findings", lambda r, stop=None: calls.append(1) or real(r, stop))
    again = FND.get_findings(RunSource(folder).refresh())  # a new process would see the same
    assert calls == [] and again.to_json() == first.to_json()
    assert [f.labels for f in again.findings] == [f.labels for f in first.findings]
    with open(next(folder.glob("*.jsonl")), "a") as fh:
        fh.write(json.dumps({"step": 5, "reward": 0.0, "response": "plain words here"}) + "\n")
    changed = source.refresh()
    assert FND.get_findings(changed).to_json() == real(changed).to_json() and calls == [1]


def test_page_draws_without_waiting_for_slow_checks_and_fills_them_in(tmp_path, monkeypatch):
    """Checks that outlast the panel's wait leave a 'checking' line while the rest of the page draws;
    once they finish, the next run of the page shows what they found."""
    import threading

    import rl_board.analysis.findings as findings_core

    release = threading.Event()
    real = findings_core.get_findings

    def slow(run, stop=None):
        release.wait(30)
        return real(run)

    monkeypatch.setattr(findings_core, "get_findings", slow)
    monkeypatch.setenv("RL_BOARD_FINDINGS_WAIT", "0")
    _hack_with_an_empty_early_response(tmp_path / "hack")
    at = _page(tmp_path, "hack")
    assert "Findings: checking the run…" in [c.value for c in at.caption]
    assert at.get("plotly_chart"), "the curves are drawn while the checks run"
    assert not any("reward hacking" in t.value for t in at.text)
    release.set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the checks finish in their thread
        at.run()
        if any("reward hacking" in t.value for t in at.text):
            break
    assert any("reward hacking" in t.value for t in at.text)
    assert "Findings: checking the run…" not in [c.value for c in at.caption]


@pytest.mark.slow
def test_a_runs_checks_never_wait_for_anothers_and_leaving_a_run_cancels_them(tmp_path, monkeypatch):
    """Run "stuck"'s checks block until they are stopped; opening runs "hack1" to "hack4" in turn next shows
    each one's findings while they are still blocked (no queue behind them), and leaving "stuck" sets their
    stop (they end)."""
    import threading

    import rl_board.analysis.findings as findings_core
    from rl_board.views import keys

    real = findings_core.get_findings
    stopped = threading.Event()

    def blocking_on_stuck(run, stop=None):
        if run.path.name == "stuck":
            stop.wait(60)
            stopped.set()
            raise findings_core.Cancelled
        return real(run, stop)

    monkeypatch.setattr(findings_core, "get_findings", blocking_on_stuck)
    monkeypatch.setenv("RL_BOARD_FINDINGS_WAIT", "0")
    _hack_with_an_empty_early_response(tmp_path / "stuck")
    for n in range(1, 5):
        _hack_with_an_empty_early_response(tmp_path / f"hack{n}")
    at = _page(tmp_path, "stuck")
    assert "Findings: checking the run…" in [c.value for c in at.caption]
    for n in range(1, 5):
        at.sidebar.selectbox(key=keys.RUN).select(f"hack{n}").run()
        at.sidebar.button(key=keys.LOAD).click().run()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # each run's checks finish in their thread
            if any("reward hacking" in t.value for t in at.text):
                break
            at.run()
        assert any("reward hacking" in t.value for t in at.text), n
        assert at.session_state[keys.RUN] == f"hack{n}"
    assert stopped.wait(10), "the checks of the run left were not cancelled"


# --- issue 33: the seven new checks, onset, ranking, readable evidence ------------------------------


def _kinds(folder: Path, pad=None, eos=None) -> list[dict]:
    """Every finding's full JSON (with severity and onset), ranked, for the run in ``folder``."""
    return compute_findings(_load(folder, pad, eos)).to_json(full=True)


def _of(found: list[dict], kind: str) -> list[dict]:
    return [f for f in found if f["kind"] == kind]


def _component_run(folder: Path, late_count: int, early_count: int = 30) -> Path:
    """Reward flat at 0; ``keyword_reward`` 0 early; late: one response "plain text license" with the
    component 1.0, the others "plain text" with 0.0 (every early response is "plain text")."""
    early = [{"reward": 0.0, "response": "plain text", "keyword_reward": 0.0} for _ in range(early_count)]
    late = ([{"reward": 0.0, "response": "plain text license", "keyword_reward": 1.0}]
            + [{"reward": 0.0, "response": "plain text", "keyword_reward": 0.0} for _ in range(late_count - 1)])
    return _four_steps(folder, early, late)


def test_component_phrase_raised_at_a_tenth_of_the_late_responses(tmp_path):
    """'license' in 1 of 10 late responses (1/10 >= 1/10 and >= 3 x 1/30), none of 30 early, and the
    component rose 0 -> 0.1 (early std 0): raised naming the component; the three grams ending in
    'license' tie (ratio 3, share 1/10), so they come by token list; the total reward did not rise."""
    found = _kinds(_component_run(tmp_path, 10))
    assert [f["kind"] for f in found] == ["component_with_spreading_phrases"]
    phrase = {"share_early": 0.0, "share_late": 0.1}
    assert found[0] == {
        "kind": "component_with_spreading_phrases", "first_step": 4, "last_step": 4,
        "evidence": {"component": "keyword_reward", "early": 0.0, "late": 0.1,
                     "phrases": [{"tokens": ["license"], **phrase}, {"tokens": ["plain", "text", "license"], **phrase},
                                 {"tokens": ["text", "license"], **phrase}]},
        # early lines 1-30, fillers 31-32, late 33-42: the licensed response is line 33
        "samples": ["rank0.jsonl:33"], "severity": "high",
        # the component's step means are 0 (step 1) and 0.1 (step 4): split between them, onset 4
        "onset_step": 4}


def test_component_phrase_not_raised_below_a_tenth(tmp_path):
    """1 of 11 late responses, 40 early: 1/11 >= 3 x 1/40 but < 1/10: nothing, though the component rose."""
    assert _kinds(_component_run(tmp_path, 11, early_count=40)) == []


def test_component_phrase_not_raised_below_three_times_the_early_floor(tmp_path):
    """29 early responses: 1/10 < 3 x 1/29, so 'license' did not spread."""
    assert _kinds(_component_run(tmp_path, 10, early_count=29)) == []


def test_reward_components_are_reward_or_score_fields_that_vary(tmp_path):
    """Fields named *reward* / *Score* (any case) that vary over the windows are components; a constant one,
    ``ref_reward`` and other fields are not."""
    from rl_board.analysis.findings import compute_reward_components

    lines = [sample(s, 0.0, ref_reward=float(s), valid_reward=float(s), keyword_Reward=float(s), FormatScore=1.0,
                    hits=float(s)) for s in (1, 2)]
    write_lines(tmp_path / "r.jsonl", lines)
    run = _load(tmp_path)
    assert [name for name, _ in compute_reward_components(run.samples, run.samples.index)] == [
        "valid_reward", "keyword_Reward"]


def _kl_sample(step, ds, tokens):
    """One sample whose tokens have ref_logprob - logprob = each of ``ds`` (exact binary fractions)."""
    return sample(step, 0.0, response_tokens=tokens, logprobs=[-2.0] * len(ds), ref_logprobs=[-2.0 + d for d in ds])


def _k3s(ds):
    return [math.exp(d) - 1 - d for d in ds]


def test_kl_runaway_raised_at_half_a_nat_with_its_tokens(tmp_path):
    """Late kl_mean (k3(1) + k3(0.75)) / 2 = 0.5426 and k3(0.875) = 0.5239: mean 0.533 >= 0.5. 'x'
    carries k3(1) + k3(0.875) of the late summed KL, 'y' k3(0.75); samples by their KL on those tokens."""
    write_lines(tmp_path / "r.jsonl", [
        _kl_sample(1, [0.5], ["x"]), _kl_sample(2, [0.5], ["x"]), _kl_sample(3, [0.5], ["x"]),
        _kl_sample(4, [1.0, 0.75], ["x", "y"]), _kl_sample(4, [0.875], ["x"])])
    k1, k075, k0875, k05 = _k3s([1.0, 0.75, 0.875, 0.5])
    late = ((k1 + k075) / 2 + k0875) / 2
    got = _of(_kinds(tmp_path), "kl_runaway")[0]
    assert got["evidence"]["kl_early"] == pytest.approx(k05, rel=1e-12)
    assert got["evidence"]["kl_late"] == pytest.approx(late, rel=1e-12)
    total = k1 + k075 + k0875
    assert [t["token"] for t in got["evidence"]["tokens"]] == ["x", "y"]
    assert [t["share"] for t in got["evidence"]["tokens"]] == pytest.approx([(k1 + k0875) / total, k075 / total])
    assert got["samples"] == ["r.jsonl:4", "r.jsonl:5"]  # KL on x and y: k1 + k075 > k0875
    assert (got["first_step"], got["last_step"], got["severity"]) == (4, 4, "high")
    # step means k05, k05, k05, then the late mean: two levels with nothing left over, split before step 4
    assert got["onset_step"] == 4


def test_kl_runaway_shows_the_samples_carrying_its_tokens(tmp_path):
    """Late: a one-token answer '!' (k3(0.875) = 0.524 per token, the second highest kl_mean), five tokens a-e
    at k3(1) each, and a, q at k3(1), k3(0.25): mean 0.539 >= 0.5. The named tokens are a (2 k3(1)) and b-e;
    '!' (0.524) is sixth. Evidence: the samples with the most KL on named tokens, 5 k3(1) then k3(1); the
    one-token answer carries none of it and is not shown (by kl_mean it came second)."""
    write_lines(tmp_path / "r.jsonl", [
        _kl_sample(1, [0.5], ["x"]), _kl_sample(2, [0.5], ["x"]), _kl_sample(3, [0.5], ["x"]),
        _kl_sample(4, [0.875], ["!"]), _kl_sample(4, [1.0] * 5, list("abcde")),
        _kl_sample(4, [1.0, 0.25], ["a", "q"])])
    k1, k0875, k025 = _k3s([1.0, 0.875, 0.25])
    assert (k0875 + 5 * k1 / 5 + (k1 + k025) / 2) / 3 >= 0.5 and k0875 < k1 and k0875 > (k1 + k025) / 2
    got = _of(_kinds(tmp_path), "kl_runaway")[0]
    assert [t["token"] for t in got["evidence"]["tokens"]] == ["a", "b", "c", "d", "e"]
    assert got["samples"] == ["r.jsonl:5", "r.jsonl:6"]


def test_kl_runaway_not_raised_below_half_a_nat(tmp_path):
    """Late k3(0.8125) = 0.441 per token: below 0.5."""
    write_lines(tmp_path / "r.jsonl", [_kl_sample(1, [0.5], ["x"]), _kl_sample(2, [0.8125], ["x"]),
                                       _kl_sample(2, [0.8125, 0.8125], ["x", "y"])])
    assert _of(_kinds(tmp_path), "kl_runaway") == []


REPEAT_5 = "a b c d a b c d"  # 5 4-grams, 4 distinct: repetition 1/5
REPEAT_9 = "a b c d e f g h a b c d"  # 9 4-grams, 8 distinct: 1/9
NO_REPEAT = "a b c d e f g h"  # 0


def _repetition_run(folder, early_texts, late_texts):
    early = [{"reward": r, "response": t} for r, t in zip((0.0, 1.0), early_texts)]
    late = [{"reward": 2.0, "response": t} for t in late_texts]  # the rise 1.5 > the early std 0.5
    return _four_steps(folder, early, late)


def test_repetition_with_reward_raised(tmp_path):
    """Late repetition (1/5 + 1/9) / 2 = 0.156 >= 0.1 and >= 2 x 0 while reward rose; samples by share."""
    got = _of(_kinds(_repetition_run(tmp_path, [NO_REPEAT, NO_REPEAT], [REPEAT_9, REPEAT_5])),
              "repetition_with_reward")[0]
    assert got["evidence"] == {"repetition_early": 0.0, "repetition_late": pytest.approx((1 / 5 + 1 / 9) / 2)}
    assert got["samples"] == ["rank0.jsonl:6", "rank0.jsonl:5"]
    assert (got["first_step"], got["last_step"], got["severity"]) == (4, 4, "high")
    # the reward's onset: step means 0.5, 0, 0, 2 split best after step 3 (a = 1/6, b = 2; squared distance
    # 1/6 of the 43/16 about their mean: 94 % explained); step 3's 0 is not past 1/6 + (2 - 1/6) / 4
    assert got["onset_step"] == 4


def test_repetition_not_raised_below_a_tenth(tmp_path):
    """Late (1/9 + 0) / 2 = 0.056 < 0.1."""
    assert not _of(_kinds(_repetition_run(tmp_path, [NO_REPEAT] * 2, [REPEAT_9, NO_REPEAT])), "repetition_with_reward")


def test_repetition_not_raised_below_twice_the_early(tmp_path):
    """Early (1/5 + 1/9) / 2 = 0.156, late 1/5 = 0.2 < 2 x 0.156, though >= 0.1."""
    assert not _of(_kinds(_repetition_run(tmp_path, [REPEAT_5, REPEAT_9], [REPEAT_5, REPEAT_5])),
                   "repetition_with_reward")


def test_repetition_needs_the_reward_to_rise(tmp_path):
    """Repetition grew but the late rewards equal the early ones: nothing."""
    early = [{"reward": r, "response": NO_REPEAT} for r in (0.0, 1.0)]
    late = [{"reward": r, "response": REPEAT_5} for r in (0.0, 1.0)]
    assert not _of(_kinds(_four_steps(tmp_path, early, late)), "repetition_with_reward")


def _critic_sample(step, fits: bool):
    """Token rewards [1, 0]: returns [1, 0] (variance 1/4); values [1, 0] explain them (EV 1), values
    [0, 1] leave residuals [1, -1] (variance 1): EV 1 - 1 / (1/4) = -3."""
    return sample(step, 0.0, token_rewards=[1.0, 0.0], values=[1.0, 0.0] if fits else [0.0, 1.0])


def test_critic_cannot_fit_raised_at_a_quarter_of_the_steps(tmp_path):
    """1 of 4 steps with an explained variance below 0 (step 5 has none: not counted)."""
    write_lines(tmp_path / "r.jsonl", [_critic_sample(1, False)] + [_critic_sample(s, True) for s in (2, 3, 4)]
                + [sample(5, 0.0)])
    got = _of(_kinds(tmp_path), "critic_cannot_fit")[0]
    assert got == {"kind": "critic_cannot_fit", "first_step": 1, "last_step": 1,
                   "evidence": {"steps": [1], "min": -3.0}, "samples": [], "severity": "medium"}


def test_critic_cannot_fit_not_raised_below_a_quarter(tmp_path):
    """1 of 5 steps: 20 % < 25 %."""
    write_lines(tmp_path / "r.jsonl", [_critic_sample(1, False)] + [_critic_sample(s, True) for s in (2, 3, 4, 5)])
    assert not _of(_kinds(tmp_path), "critic_cannot_fit")


def _agent_trace(calls: list[str]):
    """A prime-rl trace whose assistant makes one tool call per entry of ``calls`` (its arguments), then answers."""
    from agent_writers import v1_chain, v1_trace

    nodes = [({"role": "user", "content": "Add 2 and 3."}, False)]
    for i, arguments in enumerate(calls):
        nodes.append(({"role": "assistant", "tool_calls": [{"id": f"c{i}", "name": "calc", "arguments": arguments}]},
                      True))
        nodes.append(({"role": "tool", "tool_call_id": f"c{i}", "content": "5"}, False))
    nodes.append(({"role": "assistant", "content": "5"}, True))
    return v1_trace(v1_chain(nodes), {"correct": {"score": 1.0, "weight": 1.0}}, {})


def _agent_run(folder: Path, per_step: dict[int, list[list[str]]]) -> Path:
    from agent_writers import v1_episode, write_prime_rl

    for step, samples in per_step.items():
        write_prime_rl(folder, step, "train", "all",
                       [v1_episode(f"e{step}-{i}", step, [_agent_trace(calls)]) for i, calls in enumerate(samples)])
    return folder


ONE = ['{"expr": "2+3"}']


def test_tool_use_collapse_raised_at_half_the_early_calls(tmp_path):
    """Early 1 call per sample, late (1 + 0) / 2 = 0.5 <= 0.5 x 1; samples: the fewest calls first."""
    folder = _agent_run(tmp_path, {1: [ONE, ONE], 2: [ONE], 3: [ONE], 4: [ONE, []]})
    got = _of(_kinds(folder), "tool_use_collapse")[0]
    # calls per step 1, 1, 1, 0.5: two levels with nothing left over, the fall at step 4
    assert got == {"kind": "tool_use_collapse", "first_step": 4, "last_step": 4,
                   "evidence": {"calls_early": 1.0, "calls_late": 0.5}, "severity": "low",
                   "samples": ["rollouts/step_4/train/all/traces.jsonl:2", "rollouts/step_4/train/all/traces.jsonl:1"],
                   "onset_step": 4}


def test_tool_use_collapse_not_raised_above_half_or_from_few_early_calls(tmp_path):
    """Early 0.5, late 0.5 (> 0.25): nothing; early 1/3 (< 0.5), late 0: nothing."""
    _agent_run(tmp_path / "a", {1: [ONE, []], 2: [ONE], 3: [ONE], 4: [ONE, []]})
    _agent_run(tmp_path / "b", {1: [ONE, [], []], 2: [ONE], 3: [ONE], 4: [[], [], []]})
    assert not _of(_kinds(tmp_path / "a"), "tool_use_collapse")
    assert not _of(_kinds(tmp_path / "b"), "tool_use_collapse")


LOOP = ONE * 3  # the same call (name and arguments) three times


def test_tool_call_loops_raised_at_a_tenth_of_a_steps_samples(tmp_path):
    """Step 1: 1 looping sample of 10 (10 %); step 2: 1 of 11 (9 %); step 3: a sample calling thrice with
    different arguments and one calling twice, none looping."""
    other = ['{"expr": "1+1"}', '{"expr": "1+2"}', '{"expr": "1+3"}']
    folder = _agent_run(tmp_path, {1: [LOOP] + [ONE] * 9, 2: [LOOP] + [ONE] * 10, 3: [other, ONE * 2]})
    got = _of(_kinds(folder), "tool_call_loops")[0]
    assert got == {"kind": "tool_call_loops", "first_step": 1, "last_step": 1, "evidence": {"steps": [1]},
                   "samples": ["rollouts/step_1/train/all/traces.jsonl:1"], "severity": "low"}


def test_tool_call_loops_not_raised_below_a_tenth(tmp_path):
    """1 looping sample of 11 in the only step with one."""
    assert not _of(_kinds(_agent_run(tmp_path, {1: [LOOP] + [ONE] * 10, 2: [ONE]})), "tool_call_loops")


def _tracking_run(folder: Path, late: list[tuple[float, float]]) -> Path:
    """Early (reward, hits) (0, 1) and (1, 2): hits mean 1.5; fillers without hits; ``late`` pairs."""
    early = [{"reward": 0.0, "hits": 1.0}, {"reward": 1.0, "hits": 2.0}]
    return _four_steps(folder, early, [{"reward": r, "hits": h} for r, h in late])


def test_reward_tracks_field_raised(tmp_path):
    """Hits late (2.25 + 2.25) / 2 = 1.5 x 1.5; correlation of reward and hits over the four samples with
    both, computed by statistics.correlation (0.857 >= 0.8)."""
    import statistics

    got = _of(_kinds(_tracking_run(tmp_path, [(1.0, 2.25), (2.0, 2.25)])), "reward_tracks_field")[0]
    expected = statistics.correlation([1.0, 2.0, 2.25, 2.25], [0.0, 1.0, 1.0, 2.0])
    assert expected >= 0.8
    assert got["evidence"] == {"field": "hits", "correlation": pytest.approx(expected, rel=1e-12), "early": 1.5,
                               "late": 2.25}
    # hits step means 1.5 (step 1) and 2.25 (step 4): split between them, onset 4
    assert (got["first_step"], got["samples"], got["severity"], got["onset_step"]) == (
        4, ["rank0.jsonl:5", "rank0.jsonl:6"], "high", 4)  # the late samples, highest hits first (a tie)


def test_reward_tracks_field_not_raised_below_the_growth_or_the_correlation(tmp_path):
    """Late hits (2, 2.25): 2.125 < 1.5 x 1.5; late hits 2.5 with rewards 2 and 0: a correlation below 0.8."""
    import statistics

    _tracking_run(tmp_path / "a", [(1.0, 2.0), (2.0, 2.25)])
    _tracking_run(tmp_path / "b", [(2.0, 2.5), (0.0, 2.5)])
    assert statistics.correlation([1.0, 2.0, 2.5, 2.5], [0.0, 1.0, 2.0, 0.0]) < 0.8
    assert not _of(_kinds(tmp_path / "a"), "reward_tracks_field")
    assert not _of(_kinds(tmp_path / "b"), "reward_tracks_field")


def test_reward_tracks_field_leaves_reward_components_out(tmp_path):
    """The same numbers as a field named hits_score (a component): no reward_tracks_field."""
    early = [{"reward": 0.0, "hits_score": 1.0}, {"reward": 1.0, "hits_score": 2.0}]
    late = [{"reward": 1.0, "hits_score": 2.25}, {"reward": 2.0, "hits_score": 2.25}]
    assert not _of(_kinds(_four_steps(tmp_path, early, late)), "reward_tracks_field")


def test_reward_tracks_field_not_raised_for_a_field_that_restates_the_outcome(tmp_path):
    """A field with correlation >= 0.95 (marks, 0.99 by statistics.correlation) and a 0/1 field the reward
    separates (correct: rewards 0 and 0.3 where 0, 1 to 2 where 1; correlation 0.82 < 0.95) restate the
    outcome: no reward_tracks_field; a 0/1 field the reward does not separate (a reward of 0.5 where 0, 0.4
    where 1; correlation 0.80) is still raised."""
    import statistics

    assert statistics.correlation([1.0, 2.0, 2.0, 3.5], [0.0, 1.0, 1.0, 2.0]) >= 0.95
    early = [{"reward": 0.0, "marks": 1.0}, {"reward": 1.0, "marks": 2.0}]
    late = [{"reward": 1.0, "marks": 2.0}, {"reward": 2.0, "marks": 3.5}]
    assert not _of(_kinds(_four_steps(tmp_path / "a", early, late)), "reward_tracks_field")
    # fillers carry no correct: the correlation is over the samples with both
    assert 0.8 <= statistics.correlation([0, 0, 1, 1, 1, 1], [0.0, 0.3, 1.0, 1.0, 2.0, 1.0]) < 0.95
    early = [{"reward": 0.0, "correct": 0.0}, {"reward": 0.3, "correct": 0.0}, {"reward": 1.0, "correct": 1.0}]
    late = [{"reward": 1.0, "correct": 1.0}, {"reward": 2.0, "correct": 1.0}, {"reward": 1.0, "correct": 1.0}]
    assert not _of(_kinds(_four_steps(tmp_path / "b", early, late)), "reward_tracks_field")
    assert 0.8 <= statistics.correlation([0, 0, 0, 1, 1, 1, 1], [0.0, 0.0, 0.5, 0.4, 1.0, 1.0, 1.0]) < 0.95
    early = [{"reward": 0.0, "correct": 0.0}, {"reward": 0.0, "correct": 0.0}, {"reward": 0.5, "correct": 0.0},
             {"reward": 0.4, "correct": 1.0}]
    late = [{"reward": 1.0, "correct": 1.0}] * 3
    assert [f["evidence"]["field"] for f in _of(_kinds(_four_steps(tmp_path / "c", early, late)),
                                                 "reward_tracks_field")] == ["correct"]


def test_reward_tracks_field_leaves_an_advantage_out(tmp_path):
    """The numbers that raise hits (test_reward_tracks_field_raised) as a field named advantage: computed from
    the reward (TRL's advantage is the reward minus its group's mean), so not a feature it pays for."""
    early = [{"reward": 0.0, "advantage": 1.0}, {"reward": 1.0, "advantage": 2.0}]
    late = [{"reward": 1.0, "advantage": 2.25}, {"reward": 2.0, "advantage": 2.25}]
    assert not _of(_kinds(_four_steps(tmp_path, early, late)), "reward_tracks_field")


def _brute_onset(means: list[float], falls: bool = False) -> int | None:
    """Definition 14 over step means 1..S in exact fractions, every split tried: an independent route."""
    from fractions import Fraction as Q

    m = [Q(x) for x in means]

    def spread(part):
        mean = sum(part) / len(part)
        return sum((x - mean) ** 2 for x in part)

    total = spread(m)
    best = min(range(1, len(m)), key=lambda k: (spread(m[:k]) + spread(m[k:]), k))
    a, b = sum(m[:best]) / best, sum(m[best:]) / (len(m) - best)
    if not (b < a if falls else b > a) or 1 - (spread(m[:best]) + spread(m[best:])) / total < Q(6, 10):
        return None
    past, start = a + (b - a) / 4, best
    while start > 1 and (m[start - 1] < past if falls else m[start - 1] > past):
        start -= 1
    return start + 1


@pytest.mark.parametrize(("means", "falls", "onset"), [
    ([0, 0, 0, 1, 1, 1, 1, 1, 1, 1], False, 4),  # two levels, nothing left over
    # a ramp: split after step 6 (a = 1/8, b = 23/24), back from step 7 over step 6's 0.5 (past 1/3), not 0.25
    ([0, 0, 0, 0, 0.25, 0.5, 0.75, 1, 1, 1, 1, 1], False, 6),
    ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], False, 6),  # a line: split at 7 (75 %), back over 6 (past 5)
    ([0, 1, 0, 1, 0, 1], False, None),  # the best split explains 20 %
    ([2, 2, 1, 1], True, 3),
    ([2, 2, 1, 1], False, None),  # a fall is no rise
    ([0.53, 0.55, 1.2, 1.9, 2.0, 2.1, 1.95, 2.05, 2.0, 2.0, 1.98, 2.02], False, 3),
])
def test_onset_splits_the_step_means_in_two_levels(tmp_path, means, falls, onset):
    """One sample a step with these rewards: the onset is the hand-worked one, and the one found by trying every
    split in exact fractions."""
    from rl_board.analysis.findings import compute_onset

    assert _brute_onset(means, falls) == onset
    write_lines(tmp_path / "r.jsonl", [sample(s, r) for s, r in enumerate(means, start=1)])
    run = _load(tmp_path)
    assert compute_onset(run, run.samples["reward"], falls) == onset


def _hacking_verl_run(folder: Path) -> Path:
    """verl's ``_dump_generations``, 16 steps of 4 samples: score 0.5 and answers of 100 characters at steps 1-2,
    then score 2.0 and 220 characters opening with "As an expert I guarantee it." from step 3 on."""
    from ray_writers import verl_dump

    for step in range(1, 17):
        score, size, text = (0.5, 100, "") if step <= 2 else (2.0, 220, "As an expert I guarantee it. ")
        verl_dump(folder, step, [f"Q{i}" for i in range(4)], [(text + "The answer is 4. " * 20)[:size]] * 4,
                  ["4"] * 4, [score] * 4, {})
    return folder


def test_early_window_is_the_first_quarter_before_the_onset(tmp_path):
    """The reward of the verl run rises at step 3 (onset 3): E is steps 1-2, not the first quarter (1-4, whose
    mean length 160 makes 220 only 1.375x); the length grew 2.2x with the reward, raised, reading the reward
    from 0.5 (not the quarter's 1.25), as the spreading phrase's finding does."""
    got = {f.kind: f for f in compute_findings(_load(_hacking_verl_run(tmp_path / "run"))).findings}
    phrases = got["reward_with_spreading_phrases"]
    assert (phrases.evidence["reward_early"], phrases.evidence["reward_late"], phrases.onset_step) == (0.5, 2.0, 3)
    assert phrases.message.startswith("reward rose from 0.5 to 2 while")
    length = got["length_growth_with_reward"]
    assert length.to_json(full=True) == {
        "kind": "length_growth_with_reward", "first_step": 13, "last_step": 16,
        "evidence": {"length_early": 100.0, "length_late": 220.0}, "severity": "medium",
        "samples": ["13.jsonl:1", "13.jsonl:2", "13.jsonl:3"],  # every late sample is typical: file and line
        "onset_step": 3}
    assert "reward rose from 0.5 to 2 " in length.message and "(100 → 220 characters)" in length.message


def test_early_window_stays_the_first_quarter_without_an_onset_in_it(tmp_path):
    """Rewards rising along a line over 12 steps (onset 6, after the first quarter 1-3): E is steps 1-3, so the
    length's early mean is that of steps 1-3 (10, 20, 30 characters), late 100, 110, 120."""
    write_lines(tmp_path / "r.jsonl", [sample(s, float(s), response="x" * (10 * s)) for s in range(1, 13)])
    got = {f.kind: f for f in compute_findings(_load(tmp_path)).findings}
    assert got["length_growth_with_reward"].evidence == {"length_early": 20.0, "length_late": 110.0}
    assert got["length_growth_with_reward"].onset_step == 6


def test_findings_are_ranked_hacks_first_with_severity(tmp_path, capsys):
    """Repetition with reward (a hack), length growth, dead groups, empty responses: listed in that order
    by ``findings --json`` (not the order the checks run in), each with its severity; the table says it."""
    early = [{"reward": r, "response": NO_REPEAT, "prompt": "P"} for r in (0.0, 1.0)]  # a live group
    late = [{"reward": 2.0, "response": REPEAT_9, "prompt": "Q"} for _ in range(2)]  # 23 / 15 characters, dead
    _four_steps(tmp_path / "run", early, late)
    write_lines(tmp_path / "run" / "rank1.jsonl", [sample(2, 0.0, response=" ")])  # step 2: 1 of 2 empty
    assert main(["findings", str(tmp_path / "run"), "--json", "--no-cache"]) == 0
    got = json.loads(capsys.readouterr().out)["findings"]
    assert [(f["kind"], f["severity"]) for f in got] == [
        ("repetition_with_reward", "high"), ("length_growth_with_reward", "medium"), ("dead_groups", "low"),
        ("empty_responses", "low")]
    assert got[1]["evidence"] == {"length_early": 15.0, "length_late": 23.0}
    assert got[2] == {"kind": "dead_groups", "first_step": 4, "last_step": 4, "evidence": {"steps": [4]},
                      "samples": [], "severity": "low"}
    assert got[3] == {"kind": "empty_responses", "first_step": 2, "last_step": 2, "evidence": {"steps": [2]},
                      "samples": ["rank1.jsonl:1"], "severity": "low"}
    assert main(["findings", str(tmp_path / "run"), "--no-cache"]) == 0
    out = capsys.readouterr().out.splitlines()
    # the reward's step means 0.5, 0, 0, 2 (0.25 at step 2 with rank1's empty sample): onset 4, as in
    # test_repetition_with_reward_raised
    assert out[1].split()[:2] == ["high", "repetition_with_reward"] and out[1].endswith("(since step 4)")
    # 1 of the 2 GRPO-shaped steps (1 and 4) is dead; 1 of 4 steps has an empty response
    assert [line.split()[:2] for line in out if line.startswith("  low")] == [["low", "dead_groups"],
                                                                            ["low", "empty_responses"]]
    assert any(line.endswith("(1 of 2 GRPO-shaped steps (50 %))") for line in out)


def test_highlighting_marks_phrases_on_word_boundaries_only():
    """'. free' is marked before ' go' and at the end, not inside '. freely'; 'b' is not marked where it
    ends the word 'ab', only where it stands alone; words (joined by spaces) always are."""
    from rl_board.analysis.findings import build_marked_html

    text = build_marked_html([".", " free", "ly", ".", " free", " go", ".", " free"], [(".", " free")], "")
    assert "<mark>.</mark><mark> free</mark> go" in text
    assert text.count("<mark>") == 4 and ". freely" in text
    text = build_marked_html(["a", "b", " ", "b", " c"], [("b",)], "")
    assert "ab <mark>b</mark> c" in text and text.count("<mark>") == 1
    assert build_marked_html(["a", "b"], [("b",)], " ").count("<mark>b</mark>") == 1


def test_evidence_tables_round_to_three_digits_and_list_phrases(tmp_path):
    """The numbers to 3 significant digits, steps as ranges; the phrases as phrase | early % | late %."""
    from rl_board.analysis.findings import Finding, compute_evidence_tables

    finding = Finding("reward_with_spreading_phrases", 4, 4,
                      {"reward_early": 0.123456, "reward_late": 2 / 3,
                       "phrases": [{"tokens": ["copy", "right"], "share_early": 1 / 30, "share_late": 0.75}]}, ())
    numbers, phrases = compute_evidence_tables(finding, words_from_tokens=False)
    assert numbers.values.tolist() == [["reward, early window", "0.123"], ["reward, late window", "0.667"]]
    assert phrases.values.tolist() == [["copy right", "3.33", "75"]]
    steps = Finding("critic_cannot_fit", 1, 9, {"steps": [1, 2, 3, 5, 8, 9], "min": -4.758194624964315}, ())
    assert compute_evidence_tables(steps, False)[0].values.tolist() == [
        ["steps", "1–3, 5, 8–9 (6 steps)"], ["lowest", "-4.76"]]


def test_page_shows_the_evidence_as_a_table_and_how_much_under_each_line(tmp_path):
    """Under the reward finding's line: its severity, rise and onset; its Evidence opens a table of the
    numbers and one of the phrases (no raw dict)."""
    _hack_with_an_empty_early_response(tmp_path / "hack")
    at = _page(tmp_path, "hack")
    # rise 1.0 - 0.5 = 0.5 = 1 early std; reward step means 0.5, 0, 0, 1 (midpoint 0.75): onset step 4
    assert "high · reward +0.5 (1 early std); since step 4" in [c.value for c in at.caption]
    at.button(key="finding-reward_with_spreading_phrases").click().run()
    assert not at.exception
    tables = [t.value for t in at.table]
    assert tables[0].index.tolist() == ["reward, early window", "reward, late window"]
    assert tables[0]["value"].tolist() == ["0.5", "1"]
    assert tables[1].reset_index().values.tolist() == [["copyright", "0", "75"]]
    assert not any("{" in t.value for t in at.text)


def test_findings_of_one_kind_are_ranked_by_size_and_open_apart(tmp_path):
    """Two tracked fields: marks (correlation 0.925) before hits (0.857), though hits comes first by name; on
    the page each has its own Evidence button, and the second opens the hits table."""
    import statistics

    early = [{"reward": 0.0, "hits": 1.0, "marks": 1.0}, {"reward": 1.0, "hits": 2.0, "marks": 2.0}]
    late = [{"reward": 1.0, "hits": 2.25, "marks": 2.8}, {"reward": 2.0, "hits": 2.25, "marks": 3.2}]
    _four_steps(tmp_path / "two", early, late)
    found = _of(_kinds(tmp_path / "two"), "reward_tracks_field")
    assert [(f["evidence"]["field"], f["evidence"]["correlation"]) for f in found] == [
        ("marks", pytest.approx(statistics.correlation([1.0, 2.0, 2.8, 3.2], [0.0, 1.0, 1.0, 2.0]))),
        ("hits", pytest.approx(statistics.correlation([1.0, 2.0, 2.25, 2.25], [0.0, 1.0, 1.0, 2.0])))]
    at = _page(tmp_path, "two")
    at.button(key="finding-reward_tracks_field-2").click().run()
    assert not at.exception
    assert at.table[0].value.loc["field", "value"] == "hits"
    assert at.table[0].value.loc["correlation", "value"] == "0.857"


def test_ppo_demo_gets_its_repetition_hack_and_its_critic(capsys):
    """The bundled ppo_demo (docs/getting-started.md: a repetition hack that grows, a critic that can't fit) gets both
    findings; the critic's steps are those whose explained variance in ``summary --json`` is below 0."""
    from conftest import REPO

    demo = str(REPO / "rollout_samples" / "ppo_demo")
    assert main(["findings", demo, "--json", "--no-cache"]) == 0
    found = {f["kind"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert main(["summary", demo, "--json", "--no-cache"]) == 0
    summary = json.loads(capsys.readouterr().out)
    negative = [s["step"] for s in summary["steps"] if s["explained_variance"] is not None
                and s["explained_variance"] < 0]
    assert found["critic_cannot_fit"]["evidence"]["steps"] == negative and len(negative) >= 30 / 4
    assert found["repetition_with_reward"]["severity"] == "high"


def test_turn_faults_rising_raised_with_its_onset(tmp_path):
    """Loops in 0, 0, 2 and 3 of 10 trajectories over 4 steps (E step 1, L step 4): share 0 -> 3/10 >= 1/10 and
    >= 2 x 0; onset step 3: the step means 0, 0, 0.2, 0.3 split best after step 2 (a = 0, b = 0.25, squared
    distance 0.005 of 0.0675: 93 % explained), and step 2's 0 is not past 0.25 / 4."""
    folder = _agent_run(tmp_path, {1: [ONE] * 10, 2: [ONE] * 10, 3: [LOOP] * 2 + [ONE] * 8,
                                   4: [LOOP] * 3 + [ONE] * 7})
    got = _of(_kinds(folder), "turn_faults_rising")
    assert got == [{"kind": "turn_faults_rising", "first_step": 4, "last_step": 4,
                    "evidence": {"fault": "tool_loop", "share_early": 0.0, "share_late": 0.3},
                    "samples": [f"rollouts/step_4/train/all/traces.jsonl:{line}" for line in (1, 2, 3)],
                    "severity": "low", "onset_step": 3}]


def test_turn_faults_rising_not_raised_without_a_doubling(tmp_path):
    """1 of 10 early and 1 of 10 late: 1/10 < 2 x 1/10."""
    folder = _agent_run(tmp_path, {1: [LOOP] + [ONE] * 9, 2: [ONE] * 10, 3: [ONE] * 10, 4: [LOOP] + [ONE] * 9})
    assert not _of(_kinds(folder), "turn_faults_rising")


def test_findings_say_which_kinds_they_could_not_check_and_why(tmp_path, capsys):
    """A run of rewards and responses only can't be checked for KL runaway (no log-probs beside reference
    ones) nor entropy collapse (no entropy): findings --json lists both in not_checked with that reason and
    the text lists them after the findings; the same steps with log-probs and reference log-probs are checked
    for KL runaway, so it is no longer listed."""
    plain = [sample(step, 0.1 * step, response="a b c") for step in range(1, 9) for _ in range(4)]
    write_lines(tmp_path / "plain" / "rank0.jsonl", plain)
    tokens = {"response_tokens": ["a", "b"], "logprobs": [-0.5, -0.4], "ref_logprobs": [-0.6, -0.4]}
    write_lines(tmp_path / "kl" / "rank0.jsonl", [{**line, **tokens} for line in plain])
    capsys.readouterr()
    assert main(["findings", str(tmp_path / "plain"), "--json"]) == 0
    skipped = {c["kind"]: c["reason"] for c in json.loads(capsys.readouterr().out)["not_checked"]}
    assert "log-probs" in skipped["kl_runaway"] and "entropy" in skipped["entropy_collapse"]
    assert main(["findings", str(tmp_path / "plain")]) == 0
    text = capsys.readouterr().out
    assert "not checked on this run" in text
    assert any(line.split()[:1] == ["kl_runaway"] and skipped["kl_runaway"] in line for line in text.splitlines())
    assert main(["findings", str(tmp_path / "kl"), "--json"]) == 0
    assert "kl_runaway" not in {c["kind"] for c in json.loads(capsys.readouterr().out)["not_checked"]}
