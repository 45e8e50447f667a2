"""Findings: what went wrong in a run, found without a human looking (issue 16). Pure functions
over a ``Run``; the page, ``rl-board findings`` and the tests all use ``compute_findings``.

Definitions (docs/findings.md repeats them for users):

- Windows: S = the steps that have samples, ascending; the *first quarter* is the first ceil(S/4) of
  them, the *late* window the last ceil(S/4). A finding's *early* window is the steps of the first
  quarter before the onset (14) of the series it rests on, the whole quarter when there is none in it
  (issue 51: a change inside the first quarter is not "early"); E and L are their samples.
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
   are at least 10 % of the GRPO-shaped steps. Not run on evaluations (``batches.compute_evaluation``: a split
   named like ``eval``/``val``/``test``, verifiers v0's results): nothing is trained there.
6. ``empty_responses``: steps in which at least 5 % of the samples have no words.

Issue 33 adds seven (same windows and words):

7. ``component_with_spreading_phrases``: for each *reward component*, a numeric field of the samples
   other than ``reward`` and ``ref_reward`` whose name contains "reward" or "score" (any case) and that
   has two distinct values over E and L together: the component rose (as the reward does in 1) and a
   1-3-gram spread with it (as in 1, with share_L >= 1/10, and dropped when the L responses containing
   it have a mean component <= that of the others). Samples as in 1, highest component first.
8. ``kl_runaway``: mean ``kl_mean`` (k3, the samples' mean per token) over L >= 0.5.
9. ``repetition_with_reward``: the reward rose and mean ``repeat_4gram`` (what the summary's
   ``repeat_4gram_share`` averages) over L >= 0.1 and >= 2 * the same over E.
10. ``critic_cannot_fit``: steps whose ``explained_variance`` < 0 are >= 1/4 of the steps that have one.
11. ``tool_use_collapse``: on runs with turns, mean ``num_tool_calls`` of the samples with turns over L
    <= 0.5 * the same over E, and the E mean >= 0.5.
12. ``tool_call_loops``: a sample loops when one tool call (name and arguments) appears >= 3 times
    in its assistant turns; steps where >= 10 % of the samples loop.
13. ``reward_tracks_field``: a numeric field that is not a reward component nor named like an
    advantage (its name has "advantage", any case: computed from the reward), with a Pearson correlation
    >= 0.8 with the reward over all samples having both, and mean L >= 1.5 * mean E, mean E > 0; left
    out when it restates the outcome (issue 38): |correlation| >= 0.95, or a 0/1 field (both values
    taken) whose two groups of samples the reward separates (each reward of one above each of the other).
14. Onset (1, 2, 3, 7, 8, 9, 11, 13, 15, 17; ``common.compute_onset``): the series a finding rests on (the
    reward for 1, 2 and 9, which say what grew while it rose; the component, the field, ``kl_mean``,
    ``entropy_mean`` and ``num_tool_calls`` falling, a sample garbled, a fault) has its step means split in
    two levels a, b at the k minimising the squared distance of each to its level (the first such k); an
    onset when b > a (b < a for a fall) and the split explains >= 0.6 of the step means' variance; it is
    the first step after the split, moved back over the steps just before it past a + (b - a) / 4,
    keeping one step before it. None otherwise.

Issue 38 adds one (same windows and words; ``garbled`` says it in full):

15. ``garbled_output``: a response is garbled when at least 30 % of its non-whitespace characters are
    U+FFFD, control (Cc) or private-use (Co) characters, or letters (L*, M*) of a script (the first word
    of the character's Unicode name) that makes under 5 % of the first quarter's letters; raised on the
    steps where >= 5 % of the samples are garbled, while under 1 % of E's are. Onset as in 14, on the
    samples' garbled (1) or not (0).

Issue 49 adds one (``vision``):

16. ``images_dropped``: a sample's images were dropped before training when a message of it holds images
    (parts carrying their image) and the tokens it was trained on mark a different number of them (the
    readers' ``images_dropped`` extra, ``readers.placeholders.image_faults``); raised when any sample's
    were, naming the first 50 of them in step, file and line order.

Issue 48 adds one per turn fault kind (``derive.faults``):

17. ``turn_faults_rising``: of the samples with turns, the share having a fault of one kind over L is
    >= 1/10 and >= 2 * the same over E (compared as fractions). Samples: the first 3 late samples with
    that fault, in step, file and line order. Onset as in 14, on the samples with turns having it (1) or
    not (0).

Issue 48 item 3 adds one (``reward``; docs/findings.md says it in full):

18. ``reward_not_recomposed``: the samples whose total is not the weighted sum of their reward components
    (``compute_recompose_components``, ``transcript.component_names``): with every component's weight logged (prime-rl's
    ``reward_weight/NAME``), the samples whose weights differ from the run's most common ones; else, with the
    weights fitted exactly on the run's samples (``compute_fitted_weights``: reproducing more than half of the
    totals within 1e-6 absolute, on more than twice as many samples as components), the samples they do not reproduce; not run when no weights do. Samples: the
    first 100 in step, file and line order, ``count`` in the evidence.

Findings are ranked by ``RANKING`` (how much they should worry a practitioner), then, within a kind,
by their size; ``SEVERITY`` gives each kind's level.

One module per group of findings (``reward``, ``training``, ``batches``, ``agents``, ``garbled``, ``vision``), the n-gram
finder they share (``phrases``), what every finding shares (``common``), the ranked run of every
check (``compute``) and the evidence shown to people (``evidence``).
"""

from __future__ import annotations

from .agents import compute_loops
from .batches import compute_dead_steps
from .common import (
    _BLANK,
    KINDS,
    RANKING,
    SEVERITY,
    Check,
    Finding,
    Findings,
    compute_empty,
    compute_onset,
    compute_windows,
    compute_words,
)
from .compute import (
    FINDINGS_FILE,
    FINDINGS_VERSION,
    Cancelled,
    build_findings_json,
    compute_findings,
    get_findings,
    rank_findings,
)
from .evidence import (
    EvidenceSample,
    build_marked_html,
    compute_evidence,
    compute_evidence_tables,
    compute_window_ngrams,
)
from .phrases import compute_phrases
from .reward import compute_correlation, compute_reward_components
from .training import compute_kl_tokens

__all__ = ["Cancelled", "Check", "EvidenceSample", "FINDINGS_FILE", "FINDINGS_VERSION", "Finding", "Findings", "KINDS", "RANKING",
           "SEVERITY", "_BLANK", "build_findings_json", "build_marked_html", "compute_correlation", "compute_dead_steps", "compute_empty",
           "compute_evidence", "compute_evidence_tables", "compute_findings", "compute_kl_tokens", "compute_loops",
           "compute_onset", "compute_phrases", "compute_reward_components", "compute_window_ngrams",
           "compute_windows", "compute_words", "get_findings", "rank_findings"]
