"""Names of the keys a rollout line may carry, in one place.

A line is one sample. ``step`` and ``reward`` are required; everything else is
optional and may be absent or null.
"""

STEP = "step"
REWARD = "reward"

#: Optional per-sample numbers (float64).
SCALAR_FIELDS = ("ref_reward", "valid_reward", "ref_valid_reward")
#: Every per-sample reward curve the page can draw, in display order.
REWARD_FIELDS = (REWARD,) + SCALAR_FIELDS

#: Optional per-sample text; model output, always shown as plain text.
TEXT_FIELDS = ("prompt", "response", "ref_response", "ground_truth")

#: Optional per-token numbers, one per response token (stored as float32).
TOKEN_FIELDS = ("logprobs", "ref_logprobs", "values", "token_rewards")
#: Optional per-token strings.
TOKENS = "response_tokens"

#: Bookkeeping columns the loader adds to every sample.
FILE = "file"  # index into Run.files
LINE = "line"  # 1-based line number inside that file
