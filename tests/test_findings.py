"""Findings (issue 16): each of the six checks raised and not raised on tiny hand-made runs that sit
just on either side of its threshold; the words, windows and the ``findings`` command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import sample, write_lines
from rl_board.__main__ import main
from rl_board.findings import (_BLANK, compute_evidence, compute_findings, compute_window_ngrams, compute_windows,
                               compute_words)
from rl_board.loader import load_run

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


def test_phrases_counted_one_response_at_a_time_are_the_same(tmp_path, monkeypatch):
    """With every block of n-gram occurrences a single response, the top five of the test above are
    unchanged: a gram's responses are summed across blocks."""
    from rl_board import findings

    monkeypatch.setattr(findings, "GRAM_BLOCK", 1)
    early = [{"reward": 0.0, "response": t} for t in ["b", "b", "e1", "e2", "e3", "e4", "e5", "e6"]]
    late = [{"reward": 1.0, "response": "a b c d"} for _ in range(4)]
    got = _found(_four_steps(tmp_path, early, late))["reward_with_spreading_phrases"]["evidence"]["phrases"]
    assert [(p["tokens"], p["share_early"], p["share_late"]) for p in got] == [
        (["a"], 0.0, 1.0), (["a", "b"], 0.0, 1.0), (["a", "b", "c"], 0.0, 1.0), (["b", "c"], 0.0, 1.0),
        (["b", "c", "d"], 0.0, 1.0)]


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
    from rl_board.loader import RunSource

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
                                                                             "length_late": 3.0}, "samples": []}


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
    """Early mean 1.0, late 0.5: 0.5 <= 0.5 x 1.0."""
    got = _found(_entropy_run(tmp_path, [[0.5], [0.25, 0.75]]))["entropy_collapse"]
    assert got == {"kind": "entropy_collapse", "first_step": 4, "last_step": 4,
                   "evidence": {"entropy_early": 1.0, "entropy_late": 0.5}, "samples": []}


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
    agent checks and those of other fields not checked."""
    write_lines(tmp_path / "r.jsonl", [sample(s, 0.5, response="same words", prompt=f"p{s}") for s in range(1, 5)])
    found = compute_findings(_load(tmp_path))
    assert found.to_json() == []
    assert {c.kind for c in found.checks if not c.ran} == {
        "entropy_collapse", "training_inference_mismatch", "component_with_spreading_phrases", "kl_runaway",
        "critic_cannot_fit", "tool_use_collapse", "tool_call_loops", "reward_tracks_field"}


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
    from streamlit.testing.v1 import AppTest

    from conftest import REPO
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
        "Findings: none. Checked reward hacking phrases, repetition with reward, length growth, dead GRPO groups, "
        "empty responses. Not checked: reward component hacking phrases (no reward components logged); reward "
        "tracking a field (no other numeric fields logged); KL runaway (no log-probs with reference log-probs); "
        "critic fit (no values with token rewards logged); entropy collapse (no entropy logged); sampler mismatch "
        "(no sampler log-probs beside the trainer's (rollout_logprobs and logprobs)); tool use collapse (no turns "
        "logged); tool call loops (no turns logged)."]


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


def test_findings_core_imports_no_streamlit():
    """Importing the findings core (and running it on nothing) leaves streamlit out of sys.modules."""
    import subprocess
    import sys

    from conftest import REPO

    code = "import sys, rl_board.findings; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"


def test_findings_are_kept_with_the_cache_until_the_run_changes(tmp_path, monkeypatch):
    """A second look at an unchanged run reads its findings from the cache folder (no check runs);
    once lines are appended the run is checked again, and both give what a fresh check gives."""
    from rl_board import findings as FND
    from rl_board.loader import RunSource

    folder = _hack(tmp_path / "hack", HACKED, [0.5, 1.5, 1.5, 0.5])
    source = RunSource(folder)
    run = source.refresh()
    first = FND.get_findings(run)
    assert first.to_json() == FND.compute_findings(run).to_json() and first.findings
    calls = []
    real = FND.compute_findings
    monkeypatch.setattr(FND, "compute_findings", lambda r: calls.append(1) or real(r))
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

    import rl_board.findings as findings_core

    release = threading.Event()
    real = findings_core.get_findings

    def slow(run):
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
    for _ in range(50):  # the checks finish in their thread
        at.run()
        if any("reward hacking" in t.value for t in at.text):
            break
    assert any("reward hacking" in t.value for t in at.text)
    assert "Findings: checking the run…" not in [c.value for c in at.caption]
