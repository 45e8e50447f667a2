"""Findings: what went wrong in a run, found without a human looking (issue 16). Pure functions
over a ``Run``; the page, ``rl-board findings`` and the tests all use ``compute_findings``.

Definitions (the README repeats them for users):

- Windows: S = the steps that have samples, ascending; the *early* window is the first
  ceil(S/4) of them, the *late* window the last ceil(S/4); E and L are their samples.
- Words of a response: its counted tokens (``metrics.token_positions``, as the diagnostics count)
  without pad and EOS tokens; a sample without ``response_tokens`` uses its whitespace-separated
  words with pads removed. An n-gram is *in* a response when it occurs at least once in its words.
- Means ignore NaN; std is the population std.

The six checks, in this order (thresholds below as named constants):

1. ``reward_with_spreading_phrases``: the reward rose (mean L - mean E >= std E, and > 0) and a
   1-3-gram spread: share_L >= 1/2 and share_L >= 3 * max(share_E, 1/|E|), share_X = responses of X
   containing it / |X|; dropped when the L responses containing it have a mean reward <= that of
   the L responses without it (kept when every L response contains it). Top 5 by
   share_L / max(share_E, 1/|E|), then share_L, then the token lists ascending.
2. ``length_growth_with_reward``: the reward rose and mean length L / mean length E >= 1.5; length
   is ``response_len`` (counted positions), or characters without pads when no sample of the run
   has a per-token list.
3. ``entropy_collapse``: mean ``entropy_mean`` over L <= 1/2 * the same over E.
4. ``training_inference_mismatch``: steps whose ``mismatch_kl_mean`` > 1e-3.
5. ``dead_groups``: a step is GRPO-shaped when at least half its samples are in prompt groups of >= 2
   samples, dead when at least half of those groups have all rewards equal; raised when dead steps
   are at least 10 % of the GRPO-shaped steps.
6. ``empty_responses``: steps in which at least 5 % of the samples have no words.
"""

from __future__ import annotations

import html
import json
import math
import os
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import chain

import numpy as np
import pandas as pd

from ..base import fields as F
from .drivers import compute_ngram_log_odds
from ..base.colors import display_token
from .run import Run

KINDS = ("reward_with_spreading_phrases", "length_growth_with_reward", "entropy_collapse",
         "training_inference_mismatch", "dead_groups", "empty_responses")
WINDOW_FRACTION = 4  # each window holds ceil(S / 4) of the S steps with samples
MAX_N = 3  # phrases are 1- to 3-grams
PHRASE_MIN_SHARE = Fraction(1, 2)  # of the late responses
PHRASE_SPREAD = 3  # share_L >= this * max(share_E, 1/|E|)
MAX_PHRASES = 5
SAMPLES_PER_PHRASE = 3
LENGTH_GROWTH = 1.5  # mean length L / mean length E
ENTROPY_FRACTION = 0.5  # mean entropy L <= this * mean entropy E
MISMATCH_KL_MAX = 1e-3  # a step's mean mismatch KL above this is flagged
MISMATCH_SAMPLES = 3
GROUPED_SHARE = Fraction(1, 2)  # of a step's samples in groups of >= 2: GRPO-shaped
DEAD_GROUP_SHARE = Fraction(1, 2)  # of those groups with all rewards equal: a dead step
DEAD_STEP_SHARE = Fraction(1, 10)  # of the GRPO-shaped steps dead: raised
EMPTY_SHARE = Fraction(1, 20)  # of a step's samples with no words
EMPTY_SAMPLES = 3

#: Every character ``str.split()`` splits on (Python's whitespace), as an RE2 class: a text that is
#: only these has no words. (``derive`` splits the words with pyarrow, on the same characters.)
_BLANK = r"^[\x{9}-\x{d}\x{1c}-\x{1f}\x{85}\p{Z}]*$"


@dataclass(frozen=True)
class Finding:
    """One finding. ``to_json`` is the contract of ``findings --json``; ``message`` is one line for
    people; ``labels`` are the ``samples`` as rows of ``Run.samples``; ``focus_step`` the step the
    evidence centres on; ``phrases`` the phrases' tokens (finding 1) and ``joiner`` how words join
    into text ("" for tokens, " " for words)."""

    kind: str
    first_step: int
    last_step: int
    evidence: dict
    samples: tuple[str, ...]
    message: str = ""
    labels: tuple = ()
    focus_step: int | None = None
    phrases: tuple[tuple[str, ...], ...] = ()

    def to_json(self) -> dict:
        return {"kind": self.kind, "first_step": self.first_step, "last_step": self.last_step,
                "evidence": self.evidence, "samples": list(self.samples)}


@dataclass(frozen=True)
class Check:
    """Whether one check could run on this run, and why not (``note``)."""

    kind: str
    ran: bool
    note: str = ""


@dataclass(frozen=True)
class Findings:
    """What ``compute_findings`` found, in ``KINDS`` order, and which checks ran."""

    findings: tuple[Finding, ...]
    checks: tuple[Check, ...]
    words_from_tokens: bool = False  # some words came from token lists (phrases join without spaces)

    def to_json(self) -> list[dict]:
        return [f.to_json() for f in self.findings]


# --- windows and words ---------------------------------------------------------------------------


def compute_windows(run: Run) -> tuple[list[int], list[int]]:
    """(the early window's steps, the late window's), each the first / last ceil(S/4) of the S
    steps with samples, ascending; both empty for a run without samples."""
    steps = sorted(int(s) for s in pd.unique(run.samples[F.STEP]))
    k = math.ceil(len(steps) / WINDOW_FRACTION)
    return steps[:k], steps[len(steps) - k:]


def compute_words(run: Run, frame: pd.DataFrame) -> tuple[list[list[str]], list[bool]]:
    """(each response's words, whether they came from its tokens) for ``frame`` (rows of
    ``run.samples``, in their order), from the run's segments (``Run.words``): no file is read. A
    sample with neither tokens nor a response has no words."""
    words = [w if w is not None else [] for w in run.words(frame)]
    return words, frame["has_tokens"].to_numpy(dtype=bool).tolist()


def compute_empty(run: Run) -> np.ndarray:
    """Whether each sample of ``run.samples`` has no words; bool, shape (samples,). Counts the words
    in the segments (``Run.word_counts``): no text or file is read."""
    return run.word_counts() <= 0


@dataclass(frozen=True)
class _WordIds:
    """Responses' words as ids (``Run.word_ids``): ``ids`` int32, shape (words,), the responses'
    words one response after another; ``lengths`` int64, shape (responses,), each one's word count
    (-1: no words); ``vocabulary`` each id's word."""

    ids: np.ndarray
    lengths: np.ndarray
    vocabulary: list[str]

    @classmethod
    def from_lists(cls, responses: list[list[str]]) -> _WordIds:
        flat = list(chain.from_iterable(responses))
        vocabulary = {word: i for i, word in enumerate(dict.fromkeys(flat))}
        return cls(np.fromiter(map(vocabulary.__getitem__, flat), np.int32, len(flat)),
                   np.fromiter(map(len, responses), np.int64, len(responses)), list(vocabulary))


GRAM_BLOCK = 1 << 18  # occurrences sorted at a time (whole responses): bounds the sorts' memory


class _Grams:
    """The 1- to ``MAX_N``-grams of responses (``_WordIds``) that could spread: those in at least
    ``need`` of the responses from ``late_from`` on (the *candidates*). Every shorter gram inside a
    candidate is one too, so only candidates are extended by a word. For each n, ``counts[n]`` is
    (the late responses containing each gram, the earlier ones), by gram id; ``pairs[n]`` is (gram
    id, response) of every candidate in each response containing it, once, sorted by gram then
    response; ``tokens(n, gram)`` gives a candidate's words.

    Occurrences are counted in blocks of whole responses (``GRAM_BLOCK``), so besides the words
    only each n's occurrences (position, int64 key) and the candidates' pairs are held at once."""

    def __init__(self, words: _WordIds, late_from: int, need: int):
        ids, vocabulary = words.ids, words.vocabulary
        sizes = np.maximum(words.lengths, 0)
        owner = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
        self._ids, self._vocabulary = ids, vocabulary
        count, width = max(len(sizes), 1), max(len(vocabulary), 1)
        self.pairs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.counts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._first: dict[int, np.ndarray] = {}  # n -> where one occurrence of each candidate starts in ``ids``
        index = np.int32 if len(ids) < 2 ** 31 else np.int64  # positions, gram ids
        # each occurrence of an n-gram: where it starts (ascending) and its key (its candidate
        # prefix's rank * width + its last word; for n = 1 the word)
        starts, key, bound = np.arange(len(ids), dtype=index), ids, width  # key < bound
        for n in range(1, MAX_N + 1):
            who = owner[starts]
            blocks = _blocks(who)
            # the grams' keys and how many late / earlier responses contain them, block by block
            parts = [_count_grams(key[lo:hi], who[lo:hi], bound, count, late_from) for lo, hi in blocks]
            grams, where = np.unique(np.concatenate([p[0] for p in parts] or [np.zeros(0, np.int64)]),
                                     return_inverse=True)
            late_counts, early_counts = (
                np.bincount(where, np.concatenate([p[i] for p in parts] or [np.zeros(0)]), len(grams))
                .astype(np.int64) for i in (1, 2))
            self.counts[n] = late_counts, early_counts
            del parts, where
            candidate = late_counts >= need
            chosen, keys = np.flatnonzero(candidate).astype(index), grams[candidate]
            self._first[n] = np.full(len(grams), -1, dtype=np.int64)
            # the candidates' occurrences (few keys: a binary search each): their pairs, and extended by a word
            pairs, longer = [], []
            for lo, hi in blocks:
                rank = np.searchsorted(keys, key[lo:hi])
                found = rank < len(keys)
                found[found] = keys[rank[found]] == key[lo:hi][found]
                at, rank = starts[lo:hi][found], rank[found]
                gram_of, owner_of = _distinct_pairs(rank, who[lo:hi][found], max(len(keys), 1), count)
                pairs.append((chosen[gram_of], owner_of))
                self._first[n][chosen[rank]] = at
                ok = at + n < len(ids)
                at, rank = at[ok], rank[ok]
                ok = owner[at + n] == owner[at]
                at = at[ok]
                longer.append((at, rank[ok] * width + ids[at + n]))
            gram_of = np.concatenate([p[0] for p in pairs] or [np.zeros(0, index)])
            owner_of = np.concatenate([p[1] for p in pairs] or [np.zeros(0, np.int32)])
            order = np.argsort(gram_of, kind="stable")  # blocks hold ascending responses: by gram, then response
            self.pairs[n] = gram_of[order], owner_of[order]
            del pairs, gram_of, owner_of, order, who, starts, key
            starts = np.concatenate([p[0] for p in longer] or [np.zeros(0, index)])
            key = np.concatenate([p[1] for p in longer] or [np.zeros(0, np.int64)])
            bound = len(keys) * width
            del longer

    def tokens(self, n: int, gram: int) -> tuple[str, ...]:
        at = int(self._first[n][gram])
        return tuple(self._vocabulary[i] for i in self._ids[at:at + n].tolist())


def _blocks(owner: np.ndarray) -> list[tuple[int, int]]:
    """``owner`` (ascending) cut into (start, end) ranges of about ``GRAM_BLOCK``, at changes of owner."""
    cuts = np.arange(GRAM_BLOCK, len(owner), GRAM_BLOCK)
    cuts = np.unique(np.r_[0, np.searchsorted(owner, owner[cuts]), len(owner)])
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))


def _count_grams(key, owner, bound, count, late_from) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct ``key`` values, ascending; how many distinct owners >= ``late_from`` each has;
    how many owners below it), for one block of occurrences."""
    gram_key, owner_of = _distinct_pairs(key, owner, bound, count)
    new = np.ones(len(gram_key), bool)
    np.not_equal(gram_key[1:], gram_key[:-1], out=new[1:])
    gram_of = np.cumsum(new) - 1
    late = owner_of >= late_from
    size = int(new.sum())
    return gram_key[new], np.bincount(gram_of[late], minlength=size), np.bincount(gram_of[~late], minlength=size)


def _distinct_pairs(key: np.ndarray, owner: np.ndarray, bound: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (``key``, ``owner``) pairs, sorted by key then owner (int64, int32), for
    ``key`` < ``bound`` and ``owner`` < ``count``: one sort of one int64 per pair when it fits."""
    if bound * count < 2 ** 63:
        pair = key.astype(np.int64)
        pair *= count
        pair += owner
        pair.sort()
        new = np.ones(len(pair), bool)
        np.not_equal(pair[1:], pair[:-1], out=new[1:])
        key, owner = np.divmod(pair[new], count)
        return key, owner.astype(np.int32)
    order = np.lexsort((owner, key))
    key, owner = key[order].astype(np.int64), owner[order]
    new = np.r_[True, (key[1:] != key[:-1]) | (owner[1:] != owner[:-1])] if len(key) else np.zeros(0, bool)
    return key[new], owner[new]


# --- the checks ----------------------------------------------------------------------------------


def _mean(values) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else math.nan


def _std(values) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.std()) if len(values) else math.nan


def _json_number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def _ids(run: Run, frame: pd.DataFrame) -> tuple[str, ...]:
    return tuple(f"{run.files[int(f)]}:{int(line)}" for f, line in zip(frame[F.FILE], frame[F.LINE]))


def _log_order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values([F.STEP, F.FILE, F.LINE], kind="stable")


def _reward_rose(early: pd.DataFrame, late: pd.DataFrame) -> tuple[bool, float, float]:
    r_early, r_late = _mean(early[F.REWARD]), _mean(late[F.REWARD])
    rise = r_late - r_early
    return bool(rise > 0 and rise >= _std(early[F.REWARD])), r_early, r_late


def compute_phrases(early_words: list[list[str]], late_words: list[list[str]], late_rewards
                    ) -> list[tuple[tuple[str, ...], Fraction, Fraction]]:
    """The spreading phrases of definition 1, best first, at most ``MAX_PHRASES``: (tokens,
    share_E, share_L) as exact fractions."""
    words = _WordIds.from_lists(early_words + late_words)
    return [phrase[:3] for phrase in _find_phrases(words, len(early_words), late_rewards)]


def _find_phrases(words: _WordIds, n_early: int, late_rewards) -> list[tuple]:
    """``compute_phrases`` of ``words``, responses 0.. early and ``n_early``.. late, each phrase with
    the late responses containing it (indexes, ascending)."""
    n_late = len(words.lengths) - n_early
    if not n_early or not n_late:
        return []
    need = math.ceil(PHRASE_MIN_SHARE * n_late)  # share_L >= 1/2 as a whole count
    grams = _Grams(words, n_early, need)
    spread = Fraction(PHRASE_SPREAD)
    rewards = np.asarray(late_rewards, dtype=float)
    floor = Fraction(1, n_early)
    kept = []
    for n in range(1, MAX_N + 1):
        gram, owner = grams.pairs[n]
        late_counts, early_counts = grams.counts[n]
        # share_L >= PHRASE_SPREAD * max(share_E, 1/|E|), in whole counts (exact)
        spreads = (late_counts * n_early * spread.denominator
                   >= spread.numerator * np.maximum(early_counts, 1) * n_late)
        for g in np.flatnonzero((late_counts >= need) & spreads):
            count = int(late_counts[g])
            share_late, share_early = Fraction(count, n_late), Fraction(int(early_counts[g]), n_early)
            lo, hi = np.searchsorted(gram, [g, g + 1])
            rows = owner[lo:hi][owner[lo:hi] >= n_early] - n_early
            if count < n_late:
                has = np.zeros(n_late, bool)
                has[rows] = True
                if _mean(rewards[has]) <= _mean(rewards[~has]):  # a NaN mean compares False: kept
                    continue
            kept.append(((n, int(g)), share_early, share_late, share_late / max(share_early, floor), rows))
    kept.sort(key=lambda k: (-k[3], -k[2]))
    if len(kept) > MAX_PHRASES:  # the tokens break ties: only those tied with the last one shown need them
        last = (kept[MAX_PHRASES - 1][3], kept[MAX_PHRASES - 1][2])
        kept = [k for k in kept if (k[3], k[2]) >= last]
    kept = [(grams.tokens(*gram), *rest) for gram, *rest in kept]
    kept.sort(key=lambda k: (-k[3], -k[2], list(k[0])))
    return [(gram, early, late, rows) for gram, early, late, _, rows in kept[:MAX_PHRASES]]


def _phrase_text(tokens: tuple[str, ...], joiner: str) -> str:
    return joiner.join(display_token(t) for t in tokens) if joiner == "" else joiner.join(tokens)


def _percent(share) -> str:
    return f"{float(share) * 100:.0f} %"


def _spreading_phrases(run, early, late, rose, r_early, r_late, words, from_tokens):
    phrases = _find_phrases(words, len(early), late[F.REWARD].to_numpy(dtype=float)) if rose else []
    if not phrases:
        return None
    chosen = []
    for _, _, _, rows in phrases:
        having = late.iloc[rows]
        having = having.assign(_r=having[F.REWARD].astype(float)).sort_values(
            ["_r", F.FILE, F.LINE], ascending=[False, True, True], na_position="last", kind="stable")
        chosen += list(having.index[:SAMPLES_PER_PHRASE])
    labels = list(dict.fromkeys(chosen))
    joiner = "" if from_tokens else " "
    top, early_share, late_share, _ = phrases[0]
    more = f" (and {len(phrases) - 1} more phrase{'s' if len(phrases) > 2 else ''})" if len(phrases) > 1 else ""
    message = (f"reward rose from {r_early:.3g} to {r_late:.3g} while \"{_phrase_text(top, joiner)}\" spread from "
               f"{_percent(early_share)} to {_percent(late_share)} of responses{more} — possible reward hacking")
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    return Finding(
        "reward_with_spreading_phrases", steps[0], steps[-1],
        {"reward_early": _json_number(r_early), "reward_late": _json_number(r_late),
         "phrases": [{"tokens": list(g), "share_early": float(e), "share_late": float(lt)}
                     for g, e, lt, _ in phrases]},
        _ids(run, run.samples.loc[labels]), message, tuple(labels), steps[-1], tuple(p[0] for p in phrases))


def _lengths(run: Run) -> tuple[pd.Series, str] | None:
    """Each sample's length as ``response_len_mean`` counts it, and its unit; None without any."""
    samples = run.samples
    tokens = samples["response_len"].astype(float)
    if (tokens >= 0).any():
        return tokens.where(tokens >= 0), "tokens"
    chars = samples["response_chars"].astype(float)
    return (chars, "characters") if chars.notna().any() else None


def _length_growth(run, early, late, rose, r_early, r_late):
    lengths = _lengths(run)
    if not rose or lengths is None:
        return None
    values, unit = lengths
    l_early, l_late = _mean(values[early.index]), _mean(values[late.index])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.float64(l_late) / np.float64(l_early)
    if not ratio >= LENGTH_GROWTH:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    message = (f"responses grew {ratio:.2g}× longer ({l_early:.3g} → {l_late:.3g} {unit}) while reward rose from "
               f"{r_early:.3g} to {r_late:.3g} — the policy may be lengthening answers for reward")
    return Finding("length_growth_with_reward", steps[0], steps[-1],
                   {"length_early": _json_number(l_early), "length_late": _json_number(l_late)}, (), message,
                   focus_step=steps[-1])


def _entropy_collapse(run, early, late):
    e_early, e_late = _mean(early["entropy_mean"]), _mean(late["entropy_mean"])
    if not e_late <= ENTROPY_FRACTION * e_early:
        return None
    steps = sorted(int(s) for s in pd.unique(late[F.STEP]))
    message = (f"entropy fell from {e_early:.3g} to {e_late:.3g} per token between the first and last quarter "
               "of the steps — the policy is collapsing onto few tokens (less exploration)")
    return Finding("entropy_collapse", steps[0], steps[-1],
                   {"entropy_early": _json_number(e_early), "entropy_late": _json_number(e_late)}, (), message,
                   focus_step=steps[-1])


def _mismatch(run):
    if "mismatch_kl_mean" not in run.steps:
        return None
    per_step = run.steps["mismatch_kl_mean"].astype(float)
    flagged = per_step[per_step > MISMATCH_KL_MAX]  # NaN is not above it
    if flagged.empty:
        return None
    top = float(flagged.max())
    focus = int(flagged.index[flagged.to_numpy() == top][0])
    samples = run.samples[(run.samples[F.STEP] == focus) & run.samples["mismatch_kl"].notna()]
    ordered = samples.sort_values(["mismatch_kl", F.FILE, F.LINE], ascending=[False, True, True], kind="stable")
    labels = tuple(ordered.index[:MISMATCH_SAMPLES])
    steps = [int(s) for s in flagged.index]
    message = (f"sampler and trainer disagree: mismatch KL above {MISMATCH_KL_MAX:g} at {len(steps)} "
               f"step{'s' if len(steps) != 1 else ''} (largest {top:.3g} at step {focus}) — check the inference "
               "engine's precision and weight sync, or correct for it (importance sampling)")
    return Finding("training_inference_mismatch", steps[0], steps[-1], {"steps": steps, "max": top},
                   _ids(run, run.samples.loc[list(labels)]), message, labels, focus)


def compute_dead_steps(samples: pd.DataFrame) -> tuple[list[int], list[int]]:
    """(the GRPO-shaped steps, the dead ones) of definition 5, ascending."""
    rewarded = samples["has_reward"].astype(bool) if "has_reward" in samples else True
    have = samples[samples["prompt_key"].notna() & rewarded]  # a sample without a reward is in no group
    sizes = samples.groupby(F.STEP, sort=True).size()
    if have.empty:
        return [], []
    grouped = have.groupby([F.STEP, "prompt_key"], sort=False)[F.REWARD]
    groups = pd.DataFrame({"size": grouped.size(), "distinct": grouped.nunique(dropna=False)})
    groups = groups[groups["size"] >= 2]
    shaped, dead = [], []
    for step, per_step in groups.groupby(level=0, sort=True):
        if Fraction(int(per_step["size"].sum()), int(sizes[step])) < GROUPED_SHARE:
            continue
        shaped.append(int(step))
        if Fraction(int((per_step["distinct"] == 1).sum()), len(per_step)) >= DEAD_GROUP_SHARE:
            dead.append(int(step))
    return shaped, dead


def _dead_groups(run):
    shaped, dead = compute_dead_steps(run.samples)
    if not dead or Fraction(len(dead), len(shaped)) < DEAD_STEP_SHARE:
        return None
    message = (f"{len(dead)} of {len(shaped)} GRPO-shaped steps have at least half of their prompt groups with all "
               "rewards equal — those groups give no learning signal (too easy or too hard)")
    return Finding("dead_groups", dead[0], dead[-1], {"steps": dead}, (), message, focus_step=dead[0])


def _empty_responses(run, empty: np.ndarray):
    samples = run.samples
    per_step = pd.DataFrame({"empty": empty, F.STEP: samples[F.STEP].to_numpy()}).groupby(F.STEP, sort=True)["empty"]
    counts, sizes = per_step.sum(), per_step.size()
    steps = [int(s) for s in counts.index if Fraction(int(counts[s]), int(sizes[s])) >= EMPTY_SHARE]
    if not steps:
        return None
    hits = _log_order(samples[empty & samples[F.STEP].isin(steps).to_numpy()])
    labels = tuple(hits.index[:EMPTY_SAMPLES])
    message = (f"{len(steps)} step{'s' if len(steps) != 1 else ''} with at least {_percent(EMPTY_SHARE)} empty "
               f"responses (no words besides pad and EOS), first at step {steps[0]}")
    return Finding("empty_responses", steps[0], steps[-1], {"steps": steps}, _ids(run, samples.loc[list(labels)]),
                   message, labels, steps[0])


def _checks(run: Run, windows_ok: bool) -> tuple[Check, ...]:
    samples = run.samples
    responses = bool(samples["response_chars"].notna().any() or (samples["response_len"] >= 0).any())
    few = "" if windows_ok else "needs at least 2 steps with samples"
    reasons = {
        "reward_with_spreading_phrases": few or ("" if responses else "no responses logged"),
        "length_growth_with_reward": few or ("" if _lengths(run) is not None else "no response lengths logged"),
        "entropy_collapse": few or ("" if samples["entropy_mean"].notna().any() else "no entropy logged"),
        "training_inference_mismatch": "" if samples["mismatch_kl"].notna().any()
        else "no sampler log-probs beside the trainer's (rollout_logprobs and logprobs)",
        "dead_groups": "" if samples["prompt_key"].notna().any() else "no prompts logged",
        "empty_responses": "" if responses else "no responses logged",
    }
    return tuple(Check(kind, not note, note) for kind, note in reasons.items())


FINDINGS_FILE = "findings.json"  # in the run's cache folder: the findings of its current snapshot
FINDINGS_VERSION = 1  # bump when a definition changes: kept findings of an older one are not used


def get_findings(run: Run) -> Findings:
    """``compute_findings`` of ``run``, kept in its cache folder for the snapshot it was computed on
    (the manifest's version), so re-opening an unchanged run does not check it again."""
    if run.cache is None:
        return compute_findings(run)
    folder, stamp = run.cache
    path = folder / FINDINGS_FILE
    try:
        kept = json.loads(path.read_text())
        if kept["version"] == FINDINGS_VERSION and tuple(kept["stamp"]) == tuple(stamp) \
                and kept["samples"] == len(run.samples):
            return _findings_from_json(kept["findings"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = compute_findings(run)
    try:
        tmp = path.with_name(f".tmp-{os.getpid()}-{FINDINGS_FILE}")
        tmp.write_text(json.dumps({"version": FINDINGS_VERSION, "stamp": list(stamp), "samples": len(run.samples),
                                   "findings": _findings_to_json(found)}))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):  # a cache that can't be written only means checking again next time
        pass
    return found


def _findings_to_json(found: Findings) -> dict:
    return {"findings": [{"kind": f.kind, "first_step": f.first_step, "last_step": f.last_step,
                          "evidence": f.evidence, "samples": list(f.samples), "message": f.message,
                          "labels": [int(label) for label in f.labels], "focus_step": f.focus_step,
                          "phrases": [list(p) for p in f.phrases]} for f in found.findings],
            "checks": [[c.kind, c.ran, c.note] for c in found.checks],
            "words_from_tokens": found.words_from_tokens}


def _findings_from_json(raw: dict) -> Findings:
    findings = tuple(Finding(f["kind"], f["first_step"], f["last_step"], f["evidence"], tuple(f["samples"]),
                             f["message"], tuple(f["labels"]), f["focus_step"], tuple(map(tuple, f["phrases"])))
                     for f in raw["findings"])
    return Findings(findings, tuple(Check(kind, ran, note) for kind, ran, note in raw["checks"]),
                    raw["words_from_tokens"])


def compute_findings(run: Run) -> Findings:
    """Every finding of the six checks on ``run``, in ``KINDS`` order (see the module's definitions).
    Reads the words of the early and late windows' samples (when the reward rose) from the run's
    segments: no log file is opened."""
    samples = run.samples
    if samples.empty:
        return Findings((), tuple(Check(kind, False, "no samples") for kind in KINDS))
    early_steps, late_steps = compute_windows(run)
    early = _log_order(samples[samples[F.STEP].isin(early_steps)])
    late = _log_order(samples[samples[F.STEP].isin(late_steps)])
    rose, r_early, r_late = _reward_rose(early, late)
    from_tokens, words = False, None
    if rose:
        both = pd.concat([early, late])  # responses 0.. early, len(early).. late
        words = _WordIds(*run.word_ids(both))
        from_tokens = bool(both["has_tokens"].to_numpy(dtype=bool).any())
    found = [
        _spreading_phrases(run, early, late, rose, r_early, r_late, words, from_tokens),
        _length_growth(run, early, late, rose, r_early, r_late),
        _entropy_collapse(run, early, late),
        _mismatch(run),
        _dead_groups(run),
        _empty_responses(run, compute_empty(run)),
    ]
    return Findings(tuple(f for f in found if f is not None), _checks(run, len(early_steps) + len(late_steps) > 0
                                                                      and early_steps != late_steps),
                    from_tokens)


# --- evidence and the n-gram finder's windows ----------------------------------------------------


@dataclass(frozen=True)
class EvidenceSample:
    """One sample of a finding's evidence: where it is, its step and reward, and its response as
    HTML (escaped) with the finding's phrases marked."""

    label: object
    sample_id: str
    step: int
    reward: float
    html: str = field(repr=False, default="")


def build_marked_html(words: list[str], phrases, joiner: str) -> str:
    """``words`` as running text (tokens joined as they read, words with spaces), every word inside
    an occurrence of one of ``phrases`` (token tuples) in a ``<mark>``; every word is escaped."""
    marked = [False] * len(words)
    for phrase in phrases:
        n = len(phrase)
        for i in range(len(words) - n + 1):
            if tuple(words[i:i + n]) == tuple(phrase):
                marked[i:i + n] = [True] * n
    parts = []
    for word, mark in zip(words, marked):
        text = html.escape(display_token(word) if joiner == "" else word)
        parts.append(f"<mark>{text}</mark>" if mark else text)
    return ('<div class="rlb-finding-text" style="white-space:pre-wrap;font-family:monospace">'
            + joiner.join(parts) + "</div>")


def compute_evidence(run: Run, finding: Finding) -> list[EvidenceSample]:
    """The samples of ``finding`` in its order, each with its response marked (``build_marked_html``)."""
    labels = [label for label in finding.labels if label in run.samples.index]
    if not labels:
        return []
    frame = run.samples.loc[labels]
    words, from_tokens = compute_words(run, frame)
    out = []
    for label, ws, tok in zip(labels, words, from_tokens):
        row = run.samples.loc[label]
        out.append(EvidenceSample(label, f"{run.files[int(row[F.FILE])]}:{int(row[F.LINE])}", int(row[F.STEP]),
                                  float(row[F.REWARD]), build_marked_html(ws, finding.phrases, "" if tok else " ")))
    return out


def compute_window_ngrams(run: Run) -> pd.DataFrame:
    """The n-gram finder across time: n-grams over-represented in the late window's responses vs the
    early window's (``analysis.compute_ngram_log_odds``, both windows as the prior)."""
    early_steps, late_steps = compute_windows(run)
    samples = run.samples
    early_words, _ = compute_words(run, _log_order(samples[samples[F.STEP].isin(early_steps)]))
    late_words, _ = compute_words(run, _log_order(samples[samples[F.STEP].isin(late_steps)]))
    return compute_ngram_log_odds(late_words, early_words, late_words + early_words)
