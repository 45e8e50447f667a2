"""reward_not_recomposed (issue 48 item 3): the samples whose total is not the weighted sum of their reward
components, on runs written by each trainer's own writer code, planted samples and look-alikes known."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from agent_writers import v1_chain, v1_episode, v1_trace, write_prime_rl, write_rllm
from ray_writers import verl_dump

from rl_board.analysis.findings import compute_findings
from rl_board.analysis.source import load_run


def _findings(folder: Path):
    run = load_run(folder, None, cache_root=False)
    found = compute_findings(run)
    return run, {f.kind: f for f in found.findings}, {c.kind: c for c in found.checks}


def _flagged(run, finding) -> list[tuple[int, int]]:
    """(step, 1-based line) of each sample the finding names, in its order."""
    rows = run.samples.loc[list(finding.labels)]
    return [(int(s), int(n)) for s, n in zip(rows["step"], rows["line"])]


def _verl(folder: Path, planted: dict[tuple[int, int], float], nan_at: tuple[int, int] | None = None) -> None:
    """Steps 1 and 2, six samples each: score = 1.0 * accuracy_reward + 0.5 * format_score (verl's
    reward_extra_info beside it), plus ``planted[(step, i)]``; ``nan_at`` has a NaN format_score."""
    for step in (1, 2):
        accuracy = [float(i % 2) for i in range(6)]
        form = [0.25 * (i % 3) for i in range(6)]
        if nan_at and nan_at[0] == step:
            form[nan_at[1]] = math.nan
        scores = [a + 0.5 * f + planted.get((step, i), 0.0) if f == f else 7.0
                  for i, (a, f) in enumerate(zip(accuracy, form))]
        verl_dump(folder, step, ["q"] * 6, [f"s{step}r{i}" for i in range(6)], ["1"] * 6, scores,
                  {"accuracy_reward": accuracy, "format_score": form, "acc": [a == 1.0 for a in accuracy]})


def test_verl_names_exactly_the_planted_samples_with_fitted_weights(tmp_path):
    """A verl dump whose score is 1·accuracy + 0.5·format: the weights are fitted and only the two
    planted samples (off by 0.3 and by 2e-6) are named; one off by 5e-7 (float noise) and one with a NaN
    component are not."""
    _verl(tmp_path, {(1, 2): 0.3, (2, 5): 2e-6, (2, 1): 5e-7}, nan_at=(2, 4))
    run, found, checks = _findings(tmp_path)
    finding = found["reward_not_recomposed"]
    assert _flagged(run, finding) == [(1, 3), (2, 6)]  # sample i of a step's file is its line i + 1
    assert finding.evidence["count"] == 2 and finding.evidence["checked"] == 11  # 12 samples, one NaN
    assert finding.evidence["weights_from"] == "fitted"
    assert finding.message == ("the reward of 2 of 11 samples is not the weighted sum of its components "
                               "(acc, accuracy_reward, format_score) with the weights that reproduce the others")
    weights = finding.evidence["weights"]
    # acc (a bool) equals accuracy_reward on every sample: only their weights' sum is determined
    assert abs(weights["accuracy_reward"] + weights["acc"] - 1.0) < 1e-9 and abs(weights["format_score"] - 0.5) < 1e-9
    assert checks["reward_not_recomposed"].ran


def test_verl_all_recomposed_is_no_finding(tmp_path):
    """Every score is 1·accuracy + 0.5·format: no finding, and the check ran."""
    _verl(tmp_path, {})
    _, found, checks = _findings(tmp_path)
    assert "reward_not_recomposed" not in found and checks["reward_not_recomposed"].ran


def test_total_not_linear_in_components_does_not_run_and_says_why(tmp_path):
    """A score that is the product of its components (no weights reproduce 90 % of them): the check does
    not run, and its note says why."""
    for step in (1, 2):
        a = [0.1 * (i + 1) for i in range(6)]
        b = [0.3 * (i % 4) + 0.2 for i in range(6)]
        verl_dump(tmp_path, step, ["q"] * 6, [f"r{i}" for i in range(6)], ["1"] * 6,
                  [x * y for x, y in zip(a, b)], {"a_reward": a, "b_reward": b})
    _, found, checks = _findings(tmp_path)
    assert "reward_not_recomposed" not in found
    check = checks["reward_not_recomposed"]
    assert not check.ran and "not a weighted sum" in check.note


def test_no_components_says_so(tmp_path):
    """A verl dump with only a score: the check does not run, 'no reward components logged'."""
    for step in (1, 2):
        verl_dump(tmp_path, step, ["q"], ["a"], ["1"], [1.0], {})
    _, _, checks = _findings(tmp_path)
    assert checks["reward_not_recomposed"].note == "no reward components logged"


def _trace(answer: str, correct: float, form: float, format_weight: float = 0.2) -> dict:
    nodes = v1_chain([({"role": "user", "content": "q"}, False), ({"role": "assistant", "content": answer}, True)])
    return v1_trace(nodes, {"correct": {"score": correct, "weight": 1.0},
                            "format": {"score": form, "weight": format_weight}}, {})


def test_prime_rl_logged_weights_that_differ_are_named(tmp_path):
    """prime-rl rubric rewards {score, weight}: the total is Σ score × weight (no total stored); the one trace
    whose format weight is 0.5 where the run's usual is 0.2 is named, a trace with other scores but the usual
    weights is not, and the sample shows its weights as the extras reward_weight/NAME."""
    for step in (1, 2):
        traces = [_trace(f"s{step}a", 1.0, 1.0), _trace(f"s{step}b", 0.0, 0.5), _trace(f"s{step}c", 1.0, 0.0)]
        if step == 2:
            traces.append(_trace("planted", 1.0, 1.0, format_weight=0.5))
        write_prime_rl(tmp_path, step, "train", "all", [v1_episode(f"e{step}", step, traces)])
    run, found, _ = _findings(tmp_path)
    finding = found["reward_not_recomposed"]
    rows = run.samples.loc[list(finding.labels)]
    assert rows["step"].tolist() == [2] and rows["extra:reward_weight/format"].tolist() == [0.5]
    assert finding.evidence == {"count": 1, "checked": 7, "weights": {"reward/correct": 1.0, "reward/format": 0.2},
                                "weights_from": "logged", "components": ["reward/correct", "reward/format"]}
    planted = rows.iloc[0]
    assert planted["extra:reward/format"] == 0.5 and planted["reward"] == 1.5  # 1.0 × 0.5 + 1.0 × 1.0
    assert (run.samples["extra:reward_weight/format"] == 0.2).sum() == 6


def test_rllm_metrics_components_name_the_planted_episode(tmp_path):
    """rLLM episodes whose metrics hold accuracy_reward and format_reward and whose trajectory reward is
    1·accuracy + 0.5·format: the one planted episode (reward 0.9 where 1.0 + 0.5·0 = 1.0) is named."""
    episodes = tmp_path / "episodes"
    for step in (1, 2):
        for i in range(4):
            accuracy, form = float(i % 2), 0.5 * (i // 2)
            reward = 0.9 if (step, i) == (2, 1) else accuracy + 0.5 * form
            chat = [{"role": "user", "content": f"q{step}{i}"}, {"role": "assistant", "content": "a"}]
            write_rllm(episodes, step, "train", f"e{step}{i}", [{"reward": reward, "steps": [{"chat_completions": chat}]}],
                       accuracy == 1.0, {"accuracy_reward": accuracy, "format_reward": form})
    run, found, _ = _findings(episodes)
    finding = found["reward_not_recomposed"]
    rows = run.samples.loc[list(finding.labels)]
    assert rows["step"].tolist() == [2] and rows["reward"].tolist() == [0.9]
    assert finding.evidence["count"] == 1 and finding.evidence["checked"] == 8


def test_trl_completions_recompose_as_their_sum_nan_components_included(tmp_path):
    """TRL's completions parquet stores no total (the reader sums the reward functions, NaN as 0): the check
    runs and names nothing, the samples with a NaN accuracy_reward (one prompt in four) included."""
    from rl_board.demo.trl import write_trl_run

    write_trl_run(tmp_path, steps=(5, 10), prompts=4, group=4)
    run, found, checks = _findings(tmp_path)
    assert "reward_not_recomposed" not in found and checks["reward_not_recomposed"].ran
    assert run.samples["extra:accuracy_reward"].isna().sum() == 8  # 2 steps × 1 prompt × 4 completions


def test_fit_finds_a_third_of_planted_samples_among_float_noise():
    """300 samples, totals 0.7·a + 0.2·b + 0.1·c with noise under 4e-7 on the clean ones and an offset of at
    least 2e-6 on a planted third: the fitted weights reproduce exactly the clean ones, not one planted."""
    import numpy as np

    from rl_board.analysis.findings.reward import RECOMPOSE_TOLERANCE, compute_fitted_weights

    rng = np.random.default_rng(7)
    values = rng.uniform(0, 5, size=(300, 3))
    totals = values @ np.array([0.7, 0.2, 0.1]) + rng.uniform(-4e-7, 4e-7, size=300)
    planted = np.zeros(300, dtype=bool)
    planted[rng.choice(300, 100, replace=False)] = True
    totals[planted] += rng.choice([-1, 1], 100) * rng.uniform(2e-6, 1.0, 100)
    weights = compute_fitted_weights(values, totals)
    assert weights is not None
    named = ~(np.abs(totals - values @ weights) <= RECOMPOSE_TOLERANCE)
    assert np.array_equal(named, planted)


@pytest.mark.slow
def test_sample_view_lists_the_components(tmp_path):
    """The page's sample view of a verl dump (no turns) lists the sample's components, acc as 1 or 0 and
    format_score, with no logged weight (AppTest)."""
    from page_steps import load_run as load_page

    _verl(tmp_path / "verl", {})
    at = load_page(tmp_path, "verl")
    assert not at.exception, at.exception
    tables = [d.value for d in at.dataframe if list(d.value.columns) == ["component", "value", "weight"]]
    assert len(tables) == 1
    shown = tables[0]
    assert shown["component"].tolist() == ["acc", "accuracy_reward", "format_score"]
    assert shown["weight"].isna().all()
    acc, accuracy, form = shown["value"].tolist()
    assert acc == accuracy and acc in (0.0, 1.0) and form in (0.0, 0.25, 0.5)


@pytest.mark.slow
def test_findings_panel_shows_the_weights_and_opens_the_planted_samples(tmp_path):
    """The page's findings panel (AppTest): the finding's line, its evidence with the fitted weights as a
    table, and the planted samples listed by address."""
    from test_findings import _page

    _verl(tmp_path / "verl", {(1, 2): 0.3, (2, 5): 0.25})
    at = _page(tmp_path, "verl")
    assert not at.exception, at.exception
    at.button(key="finding-reward_not_recomposed").click().run()
    assert not at.exception, at.exception
    texts = [t.value for t in at.text]
    assert [t.split(" · ")[:2] for t in texts if t.startswith("step ")] == [["step 1", "1.jsonl:3"],
                                                                            ["step 2", "2.jsonl:6"]]
    weights = [t.value for t in at.table if "weight" in t.value.columns]
    assert len(weights) == 1 and weights[0]["weight"].tolist()[-1] == "0.5"  # format_score's


def test_fit_names_the_planted_samples_of_random_verl_like_runs():
    """100 random runs shaped like verl's dumps (acc 0/1, a format bonus 0 or 0.1 zero on about half the
    samples, a parsed number pred that the score ignores; score = acc + format), with up to 40 % of the
    samples planted off by 1e-5 to 1: on every run the fit names exactly the planted ones."""
    import numpy as np

    from rl_board.analysis.findings.reward import RECOMPOSE_TOLERANCE, compute_fitted_weights

    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(20, 400))
        acc, form = rng.integers(0, 2, n).astype(float), rng.choice([0.0, 0.1], n)
        values = np.column_stack([acc, form, rng.integers(0, 200, n).astype(float)])
        totals = acc + form
        planted = rng.random(n) < rng.uniform(0, 0.4)
        totals[planted] += rng.choice([-1, 1], planted.sum()) * rng.uniform(1e-5, 1, planted.sum())
        weights = compute_fitted_weights(values, totals)
        assert weights is not None
        assert np.array_equal(~(np.abs(totals - values @ weights) <= RECOMPOSE_TOLERANCE), planted)
