"""Loss masks, token ids and the tokenizer on the board's own lines: counted positions from the mask
(replacing pad/EOS), the aliases of the sampler's and trainer's log-probs, and where a tokenizer is found."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
from conftest import REPO, command, sample, write_lines
from token_writers import train_tokenizer

from rl_board.analysis.source import load_run
from rl_board.analysis.tables import compute_token_table
from rl_board.derive.metrics import compute_sample_tokens
from rl_board.derive.samples import derive
from rl_board.derive.tokenizer import find_tokenizer, token_strings
from rl_board.readers import ReadOptions
from rl_board.readers.formats.jsonl import parse_block

PAD = "<pad>"


def _derived(lines: list, options=ReadOptions(PAD, (), PAD), fast: bool = True):
    data = "".join((json.dumps(line) if isinstance(line, dict) else line) + "\n" for line in lines).encode()
    return derive(parse_block(data, options=options, fast=fast).table, options)


def test_a_loss_mask_replaces_the_pad_rule_and_counts_only_its_true_positions():
    """A mask that starts late and has a hole counts exactly its true positions, pad tokens or not:
    response length, KL mean, entropy and 4-gram repetition over them; the unmasked sample keeps the pad rule."""
    logp = [-1.0, -2.0, -0.5, -0.3, -0.2, -0.1, -0.4]
    ref = [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0]
    tokens = ["p", "p2", "a", PAD, "b", "c", "d"]
    mask = [0, 0, 1, 1, 0, 1, 1]  # trained: 2, 3, 5, 6 (the pad at 3 is trained; 4 is a hole)
    for fast in (True, False):
        table = _derived([
            sample(1, 1.0, response_tokens=tokens, logprobs=logp, ref_logprobs=ref, entropy=[0.1, 0.2, 1, 2, 9, 3, 4],
                   loss_mask=mask),
            sample(1, 0.0, response_tokens=tokens, logprobs=logp, ref_logprobs=ref),
        ], fast=fast)
        counted = [2, 3, 5, 6]
        k3 = [math.expm1(ref[i] - logp[i]) - (ref[i] - logp[i]) for i in counted]
        assert table["response_len"].to_pylist() == [4, 4]  # unmasked: P = E, the first one (at 3) ends it
        assert table["kl_mean"][0].as_py() == pytest.approx(sum(k3) / 4)
        assert table["entropy_mean"][0].as_py() == pytest.approx((1 + 2 + 3 + 4) / 4)
        assert table["mask_positions"].to_pylist() == [7, -1]
        assert table["token_words"][0].as_py() == ["a", "c", "d"]  # the pad is no word


def test_mask_aliases_and_sampler_trainer_aliases_feed_the_canonical_fields():
    """mask / token_loss_mask / response_mask are loss masks; inference_ and generation_logprobs the
    sampler's, trainer_ and prev_logprobs the trainer's; the field's own key wins over an alias."""
    line = {"step": 1, "reward": 0.0, "token_loss_mask": [1, 0, 1], "prev_logprobs": [-1.0, -2.0, -3.0],
            "generation_logprobs": [-1.5, -2.0, -3.0], "response_tokens": ["a", "b", "c"]}
    for fast in (True, False):
        table = _derived([line, {**line, "logprobs": [-1.5, -2.0, -3.0]}], fast=fast)
        d = -1.0 + 1.5
        assert table["mismatch_kl"][0].as_py() == pytest.approx((math.expm1(d) - d) / 2)  # positions 0 and 2
        assert table["mismatch_kl"][1].as_py() == pytest.approx(0.0)  # its own logprobs equal the sampler's
        assert table["response_len"].to_pylist() == [2, 2]


def test_a_per_sample_advantages_number_stays_an_extra():
    """``advantages`` as one number per line is no per-token list: the line loads, the number is an extra."""
    table = _derived([sample(1, 0.0, advantages=0.5, response="x")])
    assert table.num_rows == 1 and table["extra:advantages"].to_pylist() == [0.5]


def test_token_ids_without_a_tokenizer_read_as_hash_ids_and_give_the_prompt():
    """Token ids with a mask and no text: tokens #ID, prompt the ids before the first trained position."""
    table = _derived([{"step": 1, "reward": 1.0, "token_ids": [5, 6, 7, 8], "loss_mask": [False, False, True, True],
                       "logprobs": [-1.0] * 4}])
    assert table["prompt"].to_pylist() == ["#5 #6"] and table["response"].to_pylist() == ["#7 #8"]
    assert table["token_words"][0].as_py() == ["#7", "#8"] and table["from_ids"].to_pylist() == [True]


def test_token_view_of_a_masked_sample_keeps_untrained_positions_and_gae_runs_over_trained_ones():
    """The token table keeps the untrained positions (dimmed, not dropped) and runs GAE over the trained
    positions only, in order."""
    row = {"response_tokens": ["q", "a", "t", "b"], "logprobs": [-1.0] * 4, "values": [0.0, 1.0, 5.0, 2.0],
           "token_rewards": [0.0, 0.5, 9.0, 1.0], "loss_mask": [0, 1, 0, 1]}
    sample_tokens = compute_sample_tokens(row, PAD, PAD)
    table = compute_token_table(sample_tokens, gamma=1.0, lam=1.0, drop_pad=True)
    assert table["counted"].tolist() == [False, True, False, True]
    # over positions 1 and 3: A_3 = 1 - 2 = -1; A_1 = 0.5 + 2 - 1 + A_3 = 0.5
    assert table["advantage"].tolist()[1] == pytest.approx(0.5) and table["advantage"].tolist()[3] == pytest.approx(-1)
    assert np.isnan(table["advantage"].tolist()[0])


def test_tokenizer_is_found_in_the_run_folder_or_two_folders_up_never_beside_them(tmp_path):
    """find_tokenizer takes the tokenizer.json lying in the run folder, its parent or grandparent (the
    nearest first), and nothing three folders up nor in any sub-folder of them: a folder ``000`` beside the
    runs, a model folder, a sibling run's own tokenizer and a sub-folder of the run are all passed over."""
    run = tmp_path / "a" / "b" / "c" / "run"
    run.mkdir(parents=True)
    assert find_tokenizer(run) is None
    far = train_tokenizer(tmp_path / "a")  # three folders up: not looked at
    assert find_tokenizer(run) is None
    other_run = tmp_path / "a" / "b" / "c" / "other-run"
    write_lines(other_run / "r.jsonl", [sample(1, 0.0)])
    train_tokenizer(other_run)
    for beside in (tmp_path / "a" / "b" / "c" / "000", tmp_path / "a" / "b" / "some-model", run / "model"):
        train_tokenizer(beside)  # someone else's folder beside the run or its ancestors, or one below it
        assert find_tokenizer(run) is None, beside
    grandparent = train_tokenizer(tmp_path / "a" / "b")
    assert find_tokenizer(run) == grandparent
    parent = train_tokenizer(tmp_path / "a" / "b" / "c")
    assert find_tokenizer(run) == parent
    own = train_tokenizer(run)
    assert find_tokenizer(run) == own
    assert far.exists()


def test_a_folder_beside_the_runs_never_decodes_a_run_and_the_note_names_the_file_used(tmp_path):
    """prime_rl_tokens_demo copied to runs/a without its tokenizer, which lies in runs/000/ instead: summary
    says no tokenizer was found (ids read #ID); the same file put in runs/ itself is used, and the note
    names that file."""
    runs = tmp_path / "runs"
    shutil.copytree(REPO / "rollout_samples" / "prime_rl_tokens_demo", runs / "a")
    (runs / "000").mkdir()
    shutil.move(runs / "a" / "tokenizer.json", runs / "000" / "tokenizer.json")
    proc = command("summary", str(runs / "a"), "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert "no tokenizer was found next to the run" in proc.stderr and "000" not in proc.stderr
    shutil.copy(runs / "000" / "tokenizer.json", runs / "tokenizer.json")
    proc = command("summary", str(runs / "a"), "--no-cache")
    assert f"note: Token ids decoded with {runs / 'tokenizer.json'}." in proc.stderr.splitlines()


def test_tokenizer_outside_the_allowed_folders_is_not_found(tmp_path, monkeypatch):
    """A tokenizer in a parent outside RL_BOARD_ROOTS is never used."""
    run = tmp_path / "root" / "run"
    run.mkdir(parents=True)
    train_tokenizer(tmp_path)
    assert find_tokenizer(run) is not None
    monkeypatch.setenv("RL_BOARD_ROOTS", str(tmp_path / "root"))
    assert find_tokenizer(run) is None


def test_each_id_is_decoded_on_its_own_and_unknown_ids_read_as_hash(tmp_path):
    """token_strings decodes each id alone (special tokens kept); an id the tokenizer lacks reads #ID."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(train_tokenizer(tmp_path)))
    ids = tok.encode("The answer is café<|im_end|>").ids
    assert token_strings(tok, ids + [10**6]) == [tok.decode([i], skip_special_tokens=False) for i in ids] + ["#1000000"]
    assert "".join(token_strings(tok, ids)) == "The answer is café<|im_end|>"


def test_a_tokenizer_change_is_a_new_cache(tmp_path):
    """The tokenizer keys the cache: decoding with another one reads the run again."""
    run = tmp_path / "runs" / "a" / "run"
    write_lines(run / "r.jsonl", [{"step": 1, "reward": 1.0, "token_ids": [40, 41, 42, 43],
                                   "loss_mask": [0, 1, 1, 1]}])
    first = load_run(run)
    assert first.samples["from_ids"].all() and first.options.tokenizer is None
    path = train_tokenizer(run)
    second = load_run(run)
    assert second.options.tokenizer == str(path)
    assert second.step_samples(1)["prompt"].iloc[0] != first.step_samples(1)["prompt"].iloc[0] == "#40"
    os.utime(path, ns=(1, 1))
    assert load_run(run).step_samples(1)["prompt"].iloc[0] == second.step_samples(1)["prompt"].iloc[0]


def test_a_character_split_over_byte_level_tokens_is_whole_in_the_coloured_text(tmp_path):
    """CJK text, which the demo tokenizer (trained on English) encodes a byte per token: each character
    spans three tokens, which decode one by one to U+FFFD. The sample's tokens join them: the running
    text reads as written, no position shows U+FFFD, and there is still one string per token id."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(train_tokenizer(tmp_path)))
    text = "北京 is 21.9 million, 答案."
    ids = tokenizer.encode(text).ids
    assert "\ufffd" in "".join(token_strings(tokenizer, ids))  # each piece alone is U+FFFD
    row = {"token_ids": ids, "logprobs": [-0.5] * len(ids), "reward": 1.0, "step": 1}
    tokens = compute_sample_tokens(row, None, None, tokenizer).tokens
    assert len(tokens) == len(ids) and "".join(tokens) == text
    assert not any("\ufffd" in t for t in tokens)
    assert tokens[0] == "北" and tokens[1:3] == ["", ""]  # the character at its first token
