"""What a loaded run has (analysis.offered): read from small runs whose lines say it."""

from conftest import sample, write_lines

from rl_board.analysis.offered import compute_run_traits
from rl_board.analysis.source import load_run


def _traits(folder, lines):
    write_lines(folder / "r.jsonl", lines)
    run = load_run(folder, cache_root=False)
    return compute_run_traits(run.steps, run.samples)


def test_traits_follow_what_the_lines_hold(tmp_path):
    """Lines with ref_reward and both log-prob lists have every trait (reward fields reward, ref_reward);
    lines with logprobs only have token lists and no KL; lines with a reward and texts have none but the
    reward field; valid_reward counts once any sample has it."""
    full = _traits(tmp_path / "full", [sample(1, 1.0, ref_reward=0.5, response="ab", response_tokens=["a", "b"],
                                              logprobs=[-1.0, -2.0], ref_logprobs=[-1.5, -1.0])])
    assert full.reward_fields == ("reward", "ref_reward")
    assert full.reference and full.token_lists and full.ref_logprobs
    policy = _traits(tmp_path / "policy", [sample(1, 1.0, response="ab", response_tokens=["a", "b"],
                                                  logprobs=[-1.0, -2.0])])
    assert policy.token_lists and not policy.ref_logprobs and not policy.reference
    plain = _traits(tmp_path / "plain", [sample(1, 1.0, prompt="p", response="r"),
                                         sample(2, 0.0, prompt="p", response="r", valid_reward=1.0)])
    assert plain.reward_fields == ("reward", "valid_reward")
    assert not (plain.reference or plain.token_lists or plain.ref_logprobs)
