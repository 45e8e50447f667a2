"""One step by position: KL, entropy and advantage per token position, reward per length bucket —
each computed by hand on tiny samples; the page draws them."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, sample, write_lines

from rl_board.analysis.positions import compute_position_profile, compute_reward_by_length
from rl_board.derive.metrics import compute_sample_tokens
from rl_board.views import keys

E = "<e>"


def _k3(logp, ref):
    d = ref - logp
    return math.exp(d) - 1 - d


def test_position_profile_by_hand():
    """A: 3 counted positions (x, y, EOS), B: 1 (EOS; its pads are left out). KL at 0 is the mean of
    A's and B's, at 1 and 2 A's alone; entropy likewise; advantage is GAE for A (γ = λ = 1: the
    reward-to-go minus the value) and B's per-sample advantage at its one position."""
    a = compute_sample_tokens({"response_tokens": ["x", "y", E], "logprobs": [-1.0, -2.0, -0.5],
                               "ref_logprobs": [-1.5, -1.0, -0.5], "entropy": [1.0, 2.0, 3.0],
                               "values": [0.5, 0.25, 1.0], "token_rewards": [0.0, 0.0, 1.5]}, E, E)
    b = compute_sample_tokens({"response_tokens": [E, E, E], "logprobs": [-0.2, -0.01, -0.01],
                               "ref_logprobs": [-0.1, -0.02, -0.02], "entropy": [0.5, 9.0, 9.0]}, E, E)
    profile = compute_position_profile([a, b], "k3", gamma=1.0, lam=1.0, advantages=[None, 0.75])
    assert profile.index.tolist() == [0, 1, 2] and profile["samples"].tolist() == [2, 1, 1]
    assert profile["kl_mean"].tolist() == pytest.approx([(_k3(-1.0, -1.5) + _k3(-0.2, -0.1)) / 2,
                                                         _k3(-2.0, -1.0), _k3(-0.5, -0.5)])
    assert profile["entropy_mean"].tolist() == pytest.approx([0.75, 2.0, 3.0])
    assert profile["advantage_mean"].tolist() == pytest.approx([((1.5 - 0.5) + 0.75) / 2, 1.5 - 0.25, 1.5 - 1.0])


def test_reward_by_length_buckets_by_hand():
    """Lengths 2..17 in 8 buckets of width ceil(16 / 8) = 2: [2, 3], [4, 5] … ; a sample without a
    length or with a NaN reward is left out; without token lengths, characters are used."""
    samples = pd.DataFrame({"response_len": [2, 3, 5, 17, -1, 9], "response_chars": [9.0] * 6,
                            "reward": [1.0, 0.0, 0.5, 2.0, 7.0, float("nan")]})
    buckets, unit = compute_reward_by_length(samples)
    assert unit == "tokens"
    assert buckets[["low", "high", "samples"]].values.tolist() == [[2, 3, 2], [4, 5, 1], [16, 17, 1]]
    assert buckets["reward_mean"].tolist() == [0.5, 0.5, 2.0] and buckets["reward_std"].tolist() == [0.5, 0, 0]
    chars = pd.DataFrame({"response_len": [-1, -1, -1], "response_chars": [10.0, 12.0, 30.0],
                          "reward": [1.0, 3.0, 5.0]})
    buckets, unit = compute_reward_by_length(chars, buckets=2)  # width ceil(21 / 2) = 11: [10, 20], [21, 31]
    assert unit == "characters" and buckets[["low", "high", "samples"]].values.tolist() == [[10, 20, 2], [21, 31, 1]]
    assert buckets["reward_mean"].tolist() == [2.0, 5.0]


@pytest.mark.slow
def test_the_page_draws_the_step_by_position(tmp_path):
    """Toggling "By position" draws KL, entropy and advantage by position and the reward by length
    bucket for the step shown; the KL curve holds the hand-computed means."""
    from streamlit.testing.v1 import AppTest

    write_lines(tmp_path / "pos" / "r.jsonl", [
        sample(1, 1.0, response_tokens=["a", "<|endoftext|>"], logprobs=[-1.0, -0.5], ref_logprobs=[-2.0, -0.5],
               entropy=[1.0, 2.0], advantage=0.5),
        sample(1, 0.0, response_tokens=["b", "c", "<|endoftext|>"], logprobs=[-1.0, -1.0, -1.0],
               ref_logprobs=[-1.0, -1.5, -1.0], entropy=[3.0, 1.0, 1.0], advantage=-0.5),
    ])
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(tmp_path)).run()
    at.sidebar.button(key=keys.LOAD).click().run()
    at.session_state[keys.AREA] = keys.BATCH
    at.run()
    at.toggle(key=keys.SHOW_POSITIONS).set_value(True).run()
    assert not at.exception
    specs = {json.loads(c.proto.spec)["layout"]["title"]["text"]: json.loads(c.proto.spec)
             for c in at.get("plotly_chart")}

    def y(title):
        encoded = specs[title]["data"][0]["y"]
        if isinstance(encoded, dict):
            import base64
            return np.frombuffer(base64.b64decode(encoded["bdata"]), dtype=encoded["dtype"]).tolist()
        return list(encoded)

    assert y("KL (k3) by position") == pytest.approx([(_k3(-1.0, -2.0) + 0.0) / 2, (0.0 + _k3(-1.0, -1.5)) / 2, 0.0])
    assert y("Entropy by position") == pytest.approx([2.0, 1.5, 1.0])
    assert y("Advantage by position") == pytest.approx([0.0, 0.0, -0.5])
    assert y("Reward by response length (tokens)") == pytest.approx([1.0, 0.0])  # lengths 2 and 3
