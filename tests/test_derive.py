"""The words of a response (issue 16) on hand-made lines: the segment's ``token_words`` and the words
``compute_words`` finds from its texts on first use, and their trip through the segment files and the cache."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import sample, write_lines

from rl_board.analysis.source import load_run
from rl_board.derive.samples import SCHEMA, WORDS, compute_words, derive, is_segment_schema
from rl_board.readers import ReadOptions
from rl_board.readers.canonical import ROWS, build_rows
from rl_board.readers.formats.jsonl import parse_block
from rl_board.store import ranges

EOS, PAD = "<eos>", "<pad>"


def _derived(lines: list[dict], pad=PAD, eos=EOS) -> pa.Table:
    """The derived rows of ``lines`` with the ``words`` a reader finds from them (``_with_words``)."""
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    options = ReadOptions(pad, (), eos)
    return _with_words(derive(parse_block(data, options=options).table, options), pad)


def _with_words(table: pa.Table, pad=None) -> pa.Table:
    """A derived block with the ``words`` column a search reads (``compute_words``, as on first use)."""
    return table.append_column("words", compute_words(table["token_words"], table["response"], pad))


def _words(lines: list[dict], pad=PAD, eos=EOS) -> list:
    return _derived(lines, pad, eos)["words"].to_pylist()


def test_words_column_is_dictionary_encoded_in_the_segment_schema():
    """``token_words`` and the words found from texts are lists of dictionary-encoded strings, and a derived
    block has the segment schema (no ``words`` column: they are found on first use)."""
    assert SCHEMA.field("token_words").type == pa.list_(pa.dictionary(pa.int32(), pa.string())) == WORDS
    assert "words" not in SCHEMA.names
    table = _derived([sample(1, 0.0, response="a b")])
    assert table["words"].type == WORDS
    assert is_segment_schema(table.drop_columns(["words"]).schema)


def test_words_stop_at_the_first_pad_and_drop_the_eos_they_count():
    """Tokens after the first pad are not counted; the EOS is counted (response_len) but not a word."""
    table = _derived([
        sample(1, 0.0, response_tokens=["a", "b", PAD, "c"], logprobs=[-1.0] * 4),
        sample(1, 0.0, response_tokens=["x", EOS, "y", "z"], logprobs=[-1.0] * 4),
        sample(1, 0.0, response_tokens=[EOS, PAD]),
    ])
    assert table["words"].to_pylist() == [["a", "b"], ["x"], []]
    assert table["response_len"].to_pylist() == [2, 2, 1]


def test_pad_equal_to_eos_counts_the_first_as_the_eos_and_drops_it():
    """With pad = EOS the first one ends the counted tokens (it counts) and is no word."""
    end = "<|endoftext|>"
    table = _derived([sample(1, 0.0, response_tokens=["x", "y", end, end, "z"], logprobs=[-1.0] * 5)], end, end)
    assert table["words"].to_pylist() == [["x", "y"]]
    assert table["response_len"].to_pylist() == [3]


def test_a_token_list_shorter_than_the_numeric_lists_gives_the_tokens_it_has():
    """Two tokens, four log-probs: four counted positions, two words; one token of two log-probs: one."""
    assert _words([
        sample(1, 0.0, response_tokens=["a", "b"], logprobs=[-1.0] * 4),
        sample(1, 0.0, response_tokens=["a"], logprobs=[-1.0, -1.0], response="not these words"),
    ]) == [["a", "b"], ["a"]]


def test_a_numeric_list_shorter_than_the_tokens_cuts_them():
    """Four tokens, two log-probs: only the first two positions count."""
    assert _words([sample(1, 0.0, response_tokens=["a", "b", "c", "d"], logprobs=[-1.0, -1.0])]) == [["a", "b"]]


def test_without_tokens_the_words_are_the_texts_words_with_pads_removed():
    """No ``response_tokens`` (with or without numeric lists): the words str.split finds, pads removed
    first (so a pad between letters joins them); the EOS is a word of the text like any other."""
    table = _derived([
        sample(1, 0.0, response=f"  hi {PAD}there{PAD} you\u3000!\n"),
        sample(1, 0.0, response=f"a{PAD}b {EOS}", logprobs=[-1.0, -1.0]),
        sample(1, 0.0, response=" \t"),
        sample(1, 0.0, response=""),
    ])
    assert table["words"].to_pylist() == [["hi", "there", "you", "!"], ["ab", EOS], [], []]
    assert table["has_tokens"].to_pylist() == [False, False, False, False]


def test_neither_tokens_nor_a_response_is_null_and_an_empty_token_list_is_not():
    """No tokens and no response: null; an empty token list, or tokens with no response: words."""
    table = _derived([
        sample(1, 0.0),
        sample(1, 0.0, logprobs=[-1.0]),
        sample(1, 0.0, response_tokens=[]),
        sample(1, 0.0, response_tokens=["a"]),
    ])
    assert table["words"].to_pylist() == [None, None, [], ["a"]]
    assert table["has_tokens"].to_pylist() == [False, False, True, True]


@pytest.mark.slow
def test_text_words_split_on_exactly_what_str_split_splits_on():
    """Every code point (surrogates aside) between two letters: the words are what ``str.split`` gives."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = [f"x{c}y" for c in chars]
    nulls = pa.nulls(len(texts))
    rows = build_rows({name: nulls for name in ROWS.names} | {"response": pa.array(texts)}, {})
    got = pc.list_value_length(_with_words(derive(rows))["words"]).to_pylist()  # 2 where c splits, else 1
    assert [c for c, text, count in zip(chars, texts, got) if count != len(text.split())] == []


def test_ascii_texts_split_where_str_split_does_the_separators_x1c_to_x1f_too():
    """A block of ASCII texts only (Arrow's ASCII split): every ASCII character between two letters, and
    random runs of words, separators \\x1c-\\x1f (which Arrow's ASCII split alone keeps) and other controls,
    give the words ``str.split`` gives."""
    import random

    rng = random.Random(11)
    pieces = ["a", "bc", " ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", "\x1b", "\x00", "~"]
    texts = [f"x{chr(c)}y" for c in range(128)]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 25))) for _ in range(300)]
    nulls = pa.nulls(len(texts))
    responses = pa.array(["zz"] + texts).slice(1)  # a slice: bytes before the texts in their buffer
    table = _with_words(derive(build_rows({name: nulls for name in ROWS.names} | {"response": responses}, {})))
    assert table["words"].to_pylist() == [text.split() for text in texts]
    assert sum(len(text.split()) == 2 for text in texts[:128]) == 6 + 4  # \t \n \v \f \r space, \x1c-\x1f


def test_a_split_word_left_with_whitespace_is_trimmed_and_empty_words_dropped():
    """Arrow's split now and then leaves a text's last whitespace on its last word: a split handed over
    with such words (ASCII and U+3000) gives them trimmed, and its empty words are dropped."""
    from rl_board.derive.text_words import split_words

    split = pa.array([["", "4625 ", "a"], ["b\t", ""], [], ["字\u3000", "c"]], pa.list_(pa.string()))
    words, parent = split_words(split)
    assert words.to_pylist() == ["4625", "a", "b", "字", "c"]
    assert parent.tolist() == [0, 0, 1, 3, 3]
    words, parent = split_words(pa.array([["", "x", "y"]], pa.list_(pa.string())))
    assert (words.to_pylist(), parent.tolist()) == (["x", "y"], [0, 0])


def test_text_words_are_numbered_in_order_of_first_use_without_the_empty_word():
    """A block of ASCII texts and one of other texts, each with whitespace at the ends and in runs (where
    Arrow's split gives empty words): each word's id is its place among the block's distinct words in order of
    first use (numbered here by hand, from ``str.split``), the vocabulary those words, the empty one not
    among them, and each word's owner its sample."""
    import numpy as np

    from rl_board.derive.text_words import TextWords

    for texts in (["  a b  a ", "", " \t", "c  b\n", None, "d a"],
                  ["\u3000é b  é\u3000", "字", "  ", "b\u00a0字 x ", None, "é"]):
        words = TextWords(np.ones(len(texts), bool), pa.array(texts, pa.string()))
        split = [(i, w) for i, text in enumerate(texts) if text is not None for w in text.split()]
        first_use = list(dict.fromkeys(w for _, w in split))
        assert words.vocabulary.to_pylist() == first_use and "" not in first_use
        assert words.ids.tolist() == [first_use.index(w) for _, w in split]
        assert words.owner.tolist() == [i for i, _ in split]
        assert words.rows.tolist() == [i for i, text in enumerate(texts) if text is not None]


def test_ascii_and_other_texts_of_one_block_keep_their_words_in_sample_order():
    """ASCII texts are split over their bytes, others by Arrow: in one block, each sample's words are
    still what ``str.split`` gives, in its order, and the 4-gram share is that of those words (by hand)."""
    import random

    rng = random.Random(7)
    pieces = ["a", "bb", " ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x1b", "\x00", "~", "é", "\u3000",
              "\x85", "\xa0", "字"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 25))) for _ in range(400)]
    texts += ["a b a b a b c", "a b a b a b c \u3000"]  # 4-grams: ab a b, b a b a, a b a b, b a b c: 3 distinct of 4
    nulls = pa.nulls(len(texts))
    table = _with_words(derive(build_rows({name: nulls for name in ROWS.names} | {"response": pa.array(texts)}, {})))
    assert table["words"].to_pylist() == [text.split() for text in texts]
    assert table["repeat_4gram"].to_pylist()[-2:] == [1 - 3 / 4, 1 - 3 / 4]


def test_words_survive_segments_of_many_blocks_and_the_cache(tmp_path, monkeypatch):
    """A file read in many blocks (each its own dictionary) is written as one segment and read back
    from the cache with every sample's words; the samples table carries no words."""
    lines = [sample(i, 0.0, response=f"w{i} common", response_tokens=[f"t{i % 7}", "shared", EOS, PAD])
             if i % 2 else sample(i, 0.0, response=f"w{i} common {PAD}") for i in range(200)]
    write_lines(tmp_path / "run" / "r.jsonl", lines)
    expected = [[f"t{i % 7}", "shared"] if i % 2 else [f"w{i}", "common"] for i in range(200)]
    monkeypatch.setattr(ranges, "READ_CHUNK", 1000)
    cold = load_run(tmp_path / "run", PAD, eos_token=EOS)
    warm = load_run(tmp_path / "run", PAD, eos_token=EOS)
    assert cold.report.notes == warm.report.notes == ()
    for run in (cold, warm):
        assert run.words(run.samples) == expected
        assert "words" not in run.samples.columns
    assert warm.words(warm.samples.iloc[[5, 0]]) == [expected[5], expected[0]]
    assert list(warm.word_counts()) == [2] * 200
    segment = warm._segments[(0, 0)]["token_words"]
    assert segment.num_chunks > 1 and pc.list_value_length(segment).to_pylist() == [None, 2] * 100


def test_pads_are_removed_and_texts_without_them_are_not_copied():
    """``without_pads`` gives what Python's ``str.replace`` gives on every text: texts whose bytes hold no pad
    come back as they are (the same object); a pad only past a slice of them, or only across two texts' bytes,
    is no pad of theirs (they are copied, unchanged)."""
    from rl_board.derive.text_words import without_pads

    pad = "<pad>"
    cases = {
        "none": pa.array(["a b", None, "c"]),
        "some": pa.chunked_array([pa.array(["x<pad><pad>", "y"]), pa.array(["<pad>z", None, "<pa"])]),
        "past the slice": pa.array(["a", "b", "c<pad>"]).slice(0, 2),
        "across two texts": pa.array(["a<pa", "d>b"]),
        "large strings": pa.array(["q<pad>r", "s"], pa.large_string()),
    }
    for name, texts in cases.items():
        got = without_pads(texts, pad)
        assert got.to_pylist() == [None if t is None else t.replace(pad, "") for t in texts.to_pylist()], name
        assert got.type == texts.type, name
        assert (got is texts) == (name == "none"), name
    assert without_pads(cases["some"], None) is cases["some"]
    assert without_pads(pa.nulls(3), pad).to_pylist() == [None] * 3
