"""The ``rl-board`` command line's one parser: every command, its arguments and their help."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..base.access import is_url
from ..base.defaults import AUTO, EOS_TOKEN, MAX_REPORT_SAMPLES, PAD_TOKEN, REPORT_SAMPLES, token_option
from ..base.fields import ANY_FAULT as ANY
from ..base.fields import FAULT_KINDS as KINDS

# Heavy modules (pandas, pyarrow, the readers) are imported where used: a command that reads a run
# starts its parsing workers first, so their start overlaps this process's own imports.
READS_A_RUN = ("summary", "search", "findings", "tags", "report", "diff")


SEARCH_SHOWN = 50  # matches ``search`` prints without --limit
DIFF_SHOWN = 10  # regressions and improvements ``diff`` prints each, with their responses

FORMATS = ("board", "verl", "trl", "prime-rl", "art", "prime-rl-tokens")


def run_location(text: str) -> Path | str:
    """A run argument: a URL (``s3://bucket/runs/a``, ``hf://datasets/ORG/NAME``) as written, else a local path."""
    return text if is_url(text) else Path(text)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _old_steps_count(text: str) -> int:
    """``generate --steps N``, the count's deprecated spelling: a range there is refused, naming --num-steps."""
    try:
        return _positive_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: generate's count of steps is --num-steps N "
                                         "(--steps A:B is a range in search, diff and report)") from None


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be at least 0")
    return value


def _token_arguments(parser: argparse.ArgumentParser, pad_help: str = "positions from this token on are not "
                                                                             "counted") -> None:
    """``--pad-token`` and ``--eos-token``, with the page's defaults (``defaults``); ``none`` turns either off."""
    parser.add_argument("--pad-token", default=AUTO, type=token_option,
                        help=f"{pad_help} (default auto: the pad_token of the tokenizer_config.json beside the "
                             f"run's tokenizer.json, its EOS when it has none, else {PAD_TOKEN}; 'none': no pad token)")
    parser.add_argument("--eos-token", default=AUTO, type=token_option,
                        help=f"the model's end-of-sequence token: it is counted (it carries the reward) and the "
                             f"positions after it are not; it may equal --pad-token, whose first occurrence is "
                             f"then the EOS (default auto: that tokenizer_config.json's eos_token, else "
                             f"{EOS_TOKEN}; 'none': no EOS)")


def _run_arguments(parser: argparse.ArgumentParser, two_runs: bool = False, **token_help) -> None:
    """What every command that reads a run takes: the run folder (``two_runs``: RUN_A and RUN_B, both
    read the same way) and how it is read (the page's options)."""
    if two_runs:
        parser.add_argument("run_dir", type=run_location, metavar="RUN_A")
        parser.add_argument("run_b", type=run_location, metavar="RUN_B", help="may be RUN_A again (with --steps-b)")
    else:
        parser.add_argument("run_dir", type=run_location)
    _token_arguments(parser, **token_help)
    parser.add_argument("--max-samples-per-step", type=_positive_int, default=None)
    parser.add_argument("--tokenizer", default=None, metavar="PATH",
                        help="the tokenizer.json (or a model folder holding one) that decodes token ids; "
                             "default: one found in the run folder or up to two folders above")
    parser.add_argument("--field", action="append", default=[], metavar="CANONICAL=SOURCE",
                        help="read the board's field CANONICAL from your key SOURCE (repeatable), "
                             "e.g. --field reward=my_score")
    parser.add_argument("--split", default=None, metavar="NAME",
                        help="the split to read (train, eval, train/all…), for a format that has them")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the columnar cache")
    parser.add_argument("--max-extra-fields", type=_positive_int, default=None, metavar="N",
                        help="extra-field columns a run makes at most (sets RL_BOARD_MAX_EXTRA_FIELDS; default 256)")


def command_parser(command: str) -> argparse.ArgumentParser:
    """The parser of one command (``summary``…), whose actions name its parameters and their defaults."""
    parser = _parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[command]


def command_args(command: str, values: dict) -> argparse.Namespace:
    """The arguments of ``command`` as its parser would give them, made from ``values`` ({dest: value}, the
    names of the command's ``args``: ``run_dir``, ``pad_token``, ``field``…) over its defaults, without a
    command line: a text value goes through its argument's type (``run_location``, ``token_option``…), a
    choice is checked. ``ValueError`` naming the argument for a name the command does not take, a value
    its type refuses or one not among its choices. ``--json`` is set where the command has it."""
    actions = {a.dest: a for a in command_parser(command)._actions if a.dest != "help"}
    args = {dest: list(a.default) if isinstance(a.default, list) else a.default for dest, a in actions.items()}
    for dest, value in values.items():
        if dest not in actions:
            raise ValueError(f"{command} takes no {dest}")
        action = actions[dest]
        flag = action.option_strings[-1] if action.option_strings else action.metavar or dest
        try:
            value = [_typed(action, v) for v in value] if isinstance(value, list) else _typed(action, value)
        except (argparse.ArgumentTypeError, TypeError, ValueError) as exc:
            raise ValueError(f"{flag}: invalid value {value!r}: {exc}") from None
        if action.choices is not None and value is not None and value not in action.choices:
            raise ValueError(f"{flag}: invalid choice {value!r} (choose from {', '.join(map(str, action.choices))})")
        args[dest] = value
    if "json" in args:
        args["json"] = True
    return argparse.Namespace(command=command, **args)


def _typed(action: argparse.Action, value):
    """``value`` through ``action``'s type as the command line would give it: a text or a number (as its text,
    so ``_positive_int`` refuses a 0 whichever way it came); a path, a list or None as it is."""
    if action.type is None or isinstance(value, bool) or not isinstance(value, str | int | float):
        return value
    return action.type(value if isinstance(value, str) else str(value))


def _parser() -> argparse.ArgumentParser:
    """Every command and its arguments, in the order ``--help`` lists them. Longer than ~80 lines on
    purpose: one declaration per argument, read top to bottom as the CLI reference (docs/cli.md) is."""
    parser = argparse.ArgumentParser(prog="rl-board", description="RL Logging Board: token-level views of RL rollouts.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="start the page (Streamlit) with ROOT preselected")
    serve.add_argument("root", nargs="?", type=run_location, default=None,
                       help="folder (or URL: s3://bucket/runs) of runs shown first")
    serve.add_argument("--port", type=int, default=8901)
    serve.add_argument("--address", default="127.0.0.1",
                       help="address to listen on; anyone who can reach it can read any log file the app can")
    serve.add_argument("--roots", default=None, metavar="DIR[:DIR…]",
                       help="only folders inside these can be listed or loaded (sets RL_BOARD_ROOTS); "
                            "set it whenever the address is not 127.0.0.1")
    summary = sub.add_parser("summary", help="per-step statistics of one run folder")
    summary.add_argument("--json", action="store_true", help="print one JSON object")
    _run_arguments(summary)
    search = sub.add_parser("search", help="samples of a run whose text matches a regular expression")
    search.add_argument("--regex", default=None, help="an RE2 regular expression; (?i) for case-insensitive")
    search.add_argument("--truncated", action="store_true",
                        help="only truncated responses (no EOS among the counted positions, which fill the lists)")
    search.add_argument("--has-images", action="store_true",
                        help="only samples with an image in their turns (bytes, a URL or a path; see docs/images.md)")
    search.add_argument("--tag", default=None,
                        help="only samples carrying this tag ('*': every tagged sample); see the tags command")
    search.add_argument("--fault", default=None, choices=(*KINDS, ANY), metavar="KIND",
                        help="only trajectories with a fault of this kind: " + ", ".join(KINDS)
                             + ", or any (docs/faults.md); --json then lists each sample's faults")
    search.add_argument("--in", dest="text_field", default="response", metavar="FIELD",
                        help="the text searched: prompt, response, ref_response, ground_truth, messages (any "
                             "turn's content or tool-call arguments) or a text field of the run such as "
                             "judge_rationale, read again from the source (docs/formats/jsonl.md)")
    search.add_argument("--steps", default=None, metavar="A:B",
                        help="only steps A to B, both included; either end may be left out (100: or :200)")
    search.add_argument("--range", dest="ranges", action="append", default=[], metavar="NAME=LOW:HIGH",
                        help="only samples whose number NAME lies in [LOW, HIGH]; either end may be left out "
                             "(repeatable); NAME is reward, kl_mean, log_ratio_mean, response_len, reward_gap, "
                             "another number the page sorts by, or an extra field's name")
    search.add_argument("--sort", default=None, metavar="NAME",
                        help="order the matches by this number, highest first (a NAME as for --range, or 'log "
                             "order'); default: step, file and line order")
    search.add_argument("--ascending", action="store_true", help="with --sort: lowest first")
    search.add_argument("--limit", type=_positive_int, default=None, metavar="N",
                        help=f"print the first N matches (default {SEARCH_SHOWN}; with --json, every match "
                             "unless given)")
    search.add_argument("--json", action="store_true", help="print one JSON object")
    _run_arguments(search, pad_help="removed from the texts before matching; positions from it on are not counted")
    diff = sub.add_parser("diff", help="two runs, or two step ranges of one run, prompt by prompt: each prompt's "
                                       "mean reward in A and B, regressions first")
    diff.add_argument("--steps", default=None, metavar="A:B",
                      help="only steps A to B of RUN_A (and of RUN_B unless --steps-b), both included; either end "
                           "may be left out (100: or :200)")
    diff.add_argument("--steps-b", default=None, metavar="A:B", help="only steps A to B of RUN_B")
    diff.add_argument("--by", choices=("prompt", "id"), default="prompt",
                      help="match samples by their prompt's text with pads removed (by its user content when "
                           "either run wraps its prompts in a chat template), or by the prompt id the "
                           "trainer logs (a number named uid, index, idx, example_id, prompt_id, problem_id or "
                           "id; TRL: its prompt column)")
    diff.add_argument("--min-samples", type=_positive_int, default=1, metavar="N",
                      help="leave out (and count) the prompts with fewer than N samples on either side")
    diff.add_argument("--json", action="store_true", help="print one JSON object: settings, counts and every "
                                                          "matched prompt, most negative delta first")
    _run_arguments(diff, two_runs=True, pad_help="removed from the prompts before they are matched; positions "
                                                 "from it on are not counted")
    findings = sub.add_parser("findings", help="what went wrong in a run, most worrying first: reward hacking (of "
                                               "the total or one component, by repetition), KL runaway, length "
                                               "growth, critics that can't fit, entropy collapse, sampler mismatch, "
                                               "agents that stop using or loop on tools, dead GRPO groups, empty "
                                               "responses")
    findings.add_argument("--json", action="store_true", help="print one JSON object: the settings used and the findings")
    _run_arguments(findings)
    report = sub.add_parser("report", help="one self-contained HTML file of a run to share: its recap, main curves, "
                                           "every finding with its evidence and samples, and how it was made "
                                           "(opens in any browser, with no network)")
    report.add_argument("-o", "--output", default=None, metavar="FILE.html",
                        help="the file written (default RUN_NAME.report.html in the current folder, RUN_NAME the name of "
                             "the run's folder; '-': standard output); nothing is written when no line loads")
    report.add_argument("--steps", default=None, metavar="A:B",
                        help="the recap and curves cover steps A to B, both included (either end may be left "
                             "out); the findings are always the whole run's")
    report.add_argument("--samples", type=_non_negative_int, default=REPORT_SAMPLES, metavar="N",
                        help=f"samples shown under each finding (default {REPORT_SAMPLES}, at most "
                             f"{MAX_REPORT_SAMPLES}; 0: none)")
    report.add_argument("--full-path", action="store_true",
                        help="name the run by its absolute local path in the report (default: its folder's name "
                             "only, and each absolute path of the command shortened to .../NAME)")
    _run_arguments(report)
    mcp = sub.add_parser("mcp", help="a Model Context Protocol server on stdio for coding agents: runs, summary, "
                                     "findings, search, a sample, the trainer's metrics as JSON (needs the "
                                     "mcp extra: pip install 'rl-board[mcp]')")
    mcp.add_argument("--roots", default=None, metavar="DIR[:DIR…]",
                     help="only runs inside these folders can be listed or read (sets RL_BOARD_ROOTS; default: "
                          "RL_BOARD_ROOTS as set, else every folder this process can read)")
    index = sub.add_parser("index", help="read a run into its cache now (on a Ray cluster with --ray), so the page "
                                         "and the commands open it without reading the logs")
    index.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                       help="hand the byte ranges to Ray tasks on this cluster (auto: the one this machine is on; "
                            "HOST:PORT, ray://HOST:PORT; local: start one here); sets RL_BOARD_RAY for this read")
    index.add_argument("--json", action="store_true", help="print one JSON object")
    _run_arguments(index)
    tags = sub.add_parser("tags", help="the tags and notes put on a run's samples: list them, export them as a "
                                       "JSONL eval set, or tag a sample")
    tags.add_argument("--tag", default=None, help="only the samples carrying this tag (listing and export)")
    tags.add_argument("--export", action="store_true",
                      help="print the tagged samples as a JSONL eval set (prompt, response, reward, tags, note…)")
    tags.add_argument("--json", action="store_true", help="print one JSON object")
    tags.add_argument("--sample", default=None, metavar="FILE:LINE[#K]",
                      help="the sample to tag (with --add, --remove, --note); #K picks the K-th (from 0) of a line's "
                           "several samples")
    tags.add_argument("--add", action="append", default=[], metavar="TAG", help="add this tag (repeatable)")
    tags.add_argument("--remove", action="append", default=[], metavar="TAG", help="remove this tag (repeatable)")
    tags.add_argument("--note", default=None, help="replace the sample's note ('' removes it)")
    _run_arguments(tags, pad_help="removed from the exported prompts and responses; positions from it on are not "
                                  "counted")
    metrics = sub.add_parser("metrics", help="the trainer's own scalars: TRL, verl, TensorBoard or a metrics JSONL")
    metrics.add_argument("path", type=run_location, help="a file, or a folder holding one")
    metrics.add_argument("--json", action="store_true", help="print one JSON object")
    metrics.add_argument("--warnings", action="store_true",
                         help="also list the warning signs (docs: The page, Trainer metrics)")
    metrics.add_argument("--ratio-max", type=float, default=None, help="policy ratio threshold (default 10)")
    metrics.add_argument("--clip-max", type=float, default=None, help="clip fraction threshold (default 0.3)")
    metrics.add_argument("--spike-k", type=float, default=None, help="robust deviations for a spike (default 6)")
    metrics.add_argument("--entropy-fraction", type=float, default=None,
                         help="entropy collapse below this fraction of its early mean (default 0.2)")
    metrics.add_argument("--kl-noise-k", type=float, default=None,
                         help="negative KL below 0 by more than this many noise scales of the series (default 3)")
    runs = sub.add_parser("runs", help="every run under a root folder, at any depth, as the page's runs list and "
                                       "the MCP runs tool list them")
    runs.add_argument("root", nargs="?", type=run_location, default=None,
                      help="the root folder (default: every folder RL_BOARD_ROOTS allows)")
    runs.add_argument("--json", action="store_true", help="print one JSON object")
    detect = sub.add_parser("detect", help="the reader that opens a folder, its files, splits and steps; "
                                           "or why no reader opens it and what to try")
    detect.add_argument("run_dir", type=run_location)
    detect.add_argument("--json", action="store_true", help="print one JSON object")
    cache = sub.add_parser("cache", help="list the columnar cache, or clear it (all of it, or one run's)")
    cache.add_argument("action", choices=("list", "clear"))
    cache.add_argument("run_dir", nargs="?", type=run_location, default=None, help="only this run's caches")
    cache.add_argument("--json", action="store_true")
    generate = sub.add_parser("generate", help="write demo runs (the bundled rollout_samples/)")
    generate.add_argument("out", type=Path)
    generate.add_argument("--format", choices=FORMATS, default=None,
                          help="write one small run in this trainer's shape (board: OpenRLHF-style ranks, "
                               "verl: {step}.jsonl dumps, trl: completions_*.parquet, prime-rl: agent episodes "
                               "in rollouts/step_N/, art: agent trajectories in trajectories/train/, "
                               "prime-rl-tokens: token_exports/step_N/rank_R.jsonl with its tokenizer.json)")
    generate.add_argument("--num-steps", type=_positive_int, default=None, metavar="N",
                          help="write one PPO run of this many steps")
    generate.add_argument("--steps", type=_old_steps_count, default=None, dest="old_steps", metavar="N",
                          help="deprecated: the old spelling of --num-steps (in search, diff and report --steps is "
                               "a range of steps, A:B)")
    generate.add_argument("--samples", type=_positive_int, default=256)
    generate.add_argument("--tokens", type=_positive_int, default=200)
    generate.add_argument("--ranks", type=_positive_int, default=4)
    generate.add_argument("--full-precision", action="store_true", help="write floats in full, as trainers do")
    generate.add_argument("--force", action="store_true",
                          help="write even into a folder holding files generate did not write (they may be "
                               "overwritten); without it such a folder is refused and nothing is written")
    return parser

