"""An MCP tool's answer bounded (``cli.answers``): lists cut to the limit and to the character budget, what
was left out counted; on answers built here, their sizes counted by hand."""

from __future__ import annotations

import json

from rl_board.cli.answers import bound_answer


def _size(answer: dict) -> int:
    return len(json.dumps(answer, ensure_ascii=False))


def test_a_sample_whose_texts_alone_pass_the_budget_has_them_cut_and_named():
    """A sample of a 19,000-character prompt and response and 3 turns of 19,000 (95 KB): by hand, the turns
    take the most room and are halved to 1 (57 KB left), then every text is halved until the answer fits:
    9,500, then 4,750 characters (about 14 KB); each cut text a prefix of its own, named in ``cut``."""
    texts = {"prompt": "p" * 19_000, "response": "r" * 19_000, "ref_response": None, "ground_truth": "4"}
    answer = {"address": "r.jsonl:1", "step": 1, **texts, "n_turns": 3, "turns_left_out": 0,
              "turns": [{"role": "user", "content": f"{i}" * 19_000} for i in range(3)],
              "n_tokens": 0, "tokens": {"token": [], "counted": []}, "cut": []}
    out = bound_answer("sample", answer)
    assert _size(out) <= 20_000 and out["left_out"] == {"turns": 2}
    assert [t["content"] for t in out["turns"]] == ["0" * 4_750]
    assert (out["prompt"], out["response"], out["ground_truth"]) == ("p" * 4_750, "r" * 4_750, "4")
    assert out["cut"] == ["prompt", "response", "turns[0]"]


def test_a_per_step_list_is_spread_and_a_ranked_one_kept_from_the_top():
    """A diff of 50 prompts keeps its first ``limit``; a summary of 9 steps with limit 3 keeps the first,
    middle and last; each counts the rest in ``left_out``; a small answer is returned whole."""
    diff = {"matched": 50, "prompts": [{"prompt": f"q{i}", "delta": -i} for i in range(50)]}
    out = bound_answer("diff", diff, limit=7)
    assert [p["prompt"] for p in out["prompts"]] == [f"q{i}" for i in range(7)] and out["left_out"] == {"prompts": 43}
    summary = {"steps": [{"step": s} for s in range(1, 10)]}
    out = bound_answer("summary", summary, limit=3)
    assert [s["step"] for s in out["steps"]] == [1, 5, 9] and out["left_out"] == {"steps": 6}
    assert bound_answer("summary", summary) == {**summary, "left_out": {}}
