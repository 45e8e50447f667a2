"""The trainer's scalars: each reader on fixtures written here, one value per step, detection, the CLI."""

import json
import math

import pytest
from conftest import REPO, command, sample, write_lines

from rl_board.scalars import ScalarsError, detect, load_scalars


def _cli(*args):
    proc = command("metrics", *map(str, args))
    return proc.returncode, proc.stdout, proc.stderr


def _trl(folder, history):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 3, "log_history": history}))
    return folder


def test_trl_trainer_state_every_numeric_key_last_value_wins(tmp_path):
    """Every numeric key but step is a series; a step logged twice keeps its later value; NaN is a gap."""
    _trl(tmp_path, [{"step": 1, "loss": 0.5, "kl": 0.01, "epoch": 0.1, "note": "x", "flag": True},
                    {"step": 2, "loss": float("nan"), "clip_ratio/region_mean": 0.2},
                    {"step": 1, "loss": 0.4}, {"epoch": 1.0}])
    code, out, _ = _cli(tmp_path, "--json")
    assert code == 0
    got = json.loads(out)
    assert got == {"source": "trl", "series": {"clip_ratio/region_mean": [[2, 0.2]], "epoch": [[1, 0.1]],
                                               "kl": [[1, 0.01]], "loss": [[1, 0.4], [2, None]]}}


def test_trl_prefers_the_top_level_state_else_the_newest_checkpoint(tmp_path):
    """A run folder's own trainer_state.json wins; without one, checkpoint-10 beats checkpoint-9."""
    _trl(tmp_path / "out" / "checkpoint-9", [{"step": 9, "loss": 9.0}])
    _trl(tmp_path / "out" / "checkpoint-10", [{"step": 10, "loss": 10.0}])
    assert detect(tmp_path / "out")[1] == tmp_path / "out" / "checkpoint-10" / "trainer_state.json"
    _trl(tmp_path / "out", [{"step": 11, "loss": 11.0}])
    assert load_scalars(tmp_path / "out").series == {"loss": [(11, 11.0)]}


def test_verl_file_logger_and_plain_jsonl(tmp_path):
    """verl: every numeric key of data; plain: every numeric key but step; later lines win."""
    verl = tmp_path / "verl.jsonl"
    verl.write_text("\n".join(json.dumps(x) for x in [
        {"step": 1, "elapsed_seconds": 3.0, "data": {"actor/pg_loss": 0.1, "critic/vf_loss": 2.0, "tag": "a"}},
        {"step": 2, "data": {"actor/pg_loss": 0.3}}, {"step": 1, "data": {"actor/pg_loss": 0.2}}, "oops"]) + "\n")
    got = load_scalars(verl)
    assert got.source == "verl" and got.skipped == 1
    assert got.series == {"actor/pg_loss": [(1, 0.2), (2, 0.3)], "critic/vf_loss": [(1, 2.0)]}
    plain = tmp_path / "plain" / "metrics.jsonl"
    write_lines(plain, [{"step": 3, "loss": 1.0, "lr": 1e-5}, {"step": 2, "loss": float("inf")}])
    got = json.loads(_cli(plain.parent, "--json")[1])
    assert got == {"source": "jsonl", "series": {"loss": [[2, None], [3, 1.0]], "lr": [[3, 1e-5]]}}


def test_tensorboard_resumed_run_latest_wall_time_wins(tmp_path):
    """Two event files (a resume logs steps 2-3 again later): each step keeps the latest wall time's value."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def write(suffix, points):
        writer = EventFileWriter(str(tmp_path / "tb"), filename_suffix=suffix)
        for wall, step, tag, value in points:
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(event_pb2.Event(wall_time=wall, step=step, summary=summary))
        writer.close()

    write(".first", [(100.0, 1, "train/kl", 0.1), (101.0, 2, "train/kl", 0.2), (102.0, 3, "train/kl", 0.3),
                     (101.0, 2, "train/loss", float("nan"))])
    write(".resumed", [(200.0, 2, "train/kl", 0.25), (201.0, 3, "train/kl", 0.35), (202.0, 4, "train/kl", 0.45)])
    got = load_scalars(tmp_path)
    assert got.source == "tensorboard" and got.non_finite == 1
    assert [s for s, _ in got.series["train/kl"]] == [1, 2, 3, 4]
    assert [v for _, v in got.series["train/kl"]] == pytest.approx([0.1, 0.25, 0.35, 0.45])
    assert math.isnan(got.series["train/loss"][0][1])
    assert json.loads(_cli(tmp_path / "tb", "--json")[1])["series"]["train/loss"] == [[2, None]]


def test_missing_or_unknown_paths(tmp_path):
    """A missing path or a folder without metrics exits 2 saying what is expected; a rollout JSONL
    is not taken for metrics."""
    assert _cli(tmp_path / "nope", "--json")[0] == 2
    write_lines(tmp_path / "rollouts" / "r.jsonl", [sample(1, 1.0, prompt="p", response="r")])
    code, _, err = _cli(tmp_path / "rollouts", "--json")
    assert code == 2 and "trainer_state.json" in err
    with pytest.raises(ScalarsError):
        detect(tmp_path / "rollouts" / "r.jsonl")


def _steps(values, start=1):
    return [(start + i, float(v)) for i, v in enumerate(values)]


@pytest.mark.parametrize("name, values, kind, step", [
    ("actor/pg_loss", [0.5, 0.4, float("nan"), 0.3], "non-finite loss", 3),
    ("critic/vf_loss", [1.0, float("inf")], "non-finite loss", 2),
    ("objective/kl", [0.1, 0.11, 0.09, 0.1, -0.2, 0.1], "negative KL", 5),  # 0.2 below 0, noise 0.03
    ("actor/ppo_kl", [0.01, -0.2], "negative KL", 2),
    ("policy/ratio", [1.0, 1.1, 200.0], "ratio", 3),
    ("actor/pg_clipfrac", [0.1, 0.2, 0.45], "clip fraction", 3),
    ("loss", [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 9.0, 1.0], "spike", 7),  # and back
    ("actor/kl_coef", [0.1] * 6 + [0.5, 0.1], "spike", 7),
    ("actor/entropy", [2.0, 2.1, 1.9, 1.5, 1.0, 0.5, 0.3], "entropy collapse", 7),
])
def test_each_warning_sign_trips_at_its_step(name, values, kind, step):
    """A series built to trip a sign gets it, at the first step it shows."""
    from rl_board.scalars.signs import compute_signs

    signs = compute_signs({name: _steps(values)})
    assert [(s.kind, s.series, s.step) for s in signs if s.kind == kind] == [(kind, name, step)]


@pytest.mark.parametrize("name, values", [
    ("loss", [1.0, 0.9, 0.8, 0.85, 0.7, 0.75, 0.72, 0.7]),  # noisy but no spike, all finite
    ("objective/kl", [0.0, 0.01, 0.02]),  # zero is not negative
    ("completions/clipped_ratio", [0.9, 0.95]),  # truncated completions, not a clip fraction
    ("policy/ratio", [1.0, 9.9]),
    ("actor/entropy", [2.0, 2.0, 2.0, 1.0, 0.5]),  # 0.5 is not below 0.2 x 2.0
    ("reward", [0.0, -1.0, float("nan")]),  # no sign reads rewards
    # KL around 0 with noise ~0.002: Δ = [-0.0033, 0.0023, 0.002, -0.0025, 0.0015], their median 0.0015,
    # absolute deviations [0.0048, 0.0008, 0.0005, 0.004, 0] -> MAD 0.0008, noise 0.00084: −0.0013 is noise
    ("objective/kl", [0.002, -0.0013, 0.001, 0.003, 0.0005, 0.002]),
    ("kl", [0.0] * 10 + [0.001 * i for i in range(1, 31)]),  # flat, then grows steadily: no spike
    ("kl", [e["kl"] for e in json.loads((REPO / "rollout_samples" / "trl_grpo_demo" / "trainer_state.json")
                                        .read_text())["log_history"]]),  # the TRL demo's KL grows steadily
    ("loss", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 3.0, 3.0, 3.0]),  # a level that stays is no spike
    ("loss", [1.0] * 6 + [9.0]),  # the newest value waits for the next to be called a spike
])
def test_a_series_built_not_to_trip_gets_no_sign(name, values):
    """Healthy series, and series no sign reads, get no sign."""
    from rl_board.scalars.signs import compute_signs

    assert compute_signs({name: _steps(values)}) == []


def test_cli_lists_the_warnings_with_their_thresholds(tmp_path):
    """metrics --warnings --json adds the signs; a threshold option moves one."""
    _trl(tmp_path, [{"step": s, "clip_ratio/region_mean": v} for s, v in ((1, 0.1), (2, 0.25), (3, 0.4))])
    got = json.loads(_cli(tmp_path, "--json", "--warnings")[1])
    assert [(w["kind"], w["step"]) for w in got["warnings"]] == [("clip fraction", 3)]
    got = json.loads(_cli(tmp_path, "--json", "--warnings", "--clip-max", "0.2")[1])
    assert [(w["kind"], w["step"]) for w in got["warnings"]] == [("clip fraction", 2)]


def test_metrics_warnings_says_when_none_fired(tmp_path):
    """With --warnings and a clip fraction under 0.3 at every step, the text ends by saying that no sign fired,
    with the thresholds checked (the documented defaults), and --json gives warnings [] beside them; a clip
    fraction of 0.4 prints its sign instead of that line."""
    _trl(tmp_path / "calm", [{"step": s, "clip_ratio/region_mean": v} for s, v in ((1, 0.1), (2, 0.25), (3, 0.2))])
    status, out, _ = _cli(tmp_path / "calm", "--warnings")
    assert status == 0 and out.splitlines()[-1].startswith("no warning sign fired (checked: ratio_max 10, clip_max 0.3, ")
    got = json.loads(_cli(tmp_path / "calm", "--json", "--warnings")[1])
    assert got["warnings"] == []
    assert got["thresholds"] == {"ratio_max": 10, "clip_max": 0.3, "spike_k": 6, "spike_window": 20, "kl_noise_k": 3,
                                 "entropy_fraction": 0.2}
    assert "thresholds" not in json.loads(_cli(tmp_path / "calm", "--json")[1])  # not looked for: not said
    _trl(tmp_path / "clipped", [{"step": s, "clip_ratio/region_mean": v} for s, v in ((1, 0.1), (2, 0.4))])
    out = _cli(tmp_path / "clipped", "--warnings")[1]
    assert "! clip fraction" in out and "no warning sign fired" not in out


def test_discovered_near_a_trl_completions_run(tmp_path):
    """TRL writes OUTPUT/trainer_state.json and OUTPUT/completions/*.parquet: the run finds the state."""
    from rl_board.scalars import discover, nearest_step

    _trl(tmp_path / "out", [{"step": 1, "loss": 1.0}])
    (tmp_path / "out" / "completions").mkdir()
    assert discover(tmp_path / "out" / "completions") == tmp_path / "out" / "trainer_state.json"
    assert discover(tmp_path / "elsewhere") is None
    assert nearest_step(37, [5, 10, 35, 40]) == 35 and nearest_step(7.5, [5, 10]) == 5


def test_a_bare_log_history_list_and_trl_log_history_file_are_read(tmp_path):
    """trainer_log_history.json (the log_history list alone) is found in a folder and read like
    trainer_state.json; a .json file given by name holding the list is read too."""
    history = [{"loss": 0.5, "step": 1}, {"loss": 0.25, "kl": 0.1, "step": 2}]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "trainer_log_history.json").write_text(json.dumps(history))
    code, out, _ = _cli(tmp_path / "out", "--json")
    assert code == 0 and json.loads(out) == {"source": "trl", "series": {"kl": [[2, 0.1]],
                                                                         "loss": [[1, 0.5], [2, 0.25]]}}
    (tmp_path / "history.json").write_text(json.dumps(history))
    assert load_scalars(tmp_path / "history.json").series["loss"] == [(1, 0.5), (2, 0.25)]


def test_metrics_text_recaps_each_series(tmp_path):
    """Each series' row says its steps, first → last, min and max with their steps (by hand)."""
    _trl(tmp_path, [{"step": 1, "kl": 0.2}, {"step": 2, "kl": 0.05}, {"step": 3, "kl": 0.9}, {"step": 4, "kl": 0.3}])
    code, out, _ = _cli(tmp_path)
    row = next(line for line in out.splitlines() if line.split()[0] == "kl").split()
    assert row == ["kl", "1..4", "0.2", "→", "0.3", "0.05", "(2)", "0.9", "(3)"]


def test_default_series_find_the_kl_by_its_common_names():
    """verl's actor/ppo_kl (shorter than actor/kl_loss; actor/kl_coef is a coefficient), an estimator's kl_k3,
    NeMo-RL-style kl_penalty and plain kl are each the KL picked; a name without kl gives none."""
    from rl_board.scalars.signs import default_series

    assert default_series(["actor/kl_coef", "actor/kl_loss", "actor/ppo_kl"]) == ["actor/ppo_kl"]
    assert default_series(["kl_coef", "kl_k3"]) == ["kl_k3"]
    assert default_series(["train/kl_penalty"]) == ["train/kl_penalty"]
    assert default_series(["kl", "kl_k3"]) == ["kl"]
    assert default_series(["kl_coef", "walk"]) == []
