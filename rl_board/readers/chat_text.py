"""Turns from glued text: a decoded conversation split back into canonical turns.

Several trainers (verl's agent loop, SkyRL's eval dumps) keep a multi-turn response as
one decoded string: the assistant's turns and the tool results between them run
together. ``split_turns`` recovers the turns from the chat template's markers:

- **ChatML** (Qwen and others): ``<|im_start|>ROLE\\n … <|im_end|>``. Text before the
  first marker continues the prompt's open turn (the assistant's, for a response).
- **Llama 3**: ``<|start_header_id|>ROLE<|end_header_id|>\\n\\n … <|eot_id|>`` (or
  ``<|eom_id|>``); the ``ipython`` role is a tool turn.
- **Markers dropped by the decode** (``skip_special_tokens=True``, as verl decodes): a
  ChatML tool turn leaves ``user\\n<tool_response>…</tool_response>\\nassistant\\n``
  behind (the assistant's terminator is gone, so ``user`` may follow its text directly);
  a Search-R1 style ``<information>…</information>`` block is a tool turn wherever it is;
  when the run's chat template is Llama 3's (``hint``), a Llama 3 tool turn leaves
  ``ipython\\n\\n … assistant\\n\\n`` behind.

In every turn, ``<tool_response>…</tool_response>`` and ``<information>…</information>``
blocks are tool turns (one per block, the block's inner text); in an assistant turn,
each Hermes ``<tool_call>{"name", "arguments"}</tool_call>`` block is a tool call (a
block that is not JSON is kept as the call's arguments, its name unknown), and a leading
``<think>…</think>`` (or, in a turn holding no ``<think>``, text ending in ``</think>``:
the template opened it) is the turn's reasoning; the content is what is left. Where the markers can't be read (a ``<tool_response>`` block
with no role line before it in marker-less text), the response stays **one assistant
turn** holding the whole text, and ``Split.note`` says why: nothing is lost.

``transcript`` reads a whole conversation logged as one text (prompt included: OpenRLHF's logged
sample, a decoded token sequence) as turns when it keeps the template's start markers or
headers (its end markers may be gone) and holds an assistant turn; text whose markers are all
gone is left whole (``looks_unmarked`` tells it, for a note).

``user_content`` reads a prompt as a chat template rendered it (ChatML, Llama 3, either with its
markers dropped by the decode, Gemma, Mistral's ``[INST]``, DeepSeek's, Phi-3's) and gives its user
turns' text: what a run that logs the bare question logged (``analysis.diff`` matches prompts on it).

``template_family(run_dir)`` reads the chat template beside a run (``chat_template.jinja``
or ``tokenizer_config.json``'s ``chat_template``, in the run folder or its parent) to tell
ChatML from Llama 3 when the text alone does not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..base import fields as F
from ..base.location import as_path
from .turns import tool_call, turn

CHATML = "chatml"
LLAMA3 = "llama3"

_CHATML_HEAD = re.compile(r"<\|im_start\|>([^\n<]*)\n?")
_CHATML_END = ("<|im_end|>", "<|endoftext|>")
_LLAMA_HEAD = re.compile(r"<\|start_header_id\|>(.*?)<\|end_header_id\|>(?:\n\n)?", re.S)
_LLAMA_END = ("<|eot_id|>", "<|eom_id|>", "<|end_of_text|>")
_LLAMA_ROLES = {"ipython": "tool"}
_LLAMA_TOOL_LINE = "ipython\n\n"  # what a dropped header of a tool turn leaves
_LLAMA_ASSISTANT_LINE = "assistant\n\n"
#: A tool result block, and a run of them separated by white space only.
_RESULT = re.compile(r"<(tool_response|information)>(.*?)</\1>", re.S)
_RESULTS = re.compile(r"(?:<(tool_response|information)>.*?</\1>\s*)+", re.S)
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_THINK = re.compile(r"^\s*(?:<think>)?(.*?)</think>", re.S)
#: What a dropped ChatML header leaves before and after a tool turn (``skip_special_tokens``).
_ROLE_BEFORE = re.compile(r"\n?(?:user|tool|observation)\n$")
_ROLE_AFTER = re.compile(r"\s*assistant\n")  # used with match(): anchored at the position
_ROLE = re.compile(r"[A-Za-z_][\w.-]{0,31}")  # what a template's role line holds
_UNMARKED_START = re.compile(r"\s*(?:system|user)\n")


@dataclass
class Split:
    """A text made turns: ``turns`` (canonical turns, in order) and ``note`` (why the text was
    left as one turn, or None)."""

    turns: list[dict] = field(default_factory=list)
    note: str | None = None

    @property
    def is_multi(self) -> bool:
        """Whether the text held any structure: several turns, a tool call or reasoning."""
        return len(self.turns) > 1 or any(t["tool_calls"] or t["reasoning"] for t in self.turns)


def template_family(run_dir: Path) -> str | None:
    """``"chatml"`` or ``"llama3"`` from the chat template beside the run (the run folder or its
    parent), None when there is none or it is neither."""
    for folder in (as_path(run_dir), as_path(run_dir).parent):
        text = None
        try:
            jinja = folder / "chat_template.jinja"
            if jinja.is_file():
                text = jinja.read_text(encoding="utf-8", errors="replace")
            elif (folder / "tokenizer_config.json").is_file():
                config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
                text = config.get("chat_template") if isinstance(config, dict) else None
                if isinstance(text, list):  # named templates: [{"name", "template"}]
                    text = " ".join(t.get("template", "") for t in text if isinstance(t, dict))
        except (OSError, ValueError):
            continue
        if isinstance(text, str):
            if "<|im_start|>" in text:
                return CHATML
            if "<|start_header_id|>" in text:
                return LLAMA3
    return None


def family_of(text: str, hint: str | None = None) -> str | None:
    """The template whose markers ``text`` holds, else ``hint``."""
    if "<|im_start|>" in text or "<|im_end|>" in text:
        return CHATML
    if "<|start_header_id|>" in text or "<|eot_id|>" in text:
        return LLAMA3
    return hint


def split_turns(text: str, first_role: str = "assistant", hint: str | None = None) -> Split:
    """The turns of ``text`` (see the module's docstring); text before any marker is a turn of
    ``first_role``. ``hint``: the run's template family when known."""
    if not isinstance(text, str):
        return Split([turn({"role": first_role, "content": text})])
    family = family_of(text, hint)
    if family == CHATML and "<|im_start|>" in text:
        pieces = _marked(text, _CHATML_HEAD, _CHATML_END, first_role, {})
    elif family == LLAMA3 and "<|start_header_id|>" in text:
        pieces = _marked(text.replace("<|begin_of_text|>", ""), _LLAMA_HEAD, _LLAMA_END, first_role, _LLAMA_ROLES)
    else:
        for end in (*_CHATML_END, *_LLAMA_END):  # a terminator left without its header's start
            text = text.replace(end, "")
        got = _unmarked_llama(text, first_role) if hint == LLAMA3 and _LLAMA_TOOL_LINE in text else \
            _unmarked(text, first_role)
        if isinstance(got, str):
            return Split([turn({"role": first_role, "content": text})], got)
        pieces = got
    out = []
    for role, content in pieces:
        out.extend(_turns_of(role, content))
    return Split(out or [turn({"role": first_role, "content": ""})])


_UNMARKED_PROMPT = re.compile(r"(?:system\n(.*?)\n)?user\n(.*)\nassistant\n?", re.S)


def split_prompt(text) -> list[dict]:
    """A prompt's turns: split at its markers when it has them (the open turn it ends with
    dropped); a ChatML prompt decoded without its markers (verl's ``skip_special_tokens``), the whole
    text ``[system\nS\n]user\nU\nassistant\n``, as its system and user turns; else one user turn."""
    if isinstance(text, str) and ("<|im_start|>" in text or "<|start_header_id|>" in text):
        got = split_turns(text, first_role="user").turns
        while got and got[-1]["role"] == "assistant" and not got[-1]["content"] and not got[-1]["tool_calls"]:
            got.pop()
        if got and got[0]["role"] == "user" and not got[0]["content"]:
            got.pop(0)
        if got:
            return got
    unmarked = _UNMARKED_PROMPT.fullmatch(text) if isinstance(text, str) else None
    if unmarked is not None:
        system, user = unmarked.groups()
        return ([turn({"role": "system", "content": system})] if system is not None else []) + [
            turn({"role": "user", "content": user})]
    return [turn({"role": "user", "content": text})]


#: Chat templates told by markers no question holds by chance: (name, a user turn's text as group 1).
_USER_TURNS = (
    ("gemma", re.compile(r"<start_of_turn>user\n(.*?)(?:<end_of_turn>|<start_of_turn>|$)", re.S)),
    ("phi3", re.compile(r"<\|user\|>\n?(.*?)(?:<\|end\|>|<\|assistant\|>|$)", re.S)),
    ("deepseek", re.compile(r"<｜User｜>(.*?)(?=<｜Assistant｜>|<｜User｜>|$)", re.S)),
    ("mistral", re.compile(r"\[INST\](.*?)\[/INST\]", re.S)),
)
#: Llama 3's prompt decoded without its headers: ``[system\n\nS]user\n\nU assistant\n\n`` (no newline
#: before ``assistant``: ``<|eot_id|>`` ended the user's text), the whole text.
_UNMARKED_LLAMA_PROMPT = re.compile(r"(?:system\n\n(.*?))?user\n\n(.*)assistant\n\n", re.S)


def user_content(text) -> tuple[str, str] | None:
    """(the template's name, the text of ``text``'s user turns joined by a blank line, white space
    around it removed) when ``text`` is a prompt as a chat template renders it: ChatML or Llama 3 with
    their markers (``chatml``, ``llama3``), or as ``skip_special_tokens`` left them (``chatml-unmarked``:
    ``[system\nS\n]user\nU\nassistant\n``; ``llama3-unmarked``: ``[system\n\nS]user\n\nUassistant\n\n``,
    each the whole text), Gemma's ``<start_of_turn>user``, Phi-3's ``<|user|>``, DeepSeek's ``<｜User｜>``,
    Mistral's ``[INST] … [/INST]``; None for any other text (a bare question) or a template with no user
    turn. Tool results (``<tool_response>`` blocks) are not the user's."""
    if not isinstance(text, str):
        return None
    if "<|im_start|>" in text or "<|start_header_id|>" in text:
        family = CHATML if "<|im_start|>" in text else LLAMA3
        turns = split_turns(text, first_role="user").turns
        users = [t["content"] for t in turns if t["role"] == "user" and isinstance(t["content"], str)]
        if roles_read(turns) and users:
            return family, "\n\n".join(users).strip()
        return None
    for name, pattern in (("chatml-unmarked", _UNMARKED_PROMPT), ("llama3-unmarked", _UNMARKED_LLAMA_PROMPT)):
        whole = pattern.fullmatch(text)
        if whole is not None:
            return name, whole.group(2).strip()
    for name, pattern in _USER_TURNS:
        users = [m.group(1) for m in pattern.finditer(text)]
        if users:
            return name, "\n\n".join(u.strip() for u in users).strip()
    return None


def transcript(text) -> list[dict] | None:
    """The turns of a whole conversation logged as one text (prompt and response together, as
    OpenRLHF logs its sample: the sequence decoded with ``skip_special_tokens=True``), when the text
    keeps ChatML start markers (``<|im_start|>ROLE``; the end markers may be gone) or Llama 3 headers
    (``<|eot_id|>`` may be gone) and holds an assistant turn; None otherwise (the text stays one
    response): text whose every marker the decode dropped can't be told from a message that
    mentions a role."""
    if not isinstance(text, str) or ("<|im_start|>" not in text and "<|start_header_id|>" not in text):
        return None
    got = split_turns(text, first_role="user")
    if got.note is not None or not any(t["role"] == "assistant" for t in got.turns) or not roles_read(got.turns):
        return None
    return got.turns


def roles_read(turns: list[dict]) -> bool:
    """Whether every turn's role is a role name (a word, as templates write them): a marker followed
    by other text (``<|im_start|>What is 5 + 39?``) was not a template's."""
    return all(t["role"] is not None and _ROLE.fullmatch(t["role"]) for t in turns)


def looks_unmarked(text) -> bool:
    """Whether ``text`` looks like a whole ChatML conversation whose markers a decode dropped altogether
    (``system``/``user`` on its first line, an ``assistant`` line later, no marker): not split, since its
    role words can't be told from text that mentions them; the TensorBoard reader notes how many it kept
    whole (W&B's tables, one file a step, would repeat the note per file)."""
    return (isinstance(text, str) and _UNMARKED_START.match(text) is not None and "\nassistant\n" in text
            and "<|im_start|>" not in text and "<|start_header_id|>" not in text)


UNMARKED_NOTE = ("{count} logged text(s) hold a whole conversation whose chat-template markers the decode dropped "
                 "(skip_special_tokens=True with a tokenizer that flags them special): each is kept as one "
                 "response, since its role words can't be told from text that mentions them.")


def with_turns(row: dict) -> dict:
    """A canonical row whose response is a whole conversation with its markers (and which has no
    prompt of its own) with that conversation as its turns (``transcript``): the prompt and the
    response then come from the turns; any other row as it is."""
    turns = transcript(row["response"]) if row["prompt"] is None else None
    return row if turns is None else {**row, "response": None, F.MESSAGES: turns}


def content_turns(role: str, content: str) -> list[dict]:
    """The canonical turns of one message's text: its ``<tool_response>`` blocks as tool turns, an
    assistant's Hermes calls and reasoning taken out of its text (as in ``split_turns``)."""
    return _turns_of(role, content)


def _strip_end(content: str, ends) -> str:
    for end in ends:
        cut = content.find(end)
        if cut >= 0:
            content = content[:cut]
    return content


def _marked(text: str, head: re.Pattern, ends, first_role: str, roles: dict) -> list[tuple[str, str]]:
    """(role, content) of each turn of text that keeps its markers."""
    pieces = []
    heads = list(head.finditer(text))
    lead = _strip_end(text[:heads[0].start()], ends) if heads else text
    if lead.strip():
        pieces.append((first_role, lead))
    for k, match in enumerate(heads):
        stop = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        role = match.group(1).strip() or first_role
        pieces.append((roles.get(role, role), _strip_end(text[match.end():stop], ends)))
    return pieces


def _unmarked(text: str, first_role: str) -> list[tuple[str, str]] | str:
    """(role, content) of each turn of text whose headers the decode dropped, or why it can't be split."""
    pieces, position = [], 0
    for match in _RESULTS.finditer(text):
        before = text[position:match.start()]
        role_line = _ROLE_BEFORE.search(before)
        bare_information = all(m.group(1) == "information" for m in _RESULT.finditer(match.group(0)))
        if role_line is None and not bare_information:
            return ("a <tool_response> block has no role line before it (the chat template's markers are "
                    "gone and none of the template's own text is left): kept as one turn")
        if role_line is not None:
            before = before[:role_line.start()]
        if before.strip():
            pieces.append((first_role, before))
        pieces.append(("tool", match.group(0)))
        position = match.end()
        after = _ROLE_AFTER.match(text, position) if role_line is not None else None
        if after is not None:
            position = after.end()
    rest = text[position:]
    if rest.strip() or not pieces:
        pieces.append((first_role, rest))
    return pieces


def _unmarked_llama(text: str, first_role: str) -> list[tuple[str, str]]:
    """(role, content) of each turn of Llama 3 text whose headers the decode dropped: a tool result is
    what follows ``ipython\n\n`` up to the next ``assistant\n\n`` (used only when the run's chat
    template is Llama 3's: these words alone prove nothing)."""
    pieces = []
    for k, chunk in enumerate(text.split(_LLAMA_TOOL_LINE)):
        if k == 0:
            if chunk.strip():
                pieces.append((first_role, chunk))
            continue
        result, sep, rest = chunk.partition(_LLAMA_ASSISTANT_LINE)
        pieces.append(("tool", result))
        if sep and rest.strip():
            pieces.append((first_role, rest))
    return pieces


def _turns_of(role: str, content: str) -> list[dict]:
    """The canonical turns of one (role, content): tool result blocks as tool turns; an assistant
    turn's tool calls and reasoning taken out of its text."""
    results = list(_RESULT.finditer(content))
    if results and (role in ("user", "tool", "observation") or not _RESULT.sub("", content).strip()):
        rest = _RESULT.sub("", content).strip()
        own = [turn({"role": role, "content": rest})] if rest and role != "tool" else []
        return own + [turn({"role": "tool", "content": m.group(2).strip("\n")}) for m in results]
    if role != "assistant":
        return [turn({"role": role, "content": content.strip("\n")})]
    reasoning = None
    # a leading <think> block, or text ending in </think> when the template opened it (no <think> in the turn)
    opened = content.lstrip().startswith("<think>") or "<think>" not in content
    think = _THINK.match(content) if "</think>" in content and opened else None
    if think is not None:
        reasoning = think.group(1).strip("\n")
        content = content[think.end():]
    calls = [tool_call(m.group(1).strip()) for m in _CALL.finditer(content)]
    content = _CALL.sub("", content).strip()
    got = turn({"role": "assistant", "content": content, "reasoning": reasoning})
    got["tool_calls"] = calls
    return [got]
