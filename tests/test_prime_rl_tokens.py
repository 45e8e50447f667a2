"""prime-rl's token exports: token_exports/step_N/rank_R.jsonl, written as prime-rl's TokenExporter writes them."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO
from token_writers import PrimeTokenExporter, Sequence, train_tokenizer
from tokenizers import Tokenizer

from rl_board.analysis.source import load_run
from rl_board.analysis.tables import compute_token_table
from rl_board.base.colors import build_token_text_html, metric_scale
from rl_board.readers import detect, prime_rl_tokens
from rl_board.store.loader import NO_TOKENIZER, list_runs


def _sequence(tok: Tokenizer, turns: list[tuple[str, bool]], rng: np.random.Generator, advantage: float,
              env: str = "gsm8k", null_at: int | None = None) -> Sequence:
    """A sample of (text, trained) turns, as prime-rl's ``prepare_sample`` aligns it: the sampler's
    log-probs on trained tokens (0 elsewhere), the trainer's everywhere (position 0 the pad value)."""
    ids, mask = [], []
    for text, trained in turns:
        got = tok.encode(text).ids
        ids += got
        mask += [trained] * len(got)
    n = len(ids)
    trainer = (-np.abs(rng.normal(0, 0.8, n)) - 0.01).tolist()
    trainer[0] = math.log(1.0 / 400)
    inference = [t + float(rng.normal(0, 0.05)) if m else 0.0 for t, m in zip(trainer, mask)]
    if null_at is not None:
        inference[null_at] = float("nan")  # written as null
    entropy = np.abs(rng.normal(1.0, 0.3, n)).tolist()
    return Sequence(ids, mask, [advantage if m else 0.0 for m in mask], inference, trainer, entropy, env)


@pytest.fixture
def export_run(tmp_path):
    """outputs/run (the run folder) with two steps of two ranks; the tokenizer lies in outputs/, above it."""
    tokenizer_path = train_tokenizer(tmp_path / "outputs")
    tok = Tokenizer.from_file(str(tokenizer_path))
    out = tmp_path / "outputs" / "run"
    rng = np.random.default_rng(7)
    for step in (1, 2):
        for rank in (0, 1):
            exporter = PrimeTokenExporter(out, rank)
            single = _sequence(tok, [("<|im_start|>What is 5 + 39?<|im_end|>", False),
                                     ("The answer is 44.<|im_end|>", True)], rng, 0.5)
            late = _sequence(tok, [("Compute the sum of each term, then the total equals", False),
                                   (" the result.", True)], rng, -0.25, null_at=None)
            # multi-turn: a tool result between two trained turns (a mask with holes)
            multi = _sequence(tok, [("<|im_start|>Let me check", False), (" the weather tool first.", True),
                                    ("The tool says: sunny, 21 degrees.", False),
                                    (" So the answer is correct!", True)], rng, 1.0, env="tools")
            multi.inference_logprobs[len(multi.token_ids) - 2] = float("nan")  # a trained position logged null
            exporter.export(step, 0, [single, late], padding=3)
            exporter.export(step, 1, [multi])
            exporter.mark_stable()
    return out, tokenizer_path


def _independent(out: Path, tokenizer_path: Path) -> dict[int, dict]:
    """Per step, the summary's numbers read straight from the written lines over their masked positions."""
    per_step: dict[int, list[dict]] = {}
    for path in sorted(out.glob("token_exports/step_*/rank_*.jsonl")):
        for text in path.read_text().splitlines():
            per_step.setdefault(json.loads(text)["step"], []).append(json.loads(text))
    result = {}
    for step, lines in per_step.items():
        lengths, mismatch, entropy, repeats, untrained, positions = [], [], [], [], 0, 0
        for line in lines:
            mask = line["loss_mask"]
            trained = [i for i, m in enumerate(mask) if m]
            lengths.append(len(trained))
            untrained += len(mask) - len(trained)
            positions += len(mask)
            k3 = []
            for i in trained:
                a, b = line["trainer_logprobs"][i], line["inference_logprobs"][i]
                if a is not None and b is not None:
                    d = a - b
                    k3.append(math.exp(d) - 1 - d)
            if k3:
                mismatch.append(sum(k3) / len(k3))
            entropy.append(sum(line["entropy"][i] for i in trained) / len(trained))
            tokens = [line["token_ids"][i] for i in trained]  # a token is its id
            grams = [tuple(tokens[i:i + 4]) for i in range(len(tokens) - 3)]
            if grams:
                repeats.append(1 - len(set(grams)) / len(grams))
        result[step] = {"samples": len(lines), "response_len_mean": sum(lengths) / len(lengths),
                        "mismatch_kl": sum(mismatch) / len(mismatch), "entropy_mean": sum(entropy) / len(entropy),
                        "repeat_4gram_share": sum(repeats) / len(repeats) if repeats else None,
                        "masked_share": untrained / positions}
    return result


def test_summary_per_step_equals_an_independent_reading_of_the_masked_positions(export_run):
    """summary --json on a token export (tokenizer in the folder above the run) equals the masked
    positions read by hand: lengths, mismatch KL (null log-probs skipped), entropy, repetition, masked share."""
    out, tokenizer_path = export_run
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(out), "--json", "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["format"] == "prime-rl-tokens" and got["lines_bad"] == 0 and got["files"] == 4
    assert f"Token ids decoded with {tokenizer_path}" in proc.stderr
    expected = _independent(out, tokenizer_path)
    assert [s["step"] for s in got["steps"]] == [1, 2]
    for entry in got["steps"]:
        want = expected[entry["step"]]
        assert entry["samples"] == want["samples"] == 6
        for key in ("response_len_mean", "mismatch_kl", "entropy_mean", "repeat_4gram_share", "masked_share"):
            assert entry[key] == pytest.approx(want[key], rel=1e-9), key
        # no reward logged: left out of the reward statistics; no reference model: no KL
        assert entry["reward_mean"] is None and entry["reward_std"] is None
        assert entry["kl_mean"] is None and entry["neg_log_ratio_share"] is None
        assert entry["zero_std_groups"] == 0 and entry["prompt_groups"] == 0
        assert "rank" not in entry["extras"] and "micro_step" not in entry["extras"]


def test_token_view_decodes_each_id_and_dims_the_untrained_positions(export_run):
    """The token view shows each id decoded on its own, marks the positions the mask leaves out, and
    draws them dimmed; the prompt is the decoded text before the first trained position."""
    out, tokenizer_path = export_run
    tok = Tokenizer.from_file(str(tokenizer_path))
    run = load_run(out, cache_root=False)
    assert run.report.reader == "prime-rl-tokens"
    first = run.step_samples(1).iloc[0]
    line = json.loads((out / "token_exports/step_1/rank_0.jsonl").read_text().splitlines()[0])
    first_trained = line["loss_mask"].index(True)
    assert first["prompt"] == tok.decode(line["token_ids"][:first_trained], skip_special_tokens=False)
    assert first["prompt"] == "<|im_start|>What is 5 + 39?<|im_end|>"
    canonical, others = run.record_parts(first.name)
    assert others["env_name"] == "gsm8k"  # a text field, shown with the sample
    sample = run.sample_tokens(first.name)
    assert sample.tokens == [tok.decode([i], skip_special_tokens=False) for i in line["token_ids"]]
    assert sample.has_mask and list(~sample.is_pad) == line["loss_mask"]
    table = compute_token_table(sample, drop_pad=True)  # untrained positions stay, to be dimmed
    assert len(table) == len(line["token_ids"])
    assert table["importance_ratio"].to_numpy() == pytest.approx(np.array(line["importance_ratio"], float))
    assert table["advantages"].to_numpy() == pytest.approx(np.array(line["advantages"], float))
    values = table["mismatch_kl"].to_numpy(float)
    html = build_token_text_html(table["token"].tolist(), values, "mismatch_kl",
                                 metric_scale("mismatch_kl", values[table["counted"]]), dimmed=~table["counted"])
    assert html.count("rlb-untrained") == line["loss_mask"].count(False)


def test_without_a_tokenizer_ids_show_as_hash_numbers_and_the_run_says_how_to_give_one(export_run, tmp_path):
    """With no tokenizer near the run, it still opens: tokens read #ID and a note says how to give one;
    --tokenizer PATH gives one."""
    out, tokenizer_path = export_run
    moved = tmp_path / "far" / "away"
    moved.mkdir(parents=True)
    tokenizer_path.rename(moved / "tokenizer.json")
    run = load_run(out, cache_root=False)
    assert run.report.lines_ok == 12 and NO_TOKENIZER in run.report.notes
    label = run.samples.index[0]
    ids = run.record_parts(label)[0]["token_ids"]
    assert run.sample_tokens(label).tokens == [f"#{i}" for i in ids]
    given = load_run(out, cache_root=False, tokenizer=moved)
    assert given.sample_tokens(label).tokens[0] != f"#{ids[0]}"
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(out), "--json", "--no-cache",
                           "--tokenizer", str(tmp_path / "nothing-here")], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and "no tokenizer at" in proc.stderr


def test_layout_is_detected_and_listed_as_one_run(export_run):
    """The folder holding token_exports/ is one run of this format; its files are named by their path."""
    out, _ = export_run
    assert detect(out) is prime_rl_tokens
    assert list_runs(out.parent) == ["run"]
    run = load_run(out, cache_root=False)
    assert run.files == ("token_exports/step_1/rank_0.jsonl", "token_exports/step_1/rank_1.jsonl",
                         "token_exports/step_2/rank_0.jsonl", "token_exports/step_2/rank_1.jsonl")


def test_a_line_still_being_written_waits_and_a_broken_line_costs_only_itself(export_run):
    """A last line without its newline is not read (nor an error); a broken line is one rejected line."""
    out, _ = export_run
    path = out / "token_exports/step_2/rank_1.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines) + b"{not json\n" + lines[0][:50])
    rows, errors, count = prime_rl_tokens.read_table(path)
    assert rows.num_rows == len(lines) and [e[0] for e in errors] == [len(lines) + 1] and count == len(lines) + 1


@pytest.mark.slow
def test_the_page_opens_a_token_export_decoded_dimmed_and_without_reward_views(export_run, tmp_path):
    """In the real Streamlit runtime: the run loads, the batch says no reward is logged, the token text
    dims the untrained positions; without a tokenizer the page says how to give one, and the sidebar's
    Tokenizer box gives it."""
    from streamlit.testing.v1 import AppTest

    from rl_board.views import keys
    from rl_board.views.batch import NO_REWARD

    out, tokenizer_path = export_run
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(out.parent)).run()
    at.sidebar.selectbox(key=keys.RUN).select("run").run()
    at.sidebar.button(key=keys.LOAD).click().run()
    assert not at.exception, at.exception
    at.session_state[keys.AREA] = keys.BATCH
    at.run()
    assert NO_REWARD in [info.value for info in at.info]
    body = at.get("html")[0].proto.body
    assert "rlb-untrained" in body and "44" in body  # " 44" decoded, trained
    moved = tmp_path / "far" / "away"
    moved.mkdir(parents=True)
    tokenizer_path.rename(moved / "tokenizer.json")
    import streamlit as st

    st.cache_resource.clear()  # a server started afresh: the run is read again, with no tokenizer near it
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=60).run()
    at.sidebar.text_input(key=keys.ROOT).input(str(out.parent)).run()
    at.sidebar.button(key=keys.LOAD).click().run()
    at.session_state[keys.AREA] = keys.BATCH
    at.run()
    said = [e.value for e in (*at.info, *at.warning, *at.caption) if NO_TOKENIZER in e.value]
    assert not at.exception and len(said) == 1 and said[0].startswith("While loading:")  # said once, in the box
    assert "#" in at.get("html")[0].proto.body
    at.sidebar.text_input(key=keys.TOKENIZER).input(str(tmp_path / "far")).run()  # no tokenizer.json there
    assert not at.exception and any("Can't use this tokenizer" in w.value for w in at.warning)
    at.sidebar.text_input(key=keys.TOKENIZER).input(str(moved)).run()
    assert not at.exception and not at.error
    assert not any(NO_TOKENIZER in e.value for e in (*at.info, *at.warning, *at.caption))
    assert "rlb-untrained" in at.get("html")[0].proto.body


def test_a_tokenizer_that_cant_be_read_gets_one_note_naming_it(export_run):
    """A tokenizer.json next to the run that is no tokenizer: the load report has one note on it, naming
    the file and what was wrong, and none saying that no tokenizer was found."""
    out, tokenizer_path = export_run
    tokenizer_path.write_text("{not a tokenizer")
    run = load_run(out, cache_root=False)
    about = [n for n in run.report.notes if "tokenizer" in n.lower()]
    assert len(about) == 1, about
    assert str(tokenizer_path) in about[0] and "not a tokenizer the tokenizers library can read" in about[0]
    assert NO_TOKENIZER not in run.report.notes


def test_a_chat_template_sequence_is_turns(tmp_path):
    """A sequence whose ids are the chat template's text (prompt, a Hermes call, the tool's response as
    the template renders it, the answer) decodes with its markers and is split into turns: 2 assistant
    turns, 1 call (counted by hand), the tool's response a tool turn."""
    from ray_writers import chatml, generated

    tokenizer_path = train_tokenizer(tmp_path / "outputs")
    tok = Tokenizer.from_file(str(tokenizer_path))
    out = tmp_path / "outputs" / "run"
    call = {"role": "assistant", "content": "", "tool_calls": [{"name": "clock", "arguments": {}}]}
    turns = [(chatml([{"role": "system", "content": "You can call tools."}, {"role": "user", "content": "Time?"}],
                     add_generation_prompt=True), False),
             (generated(call), True),
             ("\n" + chatml([{"role": "tool", "content": "21:04"}], add_generation_prompt=True), False),
             (generated({"role": "assistant", "content": "It is 21:04."}), True)]
    plain = [("What is 5 + 39?", False), (" 44", True)]  # no markers: no turns
    exporter = PrimeTokenExporter(out, 0)
    rng = np.random.default_rng(3)
    exporter.export(1, 0, [_sequence(tok, turns, rng, 1.0), _sequence(tok, plain, rng, 0.0)])
    exporter.mark_stable()
    run = load_run(out, cache_root=False, tokenizer=tokenizer_path)
    samples = run.samples
    assert samples["extra:num_turns"].tolist()[0] == 2.0 and samples["extra:num_tool_calls"].tolist()[0] == 1.0
    assert math.isnan(samples["extra:num_turns"].tolist()[1])
    turns_of = run.record_parts(0)[0]["messages"]
    assert [t["role"] for t in turns_of] == ["system", "user", "assistant", "tool", "assistant"]
    assert turns_of[3]["content"] == "21:04" and turns_of[2]["tool_calls"][0]["name"] == "clock"
