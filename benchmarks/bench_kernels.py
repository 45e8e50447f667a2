"""Each hand-written kernel the board keeps, timed against the plain library call it stands in for (issue 53).

Usage:  python benchmarks/bench_kernels.py [--scale 1.0] [--repeat 7] [--json FILE]

A kernel stays only while it beats its plain alternative by more than 1.3 × here; each one's comment
names its margin and the test that holds its output to the alternative's. For each pair, both run on
the same input (made here, seeded: the same on every machine), their outputs are checked equal, and
the best process time of ``--repeat`` runs is printed:

- ``keep_per_step``'s ranks (``store/ranges.py``'s ``_step_ranks``: a row's place among its step's rows,
  by one stable argsort) against pandas' ``groupby().cumcount()``, on a block's 65,536 steps in file
  order (verl's 8 steps of 8,192; on a million steps in random order pandas is faster, a shape no block has);
- the token-string lexer (``readers/rawlists.py``: the strings' quotes found with numpy, the pieces
  dictionary-encoded where they lie) against Arrow's JSON reader (``pyarrow.json``) and a dictionary
  encode, on the token strings of a generated GRPO block (4,096 samples of 512 positions);
- the 4-grams' distinct share (``derive/samples.py``'s ``_distinct_4gram_share``: one sorted int64 key
  per sample and 4-gram) against Arrow's ``Table.group_by`` over (sample, 4 ids), on 65,536 responses'
  words.

Replaced by their library call, as fast within noise here (issue 53): the words of an ASCII response
(``pc.ascii_split_whitespace``), the number lists' marker (commas counted), the step hints' numpy
search (``re.finditer``).

Candidates for a library call the board makes (issue 52), each timed against it on the same input, with
``repeat_4gram`` checked the same: a candidate replaces the call only when more than 1.3 × faster here.

- the words' ids the 4-grams count (``derive/text_words.py``'s ``TextWords``: Arrow's whitespace split,
  ``dictionary_encode`` of every word it gives, the empty word's id then dropped: since this release, where
  the empty words were dropped first, copying every word), on 65,536 verl-shaped responses, against: the
  words encoded as ``string_view`` (short strings inline); the words encoded 8,192 responses at a time
  (ids need only be equal within a response: smaller hash tables).

Nothing is asserted but the outputs' equality: the printed table goes in docs/speed.md.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_worker import _best  # noqa: E402  (the best process time of a few calls, as the worker bench takes it)

from rl_board.readers import rawlists  # noqa: E402

MARGIN = 1.3  # a kernel that does not beat its plain alternative by this much goes


def ranks_case(scale: float):
    """``_step_ranks`` against ``groupby().cumcount()``, on a block's steps in file order."""
    import pandas as pd

    from rl_board.store.ranges import _step_ranks

    steps = np.repeat(np.arange(8), int(8_192 * scale))  # a block of 65,536 lines: verl's 8 steps of 8,192

    def kernel():
        return _step_ranks(steps)[3]

    def plain():
        return pd.Series(steps).groupby(steps).cumcount().to_numpy()

    return "keep_per_step's ranks", "groupby().cumcount()", kernel, plain, np.array_equal


def _grpo_raws(scale: float) -> tuple[list, list]:
    """(the raw ``response_tokens``, the raw ``logprobs``) of a generated GRPO block, as msgspec hands them
    to ``rawlists``: 4,096 samples of 512 positions."""
    import tempfile

    from rl_board.demo import write_grpo_run

    class Lists(msgspec.Struct):
        response_tokens: msgspec.Raw = None
        logprobs: msgspec.Raw = None

    with tempfile.TemporaryDirectory() as folder:
        write_grpo_run(Path(folder), steps=4, samples_per_step=int(1_024 * scale), positions=512, ranks=1)
        lines = next(Path(folder).glob("*.jsonl")).read_bytes().splitlines()
    decoder = msgspec.json.Decoder(Lists)
    rows = [decoder.decode(line) for line in lines]
    return [row.response_tokens for row in rows], [row.logprobs for row in rows]


def _json_token_lists(raws: list) -> pa.Array:
    """Lists of strings read by Arrow's JSON reader as the lines ``{"t": LIST}``, the strings
    dictionary-encoded (what ``rawlists`` would be without its lexer)."""
    import pyarrow.json as pj

    body = b'{"t":' + b'}\n{"t":'.join(raws) + b"}\n"
    read = pj.ReadOptions(use_threads=False, block_size=len(body))
    parse = pj.ParseOptions(explicit_schema=pa.schema([("t", pa.list_(pa.string()))]))
    column = pj.read_json(io.BytesIO(body), read_options=read, parse_options=parse)["t"].combine_chunks()
    values = pc.dictionary_encode(pc.list_flatten(column))
    values.dictionary.validate(full=True)
    return pa.ListArray.from_arrays(column.offsets, values)


def tokens_case(scale: float):
    """The token-string lexer against Arrow's JSON reader, on a GRPO block's token strings."""
    raws = _grpo_raws(scale)[0]

    def kernel():
        return rawlists.read_column(raws, "t")[0]

    def plain():
        return _json_token_lists(raws)

    def same(a, b):
        return a.cast(pa.list_(pa.string())).equals(b.cast(pa.list_(pa.string())))

    return "token-string lexer", "pyarrow.json", kernel, plain, same


def grams_case(scale: float):
    """``_distinct_4gram_share`` against Arrow's ``group_by`` over the 4-grams, on verl-shaped words."""
    from rl_board.derive.samples import _distinct_4gram_share
    from rl_board.derive.text_words import TextWords

    rng = np.random.default_rng(3)
    words = [f"w{k}" for k in range(2_000)]
    count = int(65_536 * scale)
    texts = pa.array([" ".join(words[k] for k in rng.integers(0, 40 + s % 7, rng.integers(20, 60)))
                      for s in range(count)])
    found = TextWords(np.ones(count, bool), texts)
    ids, owner = found.ids, found.owner

    def kernel():
        return _distinct_4gram_share(ids, owner, count)

    def plain():
        start = np.flatnonzero(owner[:-3] == owner[3:])
        grams = pa.table({"owner": owner[start], **{f"w{k}": ids[start + k] for k in range(4)}})
        distinct = grams.group_by(grams.column_names, use_threads=False).aggregate([])
        total = np.bincount(owner[start], minlength=count)
        unique = np.bincount(distinct["owner"].to_numpy(), minlength=count)
        out = np.full(count, np.nan)
        has = total > 0
        out[has] = 1.0 - unique[has] / total[has]
        return out

    return "4-grams' distinct share", "Table.group_by", kernel, plain, lambda a, b: np.allclose(a, b, equal_nan=True)


CASES = (ranks_case, tokens_case, grams_case)


def _verl_texts(scale: float) -> pa.Array:
    """65,536 verl-shaped responses (seeded): 10-45 words of a 3,000-word vocabulary and numbers, ASCII,
    now and then a run of spaces or a newline, a space at the end of some."""
    rng = np.random.default_rng(52)
    vocabulary = [f"w{k}" for k in range(3_000)] + [str(k) for k in range(500)] + ["=", "+", "####"]
    count = int(65_536 * scale)
    texts = []
    for s in range(count):
        words = [vocabulary[k] for k in rng.integers(0, len(vocabulary), rng.integers(10, 45))]
        end = (" " if s % 3 == 0 else "") + ("\n" if s % 7 == 0 else "")
        texts.append(("  " if s % 5 == 0 else " ").join(words) + end)
    return pa.array(texts)


def _ids_now(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    from rl_board.derive.text_words import TextWords

    found = TextWords(np.ones(len(texts), bool), texts)
    return found.ids, found.owner


def _ids_as_views(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The words (empty ones dropped) cast to ``string_view`` and encoded."""
    from rl_board.derive.text_words import split_words

    flat, parent = split_words(pc.ascii_split_whitespace(texts))
    return pc.dictionary_encode(flat.cast(pa.string_view())).indices.to_numpy().astype(np.int64), parent


def _ids_per_chunk(texts: pa.Array, size: int = 8_192) -> tuple[np.ndarray, np.ndarray]:
    """The words encoded ``size`` responses at a time (each chunk's ids its own)."""
    from rl_board.derive.text_words import split_words

    ids, owners = [], []
    for start in range(0, len(texts), size):
        flat, parent = split_words(pc.ascii_split_whitespace(texts.slice(start, size)))
        ids.append(pc.dictionary_encode(flat).indices.to_numpy().astype(np.int64))
        owners.append(parent + start)
    return np.concatenate(ids), np.concatenate(owners)


CANDIDATES = (("words as string_view", _ids_as_views), ("8,192 responses at a time", _ids_per_chunk))


def candidates(scale: float, repeat: int) -> list[dict]:
    """Each candidate for the words' ids against ``TextWords`` (its split and ``dictionary_encode``), its
    ``repeat_4gram`` checked equal (``_distinct_4gram_share`` of both ids)."""
    from rl_board.derive.samples import _distinct_4gram_share

    texts = _verl_texts(scale)
    ids, owner = _ids_now(texts)
    expected = _distinct_4gram_share(ids, owner, len(texts))
    rows = []
    for name, route in CANDIDATES:
        got_ids, got_owner = route(texts)
        if not (np.array_equal(got_owner, owner)
                and np.array_equal(_distinct_4gram_share(got_ids, got_owner, len(texts)), expected, equal_nan=True)):
            raise SystemExit(f"{name}: repeat_4gram differs from dictionary_encode's")
        for _ in range(2):  # interleaved, twice
            now, other = _best(lambda: _ids_now(texts), repeat), _best(lambda r=route: r(texts), repeat)
        rows.append({"candidate": name, "now_s": now, "candidate_s": other, "ratio": now / other})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="the inputs' size against the default")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for case in CASES:
        name, alternative, kernel, plain, same = case(args.scale)
        if not same(kernel(), plain()):
            raise SystemExit(f"{name}: the kernel and {alternative} differ")
        for _ in range(2):  # the two interleaved, twice: neither always runs first
            k, p = _best(kernel, args.repeat), _best(plain, args.repeat)
        rows.append({"kernel": name, "alternative": alternative, "kernel_s": k, "alternative_s": p,
                     "ratio": p / k})
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, pyarrow {pa.__version__}, "
          f"numpy {np.__version__}\n")
    print("| kernel | plain alternative | kernel | alternative | alternative / kernel |\n|---|---|---|---|---|")
    for r in rows:
        flag = "" if r["ratio"] > MARGIN else f" (under {MARGIN} ×)"
        print(f"| {r['kernel']} | {r['alternative']} | {r['kernel_s'] * 1e3:.1f} ms | {r['alternative_s'] * 1e3:.1f} ms"
              f" | {r['ratio']:.2f} ×{flag} |")
    found = candidates(args.scale, args.repeat)
    print("\n| the words' ids (split, dictionary_encode) | candidate | now | candidate | now / candidate |\n"
          "|---|---|---|---|---|")
    for r in found:
        verdict = "replaces it" if r["ratio"] > MARGIN else f"kept (under {MARGIN} ×)"
        print(f"| {verdict} | {r['candidate']} | {r['now_s'] * 1e3:.1f} ms | {r['candidate_s'] * 1e3:.1f} ms"
              f" | {r['ratio']:.2f} × |")
    if args.json:
        args.json.write_text(json.dumps({"kernels": rows, "candidates": found}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
