"""Pad and EOS from the run's tokenizer: ``tokenizer_config.json`` beside the ``tokenizer.json`` gives them
(string or ``{"content": ...}``; no pad token: the EOS pads), every command and ``load`` follow by default,
and the load check ``eos_never_seen`` fires when the samples have tokens and none holds the EOS."""

import json
import os
import time

import pytest
from conftest import command, sample, summary_json, write_lines

import rl_board
from rl_board.analysis.checks import compute_data_checks
from rl_board.demo.words import write_tokenizer
from rl_board.derive.tokenizer import special_tokens

# Meta-Llama-3-8B-Instruct's tokenizer_config.json, the keys that matter: no pad_token at all
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "clean_up_tokenization_spaces": True,
          "model_max_length": 1000000000000000019884624838656, "tokenizer_class": "PreTrainedTokenizerFast"}
EOT = "<|eot_id|>"


def _run(folder, config):
    """Two samples with tokens: one ends with Llama-3's EOS then pads with it (3 counted, not truncated),
    one fills its 3 positions without it (truncated): truncated_share 0.5 by hand."""
    write_lines(folder / "rank0.jsonl", [
        sample(1, 1.0, prompt="p", response="Hi there", response_tokens=["Hi", " there", EOT, EOT, EOT]),
        sample(1, 0.0, prompt="q", response="a b c", response_tokens=["a", " b", " c"]),
    ])
    write_tokenizer(folder / "tokenizer.json")
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_llama3_config_gives_pad_and_eos_and_the_right_truncation(tmp_path):
    """A Llama-3 config (eos_token <|eot_id|>, no pad_token) reads pad = EOS = <|eot_id|>: the first sample
    counts 3 tokens and ended, the second is truncated; truncated_share 0.5, and no EOS warning."""
    run = rl_board.load(_run(tmp_path, LLAMA3), cache=False)
    assert (run.options.pad_token, run.options.eos_token) == (EOT, EOT)
    assert run.samples["truncated"].tolist() == [0.0, 1.0]
    assert run.samples["response_len"].tolist() == [3, 3]
    assert compute_data_checks(run.samples, run.files, run.options.eos_token) == []
    summary = summary_json(tmp_path)
    assert summary["steps"][0]["truncated_share"] == 0.5 and summary["checks"]["eos_never_seen"] == 0


def test_the_qwen_default_on_a_llama3_run_warns(tmp_path):
    """Told the Qwen EOS on the same run, no sample holds it: both read as truncated (share 1.0) and the
    check names the 2 samples with tokens and the first one; the summary counts them."""
    run = rl_board.load(_run(tmp_path, LLAMA3), eos_token="<|endoftext|>", pad_token="<|endoftext|>", cache=False)
    assert run.samples["truncated"].tolist() == [1.0, 1.0]
    (check,) = compute_data_checks(run.samples, run.files, run.options.eos_token)
    assert (check.kind, check.samples, check.first) == ("eos_never_seen", 2, "rank0.jsonl:1")
    assert "'<|endoftext|>'" in check.message
    summary = summary_json(tmp_path, "--eos-token", "<|endoftext|>", "--pad-token", "<|endoftext|>")
    assert summary["steps"][0]["truncated_share"] == 1.0 and summary["checks"]["eos_never_seen"] == 2


def test_no_warning_without_tokens_or_without_an_eos(tmp_path):
    """Samples without tokens never warn, whatever the EOS; nor does a run read with the EOS turned off."""
    write_lines(tmp_path / "plain" / "rank0.jsonl", [sample(1, 1.0, prompt="p", response="no tokens")])
    run = rl_board.load(tmp_path / "plain", cache=False)
    assert compute_data_checks(run.samples, run.files, run.options.eos_token) == []
    off = rl_board.load(_run(tmp_path / "llama", LLAMA3), eos_token="none", pad_token="none", cache=False)
    assert off.options.eos_token is None
    assert compute_data_checks(off.samples, off.files, off.options.eos_token) == []


def test_added_token_form_and_a_pad_of_its_own(tmp_path):
    """``{"content": ...}`` tokens (Llama-2's AddedToken form) are read, a pad of its own is kept; a config
    with a null pad pads with its EOS; one without eos_token, or none at all, gives None (the defaults)."""
    config = {"eos_token": {"__type": "AddedToken", "content": "</s>", "lstrip": False},
              "pad_token": {"__type": "AddedToken", "content": "<unk>"}}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    assert special_tokens(str(tmp_path / "tokenizer.json")) == ("<unk>", "</s>")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>", "pad_token": None}))
    assert special_tokens(str(tmp_path / "tokenizer.json")) == ("</s>", "</s>")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"pad_token": "<pad>"}))
    assert special_tokens(str(tmp_path / "tokenizer.json")) is None
    (tmp_path / "tokenizer_config.json").unlink()
    assert special_tokens(str(tmp_path / "tokenizer.json")) is None


def test_a_run_without_a_config_keeps_the_qwen_defaults_and_a_given_token_wins(tmp_path):
    """No tokenizer_config.json: pad and EOS are <|endoftext|>; a token given wins over the config's."""
    run = rl_board.load(_run(tmp_path / "bare", None), cache=False)
    assert (run.options.pad_token, run.options.eos_token) == ("<|endoftext|>", "<|endoftext|>")
    given = rl_board.load(_run(tmp_path / "llama", LLAMA3), eos_token="</s>", cache=False)
    assert (given.options.pad_token, given.options.eos_token) == (EOT, "</s>")


@pytest.mark.slow
def test_the_page_boxes_default_to_auto_and_the_load_report_warns(tmp_path):
    """On the page, the pad and EOS boxes read ``auto`` (the run's tokenizer's): no EOS warning on the
    Llama-3 run; with ``<|endoftext|>`` typed into the EOS box the load report names the 2 samples."""
    from conftest import REPO
    from streamlit.testing.v1 import AppTest

    from rl_board.views import keys

    _run(tmp_path / "llama", LLAMA3)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    assert (at.sidebar.text_input(key=keys.PAD_TOKEN).value, at.sidebar.text_input(key=keys.EOS_TOKEN).value) == (
        "auto", "auto")
    at.sidebar.text_input(key=keys.ROOT).input(str(tmp_path)).run()
    at.sidebar.button(key=keys.LOAD).click().run()
    assert not at.exception
    assert not [w for w in at.warning if "is in none of the" in w.value]
    # the caption names the tokens read (escaped as Markdown: the backslashes aside, these characters)
    assert any("auto: pad <|eot_id|>, EOS <|eot_id|>" in c.value.replace("\\", "") for c in at.sidebar.caption)
    at.sidebar.text_input(key=keys.EOS_TOKEN).input("<|endoftext|>").run()
    at.sidebar.button(key=keys.LOAD).click().run()
    assert not at.exception
    text = [w.value for w in at.warning if w.value.startswith("Numbers a log should not hold:")][0]
    assert "The EOS token '<|endoftext|>' is in none of the 2 samples with tokens (first at rank0.jsonl:1)" in text


def test_search_removes_the_pad_the_run_was_read_with(tmp_path):
    """``search`` removes the resolved pad (<|eot_id|>), never the word "auto": a response holding the EOS
    only as pads matches no ``eot_id``, and matches it with --pad-token none; "auto" in a text stays."""
    run = _run(tmp_path, LLAMA3)
    write_lines(run / "rank1.jsonl", [sample(1, 0.5, prompt="r", response="auto pilot" + EOT * 2,
                                             response_tokens=["auto", " pilot", EOT, EOT])])

    def matches(*argv):
        proc = command("search", str(run), "--json", "--no-cache", *argv)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["matches"]

    assert matches("--regex", "eot_id") == 0
    assert matches("--regex", "eot_id", "--pad-token", "none") == 1
    assert matches("--regex", "^auto pilot$") == 1


def test_a_kept_summary_follows_a_config_put_beside_the_tokenizer(tmp_path):
    """``summary`` (kept between calls) of a run whose tokenizer lies in the folder above reads <|endoftext|>
    without a config; once Llama-3's config lies beside that tokenizer (outside the run's files) the next
    summary reads <|eot_id|>, not the kept answer."""
    run = _run(tmp_path / "run", None)
    (run / "tokenizer.json").rename(tmp_path / "tokenizer.json")
    for path in run.iterdir():  # files older than the memo's two seconds: the first summary is kept
        os.utime(path, (time.time() - 60, time.time() - 60))
    assert summary_json(run)["settings"]["eos_token"] == "<|endoftext|>"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(LLAMA3))
    got = summary_json(run)
    assert (got["settings"]["pad_token"], got["settings"]["eos_token"]) == (EOT, EOT)
    assert got["steps"][0]["truncated_share"] == 0.5
