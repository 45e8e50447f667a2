"""The whole page in Streamlit's real runtime (AppTest): open, load, sort, move, pick, read tokens."""

import json
import math
import re
from pathlib import Path

import pytest
from conftest import REPO, sample, write_lines
from page_steps import load as _load
from page_steps import open_area as _area
from page_steps import open_page as _open
from streamlit.testing.v1 import AppTest

from rl_board.views import keys

APP = str(REPO / "app.py")


def _kl_run(root: Path) -> Path:
    """A run whose step 2 has known rewards and KLs: sample C has the top reward, sample B the top KL."""
    run = root / "kl_run"
    lines = [
        sample(1, 0.0, prompt="p0", response="r0", logprobs=[-1.0], ref_logprobs=[-1.0]),
        sample(2, 0.2, prompt="A", response="ra", ref_response="refa", ref_reward=0.0,
               response_tokens=["x", "y"], logprobs=[-1.0, -1.0], ref_logprobs=[-1.1, -1.2]),
        sample(2, 0.1, prompt="B", response="rb", ref_response="refb", ref_reward=0.5,
               response_tokens=["x", "y"], logprobs=[-1.0, -1.0], ref_logprobs=[-3.0, -4.0]),
        sample(2, 0.9, prompt="C", response="rc", ref_response="refc", ref_reward=0.1,
               response_tokens=["x", "y"], logprobs=[-1.0, -1.0], ref_logprobs=[-1.0, -1.5]),
    ]
    write_lines(run / "rank0.jsonl", lines[:2])
    write_lines(run / "rank1.jsonl", lines[2:])
    return root


@pytest.mark.slow
def test_journey_on_the_demo_run():
    """Open, pick the PPO demo, load: curves in the overview; batch table, sample pair, token table and
    heatmap in the batch area; no exception."""
    at = _load(_open(REPO / "rollout_samples", "ppo_demo"), area=None)
    assert at.tabs[0].label == keys.OVERVIEW and len(at.get("plotly_chart")) == 6  # 3 curves, 3 diagnostics
    _area(at, keys.BATCH)
    charts = at.get("plotly_chart")
    assert len(charts) == 4  # 3 batch charts, 1 heatmap
    traces = [trace["type"] for chart in charts for trace in json.loads(chart.proto.spec)["data"]]
    heatmap = [data for data in (json.loads(c.proto.spec)["data"] for c in charts)
               if data and all(t["type"] == "heatmap" for t in data)][0]
    # the table has every metric; the heatmap six rows by default (~470 px, not ~1,000), most telling first
    assert traces.count("heatmap") == len(heatmap) == 6 < len(at.dataframe[1].value.columns) - 1
    spec = [json.loads(c.proto.spec) for c in charts if any(t["type"] == "heatmap" for t in json.loads(c.proto.spec)["data"])][0]
    assert spec["layout"]["yaxis"]["ticktext"] == ["kl", "log_ratio", "token_reward", "advantage", "entropy",
                                                    "mismatch_k3"]
    assert at.slider(key=keys.STEP).value == 30  # the newest step first
    at.slider(key=keys.STEP).set_value(5).run()
    assert not at.exception
    assert at.dataframe[0].value.shape[0] == 16  # 16 samples in the demo's step 5
    token_table = at.dataframe[1].value
    assert {"token", "kl", "log_ratio", "logp", "ref_logp", "prob", "ref_prob", "value", "token_reward",
            "rollout_ratio", "mismatch_k3", "entropy", "advantage", "return", "value_error"} <= set(token_table.columns)
    assert "neg_logp" not in token_table  # the demo logs entropy
    tokens = token_table["token"].tolist()  # by default the EOS (= pad) counts and the pads after it do not
    assert tokens.count("<|endoftext|>") == 1 and tokens[-1] == "<|endoftext|>"


@pytest.mark.slow
def test_sort_by_reward_and_by_kl_puts_the_max_first(tmp_path):
    """Sorting by reward or by KL mean puts that column's largest value in the first row and sample."""
    at = _load(_open(_kl_run(tmp_path), "kl_run"))
    assert at.slider(key=keys.STEP).value == 2
    at.selectbox(key=keys.SORT_BY).select("reward").run()
    table = at.dataframe[0].value
    assert table["prompt"].tolist() == ["C", "A", "B"]
    at.selectbox(key=keys.SORT_BY).select("KL mean").run()
    table = at.dataframe[0].value
    assert table["prompt"].iloc[0] == "B" and table["kl_mean (k3)"].iloc[0] == table["kl_mean (k3)"].max()
    assert [c.value for c in at.code][:2] == ["B", "rb"]  # the sample pair follows the sort
    at.toggle(key=keys.SORT_DESCENDING).set_value(False).run()
    assert at.dataframe[0].value["prompt"].iloc[0] == "A"


@pytest.mark.slow
def test_picking_a_sample_shows_its_texts_and_tokens(tmp_path):
    """Choosing the second sample of the sorted batch shows its prompt, response, ref response and tokens."""
    at = _load(_open(_kl_run(tmp_path), "kl_run"))
    at.selectbox(key=keys.SORT_BY).select("reward").run()
    at.selectbox(key=keys.SAMPLE).select_index(1).run()
    assert not at.exception
    assert [c.value for c in at.code][:3] == ["A", "ra", "refa"]
    tokens = at.dataframe[1].value
    assert tokens["token"].tolist() == ["x", "y"]
    assert tokens["log_ratio"].tolist() == pytest.approx([0.1, 0.2], abs=1e-6)


@pytest.mark.slow
def test_irregular_steps_get_a_select_box():
    """The eval demo's irregular steps are chosen from a select box; response-level runs have no KL curve."""
    at = _load(_open(REPO / "rollout_samples", "eval_demo"))
    box = at.selectbox(key=keys.STEP)
    assert box.options[:5] == ["0", "100", "200", "300", "500"]
    box.select(500).run()
    assert not at.exception and at.dataframe[0].value.shape[0] == 8
    _area(at, keys.OVERVIEW)
    assert any("No per-token" in i.value for i in at.info)


@pytest.mark.slow
def test_missing_and_empty_roots_say_what_to_do(tmp_path):
    """A missing root and a root without runs show a message with the expected layout; Load is disabled."""
    at = _open(tmp_path / "missing")
    assert any("Can't use" in e.value for e in at.sidebar.error)
    assert any("not found" in t.value for t in at.sidebar.text)
    assert at.sidebar.button(key=keys.LOAD).disabled
    (tmp_path / "empty").mkdir()
    at = _open(tmp_path / "empty")
    assert any("ROOT/RUN_NAME/*.jsonl" in t.value for t in at.sidebar.text)
    assert not at.exception


def test_a_run_with_no_usable_lines(tmp_path):
    """Every line bad: the page says so and lists the rejected lines instead of drawing."""
    write_lines(tmp_path / "bad" / "r.jsonl", ["{oops", '{"step": 1}'])
    at = _load(_open(tmp_path, "bad"))
    assert any("Nothing loaded: every line (2) was rejected" in e.value for e in at.error)
    assert any("r.jsonl:2: missing 'reward'" in t.value for t in at.text)


def test_log_text_renders_as_text_not_html_or_markdown(tmp_path):
    """A response holding HTML or Markdown is shown as exactly those characters."""
    html = "<img src=x onerror=alert(1)>"
    md = "# heading\n**bold**"
    write_lines(tmp_path / "x" / "r.jsonl", [sample(1, 1.0, prompt=md, response=html, ref_response="*ref*")])
    at = _load(_open(tmp_path, "x"))
    codes = [c.value for c in at.code]
    assert codes[:3] == [md, html, "*ref*"]
    rendered = [m.value for m in at.markdown] + [c.value for c in at.caption]
    assert not any("onerror" in v or "heading" in v for v in rendered)


@pytest.mark.slow
def test_load_again_reads_new_lines(tmp_path):
    """Pressing Load again on the same run picks up lines appended since."""
    run = tmp_path / "live"
    write_lines(run / "r.jsonl", [sample(1, 1.0)])
    at = _load(_open(tmp_path, "live"))
    assert at.dataframe[0].value.shape[0] == 1
    with (run / "r.jsonl").open("a") as fh:
        fh.write('{"step": 1, "reward": 2.0}\n{"step": 2, "reward": 3.0}\n')
    _load(at)
    assert at.slider(key=keys.STEP).value == 1  # the user's step stays put
    assert at.dataframe[0].value.shape[0] == 2
    at.slider(key=keys.STEP).set_value(2).run()
    assert at.dataframe[0].value["reward"].tolist() == [3.0]


@pytest.mark.slow
def test_refresh_button_and_auto_refresh(tmp_path):
    """Refresh reads appended lines into the step picker; turning auto-refresh on runs cleanly."""
    run = tmp_path / "live"
    write_lines(run / "r.jsonl", [sample(1, 1.0)])
    at = _load(_open(tmp_path, "live"))
    with (run / "r.jsonl").open("a") as fh:
        fh.write('{"step": 2, "reward": 3.0}\n{"step": 3, "reward": 4.0}\n')
    at.sidebar.button(key=keys.REFRESH).click().run()
    assert not at.exception
    assert at.slider(key=keys.STEP).max == 3
    at.sidebar.toggle(key=keys.AUTO_REFRESH).set_value(True).run()
    assert not at.exception


@pytest.mark.slow
def test_progress_and_counts_after_loading_bad_lines(tmp_path):
    """After a load the page says how many lines loaded and were rejected, quoting file:line and reason."""
    write_lines(tmp_path / "mixed" / "r.jsonl", [sample(1, 1.0), '{"step": "x", "reward": 1}', sample(1, 2.0)])
    at = _load(_open(tmp_path, "mixed"))
    assert any("2 samples loaded · 1 line rejected" in t.value for t in at.text)
    assert any("r.jsonl:2: 'step' must be an integer" in t.value for t in at.text)


@pytest.mark.slow
def test_token_view_notes_unequal_lengths_and_bad_entries(tmp_path):
    """Lists of different lengths get a note; a non-number in values shows as empty, the rest as given."""
    write_lines(tmp_path / "odd" / "r.jsonl", [sample(1, 1.0, response_tokens=["a", "b", "c"],
                                                      logprobs=[-1.0, -2.0], ref_logprobs=[-1.0, -2.5],
                                                      values=[0.5, "oops"])])
    at = _load(_open(tmp_path, "odd"))
    assert any("lengths disagree" in w.value for w in at.warning)
    tokens = at.dataframe[1].value
    assert tokens["token"].tolist() == ["a", "b"]
    assert tokens["value"].iloc[0] == 0.5 and tokens["value"].isna().iloc[1]
    assert tokens["log_ratio"].tolist() == pytest.approx([0.0, 0.5])


def _values(encoded) -> list:
    """A plotly array from a chart's JSON: a list, or a base64 typed array."""
    import base64

    import numpy as np

    if isinstance(encoded, dict):
        return np.frombuffer(base64.b64decode(encoded["bdata"]), dtype=encoded["dtype"]).tolist()
    return list(encoded)


def _verl_run(root: Path) -> Path:
    """A verl dump: {step}.jsonl with input/output/score plus acc (bool), num_turns and pred (a string)."""
    def line(step, score, turns, acc, pred):
        return {"input": f"q{turns}", "output": f"answer {pred}", "gts": "4", "score": score, "step": step,
                "acc": acc, "num_turns": turns, "pred": pred}
    write_lines(root / "verl" / "1.jsonl", [line(1, 0.0, 1, False, "5")])
    write_lines(root / "verl" / "2.jsonl", [line(2, 1.0, 2, True, "4"), line(2, 0.5, 7, False, "six"),
                                            line(2, 0.0, 3, False, "3")])
    return root


def test_verl_run_sorts_by_reward_and_by_an_extra_field(tmp_path):
    """A verl dump loads: sort by reward, then by the extra num_turns; its column, curve and the
    sample's string field (pred) are shown."""
    at = _load(_open(_verl_run(tmp_path), "verl"))
    assert any("jsonl" in t.value and "4 samples loaded" in t.value for t in at.text)
    at.selectbox(key=keys.SORT_BY).select("reward").run()
    table = at.dataframe[0].value
    assert table["prompt"].tolist() == ["q2", "q7", "q3"] and table["reward"].tolist() == [1.0, 0.5, 0.0]
    at.selectbox(key=keys.SORT_BY).select("num_turns").run()
    table = at.dataframe[0].value
    assert table["num_turns"].tolist() == [7.0, 3.0, 2.0] and table["acc"].tolist() == [0.0, 0.0, 1.0]
    codes = [c.value for c in at.code]
    assert codes[:2] == ["q7", "answer six"] and "six" in codes  # pred is shown with the sample
    _area(at, keys.OVERVIEW)
    assert at.multiselect(key=keys.EXTRA_CURVES).value == ["acc", "num_turns"]
    specs = {json.loads(c.proto.spec)["layout"]["title"]["text"]: json.loads(c.proto.spec)
             for c in at.get("plotly_chart")}
    assert {"acc", "num_turns"} <= set(specs) and "Reward gap (reward − ref reward)" not in specs  # no ref_reward
    means = _values([t for t in specs["Response length (characters)"]["data"] if t.get("mode") == "lines+markers"][0]["y"])
    assert means == pytest.approx([len("answer 5"), (len("answer 4") + len("answer six") + len("answer 3")) / 3])
    assert not at.exception


def test_trl_parquet_run_sorts_by_a_reward_function(tmp_path):
    """A TRL completions folder loads; sorting by a reward-function column puts its largest first."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "completions"
    folder.mkdir()
    pq.write_table(pa.table({"step": pa.array([4, 4, 4], pa.int64()), "prompt": ["a", "b", "c"],
                             "completion": ["ra", "rb", "rc"], "acc": [1.0, 0.0, 1.0], "fmt": [0.0, 1.0, 0.5],
                             "advantage": [0.1, 0.2, 0.3], "mode": ["train"] * 3}),
                   folder / "completions_00004.parquet")
    at = _load(_open(tmp_path, "completions"))
    assert any("parquet" in t.value and "3 samples loaded" in t.value for t in at.text)
    at.selectbox(key=keys.SORT_BY).select("fmt").run()
    table = at.dataframe[0].value
    assert table["prompt"].tolist() == ["b", "c", "a"] and table["reward"].tolist() == [1.0, 1.5, 1.0]
    assert [c.value for c in at.code][:2] == ["b", "rb"]
    assert "train" in [c.value for c in at.code]
    assert not at.exception


@pytest.mark.slow
def test_field_mapping_from_the_sidebar(tmp_path):
    """reward=my_score typed in the sidebar reads that key after Load and says so in the header; a
    bad mapping is named, disables Load and keeps the loaded run on the page."""
    write_lines(tmp_path / "mine" / "r.jsonl", [{"step": 1, "my_score": 0.25, "answer": "x"},
                                                {"step": 1, "my_score": 0.75, "answer": "y"}])
    at = _open(tmp_path, "mine")
    at.sidebar.text_input(key=keys.FIELD_MAP).input("reward=my_score, response=answer").run()
    at = _load(at)
    assert any(t.value == "Field mapping: reward=my_score, response=answer" for t in at.text)
    at.selectbox(key=keys.SORT_BY).select("reward").run()
    assert at.dataframe[0].value["response"].tolist() == ["y", "x"]
    at.sidebar.text_input(key=keys.FIELD_MAP).input("reward").run()
    assert any("Can't use this field mapping" in e.value for e in at.sidebar.error)
    assert at.sidebar.button(key=keys.LOAD).disabled
    assert at.dataframe[0].value["response"].tolist() == ["y", "x"]  # still the loaded run


@pytest.mark.slow
@pytest.mark.parametrize("run", ["verl_grpo_demo", "trl_grpo_demo"])
def test_shipped_trainer_demos_open(run):
    """The bundled verl and TRL demos load with their extra fields as table columns."""
    at = _load(_open(REPO / "rollout_samples", run))
    columns = set(at.dataframe[0].value.columns)
    assert {"acc", "format_score"} <= columns if run.startswith("verl") else {"accuracy_reward", "advantage"} <= columns


@pytest.mark.slow
def test_diagnostic_curves_smoothing_and_step_table():
    """The demo draws the six diagnostic curves; smoothing adds a faint raw curve; the per-step
    table lists every step with the diagnostics as columns."""
    at = _load(_open(REPO / "rollout_samples", "ppo_demo"), keys.OVERVIEW)
    assert at.multiselect(key=keys.DIAGNOSTIC_CURVES).value == ["entropy", "mismatch_kl", "explained_variance"]
    assert set(at.multiselect(key=keys.DIAGNOSTIC_CURVES).options) == {
        "Entropy (mean per sample)", "Mismatch KL (sampler ‖ trainer)", "Critic explained variance (γ = λ = 1)",
        "Share of tokens with log-ratio < 0", "Reward–length correlation (Pearson)",
        "4-gram repetition (mean per sample)", "GRPO groups with all rewards equal (share)",
        "Truncated responses (share: no EOS, lists full)"}  # every demo response ends: a share of 0
    at.sidebar.slider(key=keys.SMOOTHING).set_value(0.6).run()
    spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")][0]
    assert [t.get("opacity") for t in spec["data"] if t.get("mode") == "lines"][0] == 0.3
    at.toggle(key=keys.SHOW_STEP_TABLE).set_value(True).run()
    table = at.dataframe[0].value
    assert len(table) == 30 and {"neg_log_ratio_share", "explained_variance", "entropy_mean"} <= set(table.columns)
    assert not at.exception


@pytest.mark.slow
def test_sort_by_mismatch_and_what_drives_the_step(tmp_path):
    """Sorting by mismatch KL puts the largest first; the step's KL is ranked by token string with
    totals computed by hand (k3 with d = ref - logp)."""
    run = _kl_run(tmp_path)
    at = _load(_open(run, "kl_run"))
    at.toggle(key=keys.SHOW_DRIVERS).set_value(True).run()
    ranking = [d.value for d in at.dataframe if "total" in d.value.columns][0]

    def k3(d):
        return math.exp(d) - 1 - d

    assert ranking["token"].tolist() == ["y", "x"]
    assert ranking["total"].tolist() == pytest.approx([k3(-0.2) + k3(-3.0) + k3(-0.5), k3(-0.1) + k3(-2.0) + k3(0.0)])
    odds = [d.value for d in at.dataframe if "ngram" in d.value.columns][0]
    assert set(odds["ngram"]) == {"x", "y"} and (odds["z"] == 0).all()  # every response has the same tokens
    assert not at.exception
    write_lines(tmp_path / "mm" / "r.jsonl", [
        sample(1, 0.0, prompt="low", logprobs=[-1.0], rollout_logprobs=[-1.1]),
        sample(1, 0.0, prompt="high", logprobs=[-1.0], rollout_logprobs=[-3.0]),
    ])
    at = _load(_open(tmp_path, "mm"))
    at.selectbox(key=keys.SORT_BY).select("mismatch KL").run()
    table = at.dataframe[0].value
    assert table["prompt"].tolist() == ["high", "low"]
    assert table["mismatch_kl"].tolist() == pytest.approx([k3(2.0), k3(0.1)])


@pytest.mark.slow
def test_token_text_is_escaped_and_coloured(tmp_path):
    """The response drawn as running text keeps markup in tokens as text."""
    write_lines(tmp_path / "x" / "r.jsonl", [sample(1, 1.0, response_tokens=["<img src=x onerror=alert(1)>", "&amp;"],
                                                  logprobs=[-1.0, -2.0], ref_logprobs=[-1.5, -1.0])])
    at = _load(_open(tmp_path, "x"))
    body = at.get("html")[0].proto.body
    assert "&lt;img" in body and "onerror=alert(1)&gt;" in body and "<img" not in body and "&amp;amp;" in body
    assert at.selectbox(key=keys.COLOR_BY).value == "kl"
    at.selectbox(key=keys.COLOR_BY).select("log_ratio").run()
    assert "log_ratio (diverging, centred at 0)" in at.get("html")[0].proto.body


def _explore_run(root: Path) -> Path:
    write_lines(root / "ex" / "r.jsonl", [
        sample(1, 0.9, prompt="p1", response="!!!<|endoftext|>"), sample(1, 0.1, prompt="p2", response="fine answer"),
        sample(2, 0.8, prompt="p3", response=""), sample(2, 0.5, prompt="p4", response="ok then"),
        sample(3, 0.7, prompt="p5", response="..."), sample(3, 0.2, prompt="p6", response="..?"),
    ])
    return root


def test_explore_finds_matches_in_every_step(tmp_path):
    """A regex over every step's responses (pads removed) lists what Python's re finds, counts them
    per step, and a numeric range narrows them; a bad pattern is named."""
    at = _load(_open(_explore_run(tmp_path), "ex"), keys.EXPLORE)
    at.text_input(key=keys.EXPLORE_REGEX).input(r"^\W*$").run()
    texts = {"p1": "!!!", "p2": "fine answer", "p3": "", "p4": "ok then", "p5": "...", "p6": "..?"}
    expected = [p for p, t in texts.items() if re.search(r"^\W*$", t)]
    table = at.dataframe[0].value
    assert sorted(table["prompt"]) == sorted(expected) and len(expected) == 4
    per_step = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["layout"]["title"]["text"] == "Matches per step"][0]["data"][0]
    assert _values(per_step["y"]) == [1, 1, 2]
    at.selectbox(key=keys.EXPLORE_COLUMN).select("reward").run()
    at.text_input(key=keys.EXPLORE_LOW).input("0.75").run()
    assert sorted(at.dataframe[0].value["prompt"]) == ["p1", "p3"]
    at.text_input(key=keys.EXPLORE_REGEX).input("(").run()
    assert any("Can't search" in e.value for e in at.error) and not at.exception


def _linked(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(params)
    return at.run()


@pytest.mark.slow
def test_a_link_opens_its_view_without_a_click():
    """root, run, step and sample in the address open that sample with no Load press; the address
    then holds the view, and moving the step changes it. (The demo deals each step's 16 samples to 4
    rank files in turn: step 5's lines of rank 1 are 17 to 20.)"""
    at = _linked(root=str(REPO / "rollout_samples"), run="ppo_demo", step="5", sample="rollout_data_rank1.jsonl:18",
                 sort="KL mean", kl="k2")
    assert not at.exception
    assert at.slider(key=keys.STEP).value == 5
    assert at.selectbox(key=keys.SAMPLE).format_func(at.selectbox(key=keys.SAMPLE).value).endswith(
        "rollout_data_rank1.jsonl:18")
    assert at.selectbox(key=keys.SORT_BY).value == "KL mean" and at.sidebar.selectbox(key=keys.KL_ESTIMATOR).value == "k2"
    assert at.query_params["step"] == "5" and at.query_params["sample"] == "rollout_data_rank1.jsonl:18"
    assert at.query_params["run"] == "ppo_demo" and at.query_params["kl"] == "k2"
    picker = at.selectbox(key=keys.SAMPLE)
    other = [label for label in picker.options if not label.endswith("rollout_data_rank1.jsonl:18")][0]
    picker.select(other).run()
    assert at.query_params["sample"] == other.rsplit(" · ", 1)[1]  # picking a sample changes the address
    at.slider(key=keys.STEP).set_value(7).run()
    assert at.query_params["step"] == "7" and at.query_params["sample"] != "rollout_data_rank1.jsonl:18"


def test_the_address_never_names_a_sample_of_another_step():
    """A step chosen while the batch is not drawn (Explore open): the address holds that step and no
    sample of the step shown before (ppo_demo's step-30 sample with step=25 was a link that "could not
    be followed exactly")."""
    at = _linked(root=str(REPO / "rollout_samples"), run="ppo_demo", area="batch")
    assert at.query_params["step"] == "30"
    before = at.query_params["sample"]
    at.session_state[keys.AREA] = keys.EXPLORE
    at.run()
    at.session_state[keys.STEP] = 25
    at.run()
    assert not at.exception and at.query_params["step"] == "25" and at.query_params["area"] == "explore"
    assert "sample" not in at.query_params and before.startswith("rollout_data_rank")


def _shows_sample(at, source: str) -> bool:
    return at.selectbox(key=keys.SAMPLE).value == source and f"{source}" in at.selectbox(key=keys.SAMPLE).format_func(
        at.selectbox(key=keys.SAMPLE).value)


@pytest.mark.parametrize("params, message, check", [
    ({"run": "nope"}, "Run 'nope' is not under this root, so no run is loaded: pick one below or in the sidebar",
     lambda at: at.sidebar.selectbox(key=keys.RUN).value == "ppo_demo" and not at.get("tabs")
     and len(at.main.button) == 6),  # the runs list, one button per bundled run
    ({"run": "ppo_demo", "step": "999"}, "Step '999' is not in this run; showing step 30.",
     lambda at: at.slider(key=keys.STEP).value == 30),
    # the sample's step is the one shown, and the message says so (rank 1's line 18 is step 5's)
    ({"run": "ppo_demo", "step": "999", "sample": "rollout_data_rank1.jsonl:18"},
     "Step '999' is not in this run; showing step 5, the step of sample 'rollout_data_rank1.jsonl:18'.",
     lambda at: at.slider(key=keys.STEP).value == 5 and _shows_sample(at, "rollout_data_rank1.jsonl:18")),
    ({"run": "ppo_demo", "step": "7", "sample": "rollout_data_rank1.jsonl:18"},
     "Sample 'rollout_data_rank1.jsonl:18' is in step 5, not step 7; showing step 5.",
     lambda at: at.slider(key=keys.STEP).value == 5 and _shows_sample(at, "rollout_data_rank1.jsonl:18")),
    ({"run": "ppo_demo", "step": "abc"}, "Step 'abc' is not in this run", lambda at: at.slider(key=keys.STEP).value == 30),
    ({"run": "eval_demo", "step": "450"}, "showing step 500", lambda at: at.selectbox(key=keys.STEP).value == 500),
    ({"run": "ppo_demo", "sample": "nope.jsonl:1"},
     "Sample 'nope.jsonl:1' is not in this run; showing the top of step 30's table.",
     lambda at: at.slider(key=keys.STEP).value == 30),
    ({"run": "ppo_demo", "sort": "bogus"}, "Sort 'bogus' is not offered",
     lambda at: _area(at, keys.BATCH).selectbox(key=keys.SORT_BY).value == "reward"),
    ({"run": "ppo_demo", "kl": "k9"}, "KL estimator 'k9'", lambda at: at.sidebar.selectbox(key=keys.KL_ESTIMATOR).value == "k3"),
])
@pytest.mark.slow
def test_a_bad_link_parameter_gets_a_message_and_the_nearest_view(params, message, check):
    """Each parameter that does not fit is named, and the message says what the page shows, which is
    what it shows; no traceback."""
    at = _linked(root=str(REPO / "rollout_samples"), **params)
    assert not at.exception
    # inside the box that says the link could not be followed, not below it
    assert any(w.value.startswith("This link could not be followed exactly:") and message in w.value
               for w in at.warning), [w.value for w in at.warning]
    assert check(at)


@pytest.mark.slow
def test_prompt_history_follows_one_prompt_through_training(tmp_path):
    """From a sample, every sample with the same prompt (pads removed) at every step, with rewards."""
    write_lines(tmp_path / "h" / "r.jsonl", [
        sample(1, 0.1, prompt="<|endoftext|>same", response="a"), sample(1, 0.9, prompt="other", response="b"),
        sample(2, 0.4, prompt="same", response="c"), sample(3, 0.8, prompt="same<|endoftext|>", response="d"),
        sample(3, 0.2, prompt="same", response="e"),
    ])
    at = _load(_open(tmp_path, "h"))
    at.selectbox(key=keys.SORT_BY).select("log order").run()
    at.toggle(key=keys.SORT_DESCENDING).set_value(False).run()  # step 3, first line: prompt "same<pad>"
    at.toggle(key=keys.SHOW_HISTORY).set_value(True).run()
    history = [d.value for d in at.dataframe if "step" in d.value.columns and "response" in d.value.columns][-1]
    assert history["response"].tolist() == ["a", "c", "d", "e"] and history["step"].tolist() == [1, 2, 3, 3]
    curve = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
             if json.loads(c.proto.spec)["layout"]["title"]["text"] == "This prompt's reward over training"][0]
    assert _values(curve["data"][1]["y"]) == pytest.approx([0.1, 0.4, 0.5])
    assert not at.exception


@pytest.mark.slow
def test_runs_side_by_side(tmp_path):
    """Picking another run overlays its reward curve (its own step means) in another colour; the
    batch stays on the loaded run."""
    write_lines(tmp_path / "base" / "r.jsonl", [sample(1, 0.0), sample(1, 1.0), sample(2, 1.0)])
    write_lines(tmp_path / "change" / "r.jsonl", [sample(1, 2.0), sample(2, 3.0), sample(2, 5.0), sample(3, 1.0)])
    at = _load(_open(tmp_path, "base"), keys.COMPARE)
    at.multiselect(key=keys.COMPARE_RUNS).select("change").run()
    spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
            if json.loads(c.proto.spec)["layout"]["title"]["text"] == "Reward"][0]
    lines = {t["name"]: t for t in spec["data"] if t.get("mode") == "lines+markers"}
    assert _values(lines["base"]["y"]) == [0.5, 1.0] and _values(lines["change"]["y"]) == [2.0, 4.0, 1.0]
    assert lines["base"]["line"]["color"] != lines["change"]["line"]["color"]
    _area(at, keys.BATCH)
    assert at.dataframe[0].value["reward"].tolist() == [1.0]  # the batch: base's last step
    assert not at.exception


@pytest.mark.slow
def test_compare_names_runs_by_their_path_under_the_root(tmp_path):
    """Two runs both named rollout_data (a/ and b/): the curves name each by its path under the root, so
    neither hides the other."""
    write_lines(tmp_path / "a" / "rollout_data" / "r.jsonl", [sample(1, 0.0), sample(2, 1.0)])
    write_lines(tmp_path / "b" / "rollout_data" / "r.jsonl", [sample(1, 2.0), sample(2, 3.0)])
    at = _load(_open(tmp_path, "a/rollout_data"), keys.COMPARE)
    at.multiselect(key=keys.COMPARE_RUNS).select("b/rollout_data").run()
    spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
            if json.loads(c.proto.spec)["layout"]["title"]["text"] == "Reward"][0]
    lines = {t["name"]: _values(t["y"]) for t in spec["data"] if t.get("mode") == "lines+markers"}
    assert lines == {"a/rollout_data": [0.0, 1.0], "b/rollout_data": [2.0, 3.0]}
    assert not at.exception


@pytest.mark.slow
def test_grouped_batch_puts_zero_std_groups_first(tmp_path):
    """Group by prompt: one row per prompt (pads removed) with size, reward mean and population std,
    groups whose rewards are all equal first; the export buttons are there."""
    write_lines(tmp_path / "g" / "r.jsonl", [
        sample(1, 1.0, prompt="a", response="x"), sample(1, 0.0, prompt="a<|endoftext|>", response="y"),
        sample(1, 0.5, prompt="b", response="z"), sample(1, 0.5, prompt="b", response="w"),
        sample(1, 0.2, prompt="c", response="v"),
    ])
    at = _load(_open(tmp_path, "g"))
    at.toggle(key=keys.GROUP_BATCH).set_value(True).run()
    groups = at.dataframe[0].value
    assert groups["prompt"].tolist() == ["b", "c", "a"]  # std 0 (size 2), std 0 (size 1), std 0.5
    assert groups["size"].tolist() == [2, 1, 2]
    assert groups["reward_mean"].tolist() == pytest.approx([0.5, 0.2, 0.5])
    assert groups["reward_std"].tolist() == pytest.approx([0.0, 0.0, 0.5])
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download this table (CSV)" in labels and "Download its log lines (JSONL)" in labels
    assert not at.exception


@pytest.mark.slow
def test_clear_this_runs_cache(tmp_path, isolated_cache):
    """The button deletes the run's cached rows: the page parses the run again and still shows it."""
    at = _load(_open(_kl_run(tmp_path), "kl_run"))
    before = [p.stat().st_mtime_ns for p in isolated_cache.rglob("seg-*")]
    assert before
    at.sidebar.button(key="clear_cache").click().run()
    after = [p.stat().st_mtime_ns for p in isolated_cache.rglob("seg-*")]
    assert after and min(after) > max(before)  # parsed again into segments written since (their names are
    # their bytes' digests: the same rows, the same names)
    assert at.dataframe[0].value["prompt"].tolist() and not at.exception


@pytest.mark.slow
def test_kl_estimator_is_one_setting(tmp_path):
    """Switching the estimator renames the table's KL columns, relabels the picker, reorders a KL
    sort, and keeps the selected sample selected."""
    at = _load(_open(_kl_run(tmp_path), "kl_run"))
    at.selectbox(key=keys.SORT_BY).select("KL mean").run()
    at.selectbox(key=keys.SAMPLE).select_index(2).run()  # the last sample of the table, not its top
    chosen = at.selectbox(key=keys.SAMPLE).value
    at.sidebar.selectbox(key=keys.KL_ESTIMATOR).select("k1").run()
    table = at.dataframe[0].value
    assert "kl_mean (k1)" in table and "kl_mean (k3)" not in table
    # k1 is the log-ratio: A -> (0.1 + 0.2) / 2, B -> (2 + 3) / 2, C -> (0 + 0.5) / 2
    assert table["prompt"].tolist() == ["B", "C", "A"]
    assert table["kl_mean (k1)"].tolist() == pytest.approx([2.5, 0.25, 0.15])
    assert at.selectbox(key=keys.SAMPLE).value == chosen
    label = at.selectbox(key=keys.SAMPLE).format_func(chosen)
    assert label.startswith("#3 · ") and " · KL k1 0.15 · " in label  # A: now last by k1 too


@pytest.mark.slow
def test_the_loaded_run_stays_while_the_root_is_edited(tmp_path):
    """Typing another root (even one that does not exist, or with spaces around it) keeps the loaded
    run on the page until Load is pressed for another run."""
    root = _kl_run(tmp_path)
    write_lines(tmp_path / "other" / "second" / "r.jsonl", [sample(1, 7.0, prompt="Z")])
    at = _load(_open(root, "kl_run"))
    at.sidebar.text_input(key=keys.ROOT).input(str(tmp_path / "nowhere")).run()
    assert at.dataframe[0].value["prompt"].tolist()[0] in {"A", "B", "C"} and not at.exception
    at.sidebar.text_input(key=keys.ROOT).input(f"  {tmp_path / 'other'}  ").run()  # a pasted path, spaces and all
    assert at.sidebar.selectbox(key=keys.RUN).value == "second"
    assert at.dataframe[0].value["prompt"].tolist()[0] in {"A", "B", "C"}
    at = _load(at)
    assert at.dataframe[0].value["prompt"].tolist() == ["Z"]


@pytest.mark.slow
def test_trainer_metrics_beside_the_rollouts():
    """Loading the TRL demo shows its trainer_state.json without a typed path; a warning badge moves the
    batch to the nearest logged rollout step (37 -> 35) and says so."""
    at = _load(_open(REPO / "rollout_samples", "trl_grpo_demo"), keys.TRAINER)
    assert any(t.value.startswith("trl: ") and "trainer_state.json" in t.value for t in at.text)
    labels = [b.label for b in at.button if b.key and b.key.startswith("sign-")]
    assert labels == ["⚠ entropy collapse: entropy at step 29", "⚠ spike: loss at step 37"]
    spike = [b for b in at.button if b.key and b.key.startswith("sign-") and "spike" in b.label][0]
    spike.click().run()
    assert at.slider(key=keys.STEP).value == 35
    assert any("No rollouts were logged at step 37; showing step 35" in i.value for i in at.info)
    assert not at.exception


def _markdown_sources(at) -> list[str]:
    """The Markdown source of every element Streamlit renders as Markdown: captions, markdown, alerts,
    button labels and tooltips."""
    found = [e.value for kind in (at.caption, at.markdown, at.warning, at.info, at.error) for e in kind]
    return found + [b.label for b in at.button] + [b.help or "" for b in at.button]


@pytest.mark.slow
def test_names_from_disk_are_shown_literally_not_as_markdown(tmp_path):
    """A JSON key, a trainer metric and a run folder named as Markdown (an image, bold) reach every
    Markdown element only backslash-escaped (escapes written here by hand), never raw."""
    folder = tmp_path / "**bold**"
    write_lines(folder / "r.jsonl", [sample(1, 1.0, prompt="p", response="r", **{"![x](http://host/x)": "v"})])
    history = [{"step": i, "![m](http://host/m)/loss": 1.0 + 0.01 * (i % 3)} for i in range(12)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history + [
        {"step": 12, "![m](http://host/m)/loss": 100.0}, {"step": 13, "![m](http://host/m)/loss": 1.0}]}))
    write_lines(tmp_path / "other" / "r.jsonl", [sample(1, 1.0)])
    at = _load(_open(tmp_path, "**bold**"))
    at.sidebar.selectbox(key=keys.RUN).select("other").run()  # the loaded run stays: "Showing …**bold**"
    sources = _markdown_sources(at) + _markdown_sources(_area(at, keys.TRAINER))
    joined = "\n".join(sources)
    assert r"\!\[x\]\(http\://host/x\)" in joined  # the sample's other field, as its caption
    assert r"\!\[m\]\(http\://host/m\)/loss" in joined  # the warning badge
    assert r"\*\*bold\*\*" in joined  # "Showing …" caption
    for raw in ("![x](http://host/x)", "![m](http://host/m)", "**bold**"):
        assert not any(raw in s for s in sources), raw
    assert not at.exception


@pytest.mark.slow
def test_long_texts_are_cut_in_the_page_and_whole_in_the_download(tmp_path):
    """A 300,000-character response is sent cut (the sample view's first 100,000 characters, the table's
    first 2,000 and an ellipsis) and the download button holds all of it."""
    long = "ab" * 150_000
    write_lines(tmp_path / "x" / "r.jsonl", [sample(1, 1.0, prompt="p", response=long)])
    at = _load(_open(tmp_path, "x"))
    codes = [c.value for c in at.code]
    assert long[:100_000] in codes and long not in codes
    assert any("first 100,000 of 300,000 characters" in c.value for c in at.caption)
    cell = at.dataframe[0].value["response"].tolist()[0]
    assert cell == long[:2_000] + "…"
    assert not at.exception


@pytest.mark.slow
def test_truncated_flag_column_filter_and_curve(tmp_path):
    """The batch table flags the response that fills its lists without an EOS; Explore's filter keeps
    only it; the diagnostic curves offer the per-step share (1 of the 2 samples of step 1)."""
    eot = "<|endoftext|>"
    write_lines(tmp_path / "tr" / "r.jsonl", [
        sample(1, 1.0, prompt="ended", response="a", response_tokens=["a", eot, eot], logprobs=[-1.0] * 3,
               ref_logprobs=[-1.0] * 3),
        sample(1, 0.0, prompt="cut", response="a b c", response_tokens=["a", "b", "c"], logprobs=[-1.0] * 3,
               ref_logprobs=[-1.0] * 3),
    ])
    at = _load(_open(tmp_path, "tr"))
    table = at.dataframe[0].value
    assert dict(zip(table["prompt"], table["truncated"])) == {"ended": False, "cut": True}
    _area(at, keys.OVERVIEW)
    assert "Truncated responses (share: no EOS, lists full)" in at.multiselect(key=keys.DIAGNOSTIC_CURVES).options
    _area(at, keys.EXPLORE)
    at.checkbox(key=keys.EXPLORE_TRUNCATED).check().run()
    assert at.dataframe[0].value["prompt"].tolist() == ["cut"]


@pytest.mark.slow
def test_long_response_heatmap_draws_a_position_range_and_tokens_show_their_whitespace(tmp_path):
    """A 200-token response: the heatmap draws positions 0-63 first and the range the slider picks
    then; the token table shows Ġ and leading spaces as ␣ and a newline as ↵."""
    tokens = ["Ġthe", "Ċ", " x"] + [f"t{i}" for i in range(197)]
    write_lines(tmp_path / "long" / "r.jsonl", [
        sample(1, 1.0, response="".join(tokens), response_tokens=tokens, logprobs=[-1.0] * 200,
               ref_logprobs=[-1.5] * 200)])
    at = _load(_open(tmp_path, "long"))

    def heatmap_x():
        spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if "heatmap" in json.loads(c.proto.spec)["layout"]["title"]["text"].lower()][0]
        return spec["data"][0]["x"]

    x = heatmap_x()
    assert len(x) == 64 and x[:3] == ["0:␣the", "1:↵", "2:␣x"] and x[-1] == "63:t60"
    assert at.dataframe[1].value["token"].tolist()[:3] == ["␣the", "↵", "␣x"]
    at.slider(key=keys.TOKEN_RANGE).set_value((100, 149)).run()
    x = heatmap_x()
    assert len(x) == 50 and x[0] == "100:t97" and x[-1] == "149:t146"


@pytest.mark.slow
def test_trainer_metrics_defaults_by_meaning_several_groups_and_an_overlay():
    """The TRL demo's trainer_state.json logs epoch, learning_rate, completions/clipped_ratio… by name;
    the series shown first are its reward, KL, entropy, loss and clip fraction. Two prefix groups can
    be shown at once, and a trainer series drawn over the rollout reward curve carries the values of
    trainer_state.json on its own axis."""
    at = _load(_open(REPO / "rollout_samples", "trl_grpo_demo"), keys.TRAINER)
    assert at.multiselect(key=keys.METRICS_SERIES).value == ["reward", "kl", "entropy", "loss",
                                                             "clip_ratio/region_mean"]
    at.multiselect(key=keys.METRICS_GROUP).set_value(["(no prefix)", "completions/"]).run()
    assert "completions/clipped_ratio" in at.multiselect(key=keys.METRICS_SERIES).options
    assert "learning_rate" in at.multiselect(key=keys.METRICS_SERIES).options
    assert at.multiselect(key=keys.METRICS_SERIES).value == ["reward", "kl", "entropy", "loss"]  # still offered
    at.selectbox(key=keys.METRICS_OVERLAY).select("reward (mean per step)").run()
    at.selectbox(key=keys.METRICS_OVERLAY_SERIES).select("kl").run()
    spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
            if json.loads(c.proto.spec)["layout"]["title"]["text"] == "reward (mean per step) and kl"][0]
    history = json.loads((REPO / "rollout_samples" / "trl_grpo_demo" / "trainer_state.json").read_text())["log_history"]
    rollout, trainer = spec["data"]
    assert trainer["yaxis"] == "y2" and spec["layout"]["yaxis2"]["overlaying"] == "y"
    assert _values(trainer["y"]) == pytest.approx([e["kl"] for e in history])
    assert _values(rollout["x"]) == list(range(5, 65, 5))
    assert not at.exception


@pytest.mark.slow
def test_compare_runs_of_very_different_step_ranges_by_progress():
    """The eval demo (steps 0-2300) beside the PPO demo (steps 1-30): the ranges differ more than 4 ×, so
    runs are aligned by progress at first: each run's curve runs from 0 % to 100 % of its own steps
    (PPO's step 15 at 100 · 14 / 29 %), the step on hover; switching to step puts the steps back."""
    at = _load(_open(REPO / "rollout_samples", "ppo_demo"), keys.COMPARE)
    at.multiselect(key=keys.COMPARE_RUNS).select("eval_demo").run()
    assert at.radio(key=keys.COMPARE_ALIGN).value == "progress"

    def lines():
        spec = [json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["layout"]["title"]["text"] == "Reward"][0]
        return {t["name"]: t for t in spec["data"] if t.get("mode") == "lines+markers"}

    ppo, evals = lines()["ppo_demo"], lines()["eval_demo"]
    assert _values(ppo["x"])[0] == 0 and _values(ppo["x"])[-1] == 100 and _values(evals["x"])[-1] == 100
    assert _values(ppo["x"])[14] == pytest.approx(100 * 14 / 29) and _values(ppo["customdata"])[14] == 15
    assert _values(evals["x"])[1] == pytest.approx(100 * 100 / 2300)  # eval's second step is 100
    at.radio(key=keys.COMPARE_ALIGN).set_value("step").run()
    assert _values(lines()["eval_demo"]["x"])[-1] == 2300
    assert not at.exception


def test_the_step_table_of_a_run_with_sparse_extras(tmp_path):
    """A run whose extra 'rare' is at 2 of 10 steps (its step stats kept sparse): the per-step table shows
    its means (2.0 at step 1, 3.0 at step 2, empty after) beside the other columns, without an exception."""
    lines = [{"step": s, "prompt": "p", "response": "r", "reward": 0.5} for s in range(1, 11)]
    lines[0]["rare"], lines[1]["rare"] = 2, 3
    write_lines(tmp_path / "runs" / "sparse" / "a.jsonl", lines)
    at = _load(_open(tmp_path / "runs", "sparse"), keys.OVERVIEW)
    at.toggle(key=keys.SHOW_STEP_TABLE).set_value(True).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) == 10 and table["rare_mean"].tolist()[:2] == [2.0, 3.0]
    assert table["rare_mean"].isna().sum() == 8


def test_a_run_whose_rare_extra_is_kept_sparse_sorts_and_draws(tmp_path, monkeypatch):
    """With the snapshot's sparse floor at 0 rows, a run whose extra 'rare' is at 1 of 16 samples (kept as
    a sparse column) loads: sorting the batch by it puts its one value (5.0) first, the other 7 rows
    empty; the step table shows its mean at step 2 only; nothing raises."""
    import rl_board.store.columns as columns_module

    monkeypatch.setattr(columns_module, "SPARSE_MIN_ROWS", 0)
    lines = [{"step": s, "prompt": f"p{i}", "response": "r", "reward": i / 8} for s in (1, 2) for i in range(8)]
    lines[11]["rare"] = 5.0  # step 2's fourth sample
    write_lines(tmp_path / "runs" / "rare" / "a.jsonl", lines)
    at = _load(_open(tmp_path / "runs", "rare"))
    at.selectbox(key=keys.SORT_BY).select("rare").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert table["rare"].tolist()[0] == 5.0 and table["rare"].isna().sum() == 7 and table["prompt"].iloc[0] == "p3"
    _area(at, keys.OVERVIEW)
    at.toggle(key=keys.SHOW_STEP_TABLE).set_value(True).run()
    assert not at.exception
    step_table = at.dataframe[0].value
    assert step_table["rare_mean"].isna().tolist() == [True, False] and step_table["rare_mean"].iloc[1] == 5.0


@pytest.mark.slow
def test_tokens_without_per_token_numbers_are_listed_not_an_error(tmp_path):
    """A sample that logs its response tokens but no log-probs, KL, values or advantages shows its
    tokens in the token table with a line saying there are no per-token numbers (no IndexError)."""
    write_lines(tmp_path / "bare" / "r.jsonl", [
        sample(1, 1.0, response="ab c", response_tokens=["a", "b", " c"])])
    at = _load(_open(tmp_path, "bare"))
    assert not at.exception
    assert any("no per-token numbers" in i.value for i in at.info)
    assert at.dataframe[1].value["token"].tolist() == ["a", "b", "␣c"]
