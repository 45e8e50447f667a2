"""The ``garbled_output`` finding (issue 38): token soup (U+FFFD, control and private-use characters,
writing systems the early responses hardly use) raised from the step it starts; bilingual runs not."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import sample, write_lines

from rl_board.analysis.findings import compute_findings
from rl_board.analysis.findings.garbled import compute_script
from rl_board.analysis.source import load_run

PLAIN = "the answer is fine"  # 15 Latin letters
AT_THIRTY = "\ufffd\ufffd\ufffdabcdefg"  # 3 of 10 non-space characters bad: garbled
BELOW = "\ufffd\ufffdabcdefgh"  # 2 of 10: not
CYRILLIC = "Жжж ддд abcd"  # 6 Cyrillic letters of 10 non-space characters, Cyrillic absent early: garbled


def _garbled(folder: Path) -> list[dict]:
    found = compute_findings(load_run(folder, cache_root=False)).to_json(full=True)
    return [f for f in found if f["kind"] == "garbled_output"]


def _run(folder: Path, per_step: dict[int, list[str]], size: int = 20) -> Path:
    """Steps 1-8 of ``size`` samples each: the responses of ``per_step`` first, PLAIN for the rest."""
    lines = []
    for step in range(1, 9):
        odd = per_step.get(step, [])
        lines += [sample(step, 0.0, response=text) for text in odd + [PLAIN] * (size - len(odd))]
    return write_lines(folder / "rank0.jsonl", lines).parent


def test_script_of_a_character_is_the_first_word_of_its_name():
    """Letters by their Unicode name; fullwidth Latin is Latin; digits, punctuation and combining marks have none."""
    assert [compute_script(c) for c in "aЖ中あ가Ａ"] == ["LATIN", "CYRILLIC", "CJK", "HIRAGANA", "HANGUL", "LATIN"]
    assert [compute_script(c) for c in "5.\u0301 "] == [None, None, None, None]


def test_garbled_output_raised_at_thirty_percent_of_a_response_and_five_percent_of_a_step(tmp_path):
    """Step 3: 1 of 20 responses at exactly 30 % U+FFFD (5 % of the step: raised); step 4: one at 20 % (not
    garbled); steps 5-8: 4 of 20 with 60 % Cyrillic letters. E = steps 1-2 (no garbled), L = 7-8 (8 of 40).
    The garbled step means 0, 0, .05, 0, .2, .2, .2, .2 split best after step 4 (a = .0125, b = .2; squared
    distance .001875 of .0722: 97 % explained), and step 4's 0 is not past a + (b - a) / 4: onset 5."""
    folder = _run(tmp_path / "soup", {3: [AT_THIRTY], 4: [BELOW], **{s: [CYRILLIC] * 4 for s in range(5, 9)}})
    (got,) = _garbled(folder)
    assert got["evidence"] == {"share_early": 0.0, "share_late": 0.2, "steps": [3, 5, 6, 7, 8]}
    assert (got["first_step"], got["last_step"], got["severity"], got["onset_step"]) == (3, 8, "high", 5)
    # the step-3 response is line 41 (after 2 x 20), steps 5's first two are lines 81, 82
    assert got["samples"] == ["rank0.jsonl:41", "rank0.jsonl:81", "rank0.jsonl:82"]


def test_control_and_private_use_characters_are_bad(tmp_path):
    """'\\x01\\ue000\\x02abcdefg': 3 of 10 (a control, a private-use, a control): garbled, 2 of 20 in step 6."""
    folder = _run(tmp_path / "c", {6: ["\x01\ue000\x02abcdefg"] * 2})
    (got,) = _garbled(folder)
    assert got["evidence"]["steps"] == [6] and got["evidence"]["share_late"] == 0.0


def test_garbled_output_not_raised_below_five_percent_of_a_step(tmp_path):
    """1 garbled response in 21 (4.8 %) in each of steps 5-8: no step reaches 5 %."""
    assert _garbled(_run(tmp_path / "few", {s: [AT_THIRTY] for s in range(5, 9)}, size=21)) == []


def test_garbled_output_not_raised_when_the_early_window_is_garbled_already(tmp_path):
    """Step 1: 1 garbled response of 20 (2.5 % of the early window's 40, not under 1 %): nothing, though later
    steps are 20 % garbled."""
    assert _garbled(_run(tmp_path / "e", {1: [AT_THIRTY], **{s: [CYRILLIC] * 4 for s in range(5, 9)}})) == []


def test_garbled_output_raised_when_it_starts_inside_the_first_quarter(tmp_path):
    """2 of 20 responses garbled from step 2 of 8 (the first quarter is steps 1-2): the step means 0, then 0.1
    seven times, are two levels with nothing left over, onset 2; the early window is step 1 (none garbled), so it
    is raised (over the whole quarter 2 of 40 = 5 %, not under 1 %, it was not)."""
    (got,) = _garbled(_run(tmp_path / "q", {s: [AT_THIRTY] * 2 for s in range(2, 9)}))
    assert got["evidence"] == {"share_early": 0.0, "share_late": 0.1, "steps": [2, 3, 4, 5, 6, 7, 8]}
    assert got["onset_step"] == 2


def test_bilingual_runs_are_not_garbled(tmp_path):
    """Half the responses English, half Chinese, from the first step on: CJK is 40 of 190 early letters
    (21 %, not rare), so no Chinese response is garbled; an English-only start with Chinese from step 5 is."""
    chinese = "答案是四"  # 4 CJK letters
    both = {s: [chinese] * 10 for s in range(1, 9)}
    assert _garbled(_run(tmp_path / "two", both)) == []
    switched = _garbled(_run(tmp_path / "switch", {s: [chinese] * 10 for s in range(5, 9)}))
    assert switched[0]["evidence"]["steps"] == [5, 6, 7, 8]


@pytest.mark.parametrize("demo", ["ppo_demo", "prime_rl_tokens_demo", "trl_grpo_demo", "verl_grpo_demo",
                                  "prime_rl_agent_demo", "eval_demo"])
@pytest.mark.slow
def test_bundled_runs_are_not_garbled(demo):
    """The bundled runs (ppo_demo mixes Chinese words into English responses) get no garbled_output."""
    from conftest import REPO

    assert _garbled(REPO / "rollout_samples" / demo) == []


def _by_hand(texts: list[str], early: list[bool]) -> list[bool]:
    """The module's definition, one response at a time in plain Python (an independent route)."""
    import unicodedata

    def kind(char):
        if char == "\ufffd" or unicodedata.category(char) in ("Cc", "Co"):
            return "bad"
        return compute_script(char)

    letters: dict[str, int] = {}
    for text, is_early in zip(texts, early):
        for char in "".join(text.split()) if is_early else "":
            script = kind(char)
            if script not in (None, "bad"):
                letters[script] = letters.get(script, 0) + 1
    total = sum(letters.values())
    out = []
    for text in texts:
        chars = "".join(text.split())
        odd = sum(1 for c in chars if kind(c) == "bad" or (kind(c) is not None and total > 0
                                                             and letters.get(kind(c), 0) * 20 < total))
        out.append(bool(chars) and odd * 10 >= 3 * len(chars))
    return out


def test_garbled_responses_across_many_segments_match_the_definition_by_hand(tmp_path, monkeypatch):
    """Random responses of many writing systems, U+FFFD and control characters over 6 files (each its own
    segments, each with its own dictionary of words): each response's verdict is the definition's, worked out
    per response in plain Python; E = steps 1-2."""
    import random

    import numpy as np

    from rl_board.analysis.findings.common import _log_order
    from rl_board.analysis.findings.garbled import compute_garbled

    rng = random.Random(11)
    alphabet = ["a", "b", "Ж", "д", "中", "あ", "\ufffd", "\x01", "\ue000", "5", ".", " ", " ", "Ａ", "\u0301", "ع"]
    weights = [30, 30, 3, 2, 4, 1, 1, 1, 1, 3, 3, 20, 0, 1, 1, 1]
    texts_by_file = {}
    for rank in range(6):
        lines = []
        for step in range(1, 7):
            for _ in range(15):
                text = "".join(rng.choices(alphabet, weights, k=rng.randint(0, 14)))
                lines.append(sample(step, 0.0, response=text))
        texts_by_file[rank] = lines
        write_lines(tmp_path / "run" / f"rank{rank}.jsonl", lines)
    run = load_run(tmp_path / "run", cache_root=False)
    samples = _log_order(run.samples)
    texts = [texts_by_file[int(run.files[f][len("rank"):-len(".jsonl")])][line - 1]["response"]
             for f, line in zip(samples["file"], samples["line"])]
    early = np.isin(samples["step"].to_numpy(), [1, 2])
    got, _ = compute_garbled(lambda: run.word_chunks(samples), early)
    assert got.tolist() == _by_hand(texts, early.tolist())
    assert 5 < got.sum() < len(got) - 5  # both verdicts are met
