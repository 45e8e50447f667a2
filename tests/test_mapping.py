"""The field mapping suggested when nothing loads: each field from the key whose name means it."""

from __future__ import annotations

import pytest
from conftest import REPO, write_lines
from streamlit.testing.v1 import AppTest

from rl_board.readers.mapping import suggest_field_mapping
from rl_board.views import keys


@pytest.mark.parametrize("found, expected", [
    # the first number is an index and the last text a data source: neither is proposed
    ([("idx", "number"), ("question", "text"), ("model_output", "text"), ("correctness_score", "number"),
      ("global_step", "number"), ("data_source", "text")],
     "step=global_step, reward=correctness_score, prompt=question, response=model_output"),
    # verl-like keys with a nested ground truth; `prompt` and `step` are read without a mapping
    ([("step", "number"), ("data_source", "text"), ("prompt", "text"), ("ability", "text"),
      ("reward_model.ground_truth", "text"), ("extra_info.index", "number"), ("acc", "number"),
      ("responses", "text")],
     "reward=acc, response=responses, ground_truth=reward_model.ground_truth"),
    # an answer is the response when nothing else names one, else the ground truth
    ([("step", "number"), ("my_score", "number"), ("question", "text"), ("answer", "text")],
     "reward=my_score, prompt=question, response=answer"),
    ([("step", "number"), ("score", "number"), ("completion", "text"), ("answer", "text")],
     "response=completion, ground_truth=answer"),
    # nothing named like a reward or an output: nothing guessed
    ([("step", "number"), ("idx", "number"), ("length", "number"), ("data_source", "text"), ("text", "text")], ""),
    # a text named like a reward is no reward; a number named like a response is no response
    ([("step", "number"), ("reward_text", "text"), ("completion_tokens", "number")], ""),
])
def test_the_suggestion_goes_by_what_the_names_mean(found, expected):
    """Each proposed pair is the key whose name says the field, never the first number or the last text."""
    assert suggest_field_mapping(found) == expected


def test_the_page_suggests_the_mapping_by_name_when_nothing_loads(tmp_path):
    """A run whose every line is rejected shows its keys and a mapping that reads them by meaning."""
    write_lines(tmp_path / "run" / "r.jsonl", [
        {"idx": i, "global_step": 1, "question": "q", "model_output": "a", "correctness_score": 1.0,
         "data_source": "gsm8k"} for i in range(3)])
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60)
    at.session_state[keys.ROOT] = str(tmp_path)
    at.run()
    at.main.button[0].click().run()
    assert not at.exception
    assert "step=global_step, reward=correctness_score, prompt=question, response=model_output" in [
        t.value for t in at.text]
