"""Vision runs (issue 49): TRL 1.16's conversation columns as turns with their image placeholders counted, verl
VLM dumps, verifiers' eval traces.jsonl, and the samples whose images never reached the trainer."""

import math

import pyarrow.parquet as pq
import pytest
from conftest import REPO
from page_steps import load as _load
from page_steps import open_page as _open

from rl_board.analysis.source import load_run
from rl_board.readers import detect, parquet
from rl_board.readers.placeholders import image_blocks, image_faults, images_held, vision_runs
from rl_board.views import keys

DATA = REPO / "tests" / "data"
TRL_VLM = DATA / "trl_vlm_run"
PLACEHOLDERS = "extra:image_placeholders"


def _by_id(run, column):
    frame = run.to_pandas(text=True)
    return {sample_id: value for sample_id, value in frame[column].items()}


def test_trl_vlm_parquet_is_read_as_conversations():
    """TRL 1.16's completions (made by GRPOTrainer.log itself) open as turns: the prompt's user message then the
    completion's assistant message, the texts made from them, not the messages' JSON."""
    run = load_run(TRL_VLM / "completions")
    assert detect(TRL_VLM / "completions") is parquet
    frame = run.to_pandas(text=True)
    assert len(frame) == 6
    assert frame.loc["completions_00001.parquet:2", "prompt"] == "[image]\n[image]\nWhich of the two is larger?"
    assert frame.loc["completions_00001.parquet:2", "response"] == "The left one."
    assert frame.loc["completions_00001.parquet:3", "prompt"] == "What is 2+2?"
    assert list(frame["extra:num_turns"]) == [1.0] * 6
    canonical, _ = run.record_parts("completions_00002.parquet:1")
    assert [t["role"] for t in canonical["messages"]] == ["user", "assistant"]
    assert canonical["messages"][1]["content"] == "They are the same."
    assert all("{" not in text for text in frame["prompt"])  # no JSON of the messages


def test_trl_vlm_placeholders_are_counted_per_sample_by_hand():
    """image_placeholders is each row's {"type": "image"} blocks: 1, 2, 0, 1 at step 1 and 2, 1 at step 2, as
    the fixture script wrote them (and as the parquet's own prompt column holds them)."""
    run = load_run(TRL_VLM / "completions")
    got = _by_id(run, PLACEHOLDERS)
    assert [got[f"completions_00001.parquet:{i}"] for i in (1, 2, 3, 4)] == [1.0, 2.0, 0.0, 1.0]
    assert [got[f"completions_00002.parquet:{i}"] for i in (1, 2)] == [2.0, 1.0]
    # independently: the blocks of type image in the parquet's prompt column, read with pyarrow
    for name in ("completions_00001.parquet", "completions_00002.parquet"):
        prompts = pq.read_table(TRL_VLM / "completions" / name).column("prompt").to_pylist()
        for line, prompt in enumerate(prompts, start=1):
            blocks = sum(part["type"] == "image" for message in prompt for part in message["content"])
            assert got[f"{name}:{line}"] == blocks
    assert run.to_pandas()[PLACEHOLDERS].sum() == 7


def test_trl_vlm_load_report_says_the_pixels_were_not_kept():
    """The load report says, once for both files, that TRL did not keep the images' pixels."""
    run = load_run(TRL_VLM / "completions")
    notes = [n for n in run.report.notes if "image placeholders without images" in n]
    assert len(notes) == 1
    assert notes[0].startswith("completions_00001.parquet and 1 more file(s): ")
    assert "pixels left out" in notes[0]


def test_a_text_only_trl_conversation_gets_no_placeholder_column(tmp_path):
    """A conversational run without image blocks has turns and no image_placeholders column, and no note."""
    import pandas as pd

    frame = pd.DataFrame({"step": [1, 1], "prompt": [[{"role": "user", "content": "hi"}]] * 2,
                          "completion": [[{"role": "assistant", "content": "a"}], [{"role": "assistant",
                                                                                    "content": "b"}]],
                          "r": [1.0, 0.0], "advantage": [0.5, -0.5]})
    (tmp_path / "c").mkdir()
    frame.to_parquet(tmp_path / "c" / "completions_00001.parquet")
    run = load_run(tmp_path / "c")
    assert PLACEHOLDERS not in run.samples
    assert not any("placeholder" in n for n in run.report.notes)
    assert list(run.to_pandas(text=True)["response"]) == ["a", "b"]


@pytest.mark.slow
def test_page_sorts_the_batch_by_image_placeholders_and_says_why_there_are_no_pixels(tmp_path):
    """On the page (AppTest), the batch (the last step's: 2 and 1 placeholders, in log order 2 then 1) sorted by
    image_placeholders, fewest first, puts line 2 first and shows the column, and the While loading box names the missing
    pixels."""
    import shutil

    shutil.copytree(TRL_VLM / "completions", tmp_path / "vlm")
    at = _load(_open(tmp_path, "vlm"))
    assert not at.exception
    assert any("image placeholders without images" in w.value for w in at.warning)
    sort = at.selectbox(key=keys.SORT_BY)
    assert "image_placeholders" in sort.options
    sort.select("image_placeholders").run()
    at.toggle(key=keys.SORT_DESCENDING).set_value(False).run()  # fewest first: against the log order
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["image_placeholders"]) == [1.0, 2.0]
    assert list(table["source"]) == ["completions_00002.parquet:2", "completions_00002.parquet:1"]


def test_counting_helpers_by_hand():
    """Blocks without data, vision runs in text and images that carry data are counted as defined."""
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "image", "text": None},
                                             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                                             {"type": "text", "text": "x"}]}]
    assert image_blocks(messages) == 2
    assert images_held(messages[0]) == 1
    text = ("<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|vision_end|>a"
            "<|vision_start|><|video_pad|><|vision_end|><|vision_start|><|image_pad|><|vision_end|>"
            "<image><image><image> b <image><|im_end|>")
    assert vision_runs(text) == 4  # two Qwen-VL image runs, the video run not, two runs of <image>
    assert vision_runs("no markers") == 0 and vision_runs(None) == 0
    assert not math.isnan(float(vision_runs("")))


def test_image_faults_name_the_message_and_the_turn_that_should_have_seen_it():
    """A message whose images differ from its placeholders is a fault at its index, with the next assistant
    turn; unknown placeholders and messages without images are not faults."""
    held = [0, 2, 0, 1, 0, 1]
    marked = [0, 2, 0, 0, 0, None]
    roles = ["system", "user", "assistant", "tool", "assistant", "user"]
    assert image_faults(held, marked, roles) == [
        {"kind": "images_dropped", "message_index": 3, "assistant_turn": 1}]
    assert image_faults([1], [0], ["user"]) == [
        {"kind": "images_dropped", "message_index": 0, "assistant_turn": None}]


# -- verifiers' eval traces.jsonl ------------------------------------------------------------------------------

PNG_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _screens_eval(root):
    """A verifiers eval run folder: two episodes of a screenshot tool env (a user image, a tool result that is
    an image), rewards 1 and 0."""
    from agent_writers import v1_chain, v1_eval_episode, v1_trace, write_verifiers_eval

    look = {"id": "c1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
    user = {"role": "user", "content": [{"type": "text", "text": "What is on screen?"},
                                        {"type": "image_url", "image_url": {"url": PNG_URL}}]}
    call = {"role": "assistant", "content": "", "tool_calls": [look]}
    shot = {"role": "tool", "tool_call_id": "c1", "content": [{"type": "image_url", "image_url": {"url": PNG_URL}}]}
    done = {"role": "assistant", "content": "A login form."}
    first = v1_trace(v1_chain([(user, False), (call, True), (shot, False), (done, True)]),
                     {"correct": {"score": 1.0, "weight": 1.0}}, {"turns": 2.0})
    second = v1_trace(v1_chain([(user, False), ({"role": "assistant", "content": "No idea."}, True)]),
                      {"correct": {"score": 0.0, "weight": 1.0}}, {"turns": 1.0})
    run = root / "screens--demo--agent--abc123"
    write_verifiers_eval(run, [v1_eval_episode("e1", "screens", first), v1_eval_episode("e2", "screens", second)])
    (run / "logs" / "attempt_1").mkdir(parents=True)
    (run / "logs" / "attempt_1" / "eval.log").write_text("started\n")
    return run


def test_verifiers_eval_traces_open_as_one_evaluation(tmp_path):
    """verifiers' eval traces.jsonl (no step_N folder) opens with the prime-rl reader as one step 0 evaluation:
    two samples, rewards 1 and 0, the tool turn's image shown as [image] at its place."""
    from rl_board.readers import prime_rl

    run_dir = _screens_eval(tmp_path)
    assert detect(run_dir) is prime_rl
    run = load_run(run_dir)
    frame = run.to_pandas(text=True)
    assert list(frame.index) == ["traces.jsonl:1", "traces.jsonl:2"]
    assert list(frame["step"]) == [0, 0] and list(frame["reward"]) == [1.0, 0.0]
    assert not run.report.errors and run.report.lines_bad == 0
    canonical, _ = run.record_parts("traces.jsonl:1")
    assert [t["role"] for t in canonical["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert canonical["messages"][2]["content"] == "[image]"
    assert canonical["messages"][0]["content"] == "What is on screen?\n[image]"


def test_a_board_jsonl_named_traces_is_not_taken_for_an_eval(tmp_path):
    """A traces.jsonl of the board's own lines (no traces list) stays the JSONL reader's."""
    from conftest import sample, write_lines

    from rl_board.readers import jsonl

    write_lines(tmp_path / "r" / "traces.jsonl", [sample(1, 1.0, prompt="p", response="r")])
    assert detect(tmp_path / "r") is jsonl


def test_an_eval_whose_first_line_is_megabytes_is_still_an_eval(tmp_path):
    """A first episode longer than the 1 MiB detection reads (a screenshot of 1.5 MB in its task) is still
    verifiers' eval, and loads."""
    from agent_writers import v1_chain, v1_eval_episode, v1_trace, write_verifiers_eval

    from rl_board.readers import prime_rl

    big = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                                                          + "A" * 1_500_000}}]}
    trace = v1_trace(v1_chain([(big, False), ({"role": "assistant", "content": "ok"}, True)]),
                     {"r": {"score": 0.5, "weight": 1.0}}, {})
    trace["task"] = {"type": "Task", "data": {"screenshot": "A" * 1_500_000}}  # before "traces" in the line
    run_dir = tmp_path / "big"
    write_verifiers_eval(run_dir, [v1_eval_episode("e1", "screens", trace)])
    assert detect(run_dir) is prime_rl
    assert list(load_run(run_dir).to_pandas()["reward"]) == [0.5]


# -- verl VLM dumps ---------------------------------------------------------------------------------------------

#: the part of Qwen2.5-VL's chat template (its chat_template.json) that writes an image part
QWEN_VL_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
                    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
                    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
                    "<|vision_start|><|image_pad|><|vision_end|>{% elif 'text' in content %}{{ content['text'] }}"
                    "{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
#: geo3k rollouts: (question, image patch counts, answer, score); images per prompt 1, 2, 0 by hand
GEO3K = [("Find x. Put the answer in \\boxed{}.", [64], "x = 3, so \\boxed{3}", 1.0),
         ("Which angle is larger?", [16, 36], "\\boxed{A}", 0.0),
         ("What is 7*6?", [], "\\boxed{42}", 1.0)]


def _geo3k(root, skip_special_tokens=True, vlm_files=True):
    """verl's geo3k experiment folder (rollout_data/, val_data/) as _dump_generations writes it, its input and
    output decoded as _log_rollout_data decodes them; with ``vlm_files``, Qwen2.5-VL's chat template beside."""
    from ray_writers import verl_dump, verl_vlm_sample

    exp = root / "geo3k"
    for folder, step in (("val_data", 0), ("rollout_data", 1), ("rollout_data", 2)):
        pairs = [verl_vlm_sample(q, pads, a, skip_special_tokens) for q, pads, a, _ in GEO3K]
        verl_dump(exp / folder, step, [p[0] for p in pairs], [p[1] for p in pairs], ["3", "A", "42"],
                  [s for *_, s in GEO3K], {"acc": [s == 1.0 for *_, s in GEO3K]})
    if vlm_files:
        (exp / "chat_template.jinja").write_text(QWEN_VL_TEMPLATE)
    return exp


def test_a_verl_vlm_dump_says_the_trainer_does_not_save_images(tmp_path):
    """A geo3k run (skip_special_tokens=True, Qwen2.5-VL's template beside) loads with one note, said once for
    its files: this trainer does not save images; it has no image_placeholders (the dump can't tell them)."""
    from rl_board.readers import verl

    exp = _geo3k(tmp_path)
    assert detect(exp) is verl
    run = load_run(exp)
    notes = [n for n in run.report.notes if "does not save images" in n]
    assert len(notes) == 1 and "skip_special_tokens=True" in notes[0] and "more file(s)" in notes[0]
    assert PLACEHOLDERS not in run.samples
    frame = run.to_pandas(text=True)
    assert "<|image_pad|>" not in "".join(frame["prompt"]) and list(frame["reward"]) == [1.0, 0.0, 1.0] * 2


def test_a_text_only_verl_run_gets_no_image_note(tmp_path):
    """The same dumps without a vision model's files beside them say nothing of images."""
    run = load_run(_geo3k(tmp_path, vlm_files=False))
    assert not any("image" in n for n in run.report.notes)


def test_a_verl_dump_that_kept_special_tokens_counts_one_image_per_vision_run(tmp_path):
    """Decoded with skip_special_tokens=False, each prompt's vision runs are its image_placeholders (1, 2, 0 by
    hand, whatever the patch counts), and the note says the pixels are not kept."""
    run = load_run(_geo3k(tmp_path, skip_special_tokens=False))
    frame = run.to_pandas()
    assert list(frame[PLACEHOLDERS]) == [1.0, 2.0, 0.0] * 2  # the train split: steps 1 and 2
    assert any("image_placeholders" in n and "does not save images" in n for n in run.report.notes)
    _, others = run.record_parts(frame.index[1])
    assert others["image_placeholders"] == 2


def test_the_rollout_folder_of_a_verl_vlm_run_alone_says_it_too(tmp_path):
    """The rollout folder opened alone (the JSONL reader: no turn markers) says once that this trainer does not
    save images, from the template in the experiment folder above; without it, nothing."""
    from rl_board.readers import jsonl

    exp = _geo3k(tmp_path)
    assert detect(exp / "rollout_data") is jsonl
    notes = [n for n in load_run(exp / "rollout_data").report.notes if "does not save images" in n]
    assert len(notes) == 1 and notes[0].startswith("this trainer does not save images")
    plain = _geo3k(tmp_path / "plain", vlm_files=False)
    assert not any("image" in n for n in load_run(plain / "rollout_data").report.notes)


# -- images dropped between the rollout and the tokens trained on -----------------------------------------------


def _vision_tokenizer(path):
    """The demo's BPE tokenizer with Qwen-VL's vision tokens added as special tokens (as Qwen2.5-VL's has them)."""
    from tokenizers import Tokenizer

    from rl_board.demo.words import write_tokenizer

    write_tokenizer(path)
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.add_special_tokens(["<|vision_start|>", "<|image_pad|>", "<|vision_end|>"])
    tokenizer.save(str(path))
    return tokenizer


def _rendered(tokenizer, message, kept_images, after_assistant=False):
    """An input message's ids as a Qwen-VL renderer attributes them: its ChatML turn, ``kept_images`` vision runs
    (4 pads each) before its text; a renderer that dropped an image writes no run for it."""
    text = "\n".join(p.get("text", "") for p in message["content"] if p.get("type") == "text") \
        if isinstance(message["content"], list) else message["content"]
    vision = "<|vision_start|>" + "<|image_pad|>" * 4 + "<|vision_end|>"
    body = ("\n" if after_assistant else "") + f"<|im_start|>{message['role']}\n{vision * kept_images}{text}<|im_end|>\n"
    return tokenizer.encode(body, add_special_tokens=False).ids


def _screenshot_eval(root):
    """A verifiers eval of four episodes whose node ids were rendered with the run's tokenizer: (1) one user image
    kept; (2) two user images kept, the tool's screenshot dropped by the renderer (message 2); (3) text only;
    (4) one user image dropped (message 0)."""
    from agent_writers import v1_eval_episode, v1_input_node, v1_sampled_node, v1_trace, write_verifiers_eval

    run = root / "shots"
    run.mkdir(parents=True)
    tokenizer = _vision_tokenizer(run / "tokenizer.json")
    image = {"type": "image_url", "image_url": {"url": PNG_URL}}

    def user(images, text="What is on screen?"):
        return {"role": "user", "content": [{"type": "text", "text": text}, *[image] * images]}

    def reply(content, calls=()):
        return {"role": "assistant", "content": content, "tool_calls": list(calls)}

    def said(message, parent):
        ids = tokenizer.encode(message["content"] + "<|im_end|>", add_special_tokens=False).ids
        return v1_sampled_node(message, parent, tokenizer.encode("<|im_start|>assistant\n").ids, ids, [-0.5] * len(ids))

    look = {"id": "c1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
    shot = {"role": "tool", "tool_call_id": "c1", "content": [image]}
    episodes = []
    plans = [
        [(user(1), 1), (reply("A form."), None)],
        [(user(2), 2), (reply("", [look]), None), (shot, 0), (reply("Same."), None)],
        [({"role": "user", "content": "What is 2+2?"}, 0), (reply("4"), None)],
        [(user(1), 0), (reply("No idea."), None)],
    ]
    for k, plan in enumerate(plans):
        nodes = []
        for i, (message, kept) in enumerate(plan):
            parent = None if i == 0 else i - 1
            if kept is None:
                nodes.append(said(message, parent))
            else:
                nodes.append(v1_input_node(message, parent, _rendered(tokenizer, message, kept, i > 0)))
        trace = v1_trace(nodes, {"correct": {"score": float(k % 2), "weight": 1.0}}, {})
        episodes.append(v1_eval_episode(f"e{k}", "screens", trace))
    write_verifiers_eval(run, episodes)
    return run


def test_images_dropped_names_exactly_the_samples_whose_images_the_tokens_lost(tmp_path):
    """With the run's tokenizer, samples 2 (the tool's screenshot) and 4 (the user's image) are images_dropped,
    at messages 2 and 0; sample 1 is checked and fine; the text-only sample 3 is not checked. Counts by hand."""
    run = load_run(_screenshot_eval(tmp_path))
    frame = run.to_pandas()
    assert list(frame["extra:images_dropped"].fillna(-1)) == [0.0, 1.0, -1.0, 1.0]
    assert list(frame[PLACEHOLDERS].fillna(-1)) == [1.0, 2.0, -1.0, 0.0]
    assert list(frame["extra:images_dropped_at"].fillna(-1)) == [-1.0, 2.0, -1.0, 0.0]


def test_the_image_faults_of_a_trace_name_message_and_assistant_turn(tmp_path):
    """The pure fault function on sample 2's nodes: one images_dropped fault at message 2, assistant turn 1 (the
    turn after the tool's screenshot)."""
    import json

    from rl_board.readers.placeholders import image_faults_of, vision_ids

    run_dir = _screenshot_eval(tmp_path)
    episode = json.loads((run_dir / "traces.jsonl").read_text().splitlines()[1])
    faults, held, marked = image_faults_of(episode["traces"][0]["nodes"], vision_ids(str(run_dir / "tokenizer.json")))
    assert faults == [{"kind": "images_dropped", "message_index": 2, "assistant_turn": 1}]
    assert (held, marked) == (3, 2)


def test_images_dropped_finding_names_the_dropped_samples_and_no_other(tmp_path):
    """The findings raise images_dropped naming traces.jsonl:2 and :4 only, 2 of the 3 samples checked."""
    from rl_board.analysis.findings import compute_findings

    found = [f for f in compute_findings(load_run(_screenshot_eval(tmp_path))).findings if f.kind == "images_dropped"]
    assert len(found) == 1
    assert list(found[0].samples) == ["traces.jsonl:2", "traces.jsonl:4"]
    assert found[0].evidence == {"samples_dropped": 2, "samples_checked": 3, "steps": [0]}


def test_without_the_tokenizer_nothing_is_checked(tmp_path):
    """The same run without its tokenizer.json has no images_dropped column and no such finding."""
    from rl_board.analysis.findings import compute_findings

    run_dir = _screenshot_eval(tmp_path)
    (run_dir / "tokenizer.json").unlink()
    run = load_run(run_dir)
    assert "extra:images_dropped" not in run.samples
    found = compute_findings(run)
    assert not [f for f in found.findings if f.kind == "images_dropped"]
    assert [c.note for c in found.checks if c.kind == "images_dropped"] == [
        "no samples with both images and the tokens they were trained on"]


@pytest.mark.slow
def test_explore_filters_by_image_placeholders(tmp_path):
    """Explore's numeric filter offers image_placeholders; from 2 keeps the two samples with two image blocks
    (completions_00001.parquet:2 and completions_00002.parquet:1), 2 of 6."""
    import shutil

    shutil.copytree(TRL_VLM / "completions", tmp_path / "vlm")
    at = _load(_open(tmp_path, "vlm"), keys.EXPLORE)
    at.selectbox(key=keys.EXPLORE_COLUMN).select("image_placeholders").run()
    at.text_input(key=keys.EXPLORE_LOW).input("2").run()
    assert not at.exception
    assert any(c.value == "2 of 6 samples match" for c in at.caption)


# -- the docs' examples read as the docs say ---------------------------------------------------------------------


def test_the_trl_page_example_has_two_placeholders(tmp_path):
    """The TRL page's row, written as a parquet file (pandas, as TRL does), reads as the page says: step 1,
    reward 0.0, image_placeholders 2, a user and an assistant turn."""
    import json

    import pandas as pd
    from conftest import docs_example

    row = json.loads(docs_example("trl", "Which of the two is larger?"))
    (tmp_path / "c").mkdir()
    pd.DataFrame([row]).to_parquet(tmp_path / "c" / "completions_00001.parquet")
    run = load_run(tmp_path / "c")
    frame = run.to_pandas(text=True)
    assert list(frame["step"]) == [1] and list(frame["reward"]) == [0.0]
    assert list(frame[PLACEHOLDERS]) == [2.0]
    assert frame["response"].iloc[0] == "The left one."
    canonical, _ = run.record_parts(frame.index[0])
    assert [t["role"] for t in canonical["messages"]] == ["user", "assistant"]


def test_the_verl_page_examples_read_as_the_page_says(tmp_path):
    """The verl page's geo3k line with Qwen2.5-VL's template beside says the trainer does not save images; its
    line that kept the special tokens has image_placeholders 1 and says the pixels are not kept."""
    from conftest import docs_example

    plain = docs_example("verl", "Find x. Put the answer").strip()
    kept = docs_example("verl", "<|image_pad|><|image_pad|>").strip()
    for name, line in (("plain", plain), ("kept", kept)):
        (tmp_path / name / "rollout_data").mkdir(parents=True)
        (tmp_path / name / "rollout_data" / "1.jsonl").write_text(line + "\n", encoding="utf-8")
        (tmp_path / name / "val_data").mkdir()
        (tmp_path / name / "val_data" / "0.jsonl").write_text(line.replace('"step": 1', '"step": 0') + "\n",
                                                             encoding="utf-8")
    (tmp_path / "plain" / "chat_template.jinja").write_text(QWEN_VL_TEMPLATE)
    run = load_run(tmp_path / "plain")
    assert any("does not save images" in n for n in run.report.notes)
    assert PLACEHOLDERS not in run.samples
    run = load_run(tmp_path / "kept")
    assert list(run.to_pandas()[PLACEHOLDERS]) == [1.0]
    assert any("keep their image placeholders" in n for n in run.report.notes)


def test_a_kept_vision_run_is_one_image_mark_in_the_turns(tmp_path):
    """In a dump that kept the special tokens, the user turn shows each vision run as [image] before its text
    (two for the second geo3k prompt), not its pad tokens."""
    run = load_run(_geo3k(tmp_path, skip_special_tokens=False))
    canonical, _ = run.record_parts(run.to_pandas().index[1])
    user = [t for t in canonical["messages"] if t["role"] == "user"]
    assert [t["content"] for t in user] == ["[image][image]Which angle is larger?"]
    assert "<|image_pad|>" not in "".join(t["content"] for t in canonical["messages"])


def test_the_trl_fixture_is_what_grpo_trainer_log_writes(tmp_path):
    """tests/make_trl_vlm_fixtures.py (GRPOTrainer.log of trl, where trl is installed) writes the committed
    tables: the same columns and rows."""
    import subprocess
    import sys

    import pytest

    pytest.importorskip("trl")
    subprocess.run([sys.executable, str(REPO / "tests" / "make_trl_vlm_fixtures.py"), str(tmp_path)], check=True,
                   capture_output=True, timeout=600)
    for name in ("completions_00001.parquet", "completions_00002.parquet"):
        made = pq.read_table(tmp_path / "trl_vlm_run" / "completions" / name)
        kept = pq.read_table(TRL_VLM / "completions" / name)
        assert made.schema.remove_metadata() == kept.schema.remove_metadata()
        assert made.to_pylist() == kept.to_pylist()


@pytest.mark.slow
def test_page_opens_a_verifiers_eval_and_its_findings_name_the_dropped_samples(tmp_path):
    """On the page (AppTest), the screenshot eval loads, its batch holds the 4 samples, and the Findings panel
    says 2 of the 3 samples with images lost some; its Evidence lists traces.jsonl:2 and :4, no other."""
    _screenshot_eval(tmp_path)
    at = _load(_open(tmp_path, "shots"), None)
    assert not at.exception
    texts = [t.value for t in at.text]
    assert any(t.startswith("2 of 3 samples with images were trained on tokens") for t in texts), texts
    at.button(key="finding-images_dropped").click().run()
    assert not at.exception
    shown = [t.value for t in at.text if t.value.startswith("step 0 · ")]
    assert [t.split(" · ")[1] for t in shown] == ["traces.jsonl:2", "traces.jsonl:4"]


def test_board_lines_with_a_traces_key_stay_the_jsonl_readers(tmp_path):
    """The board's own lines in traces.jsonl that carry a traces list (no id, no env object) are not an eval."""
    from conftest import write_lines

    from rl_board.readers import jsonl

    write_lines(tmp_path / "j" / "traces.jsonl", [{"step": 1, "reward": 0.5, "traces": [{"rewards": {}}]}])
    assert detect(tmp_path / "j") is jsonl
