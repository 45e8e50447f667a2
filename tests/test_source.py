"""``rl_board.load``: a run as a DataFrame for a notebook, with the page's read options."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO, sample, write_lines


@pytest.mark.slow
def test_importing_rl_board_stays_light_and_load_is_there():
    """`import rl_board` imports neither pandas, pyarrow nor streamlit; `rl_board.load` is then importable."""
    code = ("import sys, rl_board; heavy = [m for m in ('pandas', 'pyarrow', 'streamlit') if m in sys.modules]; "
            "print(heavy); print(callable(rl_board.load))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"]


def test_load_gives_samples_texts_and_token_lists(tmp_path):
    """Rewards, texts and per-token log-probs are the ones written; positions after the EOS are not counted;
    a mapping given in the command line's direction ({field: source key}) reads the user's key."""
    import rl_board

    lines = [sample(1, 0.0, my_score=0.5, prompt="p1", response="a b<eos>",
                    response_tokens=["a", " b", "<eos>", "<eos>"], logprobs=[-0.1, -0.2, -0.3, -0.4]),
             sample(2, 0.0, my_score=-1.0, prompt="p2", response="c", response_tokens=["c"], logprobs=[-2.0])]
    write_lines(tmp_path / "run" / "r.jsonl", lines)
    run = rl_board.load(tmp_path / "run", fields={"reward": "my_score"}, pad_token=None, eos_token="<eos>",
                        cache=False)
    assert run.to_pandas()["reward"].tolist() == [0.5, -1.0]
    assert run.to_pandas(text=True)["response"].tolist() == ["a b<eos>", "c"]
    tokens = run.token_table("r.jsonl:1")
    assert tokens["token"].tolist() == ["a", " b", "<eos>", "<eos>"]
    assert tokens["logprobs"].tolist() == [-0.1, -0.2, -0.3, -0.4]
    assert tokens["counted"].tolist() == [True, True, True, False]  # the EOS counts, nothing after it


def test_load_refuses_what_it_cant_use(tmp_path):
    """An unknown read option is a TypeError; a bad field mapping says why."""
    import rl_board
    from rl_board.readers import FieldMappingError

    write_lines(tmp_path / "r.jsonl", [sample(1, 1.0)])
    with pytest.raises(TypeError):
        rl_board.load(tmp_path, pad="x")
    with pytest.raises(FieldMappingError, match="is not a field the board knows"):
        rl_board.load(tmp_path, fields={"rewardz": "x"})
