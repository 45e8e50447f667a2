"""The same prompt across steps and runs: finding its samples in several runs, the word diff, its HTML
(escaped), and the page's view."""

import html
import math
import random
import re
from html.parser import HTMLParser

import pytest
from conftest import REPO, sample, write_lines
from page_steps import load_run as _open

from rl_board.analysis import tagged as TG
from rl_board.analysis.prompts import (
    build_prompt_runs_figure,
    build_word_diff_html,
    compute_prompt_choices,
    compute_prompt_samples,
    compute_word_diff,
)
from rl_board.analysis.source import load_run
from rl_board.derive.samples import prompt_key
from rl_board.store import tags as T
from rl_board.views import keys

PAD = "<|endoftext|>"
APP = str(REPO / "app.py")


@pytest.fixture
def root(tmp_path):
    """Runs a and b share the prompt "Q" (a writes it once with a pad); c has none of it."""
    write_lines(tmp_path / "a" / "rank0.jsonl", [
        sample(1, 0.1, prompt="Q" + PAD, response="the cat sat", logprobs=[-1.0, -1.0], ref_logprobs=[-1.5, -1.0]),
        sample(1, 0.9, prompt="other", response="x"),
        sample(2, 0.4, prompt="Q", response="the dog sat down"),
    ])
    write_lines(tmp_path / "b" / "rank0.jsonl", [
        sample(5, 0.7, prompt="Q", response="a cat sat"),
        sample(5, 0.2, prompt="Q ", response="not the same prompt"),
    ])
    write_lines(tmp_path / "c" / "rank0.jsonl", [sample(1, 0.0, prompt="z", response="z")])
    return tmp_path


def test_the_samples_of_one_prompt_in_several_runs(root):
    """Every sample whose prompt (pads removed) is "Q", in run order then step, with reward and the k3
    KL mean computed by hand; a run without the prompt adds nothing."""
    runs = {name: load_run(root / name, pad_token=PAD) for name in ("a", "b", "c")}
    got = compute_prompt_samples(runs, prompt_key("Q", None), "k3", PAD)
    assert list(zip(got["run"], got["step"], got["source"], got["reward"], got["response"])) == [
        ("a", 1, "rank0.jsonl:1", 0.1, "the cat sat"), ("a", 2, "rank0.jsonl:3", 0.4, "the dog sat down"),
        ("b", 5, "rank0.jsonl:1", 0.7, "a cat sat")]
    k3 = (math.exp(-0.5) - 1 + 0.5 + 0.0) / 2  # d = ref - logp per position: -0.5 and 0
    assert got["kl"].iloc[0] == pytest.approx(k3) and got["kl"].iloc[1:].isna().all()
    by_run = {t.name: t for t in build_prompt_runs_figure(got).data if t.mode == "lines+markers"}
    assert list(by_run["a"].y) == pytest.approx([0.1, 0.4]) and list(by_run["b"].x) == [5]
    assert compute_prompt_samples(runs, prompt_key("nothing", None)).empty
    b = runs["b"]
    T.set_tags(b.path, TG.new_entry(b, b.samples.index[0], ["good", "short"]))
    tagged = {"b": TG.compute_tagged(b, T.load_tags(b.path))}
    assert compute_prompt_samples(runs, prompt_key("Q", None), tagged=tagged)["tags"].tolist() == [
        "", "", "good, short"]  # an untagged sample's cell shows nothing, not None


def test_prompt_choices_by_regular_expression(root):
    """A regex over the run's prompts offers each matching prompt once, most sampled first, with its
    sample and step counts; a bad pattern is a ValueError."""
    run = load_run(root / "a", pad_token=PAD)
    choices = compute_prompt_choices(run, ".", PAD)
    assert choices["prompt"].tolist() == ["Q", "other"]
    assert choices["samples"].tolist() == [2, 1] and choices["steps"].tolist() == [2, 1]
    assert list(choices.index) == [prompt_key("Q", None), prompt_key("other", None)]
    assert compute_prompt_choices(run, "^oth", PAD)["prompt"].tolist() == ["other"]
    assert compute_prompt_choices(run, "nope", PAD).empty
    assert compute_prompt_choices(run, str(prompt_key("other", None)), PAD)["prompt"].tolist() == ["other"]
    with pytest.raises(ValueError):
        compute_prompt_choices(run, "(", PAD)


def test_word_diff_by_hand():
    """"the cat sat" -> "the dog sat down": cat removed, dog and down added, the and sat the same; spaces
    are never compared and come from the text shown."""
    diff = compute_word_diff("the cat sat", "the dog sat down")
    assert diff.ops == (("same", "the "), ("removed", "cat"), ("added", "dog"), ("same", " sat "), ("added", "down"))
    assert (diff.same_words, diff.added_words, diff.removed_words) == (2, 2, 1)
    assert diff.similarity == pytest.approx(2 * 2 / (3 + 4))
    same = compute_word_diff("a b c", "a  b\n c ")
    assert same.ops == (("same", "a  b\n c "),) and same.similarity == 1.0
    assert compute_word_diff(None, "").ops == () and compute_word_diff(None, None).similarity == 1.0
    assert compute_word_diff("", "new words").ops == (("added", "new words"),)
    assert compute_word_diff("a b c d", "a c d").ops == (("same", "a"), ("removed", " b"), ("same", " c d"))


def test_a_lone_common_word_inside_a_rewrite_is_no_anchor():
    """A run of same words between two changes each at least four times longer joins them into one
    change; a shorter change on either side keeps it."""
    diff = compute_word_diff("w1 w2 w3 w4 the x1 x2 x3 x4", "v1 v2 v3 v4 the y1 y2 y3 y4")
    assert diff.ops == (("removed", "w1 w2 w3 w4 the x1 x2 x3 x4"), ("added", "v1 v2 v3 v4 the y1 y2 y3 y4"))
    assert (diff.same_words, diff.added_words, diff.removed_words) == (0, 9, 9)
    kept = compute_word_diff("w1 w2 w3 the x1 x2 x3 x4", "v1 v2 v3 the y1 y2 y3 y4")
    assert ("same", " the ") in kept.ops and kept.same_words == 1


def test_word_diff_rebuilds_both_texts():
    """On random texts, the same and added parts give the text; the same and removed parts give the
    reference's words; the word counts add up to each text's words."""
    rng = random.Random(7)
    vocabulary = ["a", "b", "cat", "4.", "<b>", "&amp;", "\n", "  "]
    for _ in range(200):
        ref = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 12)))
        text = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 12)))
        diff = compute_word_diff(ref, text)
        assert "".join(t for k, t in diff.ops if k != "removed") == text
        assert [w for k, t in diff.ops if k != "added" for w in t.split()] == ref.split()  # ops end at words
        assert diff.same_words + diff.added_words == len(text.split())
        assert diff.same_words + diff.removed_words == len(ref.split())


def test_word_diff_of_long_texts_is_cut_and_says_so():
    """Past max_words each text is compared up to there, and the diff says so."""
    diff = compute_word_diff("w " * 10, "w " * 10 + "extra", max_words=3)
    assert diff.cut and "".join(t for k, t in diff.ops if k != "removed") == "w w w"
    assert "compared up to" in build_word_diff_html(diff)


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_word_diff_html_is_escaped():
    """Markup, entities and Markdown in the texts and the head create no element: only the diff's own
    div, span, del and ins; the text reads as written."""
    ref = "<img src=x onerror=alert(1)> &amp; **bold**"
    text = "</div><script>alert(2)</script> &amp; **bold** [link](http://x)"
    head = "<b>run</b> · step 1"
    parsed = _Elements()
    parsed.feed(build_word_diff_html(compute_word_diff(ref, text), head))
    assert set(parsed.tags) <= {"div", "span", "del", "ins"}
    assert parsed.tags.count("del") >= 1 and parsed.tags.count("ins") >= 1
    shown = "".join(parsed.text)
    assert shown.startswith(head) and "<img src=x onerror=alert(1)>" in shown and "</div><script>" in shown
    assert "&amp;" in shown and "[link](http://x)" in shown



def test_an_empty_response_is_drawn_as_empty_not_as_the_reference_struck():
    """B's response empty (or only whitespace) against A's words: the diff reads "(empty response)" with
    no struck word; one word written is a change as before."""
    for empty in ("", "  \n ", None):
        parsed = _Elements()
        parsed.feed(build_word_diff_html(compute_word_diff("the answer is 42", empty)))
        assert "del" not in parsed.tags and "".join(parsed.text) == "(empty response)"
    parsed = _Elements()
    parsed.feed(build_word_diff_html(compute_word_diff("the answer is 42", "42")))
    assert parsed.tags.count("del") == 1 and "(empty response)" not in "".join(parsed.text)

# -- the page ----------------------------------------------------------------------------------------


def _blocks(at) -> list[str]:
    return [h.proto.body for h in at.get("html") if "rlb-diff-block" in h.proto.body]


def _words_in(block: str, tag: str) -> set[str]:
    parts = re.findall(rf"<{tag}[^>]*>(.*?)</{tag}>", block, re.S)
    return {word for part in parts for word in html.unescape(part).split()}


@pytest.mark.slow
def test_same_prompt_view_across_steps_and_runs(root):
    """The open sample's prompt in this run and in a run picked beside it: one diff per response with
    its run, step, reward; each compared with the open sample (words removed and added as by hand)."""
    at = _open(root, "a")  # step 2 opens: "the dog sat down"
    at.toggle(key=keys.SHOW_PROMPT_COMPARE).set_value(True).run()
    assert len(_blocks(at)) == 2
    at.multiselect(key=keys.PROMPT_RUNS).select("b").run()
    assert not at.exception
    blocks = _blocks(at)
    heads = [html.unescape(re.search(r'rlb-diff-head[^>]*>(.*?)</div>', b).group(1)) for b in blocks]
    assert [h.split(" · ")[:4] for h in heads] == [["a", "step 1", "rank0.jsonl:1", "reward 0.1"],
                                                   ["a", "step 2", "rank0.jsonl:3", "reward 0.4"],
                                                   ["b", "step 5", "rank0.jsonl:1", "reward 0.7"]]
    assert "KL k3 0.05327" in heads[0] and heads[1].endswith("the chosen response")
    assert _words_in(blocks[2], "del") == {"the", "dog", "down"} and _words_in(blocks[2], "ins") == {"a", "cat"}
    assert _words_in(blocks[0], "del") == {"dog", "down"} and _words_in(blocks[0], "ins") == {"cat"}
    # another reference: everything is compared with b's response now
    at.selectbox(key=keys.PROMPT_REFERENCE).select("b · rank0.jsonl:1").run()
    blocks = _blocks(at)
    assert _words_in(blocks[1], "del") == {"a", "cat"} and _words_in(blocks[1], "ins") == {"the", "dog", "down"}
    assert "the chosen response" in blocks[2]
    # another prompt, found by its text
    at.text_input(key=keys.PROMPT_FIND).input("^oth").run()
    assert at.selectbox(key=keys.PROMPT_PICK).value == prompt_key("other", None)
    assert len(_blocks(at)) == 1 and not at.exception


def test_prompt_choices_say_where_a_regex_ran_out_of_time(tmp_path, monkeypatch):
    """With the search's time budget spent at once, the prompts offered are those matching among the samples
    its first chunk searched (three of six, in step order), and ``attrs["note"]`` says so; with the default
    budget all six match and there is no note."""
    from rl_board import load
    from rl_board.analysis.prompts import compute_prompt_choices
    from rl_board.analysis.segment_queries import PROBE_BYTES

    size = PROBE_BYTES // 3 + 1
    write_lines(tmp_path / "run" / "r.jsonl", [sample(step, 0.0, prompt=f"needle {step}{i} " + "z" * size)
                                               for step in (1, 2, 3) for i in range(2)])
    run = load(tmp_path / "run")
    monkeypatch.setenv("RL_BOARD_SEARCH_SECONDS", "1e-9")
    cut = compute_prompt_choices(run, "^needle")
    assert sorted(p.split()[1] for p in cut["prompt"]) == ["10", "11", "20"]
    assert "3 of 6 samples searched" in cut.attrs["note"]
    monkeypatch.delenv("RL_BOARD_SEARCH_SECONDS")
    whole = compute_prompt_choices(run, "^needle")
    assert len(whole) == 6 and whole.attrs["note"] is None
