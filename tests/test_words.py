"""The words of responses without tokens (issue 52): not kept by the cold read, found on first use from the
segment's texts, kept beside the segment in the cache (``store.words``), checked when opened again."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from conftest import sample, write_lines

from rl_board.analysis.source import load_run
from rl_board.derive import samples as derived
from rl_board.store import ranges
from rl_board.store.cache import RunCache, words_digests

PAD = "<pad>"


def _texts(count: int, seed: int = 5) -> list[str]:
    """Responses of random words with pads, runs of whitespace (Unicode's too) and repeats."""
    rng = random.Random(seed)
    pieces = ["alpha", "beta", "gamma", "δ", "字", " ", "  ", "\t", "\n", "\u3000", PAD, "x" + PAD + "y"]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) for _ in range(count)]


def _run_folder(tmp_path, texts: list[str]):
    lines = [sample(i // 8, float(i % 3), prompt=f"p{i % 5}", response=text) for i, text in enumerate(texts)]
    lines.append(sample(99, 0.0, prompt="no response"))  # neither tokens nor a response: no words
    return write_lines(tmp_path / "run" / "r.jsonl", lines).parent


def _expected(texts: list[str]) -> list:
    """The words by an independent route: Python's ``str.split`` of each response with pads removed."""
    return [text.replace(PAD, "").split() for text in texts] + [None]


def _words_files(run) -> list:
    return sorted(p.name for p in run.cache[0].iterdir() if words_digests(p.name))


def test_a_cold_read_keeps_no_words_and_the_first_use_finds_those_str_split_finds(tmp_path, monkeypatch):
    """A run of text responses read cold writes no words (no ``words`` column, ``token_words`` all null, no
    words file); the first use gives every sample's words as ``str.split`` finds them with pads removed
    (strings, ids into one vocabulary and counts alike), keeps one words file a segment, and a warm read
    takes them from it without finding them again."""
    texts = _texts(600)
    folder = _run_folder(tmp_path, texts)
    monkeypatch.setattr(ranges, "READ_CHUNK", 4000)  # several blocks, each its own dictionary
    cold = load_run(folder, PAD)
    segments = list(cold._segments.values())
    assert all("words" not in t.column_names and t["token_words"].null_count == t.num_rows for t in segments)
    assert _words_files(cold) == []
    expected = _expected(texts)
    assert cold.words(cold._samples) == expected
    ids, lengths, vocabulary = cold.word_ids(cold._samples)
    assert lengths.tolist() == [len(w) if w is not None else -1 for w in expected]
    assert [vocabulary[i] for i in ids] == [word for w in expected if w for word in w]
    assert cold.word_counts().tolist() == lengths.tolist()
    kept = _words_files(cold)
    assert len(kept) == len({id(t) for t in segments}) >= 1

    def refused(*args):
        raise AssertionError("the words were found again instead of read from their file")

    monkeypatch.setattr("rl_board.store.words.compute_words", refused)
    warm = load_run(folder, PAD)
    assert warm.words(warm._samples.iloc[::-1]) == expected[::-1]
    assert _words_files(warm) == kept


def test_the_4gram_share_is_that_of_the_words_found_on_first_use(tmp_path):
    """``repeat_4gram`` (computed at the cold read) is 1 - distinct / total over the 4-grams of the words the
    first use gives, counted here with Python's sets."""
    texts = _texts(300, seed=9)
    folder = _run_folder(tmp_path, texts)
    run = load_run(folder, PAD)
    got = run._samples["repeat_4gram"].tolist()
    for words, share in zip(run.words(run._samples), got):
        grams = list(zip(*(words[k:] for k in range(4)))) if words is not None else []
        if words is None:
            assert np.isnan(share)  # null in the segment, NaN in the frame
        elif not grams:
            assert np.isnan(share)
        else:
            assert share == pytest.approx(1 - len(set(grams)) / len(grams))


def test_a_damaged_words_file_is_found_again(tmp_path):
    """A words file whose bytes changed is not used: the words are found again (the same) and the file
    replaced by a sound one."""
    texts = _texts(200, seed=3)
    folder = _run_folder(tmp_path, texts)
    run = load_run(folder, PAD)
    run.word_counts()
    (name,) = _words_files(run)
    path = run.cache[0] / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    again = load_run(folder, PAD)
    assert again.words(again._samples) == _expected(texts)
    assert _words_files(again) == [name]  # found again: the same bytes, the same name
    assert path.read_bytes() != bytes(data)


def test_a_words_file_goes_with_its_segment(tmp_path):
    """The cache's clean-up keeps a words file while its segment is named, and removes it with the segment."""
    folder = _run_folder(tmp_path, _texts(50))
    run = load_run(folder, PAD)
    run.word_counts()
    (name,) = _words_files(run)
    segments = {p.name for p in run.cache[0].glob("seg-*.arrow")}
    cache = RunCache(run.cache[0])
    with cache.locked():
        cache.remove_segments(segments)
        assert _words_files(run) == [name]
        cache.remove_segments(set())
    assert _words_files(run) == []


def test_without_a_cache_the_words_are_found_and_held_in_memory(tmp_path):
    """Caching off: the words are found from the texts all the same (nothing written)."""
    texts = _texts(100, seed=4)
    run = load_run(_run_folder(tmp_path, texts), PAD, cache_root=False)
    assert run.cache is None
    assert run.words(run._samples) == _expected(texts)


def test_tokens_and_texts_in_one_segment_share_one_dictionary():
    """A block with samples with tokens and samples without: ``compute_words`` gives the tokens' kept words
    and the others' text words, in sample order, as ``str.split`` and the tokens say."""
    from rl_board.readers import ReadOptions
    from rl_board.readers.canonical import ROWS, build_rows

    texts = ["a b", None, "c  a", "", "x y z"]
    tokens = [None, ["t1", "a", PAD], None, ["b"], None]
    nulls = pa.nulls(len(texts))
    rows = build_rows({name: nulls for name in ROWS.names}
                      | {"response": pa.array(texts, pa.string()),
                         "response_tokens": pa.array(tokens, pa.list_(pa.string()))}, {})
    table = derived.derive(rows, ReadOptions(PAD, (), None))
    words = derived.compute_words(table["token_words"], table["response"], PAD)
    assert words.type == derived.WORDS
    assert words.to_pylist() == [["a", "b"], ["t1", "a"], ["c", "a"], ["b"], ["x", "y", "z"]]


def test_the_page_s_read_keeps_the_words_at_once_in_the_same_cache(tmp_path, monkeypatch):
    """With ``keep_words`` (the page's reader) the cold read itself writes each segment's words file, in the
    cache folder a read without it uses (the key is the same); a later read finds them there, never again
    from the texts, and they are ``str.split``'s."""
    from rl_board.analysis.source import RunSource

    texts = _texts(400, seed=6)
    folder = _run_folder(tmp_path, texts)
    monkeypatch.setattr(ranges, "READ_CHUNK", 4000)
    page = RunSource(folder, PAD, keep_words=True).refresh()
    kept = _words_files(page)
    assert len(kept) == len({id(t) for t in page._segments.values()}) >= 1
    assert all("words" not in t.column_names for t in page._segments.values())

    def refused(*args):
        raise AssertionError("the words were found again instead of read from their file")

    monkeypatch.setattr("rl_board.store.words.compute_words", refused)
    plain = load_run(folder, PAD)
    assert plain.cache[0] == page.cache[0]
    assert plain.words(plain._samples) == page.words(page._samples) == _expected(texts)
    assert _words_files(plain) == kept


def test_keep_words_reaches_the_workers_and_keys_no_cache():
    """``keep_words`` goes to the workers with the options (their JSON) and is left out of the cache's key."""
    from rl_board.readers import ReadOptions

    options = ReadOptions(PAD, keep_words=True)
    assert ReadOptions.from_json(options.to_json()).keep_words
    assert options.cache_key() == ReadOptions(PAD).to_json() == ReadOptions(PAD).cache_key()


def test_many_small_files_and_max_per_step_with_keep_words(tmp_path):
    """Small files read a batch at a time share one segment and its one words file; with max samples per step
    (no cache) the words are found in memory. Either way, ``str.split``'s words."""
    from rl_board.analysis.source import RunSource

    texts = _texts(80, seed=8)
    for i, text in enumerate(texts):
        write_lines(tmp_path / "run" / f"{i:03d}.jsonl", [sample(i, 0.0, response=text)])
    run = RunSource(tmp_path / "run", PAD, keep_words=True).refresh()
    assert len(_words_files(run)) == len({id(t) for t in run._segments.values()}) < len(texts)
    assert run.words(run._samples) == [text.replace(PAD, "").split() for text in texts]
    capped = RunSource(tmp_path / "run", PAD, max_per_step=1, keep_words=True).refresh()
    assert capped.words(capped._samples) == [text.replace(PAD, "").split() for text in texts]


@pytest.mark.parametrize("command", [["findings", "--json"], ["index"]])
def test_commands_whose_findings_read_the_words_have_the_cold_read_keep_them(tmp_path, monkeypatch, command):
    """``rl-board findings`` (and the MCP tool, which runs it) and ``rl-board index`` (which prepares the page's
    cache) have the workers keep each segment's words at the cold read: the command never finds them again from
    the texts in its own process, and a later read takes them from their files (``str.split``'s words)."""
    import contextlib
    import io

    from rl_board.cli import main

    texts = _texts(300, seed=8)
    folder = _run_folder(tmp_path, texts)

    def refused(*args):
        raise AssertionError("the words were found in the command's process instead of by the cold read")

    monkeypatch.setattr("rl_board.store.words.compute_words", refused)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([command[0], str(folder), "--pad-token", PAD, "--eos-token", "none", *command[1:]]) == 0
    run = load_run(folder, PAD)
    assert _words_files(run)
    assert run.words(run._samples) == _expected(texts)
