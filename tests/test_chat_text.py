"""Turns from glued text: ChatML and Llama 3 markers, markers dropped by the decode, Hermes tool calls."""

from ray_writers import (
    agent_loop_response,
    call,
    decode,
    llama3_message,
    openrlhf_sample0,
)

from rl_board.readers.chat_text import split_prompt, split_turns, transcript

SEARCH = {"role": "assistant", "content": "<think>I need the population.</think>Let me look it up.",
          "tool_calls": [call("search", query="北京 人口")]}
RESULT = {"role": "tool", "content": "北京: 21 893 095 (2020)"}
ANSWER = {"role": "assistant", "content": "<think>done</think>About 21.9 million — 约2190万."}


def _shape(turns):
    return [(t["role"], t["content"], t["reasoning"], [(c["name"], c["arguments"]) for c in t["tool_calls"]])
            for t in turns]


EXPECTED = [
    ("assistant", "Let me look it up.", "I need the population.", [("search", '{"query": "北京 人口"}')]),
    ("tool", "北京: 21 893 095 (2020)", None, []),
    ("assistant", "About 21.9 million — 约2190万.", "done", []),
]


def test_chatml_with_markers_gives_turns_calls_and_reasoning():
    """ChatML text that keeps its markers splits into assistant, tool and assistant turns, the Hermes
    call and the <think> text taken out of the assistant's content; non-ASCII text kept as it is."""
    got = split_turns(agent_loop_response([[SEARCH], [RESULT], [ANSWER]]))
    assert got.note is None and _shape(got.turns) == EXPECTED


def test_chatml_with_markers_dropped_by_the_decode():
    """The same response decoded with skip_special_tokens (verl) gives the same turns: the role lines
    the template leaves around a <tool_response> block are recognised."""
    text = decode(agent_loop_response([[SEARCH], [RESULT], [ANSWER]]), True)
    assert "<|im_start|>" not in text and "</tool_call>user\n<tool_response>" in text
    got = split_turns(text)
    assert got.note is None and _shape(got.turns) == EXPECTED


def test_two_tool_results_in_one_user_turn_are_two_tool_turns():
    """Parallel calls: two Hermes blocks are two calls; their two <tool_response> blocks (one user turn
    in Qwen's template) are two tool turns."""
    ask = {"role": "assistant", "content": "", "tool_calls": [call("calc", expr="2+2"), call("calc", expr="3*3")]}
    rounds = [[ask], [{"role": "tool", "content": "4"}, {"role": "tool", "content": "9"}],
              [{"role": "assistant", "content": "4 and 9"}]]
    for text in (agent_loop_response(rounds), decode(agent_loop_response(rounds), True)):
        got = split_turns(text)
        assert [t["role"] for t in got.turns] == ["assistant", "tool", "tool", "assistant"]
        assert [c["arguments"] for c in got.turns[0]["tool_calls"]] == ['{"expr": "2+2"}', '{"expr": "3*3"}']
        assert [t["content"] for t in got.turns[1:]] == ["4", "9", "4 and 9"]


def test_llama3_headers_with_a_tool_call_and_an_ipython_turn():
    """Llama 3 headers: the text before the first header is the assistant's, ipython is a tool turn."""
    text = ('<think>plan</think>Calling.<tool_call>{"name": "weather", "arguments": {"city": "Zürich"}}</tool_call>'
            "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 7}<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nIt is 7 °C in Zürich.<|eot_id|>")
    got = split_turns(text)
    assert _shape(got.turns) == [("assistant", "Calling.", "plan", [("weather", '{"city": "Zürich"}')]),
                                 ("tool", '{"temp": 7}', None, []),
                                 ("assistant", "It is 7 °C in Zürich.", None, [])]


def test_information_blocks_are_tool_turns_without_role_lines():
    """Search-R1 glues <information> blocks straight into the response: each is a tool turn."""
    text = ("<search>capital of France</search>\n\n<information>Paris is the capital.</information>\n\n"
            "<answer>Paris</answer>")
    got = split_turns(text)
    assert [(t["role"], t["content"]) for t in got.turns] == [
        ("assistant", "<search>capital of France</search>"), ("tool", "Paris is the capital."),
        ("assistant", "<answer>Paris</answer>")]


def test_ambiguous_text_stays_one_turn_and_says_so():
    """A <tool_response> block with no role line before it in marker-less text: one assistant turn
    holding the whole text, and a note saying why."""
    text = "I think <tool_response>x</tool_response> was the answer"
    got = split_turns(text)
    assert [(t["role"], t["content"]) for t in got.turns] == [("assistant", text)]
    assert "kept as one turn" in got.note


def test_a_tool_call_that_is_not_json_is_kept_as_its_arguments():
    """A Hermes block that is not JSON is a call with no name, its text the arguments."""
    got = split_turns("Try.<tool_call>search(北京)</tool_call>")
    assert got.turns[0]["tool_calls"] == [{"id": None, "name": None, "arguments": "search(北京)"}]


def test_prompt_with_markers_splits_and_without_is_one_user_turn():
    """A marked prompt is its system and user turns (the open assistant header dropped); one decoded
    without markers is too when it is the whole system/user/assistant layout, else one user turn."""
    marked = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi 👋<|im_end|>\n<|im_start|>assistant\n"
    assert [(t["role"], t["content"]) for t in split_prompt(marked)] == [("system", "Be brief."), ("user", "Hi 👋")]
    plain = decode(marked, True)
    assert plain == "system\nBe brief.\nuser\nHi 👋\nassistant\n"
    assert [(t["role"], t["content"]) for t in split_prompt(plain)] == [("system", "Be brief."), ("user", "Hi 👋")]
    assert [(t["role"], t["content"]) for t in split_prompt("Hi, user\nassistant")] == [("user", "Hi, user\nassistant")]


def test_llama3_text_without_markers_needs_the_template():
    """Llama 3 text decoded without its special tokens splits at the ipython/assistant lines only when
    the run's template is Llama 3's (read from tokenizer_config.json beside the run)."""
    from ray_writers import decode_llama3, llama3_agent_response

    text = decode_llama3(llama3_agent_response([[SEARCH], [RESULT], [ANSWER]]))
    assert "ipython\n\n北京" in text
    assert len(split_turns(text).turns) == 1  # no hint: one turn (its call is still read)
    got = split_turns(text, hint="llama3")
    assert _shape(got.turns) == EXPECTED


def test_template_family_reads_tokenizer_config_or_jinja(tmp_path):
    """The chat template beside a run (or one folder up) names its family."""
    import json

    from ray_writers import LLAMA3_TEMPLATE

    from rl_board.readers.chat_text import template_family

    run = tmp_path / "exp" / "rollout_data"
    run.mkdir(parents=True)
    assert template_family(run) is None
    (tmp_path / "exp" / "tokenizer_config.json").write_text(json.dumps({"chat_template": LLAMA3_TEMPLATE}))
    assert template_family(run) == "llama3"
    (run / "chat_template.jinja").write_text("{{ '<|im_start|>' + message['role'] }}")
    assert template_family(run) == "chatml"


def test_a_whole_conversation_with_only_start_markers_is_turns():
    """ChatML with its end markers gone (a decode that drops only those): system, user, the assistant's
    reasoning and Hermes call, the tool response as a tool turn, the answer."""
    user = {"role": "user", "content": "How many people live in Beijing?"}
    text = openrlhf_sample0([{"role": "system", "content": "Be brief."}, user, SEARCH, RESULT, ANSWER])
    assert "<|im_end|>" not in text and text.startswith("<|im_start|>system\n")
    assert _shape(transcript(text)) == [("system", "Be brief.", None, []),
                                        ("user", "How many people live in Beijing?", None, [])] + EXPECTED


def test_llama3_headers_without_eot_are_turns():
    """Llama 3 headers kept, <|eot_id|> and <|begin_of_text|> dropped: one turn per header, ipython a tool turn."""
    messages = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "", "tool_calls": [call("calc")]},
                {"role": "tool", "content": "4"}, {"role": "assistant", "content": "4."}]
    text = openrlhf_sample0(messages, ("<|begin_of_text|>", "<|eot_id|>"),
                            lambda ms: "<|begin_of_text|>" + "".join(map(llama3_message, ms)))
    assert [(t["role"], t["content"]) for t in transcript(text)] == [
        ("user", "2+2?"), ("assistant", ""), ("tool", "4"), ("assistant", "4.")]


def test_text_that_is_not_a_template_s_is_not_turns():
    """No assistant turn, a marker followed by a sentence, or no marker at all: None (the text stays as it is)."""
    assert transcript("<|im_start|>user\nhi") is None
    assert transcript("<|im_start|>What is 5 + 39?<|im_start|>assistant\n44") is None
    assert transcript("user\nhi\nassistant\nhello") is None


def test_user_content_of_each_template_and_none_for_a_bare_question():
    """A prompt as each recognised template renders it (system + user + the generation prompt) gives its
    user text; a tool result is not the user's; a bare question, or one that only mentions a role, gives None."""
    from rl_board.readers.chat_text import user_content

    q = "What is 2 + 3?\nShow your work."
    rendered = {
        "chatml": f"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n",
        "chatml-unmarked": f"system\nBe brief.\nuser\n{q}\nassistant\n",
        "llama3": ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                   f"<|start_header_id|>user<|end_header_id|>\n\n{q}<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n"),
        "llama3-unmarked": f"system\n\nBe brief.user\n\n{q}assistant\n\n",
        "gemma": f"<bos><start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n",
        "phi3": f"<|system|>\nBe brief.<|end|>\n<|user|>\n{q}<|end|>\n<|assistant|>\n",
        "deepseek": f"<｜begin▁of▁sentence｜>Be brief.<｜User｜>{q}<｜Assistant｜><think>\n",
        "mistral": f"<s>[INST] {q} [/INST]",
    }
    for name, text in rendered.items():
        assert user_content(text) == (name, q), name
    two = ("<|im_start|>user\nFirst.<|im_end|>\n<|im_start|>assistant\nOk.<|im_end|>\n"
           "<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>user\nSecond.<|im_end|>\n")
    assert user_content(two) == ("chatml", "First.\n\nSecond.")
    for bare in (q, "Tell the user\nhow an assistant works.", "", None):
        assert user_content(bare) is None
