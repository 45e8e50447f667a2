"""A response's words as ``str.split()`` finds them, for many responses at once (Arrow's whitespace splits, the
words encoded once a block), and texts with a pad token removed: what ``samples.derive`` counts 4-grams over
and ``samples.compute_words`` keeps."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class TextWords:
    """The words of the responses of samples without tokens (``has_text``: bool, shape (samples,)),
    as ``str.split()`` finds them: ``rows`` (the samples with a response), ``ids`` (int64, one per
    word, samples one after another; equal words, equal ids, numbered in order of first use),
    ``owner`` (the sample of each word) and ``vocabulary`` (the strings of the ids).

    An ASCII text is split by Arrow's ``ascii_split_whitespace`` (``ascii_words``: ``str.split()``'s
    ASCII whitespace, half the time of the Unicode split); a text with other characters by Arrow's
    ``utf8_split_whitespace``, which splits on the Unicode whitespace ``str.split()`` does."""

    def __init__(self, without_tokens: np.ndarray, responses: pa.ChunkedArray):
        responses = responses.combine_chunks() if isinstance(responses, pa.ChunkedArray) else responses
        present = responses.is_valid().to_numpy(zero_copy_only=False)
        self.rows = np.flatnonzero(without_tokens & present)
        texts = responses if len(self.rows) == len(responses) else responses.take(pa.array(self.rows, pa.int64()))
        ascii_ = pc.string_is_ascii(texts).to_numpy(zero_copy_only=False)
        if ascii_.all() or not ascii_.any():  # the split's words as they are, the empty ones among them
            flat, parent = (ascii_words if ascii_.all() else unicode_words)(texts, drop_empty=False)
        else:  # each kind split its own way, then the words put back in sample order
            simple, other = np.flatnonzero(ascii_), np.flatnonzero(~ascii_)
            flat_a, parent_a = ascii_words(texts.take(pa.array(simple)), drop_empty=False)
            flat_u, parent_u = unicode_words(texts.take(pa.array(other)), drop_empty=False)
            parent = np.concatenate([simple[parent_a], other[parent_u]])
            order = np.argsort(parent, kind="stable")  # a sample's words are all in one part, in order
            flat = pa.concat_arrays([flat_a.cast(pa.large_string()), flat_u.cast(pa.large_string())]).take(
                pa.array(order))
            parent = parent[order]
        self.ids, parent, vocabulary = encoded_words(flat, parent)  # (the empty word's id dropped)
        self.owner = self.rows[parent]
        self.vocabulary = vocabulary.cast(pa.string())


#: the ASCII characters ``str.split()`` splits at (``str.isspace``) that Arrow's ``ascii_split_whitespace``
#: does not (it splits at \t \n \v \f \r and space): the separators \x1c-\x1f
SEPARATORS = "[\x1c-\x1f]"


def ascii_words(texts: pa.Array, drop_empty: bool = True) -> tuple[pa.Array, np.ndarray]:
    """(every word of ``texts``, ASCII strings without nulls, in order; the text of each word: int64),
    a word being what ``str.split()`` finds: Arrow's ``ascii_split_whitespace`` (half the time of a
    numpy scan over the bytes, issue 53), the separators \\x1c-\\x1f made spaces first where a text has them.
    ``drop_empty`` false: the empty strings the split gives stay among them (``encoded_words`` drops them)."""
    data = texts.buffers()[2]
    if data is not None and np.count_nonzero(np.frombuffer(data, np.uint8) - np.uint8(28) < 4):  # uint8 wraps
        texts = pc.replace_substring_regex(texts, SEPARATORS, " ")
    return split_words(pc.ascii_split_whitespace(texts), drop_empty)


def unicode_words(texts: pa.Array, drop_empty: bool = True) -> tuple[pa.Array, np.ndarray]:
    """What ``ascii_words`` gives, for texts of any characters, by Arrow's Unicode whitespace split (which
    splits at the separators \\x1c-\\x1f too)."""
    return split_words(pc.utf8_split_whitespace(texts), drop_empty)


def encoded_words(flat: pa.Array, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """(the ids, int64, and texts of the words ``flat`` (with the empty strings a split gives) and their
    ``parent``, the empty strings left out; the vocabulary): the ids ``dictionary_encode`` gives the words
    without the empty strings (each numbered in order of first use), found without copying the words to drop
    those: the empty string's id dropped and the ids after it moved down one. 1.4 x the filter then the
    encoding on verl-shaped responses (the words' bytes are not copied)."""
    encoded = pc.dictionary_encode(flat)
    ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    vocabulary = encoded.dictionary
    empty = pc.index(vocabulary, "").as_py()
    if empty >= 0:
        keep = ids != empty
        ids, parent = ids[keep], parent[keep]
        ids -= ids > empty
        vocabulary = pa.concat_arrays([vocabulary.slice(0, empty), vocabulary.slice(empty + 1)])
    return ids, parent, vocabulary


def split_words(split: pa.ListArray, drop_empty: bool = True) -> tuple[pa.Array, np.ndarray]:
    """(the words of Arrow's whitespace ``split`` of texts, without the empty ones unless ``drop_empty`` is
    false; the text of each)."""
    flat, parent = pc.list_flatten(split), pc.list_parent_indices(split)
    offsets = np.frombuffer(flat.buffers()[1], np.int32 if flat.type == pa.string() else np.int64)
    offsets = offsets[flat.offset:flat.offset + len(flat) + 1]
    word = offsets[1:] > offsets[:-1]  # the split gives an empty word at each end that is whitespace
    data = flat.buffers()[2]
    if data is not None and word.any() and TRAILING[np.frombuffer(data, np.uint8)[offsets[1:][word] - 1]].any():
        # Arrow's split now and then leaves the whitespace that ends the last text on its last word
        # ("4625 " for "... 4625 "; it depends on what lies past the text's buffer, so on the process's
        # history): a word never holds whitespace, so it is trimmed off (looked for first: the trim
        # copies every word)
        flat = pc.utf8_rtrim_whitespace(flat)
        word = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)
    if not drop_empty:
        return flat, parent.to_numpy(zero_copy_only=False).astype(np.int64)
    keep = pa.array(word)
    return flat.filter(keep), parent.filter(keep).to_numpy(zero_copy_only=False).astype(np.int64)


#: the last bytes a word may not end in: ASCII whitespace, and any byte of a multi-byte character (which
#: may be Unicode whitespace: U+3000 ends in 0x80)
TRAILING = np.array([chr(c).isspace() or c >= 0x80 for c in range(256)])


def without_pads(texts: pa.Array | pa.ChunkedArray, pad: str | None) -> pa.Array | pa.ChunkedArray:
    """``texts`` with every ``pad`` removed (``replace_substring``); ``texts`` itself, not copied, when no
    pad is given or its bytes are nowhere in the texts' data (a verl dump's texts: each copy cost 1 ms of a
    worker's 8,192 lines). The data buffers are searched whole (bytes past a slice, or a pad across two
    texts' bytes, only mean the texts are copied as before)."""
    if not pad:
        return texts
    if pa.types.is_null(texts.type):  # (no text at all)
        return texts
    needle = re.compile(re.escape(pad.encode()))  # searched in the buffers as they are (no copy of their bytes)
    chunks = texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]
    if (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)) and not any(
            c.buffers()[2] is not None and needle.search(memoryview(c.buffers()[2])) for c in chunks):
        return texts
    return pc.replace_substring(texts, pad, "")
