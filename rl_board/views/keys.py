"""Widget keys, in one place so views and tests agree on them."""

ROOT = "root"
RUN = "run"
OPEN_RUN = "open_run_"  # + the row's index: the runs list's button that opens that run
MAX_SAMPLES = "max_samples"
FIELD_MAP = "field_map"
LOAD = "load"
REFRESH = "refresh"
AUTO_REFRESH = "auto_refresh"
AUTO_REFRESH_SECONDS = "auto_refresh_seconds"
FOLLOW_NEWEST = "follow_newest"

SHOW_REWARD_CURVES = "show_reward_curves"
REWARD_FIELDS = "reward_fields"
STD_SCALE = "std_scale"
CLIP_BANDS = "clip_bands"
ZERO_SHIFT = "zero_shift"
SMOOTHING = "smoothing"
DIAGNOSTIC_CURVES = "diagnostic_curves"
SHOW_STEP_TABLE = "show_step_table"
SHOW_COMPARISON = "show_comparison"
KL_ESTIMATOR = "kl_estimator"
USE_LOG_RATIO = "use_log_ratio"
DROP_PAD = "drop_pad"
PAD_TOKEN = "pad_token"
EOS_TOKEN = "eos_token"
TOKENIZER = "tokenizer"
DROP_SYSTEM = "drop_system"
SYSTEM_MARKER = "system_marker"
SHOW_CHARTS = "show_charts"
SHOW_TABLE = "show_table"
SHOW_PAIR = "show_pair"
SHOW_HEATMAP = "show_heatmap"

STEP = "step"
SPLIT = "split"  # the split read, for a format that has them (train, eval, train/all…)
SORT_BY = "sort_by"
SORT_DESCENDING = "sort_descending"
SAMPLE = "sample"
TOKEN_METRICS = "token_metrics"
EXTRA_CURVES = "extra_curves"
GAMMA = "gae_gamma"
LAMBDA = "gae_lambda"
COLOR_BY = "color_tokens_by"
TOKEN_RANGE = "token_range"  # the positions the heatmap draws (a long response)
TURN_COLOR_BY = "color_turn_tokens_by"  # the turn view's own choice (the token view below has COLOR_BY)
SHOW_DRIVERS = "show_drivers"
SHOW_POSITIONS = "show_positions"
DRIVERS_NGRAMS = "drivers_ngrams"  # the n-gram finder compares: top vs bottom of the step, or late vs early steps
FINDING_OPEN = "finding_open"  # the finding whose evidence is shown (its kind, numbered after a kind's first)
EXPLORE_REGEX = "explore_regex"
EXPLORE_FIELD = "explore_field"
EXPLORE_COLUMN = "explore_column"
EXPLORE_LOW = "explore_low"
EXPLORE_HIGH = "explore_high"
EXPLORE_STEPS = "explore_steps"
EXPLORE_TOP = "explore_top"
EXPLORE_ORDER = "explore_order"
EXPLORE_TRUNCATED = "explore_truncated"
SHOW_HISTORY = "show_prompt_history"
GROUP_BATCH = "group_batch"
COMPARE_RUNS = "compare_runs"
COMPARE_PATH = "compare_path"  # a run folder typed to compare with, from anywhere the board may read
COMPARE_ALIGN = "compare_align"  # align compared runs by step or by progress
METRICS_PATH = "metrics_path"
METRICS_GROUP = "metrics_group"
METRICS_SERIES = "metrics_series"
METRICS_OVERLAY = "metrics_overlay"  # the rollout curve a trainer series is drawn over
METRICS_OVERLAY_SERIES = "metrics_overlay_series"

#: The page's areas: a tab each (``main.AREAS`` says what each holds); ``AREA`` is the open one's label.
AREA = "area"
OVERVIEW = "Run overview"
BATCH = "Batch and sample"
EXPLORE = "Explore"
TRAINER = "Trainer metrics"
COMPARE = "Compare runs"
DIFF = "Diff"

#: session_state entry (not a widget): the run folder the user last loaded.
LOADED_RUN = "loaded_run"

# The same prompt across steps and runs (views/prompts.py)
SHOW_PROMPT_COMPARE = "show_prompt_compare"
PROMPT_FIND = "prompt_find"  # a regular expression that finds another prompt
PROMPT_PICK = "prompt_pick"  # the prompt found (its prompt key)
PROMPT_RUNS = "prompt_runs"  # other runs searched for it
PROMPT_REFERENCE = "prompt_reference"  # the response the others are compared with
PROMPT_STEPS = "prompt_steps"
PROMPT_SHOWN = "prompt_shown"  # responses drawn per run

# Tags and notes (views/tags.py); the tag and note widgets of a sample are TAGS/NOTE + ":" + FILE:LINE
TAGS = "tags"
NOTE = "note"
SHOW_TAGGED = "show_tagged"
TAGGED_FILTER = "tagged_filter"
EXPLORE_TAG = "explore_tag"
EXPLORE_FAULT = "explore_fault"
BATCH_FAULT = "batch_fault"

# Diff by prompt (views/diff.py)
DIFF_RUN = "diff_run"  # run B, by its name under the root
DIFF_STEPS = "diff_steps"  # A's steps, typed A:B
DIFF_STEPS_B = "diff_steps_b"  # B's steps, typed A:B
DIFF_PROMPT = "diff_prompt"  # the prompt opened (its prompt key)
