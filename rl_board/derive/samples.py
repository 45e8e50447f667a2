"""From canonical rows to the rows a segment keeps: counted positions, per-sample aggregates, keys.

``derive(rows, options)`` takes a block of canonical rows (``readers.canonical``) and
computes, for every sample at once (no Python per sample), what the page and the
summary read: ``n_tokens``, ``response_len`` (the counted positions of ``metrics``),
``lengths_differ``, the characters of the response, the 4-gram repetition, the
prompt key, the words of a sample with tokens (``token_words``) and the per-sample aggregates of
``metrics.SAMPLE_AGGREGATES``. The words of a response without tokens are not kept in the segment:
``compute_words`` finds them again from its texts where they are first read, or, with
``ReadOptions.keep_words``, ``derive`` adds them after the extras for the store to keep beside the
segment (``store.words``). A sample's tokens are its ``response_tokens``, else its
``token_ids`` decoded with the run's tokenizer (``tokenizer``; each distinct id once), and its
counted positions come from its ``loss_mask`` when it has one (how positions are counted is
``counting``). The per-token lists are dropped: a sample's tokens are read again from its source
when it is shown. The result's columns are ``SCHEMA`` then the extras, as the cache stores them.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..base import fields as F
from ..readers import ReadOptions
from ..readers.canonical import ROWS, TOKEN_STRINGS
from ..readers.chat_text import transcript
from ..readers.notes import with_notes
from .conversations import from_messages
from .counting import (
    Counted,
    FlatList,
    Ids,
    Mask,
    Tokens,
    above_zero,
    array,
    truncated,
)
from .faults import DROPPED, with_image_faults
from .metrics import SAMPLE_AGGREGATES, TokenColumns, compute_sample_aggregates
from .text_words import TextWords, without_pads
from .tokenizer import decode_texts, failure, load_tokenizer

WORDS = TOKEN_STRINGS  # list<dictionary<int32, string>>: each sample's words, strings stored once a block

SCHEMA = pa.schema(
    [(F.STEP, pa.int64()), (F.REWARD, pa.float64())]
    + [(name, pa.float64()) for name in F.SCALAR_FIELDS]
    + [(name, pa.string()) for name in F.TEXT_FIELDS]
    + [
        (F.LINE, pa.int64()),  # 1-based line (or table row), counted from the block's first
        ("offset", pa.int64()),  # byte offset of the line in its file (the 0-based row for a table file)
        ("length", pa.int64()),  # bytes of the line, without its newline (0 for a table file)
        ("n_tokens", pa.int32()),  # token positions: the shortest numeric list
        ("response_len", pa.int32()),  # counted positions (see metrics); -1 when nothing tells
        ("lengths_differ", pa.bool_()),  # per-token lists of unequal length
        ("response_chars", pa.float64()),  # characters of the response, pads removed
        ("ref_response_chars", pa.float64()),
        ("repeat_4gram", pa.float64()),  # 1 - distinct/total 4-grams of the counted tokens (or words)
        ("prompt_key", pa.int64()),  # 64-bit key of the prompt text with pads removed; null without a prompt
        # The words (issue 16) of a sample with tokens: its counted tokens without pad and EOS tokens; null
        # for a sample without (its words, those ``str.split()`` finds in its response with pads removed, are
        # found where they are read: ``compute_words``, issue 52).
        ("token_words", WORDS),
        ("has_tokens", pa.bool_()),  # the sample has tokens (``response_tokens`` or ids): its words are tokens
        ("has_reward", pa.bool_()),  # the source logged a reward (NaN included); false: left out of reward stats
        ("from_ids", pa.bool_()),  # the sample's tokens are its ``token_ids`` (decoded, or ``#ID``)
        ("mask_positions", pa.int32()),  # its positions when it has a loss mask, else -1
        # 1 when no EOS is among the counted positions while they fill the lists (the response ran out
        # of room), 0 when it ended, NaN when nothing tells (no EOS token set, no tokens, or a loss mask)
        ("truncated", pa.float64()),
        ("eos_seen", pa.bool_()),  # the EOS token is among its counted positions (the load check ``eos_never_seen``)
    ]
    # checks on load: per log-prob list, its values above 0 (a probability above 1) and the largest
    + [(name, type_) for field in F.LOGPROB_FIELDS
       for name, type_ in ((f"{field}_above_0", pa.int32()), (f"{field}_max", pa.float64()))]
    + [(name, pa.float64()) for name in SAMPLE_AGGREGATES]
    + [
        ("has_messages", pa.bool_()),  # the sample has a conversation (``messages``)
        ("turn_texts", pa.list_(pa.string())),  # every turn's content, then every tool call's arguments
        ("tool_names", pa.list_(pa.string())),  # the tool name of each tool call of its assistant turns
        ("images", pa.int32()),  # image parts of its turns with bytes, a URL or a path (``conversations``)
        ("fault_kinds", pa.int32()),  # its conversation's fault kinds as bits (derive.faults); null without one
    ]
)
#: the column ``derive`` adds after the extras with ``ReadOptions.keep_words``: ``compute_words``' words, which
#: the store writes beside the segment (``store.words``), never into it
KEPT_WORDS = "words"
#: The segment's list columns of a sample's turns (kept in the segment, read where needed).
TURN_COLUMNS = ("turn_texts", "tool_names")
_KEPT = [f.name for f in ROWS
         if f.name not in F.TOKEN_FIELDS and f.name not in (F.TOKENS, F.TOKEN_IDS, F.LOSS_MASK, F.MESSAGES)]


def prompt_key(prompt: str | None, pad_token: str | None) -> int | None:
    """A 64-bit key of a prompt's text with ``pad_token`` removed (blake2b: the same in every
    process), so samples with the same prompt group without holding texts; None without a prompt."""
    if prompt is None:
        return None
    text = prompt.replace(pad_token, "") if pad_token else prompt
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "little", signed=True)


def derive(rows: pa.Table, options: ReadOptions = ReadOptions()) -> pa.Table:
    """The segment rows of a block of canonical rows (see the module's docstring)."""
    metadata = rows.schema.metadata  # the notes on its extra fields (``readers.extras``) stay with the rows
    rows = rows.unify_dictionaries().combine_chunks()
    count = rows.num_rows
    rows, turned = from_messages(rows)
    lists, last = {}, None
    for name in F.TOKEN_FIELDS:
        lists[name] = FlatList(rows[name], last, values=name not in F.LOGGED_TOKEN_FIELDS)
        last = lists[name] if lists[name].any and lists[name].has_values else last
    present = [flat for flat in lists.values() if flat.any]
    has_lists = np.zeros(count, bool)
    n = np.full(count, np.iinfo(np.int64).max)
    longest = np.full(count, -1)
    for flat in present:
        has = flat.lengths >= 0
        has_lists |= has
        n = np.where(has, np.minimum(n, flat.lengths), n)
        longest = np.maximum(longest, flat.lengths)
    ids = Ids(rows[F.TOKEN_IDS], rows[F.TOKENS])
    tokenizer = load_tokenizer(options.tokenizer) if ids.used.any() else None
    tokens = Tokens(rows[F.TOKENS], ids, tokenizer)
    n = np.where(has_lists, n, np.maximum(tokens.lengths, 0))
    mask = Mask(rows[F.LOSS_MASK])
    counted = Counted(n, tokens, mask, options)
    with_tokens = has_lists & (tokens.lengths >= 0)
    longest = np.where(with_tokens, np.maximum(longest, tokens.lengths), longest)
    shortest = np.where(with_tokens, np.minimum(n, tokens.lengths), n)
    with_mask = has_lists & (mask.lengths >= 0)
    longest = np.where(with_mask, np.maximum(longest, mask.lengths), longest)
    shortest = np.where(with_mask, np.minimum(shortest, mask.lengths), shortest)

    columns = {name: rows[name] for name in _KEPT}
    prompts, responses = _texts_from_ids(ids, mask, tokenizer, rows["prompt"], rows["response"])
    columns["prompt"], columns["response"] = prompts, responses
    if tokenizer is not None:
        rows, turned = _turns_from_ids(rows, turned, ids.used, prompts, responses)
    columns["n_tokens"] = np.where(has_lists, n, 0).astype(np.int32)
    columns["response_len"] = np.where(has_lists | (tokens.lengths >= 0), counted.count, -1).astype(np.int32)
    columns["lengths_differ"] = has_lists & (longest != shortest)
    pad = options.pad_token
    texts = {name: without_pads(columns[name], pad) for name in ("prompt", "response")}
    texts["ref_response"] = without_pads(rows["ref_response"], pad)
    columns["response_chars"] = pc.utf8_length(texts["response"]).cast(pa.float64())
    columns["ref_response_chars"] = pc.utf8_length(texts["ref_response"]).cast(pa.float64())
    words = TextWords(tokens.lengths < 0, texts["response"])
    columns["repeat_4gram"] = _repeat_4gram(tokens, counted, words)
    columns["token_words"] = _token_words(tokens, counted, options)
    columns["has_tokens"] = tokens.lengths >= 0
    columns["has_reward"] = rows[F.REWARD].is_valid()
    columns["from_ids"] = ids.used
    columns["mask_positions"] = np.where(mask.lengths >= 0, n, -1).astype(np.int32)
    columns["truncated"] = truncated(n, counted, tokens, options)
    columns["eos_seen"] = counted.ended
    for name in F.LOGPROB_FIELDS:
        columns[f"{name}_above_0"], columns[f"{name}_max"] = above_zero(lists[name], count)
    columns["prompt_key"] = _prompt_keys(texts["prompt"])
    cut = TokenColumns(count, {name: flat.cut(counted) for name, flat in lists.items()
                               if flat.any and flat.has_values})
    columns.update(compute_sample_aggregates(cut))
    columns.update(turned)
    dropped = F.extra_column(DROPPED)
    if dropped in rows.column_names:  # a reader found images dropped before training: a fault kind too
        kinds = columns["fault_kinds"]
        kinds = kinds if isinstance(kinds, (pa.Array, pa.ChunkedArray)) else pa.array(kinds, pa.int32())
        bits = with_image_faults(kinds.to_numpy(zero_copy_only=False), rows[dropped].to_numpy(zero_copy_only=False))
        columns["fault_kinds"] = pa.array(bits.filled(0), pa.int32(), mask=np.ma.getmaskarray(bits))
    arrays = [array(columns[f.name], f.type) for f in SCHEMA]
    names = list(SCHEMA.names)
    for name in sorted(F.extra_columns(rows.column_names)):
        arrays.append(rows[name])
        names.append(name)
    if options.keep_words:  # the words a reader will read at once, kept beside the segment (``store.words``)
        arrays.append(_joined_words(array(columns["token_words"], WORDS), words))
        names.append(KEPT_WORDS)
    table = pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(metadata)
    return with_notes(table, [failure(tokenizer)]) if failure(tokenizer) else table  # a tokenizer that failed


def _turns_from_ids(rows: pa.Table, turned: dict, from_ids: np.ndarray, prompts: pa.Array,
                    responses: pa.Array) -> tuple[pa.Table, dict]:
    """(``rows``, the turn columns) with the turns of each sample whose texts were decoded from its ids
    with the chat template's markers kept (prime-rl's token exports) and that has no conversation of
    its own: the decoded prompt and response split at their markers (``chat_text.transcript``)."""
    places = np.flatnonzero(from_ids & ~turned["has_messages"])
    if not len(places):
        return rows, turned
    messages = rows[F.MESSAGES].to_pylist()
    found = False
    for i in places.tolist():
        prompt, response = prompts[i].as_py(), responses[i].as_py()
        got = transcript((prompt or "") + (response or "")) if response is not None else None
        if got is not None:
            messages[i], found = got, True
    if not found:
        return rows, turned
    index = rows.schema.get_field_index(F.MESSAGES)
    return from_messages(rows.set_column(index, F.MESSAGES, pa.array(messages, rows.schema.field(index).type)))


def compute_turns_from_ids(record: dict, tokenizer) -> list[dict] | None:
    """The turns ``derive`` finds in a canonical record with ``token_ids`` and a loss mask and no
    conversation of its own: its prompt and response decoded as ``derive`` decodes them (the ids
    before the first trained position, then the first to the last trained one), split at the chat
    template's markers (``chat_text.transcript``); None without a tokenizer or markers."""
    ids, mask = record.get(F.TOKEN_IDS), record.get(F.LOSS_MASK)
    if tokenizer is None or record.get(F.MESSAGES) or not isinstance(ids, list) or not isinstance(mask, list):
        return None
    trained = [k for k, flag in enumerate(mask[:len(ids)]) if flag]
    if not trained or not all(type(i) is int for i in ids):
        return None
    prompt, response = decode_texts(tokenizer, [ids[:trained[0]], ids[trained[0]:trained[-1] + 1]])
    return transcript(prompt + response)


def is_segment_schema(schema: pa.Schema) -> bool:
    """Whether a stored table starts with ``SCHEMA`` and has only float64 extras after it."""
    n = len(SCHEMA)
    head = pa.schema(list(schema)[:n])
    return head.equals(SCHEMA) and all(
        f.name.startswith(F.EXTRA_PREFIX) and f.type == pa.float64() for f in list(schema)[n:])


def _texts_from_ids(ids: Ids, mask: Mask, tokenizer, prompts: pa.ChunkedArray,
                    responses: pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
    """(prompt, response) texts, each taken from the token ids where the line has none: for a
    sample with ``token_ids`` and a loss mask, the prompt is the decoded text of the positions before
    its first trained position (all of them when none is trained), the response that of its first
    to its last trained position. Other samples keep what they have."""
    prompts, responses = prompts.combine_chunks(), responses.combine_chunks()
    candidates = np.flatnonzero((ids.lengths >= 0) & (mask.lengths >= 0))
    if not len(candidates):
        return prompts, responses
    need_prompt = prompts.is_null().to_numpy(zero_copy_only=False)
    need_response = responses.is_null().to_numpy(zero_copy_only=False)
    first, last = mask.first_last()
    runs, places = [], []
    for sample in candidates.tolist():
        start, stop = int(first[sample]), int(last[sample])
        if need_prompt[sample]:
            runs.append(ids.of(sample, 0, start if start >= 0 else None))
            places.append((0, sample))
        if need_response[sample] and start >= 0:
            runs.append(ids.of(sample, start, stop + 1))
            places.append((1, sample))
    if not runs:
        return prompts, responses
    filled = [prompts.to_pylist(), responses.to_pylist()]
    for (which, sample), text in zip(places, decode_texts(tokenizer, runs)):
        filled[which][sample] = text
    return pa.array(filled[0], pa.string()), pa.array(filled[1], pa.string())


def _repeat_4gram(tokens: Tokens, counted: Counted, words: TextWords) -> pa.Array:
    """The 4-gram repetition of each sample, 1 - distinct / total over its 4-grams (NaN with fewer
    than 4): of its counted tokens (in order, skipping positions not counted; token ids for a sample
    whose tokens are ids) when it has tokens, else of its response's words (pads removed); null with
    neither."""
    count = len(counted.count)
    keep = counted.at(tokens.owner, tokens.position)
    out = _distinct_4gram_share(tokens.gram_ids()[keep], tokens.owner[keep], count)
    if len(words.rows):
        out[words.rows] = _distinct_4gram_share(words.ids, words.owner, count)[words.rows]
    mask = tokens.lengths < 0
    mask[words.rows] = False
    return pa.array(out, pa.float64(), mask=mask)


def _token_words(tokens: Tokens, counted: Counted, options: ReadOptions) -> pa.Array:
    """The ``token_words`` column: each sample's counted tokens without pad and EOS (a token list shorter
    than the counted positions gives the tokens it has); null for a sample without tokens."""
    count = len(counted.count)
    if not tokens.vocabulary:  # no sample has tokens (verl's dumps): every row null, a bitmap and offsets
        return pa.nulls(count, WORDS)
    keep = counted.at(tokens.owner, tokens.position)
    for token in {options.pad_token, options.eos_token}:
        token_id = tokens.id_of(token)
        if token_id is not None:
            keep &= tokens.ids != token_id
    return _word_lists(tokens.ids[keep], tokens.owner[keep], pa.array(tokens.vocabulary, pa.string()),
                       tokens.lengths < 0)


def compute_words(token_words: pa.Array, responses: pa.Array, pad_token: str | None) -> pa.Array:
    """The words (issue 16) of a segment's samples, as the findings and a diff's marks read them: a sample's
    ``token_words`` when it has tokens, else the words ``str.split()`` finds in its ``responses`` (the
    segment's, pads removed: ``TextWords``, as ``derive`` finds them for the 4-grams); null with neither.
    A list of dictionary-encoded strings (``WORDS``), one dictionary for both kinds of words: the tokens'
    strings, then the text words'."""
    token_words = _joined(token_words)
    responses = _joined(responses)
    responses = without_pads(responses, pad_token)
    return _joined_words(token_words, TextWords(~token_words.is_valid().to_numpy(zero_copy_only=False), responses))


def _joined_words(token_words: pa.Array, words: TextWords) -> pa.Array:
    """``compute_words``' column from the ``token_words`` and the text ``words`` of the samples without tokens."""
    has_tokens = token_words.is_valid().to_numpy(zero_copy_only=False)
    neither = ~has_tokens
    neither[words.rows] = False
    if not has_tokens.any():  # text words only (verl's dumps): their strings are the dictionary already
        return _word_lists(words.ids, words.owner, words.vocabulary, neither)
    flat = token_words.flatten()  # the tokens' words, sample after sample, as a dictionary array
    owner = pc.list_parent_indices(token_words).to_numpy(zero_copy_only=False).astype(np.int64)
    strings = pa.concat_arrays([flat.dictionary, words.vocabulary])
    unified = pc.dictionary_encode(strings)
    remap = unified.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    ids = np.concatenate([remap[flat.indices.to_numpy(zero_copy_only=False)], remap[len(flat.dictionary) + words.ids]])
    owner = np.concatenate([owner, words.owner])
    if len(words.ids) and len(flat):  # each part's owners ascend; a sample's words are in one part
        order = np.argsort(owner, kind="stable")
        ids, owner = ids[order], owner[order]
    return _word_lists(ids, owner, unified.dictionary, neither)


def _joined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _word_lists(ids: np.ndarray, owner: np.ndarray, dictionary: pa.Array, neither: np.ndarray) -> pa.Array:
    """A ``WORDS`` column: sample ``k``'s words the ``ids`` (into ``dictionary``) whose ``owner`` is ``k``
    (owners ascending), null where ``neither`` (bool, shape (samples,))."""
    offsets = np.zeros(len(neither) + 1, np.int32)
    np.cumsum(np.bincount(owner, minlength=len(neither)), out=offsets[1:])
    values = pa.DictionaryArray.from_arrays(pa.array(ids.astype(np.int32, copy=False)), dictionary)
    return pa.ListArray.from_arrays(pa.array(offsets), values, mask=pa.array(neither))


def _distinct_4gram_share(ids: np.ndarray, owner: np.ndarray, count: int) -> np.ndarray:
    """1 - distinct/total over the 4-grams of each sample's ``ids`` (owners ascending); NaN with
    fewer than 4; shape (count,)."""
    # speed: 5 x Arrow's Table.group_by over (sample, 4 ids) on verl-shaped words (benchmarks/bench_kernels.py);
    # reference test: tests/test_derive.py::test_ascii_and_other_texts_of_one_block_keep_their_words_in_sample_order
    grams = np.zeros(count)
    out = np.full(count, np.nan)
    if len(ids) < 4:
        return out
    start = np.flatnonzero(owner[:-3] == owner[3:])
    who = owner[start]
    total = np.bincount(who, minlength=count)
    if not len(start):
        return out
    vocabulary = int(ids.max()) + 1
    if vocabulary ** 4 < 2**62:  # one exact integer per (sample, 4-gram) among ``span`` samples at a time
        # the 4-gram at every position from shifted views (no gather per position), then those that start one
        at = ids[:-3] * vocabulary
        for k in (1, 2):
            at += ids[k:k - 3]
            at *= vocabulary
        at += ids[3:]
        span = min(2**62 // vocabulary**4, count)  # samples whose keys fit one int64; owners ascend, so
        key = (who % span if span < count else who) * vocabulary**4  # each run of ``span`` samples is one
        key += at[start]  # slice, sorted alone
        bounds = np.searchsorted(who, np.arange(0, count + span, span))
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            key[lo:hi].sort()
        new = np.empty(len(key), bool)
        new[0] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
        if span < count:  # keys of two runs may be equal
            new[1:] |= who[1:] != who[:-1]
        distinct = np.bincount(who[new], minlength=count)
    else:
        a, b, c, d = (ids[start + k] for k in range(4))
        first, second = a * vocabulary + b, c * vocabulary + d
        order = np.lexsort((second, first, who))
        who, first, second = who[order], first[order], second[order]
        new = np.r_[True, (who[1:] != who[:-1]) | (first[1:] != first[:-1]) | (second[1:] != second[:-1])]
        distinct = np.bincount(who[new], minlength=count)
    has = total > 0
    grams[has] = total[has]
    out[has] = 1.0 - distinct[has] / grams[has]
    return out


def _prompt_keys(prompts: pa.ChunkedArray) -> pa.Array:
    """``prompt_key`` of every prompt (pads already removed), each distinct text hashed once."""
    distinct = pc.unique(prompts)
    keys = [prompt_key(text, None) for text in distinct.to_pylist()]
    where = pc.index_in(prompts, distinct)
    return pa.array(keys, pa.int64()).take(where)
