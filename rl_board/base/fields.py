"""Names of the canonical fields of a sample, in one place.

Every reader (see ``readers/``) turns its source into rows of these fields. A
sample needs ``step`` and ``reward``; everything else is optional. Any other
top-level numeric or boolean field of a source becomes an *extra* (stored as
``EXTRA_PREFIX + name``, float64, booleans as 0/1).
"""

STEP = "step"
REWARD = "reward"

#: Optional per-sample numbers (float64).
SCALAR_FIELDS = ("ref_reward", "valid_reward", "ref_valid_reward")
#: Every per-sample reward curve the page can draw, in display order.
REWARD_FIELDS = (REWARD,) + SCALAR_FIELDS

#: Optional per-sample text; model output, always shown as plain text.
TEXT_FIELDS = ("prompt", "response", "ref_response", "ground_truth")

#: Optional per-token numbers, one per response token. A sample's positions are the
#: first n, n = the length of the shortest of these lists present.
TOKEN_FIELDS = ("logprobs", "ref_logprobs", "values", "token_rewards", "rollout_logprobs", "entropy",
                "advantages", "mismatch_kl", "importance_ratio")
#: Per-token numbers the trainer computed and logged: shown in the token view, never aggregated.
LOGGED_TOKEN_FIELDS = ("advantages", "mismatch_kl", "importance_ratio")
#: The per-token lists that hold log-probabilities (never above 0: a load check counts those that are).
LOGPROB_FIELDS = ("logprobs", "ref_logprobs", "rollout_logprobs")
#: Optional per-token strings.
TOKENS = "response_tokens"
#: Optional per-token ids, decoded with the run's tokenizer when the sample has no ``response_tokens``.
TOKEN_IDS = "token_ids"
#: Optional per-token loss mask (true or 1 = trained): the sample's counted positions when present.
LOSS_MASK = "loss_mask"

#: Every canonical name a source field can be mapped to.
CANONICAL = (STEP, *REWARD_FIELDS, *TEXT_FIELDS, *TOKEN_FIELDS, TOKENS, TOKEN_IDS, LOSS_MASK)

#: Optional conversation of an agent sample: an ordered list of turns, each {role, content, reasoning,
#: tool_calls [{id, name, arguments}], tool_call_id, trainable} (see ``readers.turns``). Readers of
#: agent formats fill it; it is not a field mapping target.
MESSAGES = "messages"
#: Extras derived from ``messages`` (``derive``): the assistant turns, and the tool calls of all of them.
NUM_TURNS = "num_turns"
NUM_TOOL_CALLS = "num_tool_calls"

#: canonical name <- the source keys used, the first present, when the canonical key is absent
#: (verl's dumps, prime-rl's token exports, NeMo-RL's step files and others).
ALIASES: dict[str, tuple[str, ...]] = {
    "prompt": ("input",),
    "response": ("output",),
    REWARD: ("score",),
    "ground_truth": ("gts",),
    "rollout_logprobs": ("rollout_log_probs", "inference_logprobs", "generation_logprobs"),
    "logprobs": ("trainer_logprobs", "prev_logprobs"),
    "ref_logprobs": ("reference_logprobs",),
    LOSS_MASK: ("mask", "token_loss_mask", "response_mask"),
}

#: Extra fields are stored under this prefix so a user's field can never collide with a derived column.
EXTRA_PREFIX = "extra:"

#: Bookkeeping columns the loader adds to every sample.
FILE = "file"  # index into Run.files
LINE = "line"  # 1-based line number inside that file (the 1-based row for a table file)
#: A sample's place among the samples of its line, where one line holds several (ROLL's line of columns:
#: its row; a wide W&B row: its number's group), 0-based; -1 for a line that holds one sample.
POSITION = "position"


def address(file: str, line: int, position: int = -1) -> str:
    """A sample's one address, used alike by evidence, links, tags, search and export: ``FILE:LINE``,
    or ``FILE:LINE#K`` for the sample at position K (0-based) of a line that holds several."""
    return f"{file}:{int(line)}" if position is None or position < 0 else f"{file}:{int(line)}#{int(position)}"


def parse_address(text: str) -> tuple[str, int, int] | None:
    """(file, line, position: -1 for none) of an ``address``; None when ``text`` is not one."""
    head, sharp, position = text.rpartition("#") if "#" in text.rpartition(":")[2] else (text, "", "")
    name, _, line = head.rpartition(":")
    if not name or not line.isdigit() or (sharp and not position.isdigit()):
        return None
    return name, int(line), int(position) if sharp else -1


def addresses(files, frame) -> list[str]:
    """The ``address`` of each sample of ``frame`` (rows of ``Run._samples``; ``files`` names their
    ``file`` index)."""
    positions = frame[POSITION] if POSITION in frame else [-1] * len(frame)
    return [address(files[int(f)], int(line), int(k)) for f, line, k in zip(frame[FILE], frame[LINE], positions)]


def extra_column(name: str) -> str:
    """The column that stores extra field ``name``."""
    return EXTRA_PREFIX + name


def extra_name(column: str) -> str:
    """The extra field a column stores (``column`` without the prefix)."""
    return column[len(EXTRA_PREFIX):]


def extra_columns(columns) -> list[str]:
    """The extra-field columns among ``columns``, in their order."""
    return [c for c in columns if isinstance(c, str) and c.startswith(EXTRA_PREFIX)]

#: Every fault kind of a conversation, in bit order (bit i of the ``fault_kinds`` column is ``FAULT_KINDS[i]``;
#: what each means and how it is found: ``derive.faults``), and the filter that keeps any of them.
FAULT_KINDS = ("tool_error", "tool_loop", "malformed_tool_call", "truncated", "empty_final_answer", "images_dropped")
ANY_FAULT = "any"
