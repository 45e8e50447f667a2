"""The page's state in Streamlit's real runtime (AppTest): what stays while a run grows or another run is
loaded, what links carry, what is offered, and where a click takes the user."""

import json
import os
from pathlib import Path

import pytest
from conftest import REPO, sample, write_lines
from page_steps import load as _load
from page_steps import open_area as _area
from page_steps import open_page as _open
from streamlit.testing.v1 import AppTest
from test_app import _values

from rl_board.views import keys

APP = str(REPO / "app.py")


def _shown_sample(at: AppTest) -> str:
    """The "file:line" of the sample the picker shows, read from its label."""
    picker = at.selectbox(key=keys.SAMPLE)
    return picker.format_func(picker.value).rsplit(" · ", 1)[1]


def _growing_run(root: Path) -> Path:
    """Steps 1 to 3, three samples each, in b.jsonl; rewards 0, 1, 2 within each step."""
    write_lines(root / "live" / "b.jsonl", [sample(s, float(i), prompt=f"p{s}{i}", response=f"r{s}{i}")
                                            for s in (1, 2, 3) for i in range(3)])
    return root


def _grow(root: Path) -> None:
    """What a trainer writes next: a new rank file that sorts before b.jsonl (so every sample's place in
    the run moves), with lines of step 2 and a new step 4."""
    write_lines(root / "live" / "a.jsonl", [sample(2, 5.0, prompt="late"), sample(4, 1.0, prompt="new")])


@pytest.mark.slow
def test_refresh_keeps_the_step_and_the_open_sample(tmp_path):
    """On step 2 with its third sample open, a refresh that brings a new step and a file read before the
    old one keeps step 2 and that same sample (b.jsonl line 4: step 2's reward-0 line), in the address too."""
    at = _load(_open(_growing_run(tmp_path), "live"))
    at.slider(key=keys.STEP).set_value(2).run()
    at.selectbox(key=keys.SAMPLE).select_index(2).run()  # sorted by reward, highest first: the reward-0 one
    assert _shown_sample(at) == "b.jsonl:4"
    _grow(tmp_path)
    at.sidebar.button(key=keys.REFRESH).click().run()
    assert not at.exception
    assert at.slider(key=keys.STEP).max == 4 and at.slider(key=keys.STEP).value == 2
    assert _shown_sample(at) == "b.jsonl:4"
    assert [c.value for c in at.code][:2] == ["p20", "r20"]
    assert at.query_params["step"] == "2" and at.query_params["sample"] == "b.jsonl:4"


@pytest.mark.slow
def test_follow_the_newest_step(tmp_path):
    """With "Follow the newest step" on, a refresh that brings step 4 shows step 4; without new steps the
    user's step stays."""
    at = _load(_open(_growing_run(tmp_path), "live"))
    at.sidebar.toggle(key=keys.FOLLOW_NEWEST).set_value(True).run()
    at.slider(key=keys.STEP).set_value(1).run()
    at.sidebar.button(key=keys.REFRESH).click().run()
    assert at.slider(key=keys.STEP).value == 1  # nothing new: the user's step
    _grow(tmp_path)
    at.sidebar.button(key=keys.REFRESH).click().run()
    assert at.slider(key=keys.STEP).value == 4
    assert [c.value for c in at.code][0] == "new"


def _choices_runs(root: Path) -> Path:
    """``verlish``: a response-level run with extras acc and num_turns, whose only diagnostic is the share
    of GRPO groups with equal rewards (one group of two); ``tokens``: that share too, and per-token lists
    with entropy and sampler log-probs, and the extra acc only."""
    write_lines(root / "verlish" / "r.jsonl", [
        sample(1, 1.0, prompt="a", response="one two", acc=True, num_turns=3),
        sample(1, 0.0, prompt="a", response="three", acc=False, num_turns=5)])
    tokens = dict(response_tokens=["x", "y"], logprobs=[-1.0, -2.0], ref_logprobs=[-1.5, -1.0],
                  rollout_logprobs=[-1.1, -2.2], entropy=[0.5, 0.7])
    write_lines(root / "tokens" / "r.jsonl", [sample(1, 0.5, prompt="c", response="xy", acc=1, **tokens),
                                              sample(1, 0.1, prompt="c", response="xy", acc=0, **tokens)])
    return root


@pytest.mark.slow
def test_choices_persist_across_runs_only_where_they_apply(tmp_path):
    """A choice made on one run stays on the next where that run offers it; where it does not, and where
    the user chose nothing, the next run's own defaults show."""
    root = _choices_runs(tmp_path)
    at = _load(_open(root, "verlish"), keys.OVERVIEW)
    assert at.multiselect(key=keys.EXTRA_CURVES).value == ["acc", "num_turns"]
    at.multiselect(key=keys.EXTRA_CURVES).set_value(["num_turns"]).run()  # the user's choice
    assert at.multiselect(key=keys.DIAGNOSTIC_CURVES).value == ["zero_std_share"]  # the run's default
    _area(at, keys.BATCH).selectbox(key=keys.SORT_BY).select("num_turns").run()
    at.sidebar.selectbox(key=keys.RUN).select("tokens").run()
    at = _load(at, keys.OVERVIEW)
    # num_turns is not in this run: its default (its first three extras: acc); the diagnostics were never
    # chosen: this run's defaults, entropy and mismatch (explained variance needs values)
    assert at.multiselect(key=keys.EXTRA_CURVES).value == ["acc"]
    assert at.multiselect(key=keys.DIAGNOSTIC_CURVES).value == ["entropy", "mismatch_kl"]
    _area(at, keys.BATCH)
    assert at.selectbox(key=keys.SORT_BY).value == "reward"  # num_turns does not apply: the default
    at.selectbox(key=keys.SORT_BY).select("acc").run()
    at.sidebar.selectbox(key=keys.RUN).select("verlish").run()
    at = _load(at)
    assert at.selectbox(key=keys.SORT_BY).value == "acc"  # acc applies here too: the user's choice stays
    assert at.dataframe[0].value["response"].tolist() == ["one two", "three"]


@pytest.mark.slow
def test_response_level_runs_offer_only_their_sort_keys(tmp_path):
    """A run without token lists or reference rewards offers reward, the 4-gram repetition of its words
    (one response has 4 words), the log order and its extras; nothing it cannot sort by."""
    write_lines(tmp_path / "verlish" / "r.jsonl", [
        sample(1, 1.0, prompt="a", response="one two three four", acc=True, num_turns=3),
        sample(1, 0.0, prompt="b", response="five", acc=False)])
    at = _load(_open(tmp_path, "verlish"))
    assert at.selectbox(key=keys.SORT_BY).options == ["reward", "4-gram repetition", "log order", "acc", "num_turns"]


@pytest.mark.slow
def test_a_link_to_a_run_with_a_field_mapping_reads_it_the_same_way(tmp_path):
    """The address of a run loaded with a field mapping, a pad token, no EOS token and a sample limit
    carries them; opening it in a new session reads the run the same way (no line rejected)."""
    write_lines(tmp_path / "mine" / "r.jsonl", [{"step": 1, "my_score": 0.25, "answer": "x<pad>"},
                                                {"step": 1, "my_score": 0.75, "answer": "y"},
                                                {"step": 1, "my_score": 0.5, "answer": "z"}])
    at = _open(tmp_path, "mine")
    at.sidebar.text_input(key=keys.FIELD_MAP).input("reward=my_score, response=answer").run()
    at.sidebar.text_input(key=keys.PAD_TOKEN).input("<pad>").run()
    at.sidebar.text_input(key=keys.EOS_TOKEN).input("").run()
    at.sidebar.number_input(key=keys.MAX_SAMPLES).set_value(2).run()
    at = _load(at)
    params = dict(at.query_params)
    assert params["fields"] == "reward=my_score,response=answer" and params["pad"] == "<pad>"
    assert params["eos"] == "none" and params["max"] == "2"
    linked = AppTest.from_file(APP, default_timeout=60)
    linked.query_params.update(params)
    linked.run()
    assert not linked.exception
    assert any("2 samples loaded · 0 lines rejected · 1 skipped" in t.value for t in linked.text)
    assert any(t.value == "Field mapping: reward=my_score, response=answer" for t in linked.text)
    assert linked.dataframe[0].value["response"].tolist() == ["y", "x"]  # the first two, <pad> removed
    assert linked.sidebar.text_input(key=keys.EOS_TOKEN).value == ""


@pytest.mark.slow
def test_drop_system_prompt_keeps_a_prompt_without_a_system_turn(tmp_path):
    """With "Drop system prompt" on, a ChatML prompt with a system turn loses it; one without (verl's
    user turn first) is shown whole, question included."""
    with_system = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    without = "<|im_start|>user\nWhat is 3+3?<|im_end|>\n<|im_start|>assistant\n"
    write_lines(tmp_path / "chat" / "r.jsonl", [sample(1, 1.0, prompt=with_system, response="4"),
                                                sample(1, 0.0, prompt=without, response="6")])
    at = _load(_open(tmp_path, "chat"))
    at.sidebar.checkbox(key=keys.DROP_SYSTEM).check().run()
    assert at.dataframe[0].value["prompt"].tolist() == [
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", without]
    at.selectbox(key=keys.SAMPLE).select_index(1).run()
    assert at.code[0].value == without.rstrip("\n")  # the code block drops the last newline


@pytest.mark.slow
def test_a_search_match_opens_the_batch_area_and_marks_its_row(tmp_path):
    """Opening a sample from the findings panel (as a search match, a badge or a point does) opens the
    batch area at its step, shows it, and marks its row in the batch table."""
    at = _load(_open(REPO / "rollout_samples", "ppo_demo"), keys.OVERVIEW)
    for kind in [b.key for b in at.button if b.key and b.key.startswith("finding-")]:  # each finding's Evidence
        at.button(key=kind).click().run()
        opened = [b for b in at.button if b.key and b.key.startswith("finding-sample-")]
        if opened:
            break
    assert opened, "the demo's findings have samples to open"
    assert at.session_state[keys.AREA] == keys.OVERVIEW  # the evidence opens in the panel
    line = [t.value for t in at.text if t.value.startswith("step ")][0]  # "step S · FILE:LINE · reward R"
    step, source = int(line.split(" · ")[0].split()[1]), line.split(" · ")[1]
    opened[0].click().run()
    assert not at.exception
    assert at.session_state[keys.AREA] == keys.BATCH
    assert at.slider(key=keys.STEP).value == step and _shown_sample(at) == source
    table_key = f"batch_table-{step}-reward-True-None-k3"  # step, sort, highest first, no group, estimator
    row = at.session_state[table_key]["selection"]["rows"][0]
    picker = at.selectbox(key=keys.SAMPLE)
    assert picker.options.index(picker.format_func(picker.value)) == row  # the table's row is the sample's


@pytest.mark.slow
def test_a_badge_opens_the_batch_area_at_its_step():
    """A trainer-metrics warning badge opens the batch area at the nearest logged step (37 -> 35)."""
    at = _load(_open(REPO / "rollout_samples", "trl_grpo_demo"), keys.TRAINER)
    spike = [b for b in at.button if b.key and b.key.startswith("sign-") and "spike" in b.label][0]
    spike.click().run()
    assert at.session_state[keys.AREA] == keys.BATCH and at.slider(key=keys.STEP).value == 35


@pytest.mark.slow
def test_a_link_opens_its_area(tmp_path):
    """The address names the open area; a link with area=explore opens the search."""
    at = _load(_open(_growing_run(tmp_path), "live"), keys.EXPLORE)
    assert at.query_params["area"] == "explore"
    linked = AppTest.from_file(APP, default_timeout=60)
    linked.query_params.update(dict(at.query_params))
    linked.run()
    assert linked.session_state[keys.AREA] == keys.EXPLORE
    assert linked.text_input(key=keys.EXPLORE_REGEX) is not None and not linked.exception


@pytest.mark.slow
def test_an_area_keeps_its_choices_while_another_is_open(tmp_path):
    """Step, sort, sample and the open area stay as the user left them when another area was open in
    between, and when a tokenizer path that can't be used was typed in between."""
    at = _load(_open(_growing_run(tmp_path), "live"))
    at.slider(key=keys.STEP).set_value(2).run()
    at.selectbox(key=keys.SORT_BY).select("log order").run()
    at.selectbox(key=keys.SAMPLE).select_index(1).run()
    shown = _shown_sample(at)
    _area(at, keys.EXPLORE)
    _area(at, keys.BATCH)
    assert at.slider(key=keys.STEP).value == 2 and at.selectbox(key=keys.SORT_BY).value == "log order"
    assert _shown_sample(at) == shown
    at.sidebar.text_input(key=keys.TOKENIZER).input(str(tmp_path / "nothing here")).run()
    assert any("Can't use this tokenizer" in w.value for w in at.warning)
    at.sidebar.text_input(key=keys.TOKENIZER).input("").run()
    assert at.session_state[keys.AREA] == keys.BATCH and at.slider(key=keys.STEP).value == 2
    assert _shown_sample(at) == shown


@pytest.mark.slow
def test_an_unknown_format_says_nothing_loaded_and_lists_its_keys(tmp_path):
    """Lines the board can't read: the page says nothing loaded (not "the rest loaded"), lists the keys of
    the first lines with their kinds, and points to the field mapping with one built from those keys."""
    write_lines(tmp_path / "mine" / "r.jsonl", [{"step": i // 8, "my_score": 0.5, "question": "q", "answer": "a",
                                                 "meta": {"id": i}} for i in range(80)])
    at = _load(_open(tmp_path, "mine"), area=None)
    assert any("Nothing loaded: every line (80) was rejected" in e.value for e in at.error)
    assert not any("the rest loaded" in w.value for w in at.warning)
    texts = [t.value for t in at.text]
    assert "step (number), my_score (number), question (text), answer (text), meta (object), meta.id (number)" in texts
    assert any("Field mapping" in i.value for i in at.info)
    assert "reward=my_score, prompt=question, response=answer" in texts  # each by what its name means
    at.sidebar.text_input(key=keys.FIELD_MAP).input("reward=my_score, response=answer").run()
    at = _load(at)
    assert any("80 samples loaded · 0 lines rejected" in t.value for t in at.text)


@pytest.mark.slow
def test_a_trainers_metrics_file_is_neither_a_run_nor_rollout_lines(tmp_path):
    """train_metrics.jsonl (a step and numbers per line) in the root is not offered as a run, and one in a
    run folder is not read as rollouts: no line rejected, named as the trainer's metrics."""
    metrics = [{"step": s, "loss": 1.0 / s, "reward": 0.1 * s} for s in (1, 2, 3)]
    write_lines(tmp_path / "train_metrics.jsonl", metrics)
    write_lines(tmp_path / "run1" / "rollouts.jsonl", [sample(1, 0.5, prompt="p", response="r")])
    write_lines(tmp_path / "run1" / "train_metrics.jsonl", metrics)
    at = _open(tmp_path)
    assert at.sidebar.selectbox(key=keys.RUN).options == ["run1"]
    at = _load(at, area=None)
    assert any("1 file · 1 sample loaded · 0 lines rejected" in t.value for t in at.text)
    assert any("The trainer's own metrics, shown under Trainer metrics" in c.value for c in at.caption)
    assert "train_metrics.jsonl" in [t.value for t in at.text]
    assert not any("ignored" in i.value for i in at.info)


@pytest.mark.slow
def test_trl_trainer_state_is_named_as_used_not_ignored():
    """The TRL demo's trainer_state.json is named as the trainer's metrics, not as an ignored file."""
    at = _load(_open(REPO / "rollout_samples", "trl_grpo_demo"), area=None)
    assert not any("ignored" in i.value for i in at.info)
    assert any("The trainer's own metrics" in c.value for c in at.caption)
    assert "trainer_state.json" in [t.value for t in at.text]


@pytest.mark.slow
def test_a_response_level_run_offers_only_what_it_has(tmp_path):
    """A run with rewards and texts only: Reward fields offers and picks reward alone, no reference or KL
    control is drawn, no number of the sample shows "–"; the PPO demo (reference model, per-token KL)
    offers reward and ref_reward, both picked, and its KL controls."""
    write_lines(tmp_path / "plain" / "r.jsonl", [sample(s, float(i), prompt=f"p{i}", response="a b" * (i + 1))
                                                 for s in (1, 2) for i in range(3)])
    at = _load(_open(tmp_path, "plain"))
    fields = at.sidebar.multiselect(key=keys.REWARD_FIELDS)
    assert fields.options == ["reward"] and fields.value == ["reward"]
    drawn = {w.key for w in [*at.sidebar.checkbox, *at.sidebar.selectbox]}
    assert not {keys.SHOW_COMPARISON, keys.KL_ESTIMATOR, keys.USE_LOG_RATIO} & drawn
    assert at.metric and all(m.value != "–" for m in at.metric)
    assert not any("Reward gap" in m.label for m in at.metric)
    demo = _load(_open(REPO / "rollout_samples", "ppo_demo"))
    fields = demo.sidebar.multiselect(key=keys.REWARD_FIELDS)
    assert fields.options == ["reward", "ref_reward"] and fields.value == ["reward", "ref_reward"]
    assert demo.sidebar.selectbox(key=keys.KL_ESTIMATOR).value == "k3"
    assert demo.sidebar.checkbox(key=keys.SHOW_COMPARISON).value


@pytest.mark.slow
def test_a_shorter_response_is_not_coloured_as_worse(tmp_path):
    """Step 2's responses are shorter than step 1's: the length metrics show the drop (−3 characters) in
    grey, not red."""
    write_lines(tmp_path / "short" / "r.jsonl", [sample(1, 0.0, prompt="p", response="abcdef"),
                                                 sample(2, 1.0, prompt="p", response="abc")])
    at = _load(_open(tmp_path, "short"))
    chars = [m for m in at.metric if m.label == "Step mean response length (chars)"][0]
    assert chars.value == "3" and chars.delta == "-3 vs previous step"
    assert chars.proto.color == chars.proto.MetricColor.GRAY


@pytest.mark.slow
def test_each_extra_field_gets_its_own_chart(tmp_path):
    """Extras acc (0 or 1) and num_turns (3 or 5) are drawn in a chart each, titled by the field, so the
    counts never flatten the 0–1 field."""
    at = _load(_open(_choices_runs(tmp_path), "verlish"), keys.OVERVIEW)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    by_title = {s["layout"]["title"]["text"]: s["data"] for s in specs}
    assert [t["name"] for t in by_title["acc"] if t.get("mode")] == ["acc"]
    assert [t["name"] for t in by_title["num_turns"] if t.get("mode")] == ["num_turns"]
    assert "Extra fields" not in by_title


@pytest.mark.slow
def test_a_run_with_log_probs_but_no_reference_ones_says_which_are_missing(tmp_path):
    """Per-token log-probs without ref_logprobs: the KL curve's place says the reference log-probs are
    missing, not that the run has no per-token log-probabilities."""
    write_lines(tmp_path / "nolref" / "r.jsonl", [sample(1, 1.0, prompt="p", response="xy", response_tokens=["x", "y"],
                                                        logprobs=[-1.0, -2.0])])
    at = _load(_open(tmp_path, "nolref"), keys.OVERVIEW)
    infos = [i.value for i in at.info]
    assert any("No reference log-probabilities" in i for i in infos)
    assert not any("No per-token log-probabilities" in i for i in infos)


def test_no_deploy_button_in_either_way_of_serving():
    """Streamlit's toolbar shows a viewer's options only (no Deploy button) under `streamlit run`
    (.streamlit/config.toml) and under `rl-board serve` (its command line)."""
    import tomllib

    from rl_board.cli import _parser, serve_command

    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert config["client"]["toolbarMode"] in ("viewer", "minimal")
    command = serve_command(_parser().parse_args(["serve"]))
    assert command[command.index("--client.toolbarMode") + 1] == config["client"]["toolbarMode"]


def test_a_note_while_loading_is_inside_its_box(tmp_path, monkeypatch):
    """The cache folder is a file: the run loads without a cache, and the box that says "While loading:"
    holds the note itself (not a title alone with the text below it)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache folder should go")
    monkeypatch.setenv("RL_BOARD_CACHE_DIR", str(blocker))
    at = _load(_open(_growing_run(tmp_path / "root"), "live"), area=None)
    boxes = [w.value for w in at.warning if w.value.startswith("While loading:")]
    assert len(boxes) == 1 and "not caching" in boxes[0]


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_among_the_run_files_is_named_in_the_load_report(tmp_path):
    """A FIFO named like a run file (a.jsonl, beside b.jsonl): the page loads the run and its "While
    loading:" box names the FIFO as not read, never waiting on it."""
    root = _growing_run(tmp_path / "root")
    os.mkfifo(root / "live" / "a.jsonl")
    at = _load(_open(root, "live"), area=None)
    boxes = [w.value for w in at.warning if w.value.startswith("While loading:")]
    assert len(boxes) == 1 and "a.jsonl (a FIFO, not a regular file: not read)" in boxes[0]


@pytest.mark.slow
def test_a_run_that_went_away_says_why_inside_its_box(tmp_path):
    """The loaded run's folder is deleted and the server's caches are gone (a restart): the page shows
    "Can't read this run." with the reason (the folder not found, named) in the same box."""
    import shutil

    import streamlit as st

    write_lines(tmp_path / "other" / "r.jsonl", [sample(1, 0.0, prompt="p", response="r")])
    at = _load(_open(_growing_run(tmp_path), "live"))
    shutil.rmtree(tmp_path / "live")
    st.cache_resource.clear()
    at.run()
    assert not at.exception
    boxes = [e.value for e in at.error if e.value.startswith("Can't read this run.")]
    assert len(boxes) == 1 and f"Run folder not found: {tmp_path / 'live'}" in boxes[0]


def _table_key(at: AppTest, prefix: str) -> str:
    """The key of the drawn table whose key starts with ``prefix`` (a table's key names its query)."""
    ids = [d.proto.id for d in at.dataframe if f"-{prefix}" in d.proto.id]
    assert len(ids) == 1, ids
    return ids[0][ids[0].index(f"-{prefix}") + 1:]


def _click_cell(at: AppTest, key: str, row: int, column: str) -> None:
    """What a click on a cell (not the row's checkbox) sends: that cell selected."""
    at.session_state[key] = {"selection": {"rows": [], "columns": [], "cells": [[row, column]]}}
    at.run()
    assert not at.exception, at.exception


@pytest.mark.slow
def test_a_click_on_any_cell_of_the_batch_table_opens_its_sample(tmp_path):
    """At step 3 (rewards 2, 1, 0 from the top) a click on the response cell of the third row opens the
    reward-0 sample (b.jsonl line 7), and the table then marks that row."""
    at = _load(_open(_growing_run(tmp_path), "live"))
    key = _table_key(at, "batch_table-3-")
    _click_cell(at, key, 2, "response")
    assert _shown_sample(at) == "b.jsonl:7"
    assert [c.value for c in at.code][:2] == ["p30", "r30"]
    assert at.session_state[key]["selection"]["rows"] == [2]


@pytest.mark.slow
def test_a_click_on_a_search_result_cell_opens_its_sample(tmp_path):
    """In Explore, a click on any cell of the fifth result opens that sample in Batch and sample: its step
    and its prompt, read from the results table's own row."""
    at = _area(_load(_open(_growing_run(tmp_path), "live")), keys.EXPLORE)
    key = _table_key(at, "explore_table-")
    results = at.dataframe[[i for i, d in enumerate(at.dataframe) if key in d.proto.id][0]].value
    step, prompt = int(results["step"].iloc[4]), results["prompt"].iloc[4]
    _click_cell(at, key, 4, "reward")
    assert at.session_state[keys.AREA] == keys.BATCH
    assert at.slider(key=keys.STEP).value == step and at.code[0].value == prompt


@pytest.mark.slow
def test_a_click_on_a_group_cell_shows_that_groups_samples(tmp_path):
    """Prompt a (rewards 1, 0) and prompt b (2, 2): a click on any cell of a group's row in the GRPO group
    table shows that group's samples only."""
    write_lines(tmp_path / "grpo" / "r.jsonl", [sample(1, 1.0, prompt="a", response="a1"),
                                                sample(1, 0.0, prompt="a", response="a0"),
                                                sample(1, 2.0, prompt="b", response="b1"),
                                                sample(1, 2.0, prompt="b", response="b2")])
    at = _load(_open(tmp_path, "grpo"))
    at.toggle(key=keys.GROUP_BATCH).set_value(True).run()
    key = _table_key(at, "group_table-")
    groups = at.dataframe[0].value
    for row in range(2):
        _click_cell(at, key, row, "size")
        prompt = groups["prompt"].iloc[row]
        assert at.dataframe[1].value["prompt"].tolist() == [prompt, prompt]


@pytest.mark.slow
def test_trainer_metrics_preselect_the_kl_series(tmp_path):
    """A metrics JSONL with loss, entropy, reward, kl_k3, kl_coef and grad_norm: the series shown first are
    reward, the KL (kl_k3; kl_coef is a coefficient, not a KL), entropy and loss."""
    write_lines(tmp_path / "run1" / "rollouts.jsonl", [sample(s, 0.5, prompt="p", response="r") for s in (1, 2)])
    write_lines(tmp_path / "run1" / "train_metrics.jsonl", [
        {"step": s, "loss": 1.0 / s, "entropy": 2.0, "reward": 0.1 * s, "kl_k3": 0.01 * s, "kl_coef": 0.05,
         "grad_norm": 1.0} for s in (1, 2)])
    at = _load(_open(tmp_path, "run1"), keys.TRAINER)
    assert at.multiselect(key=keys.METRICS_SERIES).value == ["reward", "kl_k3", "entropy", "loss"]


@pytest.mark.slow
def test_a_tokenizer_outside_the_allowed_folders_opens_the_run_without_it(tmp_path, monkeypatch):
    """RL_BOARD_ROOTS = allowed; a tokenizer typed (or linked) from outside it: the run loads all its 9
    samples, a warning box says the tokenizer can't be used and why (outside the allowed folders), and
    no "Reading rollout files…" bar is left on the page."""
    allowed = tmp_path / "allowed"
    _growing_run(allowed)
    outside = tmp_path / "secret" / "tokenizer.json"
    outside.parent.mkdir()
    outside.write_text("{}")
    monkeypatch.setenv("RL_BOARD_ROOTS", str(allowed))

    def check(at):
        assert not at.exception and not at.error
        assert any("9 samples loaded · 0 lines rejected" in t.value for t in at.text)
        boxes = [w.value for w in at.warning if w.value.startswith("Can't use this tokenizer")]
        assert len(boxes) == 1 and "outside the allowed folders" in boxes[0]
        assert at.dataframe[0].value.shape[0] == 3  # step 3's batch is drawn
        assert not at.get("progress")

    at = _open(allowed, "live")
    at.sidebar.text_input(key=keys.TOKENIZER).input(str(outside)).run()
    check(_load(at))
    linked = AppTest.from_file(APP, default_timeout=60)
    linked.query_params.update({"root": str(allowed), "run": "live", "tokenizer": str(outside), "area": "batch"})
    check(linked.run())


@pytest.mark.slow
def test_a_step_opened_from_a_finding_shows_what_drives_it(tmp_path):
    """Opening a finding's sample (its evidence's Open) shows "What drives this step" at once: its toggle
    is on and the KL token ranking of that step is drawn, with no click on the toggle."""
    at = _load(_open(REPO / "rollout_samples", "ppo_demo"), keys.OVERVIEW)
    for kind in [b.key for b in at.button if b.key and b.key.startswith("finding-")]:
        at.button(key=kind).click().run()
        opened = [b for b in at.button if b.key and b.key.startswith("finding-sample-")]
        if opened:
            break
    assert opened, "the demo's findings have samples to open"
    opened[0].click().run()
    assert at.session_state[keys.AREA] == keys.BATCH
    assert at.toggle(key=keys.SHOW_DRIVERS).value
    ranking = [d.value for d in at.dataframe if "token" in d.value.columns and "count" in d.value.columns]
    assert ranking and len(ranking[0]) > 0


def _reward_runs(root: Path, name: str, rewards: list[float]) -> Path:
    """A run ``root/name`` with one sample per step (steps 1, 2, …) of these rewards."""
    write_lines(root / name / "r.jsonl", [sample(s, r, prompt="p", response="r") for s, r in enumerate(rewards, 1)])
    return root / name


def _compared_rewards(at: AppTest) -> dict[str, list]:
    """The compare area's reward chart: each run's mean reward per step, by the run's name in the legend."""
    spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
            if json.loads(c.proto.spec)["layout"]["title"]["text"] == "Reward"][0]
    return {t["name"]: _values(t["y"]) for t in spec["data"] if t.get("mode")}


@pytest.mark.slow
def test_compare_a_run_from_another_folder_by_path_or_as_a_recent_run(tmp_path):
    """A root with one run: Compare runs says what to do instead of staying blank. A run in another
    folder, typed as a path, is drawn over this one (rewards 5, 6 over 1, 2); after loading that run and
    coming back, it is offered as a recent run and drawn the same way."""
    root, elsewhere = tmp_path / "a", tmp_path / "b"
    _reward_runs(root, "mine", [1.0, 2.0])
    theirs = _reward_runs(elsewhere, "theirs", [5.0, 6.0])
    at = _load(_open(root, "mine"), keys.COMPARE)
    assert any("type the path of any run folder" in i.value for i in at.info)
    at.text_input(key=keys.COMPARE_PATH).input(str(theirs)).run()
    assert not at.exception
    assert _compared_rewards(at) == {"mine": [1.0, 2.0], str(theirs): [5.0, 6.0]}
    at.text_input(key=keys.COMPARE_PATH).input("").run()
    at.sidebar.text_input(key=keys.ROOT).input(str(elsewhere)).run()  # open theirs, then mine again
    at = _load(at, area=None)
    at.sidebar.text_input(key=keys.ROOT).input(str(root)).run()
    at = _load(at, keys.COMPARE)
    assert str(theirs) in at.multiselect(key=keys.COMPARE_RUNS).options
    at.multiselect(key=keys.COMPARE_RUNS).select(str(theirs)).run()
    assert _compared_rewards(at) == {"mine": [1.0, 2.0], str(theirs): [5.0, 6.0]}


@pytest.mark.slow
def test_compare_refuses_a_path_outside_the_allowed_folders(tmp_path, monkeypatch):
    """With RL_BOARD_ROOTS = allowed, a run typed from outside it is not read: a warning box names the
    reason, and only this run is drawn."""
    allowed = tmp_path / "allowed"
    _reward_runs(allowed, "mine", [1.0, 2.0])
    outside = _reward_runs(tmp_path / "secret", "theirs", [5.0, 6.0])
    monkeypatch.setenv("RL_BOARD_ROOTS", str(allowed))
    at = _load(_open(allowed, "mine"), keys.COMPARE)
    at.text_input(key=keys.COMPARE_PATH).input(str(outside)).run()
    assert not at.exception
    assert any(w.value.startswith("Can't read") and "outside the allowed folders" in w.value for w in at.warning)
    assert not [c for c in at.get("plotly_chart")]


def test_options_set_once_sit_in_closed_sidebar_sections(tmp_path):
    """The sidebar's set-once options (bands and smoothing; pad, EOS, tokenizer and system prompt; the
    trainer metrics path and thresholds; what the page shows) are each in a closed section, while the run
    picker and Load stay outside any section."""
    at = _open(_growing_run(tmp_path), "live")
    sections = {e.label: e for e in at.sidebar.expander}
    wanted = {"Curve bands and smoothing": [keys.STD_SCALE, keys.CLIP_BANDS, keys.ZERO_SHIFT, keys.SMOOTHING],
              "Tokens and text": [keys.DROP_PAD, keys.PAD_TOKEN, keys.EOS_TOKEN, keys.TOKENIZER, keys.DROP_SYSTEM,
                                  keys.SYSTEM_MARKER],
              "Trainer metrics": [keys.METRICS_PATH, "sign_ratio"],
              "Show on the page": [keys.SHOW_CHARTS, keys.SHOW_TABLE, keys.SHOW_PAIR, keys.SHOW_HEATMAP]}
    for label, inside in wanted.items():
        section = sections[label]
        assert not section.proto.expanded, label
        found = {w.key for kind in ("checkbox", "text_input", "slider", "number_input") for w in section.get(kind)}
        assert set(inside) <= found, (label, found)
    outside = {w.key for e in sections.values() for kind in ("selectbox", "button", "text_input") for w in e.get(kind)}
    assert not {keys.ROOT, keys.RUN, keys.LOAD} & outside


def _step_of(source: str) -> int:
    """The step a sample's own log line holds (read from ppo_demo's file, not from the page)."""
    name, line = source.rsplit(":", 1)
    raw = (REPO / "rollout_samples" / "ppo_demo" / name).read_text().splitlines()[int(line) - 1]
    return json.loads(raw)["step"]


def _address_names_what_is_shown(at: AppTest) -> None:
    params = dict(at.query_params)
    assert params["sample"] == at.session_state[keys.SAMPLE]
    assert int(params["step"]) == at.session_state[keys.STEP] == _step_of(params["sample"])


@pytest.mark.slow
def test_sort_search_open_a_match_and_come_back_keep_every_choice():
    """On ppo_demo: sort the batch by KL, search in Explore, open a step-25 match, come back to Explore
    and to the batch, move to step 30: the sort stays KL mean throughout, and the address always names
    the sample shown and its step (the step its own log line holds)."""
    at = _load(_open(REPO / "rollout_samples", "ppo_demo"))
    at.selectbox(key=keys.SORT_BY).select("KL mean").run()
    at = _area(at, keys.EXPLORE)
    at.text_input(key=keys.EXPLORE_REGEX).input("so the answer is correct").run()
    matches = at.dataframe[0].value
    row = int((matches["step"] == 25).to_numpy().argmax())
    assert matches["step"].iloc[row] == 25
    table = [k for k in at.session_state._state._state.filtered_state if str(k).startswith("explore_table-")]
    at.session_state[table[0]] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert not at.exception and at.session_state[keys.AREA] == keys.BATCH and at.session_state[keys.STEP] == 25
    assert at.selectbox(key=keys.SORT_BY).value == "KL mean" and dict(at.query_params)["sort"] == "KL mean"
    _address_names_what_is_shown(at)
    at = _area(at, keys.EXPLORE)
    assert at.text_input(key=keys.EXPLORE_REGEX).value == "so the answer is correct"
    at = _area(at, keys.BATCH)
    assert at.selectbox(key=keys.SORT_BY).value == "KL mean"
    _address_names_what_is_shown(at)
    at.slider(key=keys.STEP).set_value(30).run()
    assert not at.exception and at.selectbox(key=keys.SORT_BY).value == "KL mean"
    _address_names_what_is_shown(at)
    assert dict(at.query_params)["step"] == "30"


@pytest.mark.slow
def test_the_page_search_says_where_a_regex_stopped_and_refuses_a_large_one(tmp_path, monkeypatch):
    """Explore with a time budget spent at once says, in a warning, how many samples its regular expression
    searched (its first chunk: three of six 90 KB responses); a pattern of size 1,001 is refused with the
    limit and its setting named, the page alive."""
    from rl_board.analysis.segment_queries import PROBE_BYTES

    size = PROBE_BYTES // 3 + 1
    write_lines(tmp_path / "run" / "r.jsonl", [sample(step, 0.0, response="needle " + "z" * size)
                                               for step in (1, 2, 3) for _ in range(2)])
    monkeypatch.setenv("RL_BOARD_SEARCH_SECONDS", "1e-9")
    at = _area(_load(_open(tmp_path, "run")), keys.EXPLORE)
    at.text_input(key=keys.EXPLORE_REGEX).input("needle").run()
    assert not at.exception, at.exception
    warned = [w.value for w in at.warning if "stopped at its time budget" in w.value]
    assert len(warned) == 1 and "3 of 6 samples searched" in warned[0]
    at.text_input(key=keys.EXPLORE_REGEX).input("x{1000}y").run()
    assert not at.exception, at.exception
    assert any("Can't search with this pattern" in e.value for e in at.error)
    assert any("size 1,001" in t.value and "RL_BOARD_MAX_REGEX_SIZE" in t.value for t in at.text)


@pytest.mark.slow
@pytest.mark.parametrize("run", ["ppo_demo", "prime_rl_agent_demo"])
def test_no_area_of_the_page_reads_the_old_samples_name(run):
    """Every area of the page draws a PPO run and an agent run with the warning of ``run.samples`` made an
    error: no exception and no error box (the page reads the private ``_samples``; a guard for code merged
    later)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="run.samples is private", category=DeprecationWarning)
        at = _load(_open(REPO / "rollout_samples", run))
        for area in (keys.OVERVIEW, keys.BATCH, keys.EXPLORE, keys.TRAINER, keys.COMPARE, keys.DIFF):
            _area(at, area)
            assert not [e.value for e in at.error if "run.samples" in str(e.value)]
