"""``rl-board diff``: two runs (or two step ranges of one run) prompt by prompt, regressions first, as on
the page's Diff area."""

from __future__ import annotations

import argparse
import json
import sys

from ..analysis.source import read_settings
from .common import CommandError, _describe_settings, _fmt, load_run_for, printed
from .parser import DIFF_SHOWN

JSON_CHUNK = 10_000  # prompts of diff --json built and written at a time
DIFF_CHARS = 400  # characters of a response's word diff printed; the rest is cut (…)
ADDED, REMOVED = ("{+", "+}"), ("[-", "-]")  # how the text output marks words only in B and only in A


def diff_json(args) -> dict:
    """What ``diff --json`` prints (docs/schemas/diff.json): settings, counts and every matched prompt, most
    negative delta first. ``CommandError`` on a bad argument or a run that can't be read as asked."""
    return _diffed(args, listed_all=True)[0]


def _printed_rows(diff) -> tuple[list[int], list[int]]:
    """(the table's positions the text output prints as regressions, most negative first; as improvements,
    most positive first): ``DIFF_SHOWN`` of each."""
    import numpy as np

    delta = diff.table["delta"].to_numpy(dtype=float)
    return np.flatnonzero(delta < 0)[:DIFF_SHOWN].tolist(), np.flatnonzero(delta > 0)[::-1][:DIFF_SHOWN].tolist()


def _diffed(args, listed_all: bool = False) -> tuple[dict, object, object, object, object]:
    """(the diff's dict, the ``Diff``, run A, run B, B's finding marks or None): the dict's ``prompts`` are
    every matched prompt with ``listed_all``, else those the text output prints (none with ``--json``: they
    are written a chunk at a time, ``_write_json``)."""

    from ..analysis.diff import build_diff_json, compute_diff, diff_settings
    from ..analysis.search import parse_steps

    try:
        steps_a = parse_steps(args.steps) if args.steps is not None else (None, None)
        steps_b = parse_steps(args.steps_b) if args.steps_b is not None else steps_a
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    run_a = load_run_for(args)
    if str(args.run_b) == str(args.run_dir):
        run_b = run_a
    else:
        run_b = load_run_for(argparse.Namespace(**{**vars(args), "run_dir": args.run_b}))
    try:
        diff = compute_diff(run_a, run_b, steps_a, steps_b, args.by, args.min_samples)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    worse, better = _printed_rows(diff)
    # text: only the prompts it prints are built; JSON: a chunk at a time as it is written (below)
    listed = list(range(len(diff.table))) if listed_all else [] if args.json else sorted(worse + better)
    marks = None
    # B's findings of the reward hacked, marked on the improvements that carry them
    if (diff.table["delta"].to_numpy(dtype=float) > 0).any():
        from ..analysis.findings import get_findings
        from ..analysis.marks import compute_finding_marks

        marks = compute_finding_marks(diff, run_b, get_findings(run_b))
    result = {"settings": {**read_settings(run_a, args.max_samples_per_step), **diff_settings(diff)},
              **build_diff_json(diff, run_a, run_b, listed, marks)}
    return result, diff, run_a, run_b, marks


def _diff(args) -> int:

    from ..analysis.diff import FAR_STEPS
    from ..analysis.search import printable_line

    got, status = printed(_diffed, args)
    if status is not None:
        return status
    result, diff, run_a, run_b, marks = got
    worse, better = _printed_rows(diff)
    listed = sorted(worse + better)
    status = 0 if run_a.report.lines_ok and run_b.report.lines_ok else 1
    if args.json:
        _write_json(result, diff, run_a, run_b, marks)
        return status
    settings = result["settings"]
    print(f"A: {args.run_dir}" + (f" steps {settings['steps_a']}" if settings["steps_a"] else "")
          + f"   B: {args.run_b}" + (f" steps {settings['steps_b']}" if settings["steps_b"] else ""))
    on = diff.key_a if diff.key_a == diff.key_b else diff.key_a + " / " + diff.key_b
    if diff.prompt_match == "user content":
        on += " (the user content of the chat template)"
    print(f"matched by {on}; {_describe_settings(settings)}")
    print(f"{result['matched']} prompts in both, {result['only_a']} only in A, {result['only_b']} only in B"
          + (f", {result['too_few']} with fewer than {args.min_samples} samples on a side left out"
             if result["too_few"] else "")
          + f"; {result['regressions']} worse in B, {result['improvements']} better, {result['unchanged']} the same")
    if result["no_match"] is not None:
        print(printable_line(result["no_match"]["why"]))
    elif result["step_distance"] is not None:
        far = result["step_distance"] >= FAR_STEPS
        print(f"A's and B's samples of a prompt are {result['step_distance']:.4g} steps apart on average"
              + (" (far apart: the training between those steps may explain a change as much as what sets B apart)" if far else ""))
    prompts = dict(zip(listed, result["prompts"]))  # by position in the table
    for title, shown, count in (("Regressions (mean reward B − A, most negative first)", worse, result["regressions"]),
                                ("Improvements (most positive first)", better, result["improvements"])):
        if not shown:
            continue
        print(f"\n{title}" + (f"; showing {DIFF_SHOWN} of {count} (--json for all)"
                              if count > DIFF_SHOWN else "") + ":")
        _print_prompts(diff, run_a, run_b, prompts, shown)
    return status


def _write_json(result: dict, diff, run_a, run_b, marks=None) -> None:
    """``result`` (its ``prompts`` empty) with every prompt of the table, written as ``json.dumps`` of the
    whole would write it, byte for byte, ``JSON_CHUNK`` prompts at a time: a million prompts are never
    a million dicts at once."""
    from ..analysis.diff import build_diff_json

    head = json.dumps(result, ensure_ascii=False, allow_nan=False)
    assert head.endswith('"prompts": []}')  # the contract's last key
    out = sys.stdout
    out.write(head[:-len("[]}")] + "[")
    for start in range(0, len(diff.table), JSON_CHUNK):
        prompts = build_diff_json(diff, run_a, run_b, list(range(start, min(start + JSON_CHUNK, len(diff.table)))),
                                  marks)
        out.write((", " if start else "") + ", ".join(json.dumps(p, ensure_ascii=False, allow_nan=False)
                                                     for p in prompts["prompts"]))
    out.write("]}\n")


def _print_prompts(diff, run_a, run_b, prompts: dict[int, dict], shown: list[int]) -> None:
    """Each prompt's numbers (``prompts[i]`` for ``i`` in ``shown``: rows of ``diff.table``), one response
    of each side and B's words against A's."""
    from ..analysis.prompts import EMPTY_RESPONSE, compute_word_diff
    from ..analysis.search import printable_line
    from ..analysis.tables import strip_pad

    for i in shown:
        p, row = prompts[i], diff.table.iloc[i]
        picked = {}
        for name, run in (("a", run_a), ("b", run_b)):
            one = run.with_text(run._samples.loc[[row[f"{name}_sample"]]]).iloc[0]
            picked[name] = (strip_pad(one["response"], run.pad_token) or "", one)
        print(f"  {_fmt(p['delta']):>8}  A {_fmt(p['a']['reward_mean'])} ({p['a']['samples']})  "
              f"B {_fmt(p['b']['reward_mean'])} ({p['b']['samples']})  {_cut(printable_line(p['prompt'] or ''), 100)}")
        for name in ("a", "b"):
            one = picked[name][1]
            print(f"      {name.upper()}: step {int(one['step'])}  {one['source']}  reward {_fmt(one['reward'])}")
        if p.get("b_findings"):
            print(f"      B carries its finding{'s' if len(p['b_findings']) > 1 else ''}: {', '.join(p['b_findings'])} "
                  "(rl-board findings RUN_B): better by the hack?")
        words = compute_word_diff(picked["a"][0], picked["b"][0])
        marks = {"removed": REMOVED, "added": ADDED}
        marked = EMPTY_RESPONSE if words.empty else "".join(
            part if kind == "same" else marks[kind][0] + part + marks[kind][1] for kind, part in words.ops)
        print(f"      B against A: {_cut(printable_line(marked), DIFF_CHARS)}")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
