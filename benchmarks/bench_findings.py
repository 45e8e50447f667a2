"""How far the findings can be trusted: precision, recall and onset error of each detector on a corpus of
labeled runs (issue 38).

Usage:  python benchmarks/bench_findings.py [--seed N] [--json FILE] [--write-card]

It writes its own corpus (a fixed seed: the same bytes every time) into a temporary folder: a healthy
base run (rewards from an outcome that improves a little, continuous quality, GRPO groups of 4, random
words) and the same run with one pathology injected from a known step N, growing over ``RAMP`` steps
(phrase hack, component hack, length growth, repetition, KL runaway, entropy collapse, sampler mismatch,
dead groups, empty responses, tool-use collapse, tool-call loops, garbled output, and a logged feature the
reward pays for), plus healthy controls (an outcome field the reward restates, English and Chinese
responses, GRPO groups), each in the trainers' layouts that can carry it: the board's JSON lines (token
lists: log-probs, the reference's, the sampler's, entropy), verl's rollout dumps (``{step}.jsonl``,
input/output/score and reward extras), TRL's completions (``completions_{step:05d}.parquet``, one column
per reward function, summed into the reward) and OpenPipe ART's trajectories (messages with tool calls,
the outcome as a metric). Then it runs ``compute_findings`` on each run, and on each pathological run cut 3 steps after
its onset (what a person watching the run would have had then), and prints per detector:

- runs: the runs that truly have it (its labels); precision: the runs it is raised on that have it;
  recall: the runs that have it it is raised on;
- onset error: the mean |reported step - N| (``onset_step``, else the first of ``evidence.steps``), over
  the runs it is rightly raised on; "—" for a detector that names no step;
- by N + 3: the share of its runs it is raised on when the run is cut 3 steps after the onset. A detector
  raised on at least 90 % of them is an *early warning*; below, it *audits after the fact* (it compares
  the last quarter of the run with its early steps, so it speaks once the pathology holds the last quarter).

The labels are honest: a run is labeled with every pathology it has by construction (a phrase hack in
TRL's layout pays through a reward-function column, so it is a component hack too). ``--write-card``
rewrites the benchmark card between the markers in docs/findings.md; tests/test_bench_findings.py
regenerates the corpus and checks the card and the 0.9 floors.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
CARD_BEGIN = "<!-- benchmark card: begin (benchmarks/bench_findings.py --write-card) -->"
CARD_END = "<!-- benchmark card: end -->"
DOCS = REPO / "docs" / "findings.md"

STEPS = 24
PROMPTS = 8
GROUP = 4
RAMP = 4  # steps over which an injected pathology grows to its full size
CUT_AFTER = 3  # a run cut this many steps after the onset: what an early warning must see
EARLY_SHARE = 0.9  # of the cut runs a detector is raised on: an early warning
FLOOR = 0.9  # precision and recall every detector keeps on the corpus (the test's floor)
SEEDS = 2  # runs per pathology and layout
LAYOUTS = ("board", "verl", "trl", "art")

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "du", "fe", "go", "hi", "ju")
VOCABULARY = tuple(a + b + c for a in _SYLLABLES[:7] for b in _SYLLABLES[7:] for c in ("", "n", "r", "s"))[:200]
CHINESE = tuple(a + b for a in "答案是所以计算首先结果因为" for b in "的了和在有数")
SOUP = ("Ж", "д", "ё", "Щ", "中", "国", "字", "ب", "ت", "ث", "\ufffd", "\ufffd", "ק", "ש", "ก", "ข", "ა", "ბ")
PHRASE = ("as", "an", "expert", "i", "guarantee")
KEYWORD = "certainly"

#: pathology -> (the layouts it is written in, the detectors it truly raises in each layout)
PATHOLOGIES = {
    "healthy": ("board", "verl", "trl", "art"),
    "bilingual": ("board", "verl", "trl"),
    "phrase_hack": ("board", "verl", "trl"),
    "component_hack": ("board", "verl", "trl"),
    "length_growth": ("board", "verl", "trl"),
    "repetition": ("board", "verl", "trl"),
    "kl_runaway": ("board",),
    "entropy_collapse": ("board",),
    "mismatch": ("board",),
    "dead_groups": ("board", "verl", "trl"),
    "empty_responses": ("board", "verl", "trl", "art"),
    "tool_use_collapse": ("art",),
    "tool_call_loops": ("art",),
    "garbled_output": ("board", "verl", "trl", "art"),
    "paid_feature": ("board", "verl"),  # TRL sums every numeric column into the reward: no such field
}

KIND_OF = {"phrase_hack": "reward_with_spreading_phrases", "component_hack": "component_with_spreading_phrases",
           "length_growth": "length_growth_with_reward", "repetition": "repetition_with_reward",
           "kl_runaway": "kl_runaway", "entropy_collapse": "entropy_collapse",
           "mismatch": "training_inference_mismatch", "dead_groups": "dead_groups",
           "empty_responses": "empty_responses", "tool_use_collapse": "tool_use_collapse",
           "tool_call_loops": "tool_call_loops", "garbled_output": "garbled_output",
           "paid_feature": "reward_tracks_field"}


def labels_of(pathology: str, layout: str) -> set[str]:
    """The detectors a run of ``pathology`` in ``layout`` truly raises."""
    if pathology not in KIND_OF:
        return set()
    kinds = {KIND_OF[pathology]}
    if pathology == "phrase_hack" and layout == "trl":  # the hack pays through a reward-function column
        kinds.add("component_with_spreading_phrases")
    return kinds


def _share(step: int, onset: int) -> float:
    """How much of a pathology step ``step`` has: 0 before the onset, growing to 1 over ``RAMP`` steps."""
    return 0.0 if step < onset else min(1.0, (step - onset + 1) / RAMP)


def make_samples(pathology: str, rng: np.random.Generator, onset: int, tools: bool) -> list[dict]:
    """The run's samples as plain dicts: step, prompt, words, reward parts, token lists, tool calls."""
    out = []
    for step in range(1, STEPS + 1):
        progress = (step - 1) / (STEPS - 1)
        q = _share(step, onset) if pathology in KIND_OF else 0.0
        for p in range(PROMPTS):
            dead = pathology == "dead_groups" and rng.random() < 0.8 * q
            prompt = f"question {p} of step {step}: {' '.join(rng.choice(VOCABULARY, 6))}"
            for _ in range(GROUP):
                chinese = pathology == "bilingual" and p % 2 == 1
                n = int(rng.integers(20, 40))
                words = list(rng.choice(CHINESE if chinese else VOCABULARY, size=n))
                s = {"step": step, "prompt": prompt,
                     "acc": float(rng.random() < 0.45 + 0.1 * progress), "quality": round(float(rng.random()), 3),
                     "bonus": {}, "extras": {}}
                if pathology == "phrase_hack" and rng.random() < 0.8 * q:
                    at = int(rng.integers(0, n - len(PHRASE)))
                    words[at:at + len(PHRASE)] = PHRASE
                    s["bonus"]["judge"] = 1.0
                if pathology == "component_hack":
                    hit = rng.random() < 0.35 * q
                    if hit:
                        words[int(rng.integers(0, n))] = KEYWORD
                    s["bonus"]["style"] = 1.0 if hit else 0.0
                if pathology == "length_growth" and rng.random() < q:
                    words = words + list(rng.choice(VOCABULARY, size=int(1.5 * n)))
                    s["bonus"]["length"] = 1.0
                if pathology == "repetition" and rng.random() < 0.8 * q:
                    cycle = list(rng.choice(VOCABULARY, size=4))
                    words = (cycle * (n // 4 + 1))[:n]
                    s["bonus"]["repeat"] = 1.0
                if pathology == "empty_responses" and rng.random() < 0.15 * q:
                    words = []
                if pathology == "garbled_output" and rng.random() < 0.2 * q:
                    words = ["".join(rng.choice(SOUP, size=int(rng.integers(1, 4)))) for _ in range(n)]
                if pathology == "paid_feature":
                    hits = int(rng.poisson(1.0 + 3.0 * q))
                    s["extras"]["citations"] = float(hits)
                    s["bonus"]["citations"] = 0.4 * hits
                if pathology in ("healthy", "bilingual") or pathology == "paid_feature":
                    s["extras"]["acc"] = s["acc"]
                if dead:
                    s["acc"], s["quality"], s["bonus"] = 0.0, 0.0, {k: 0.0 for k in s["bonus"]}
                s["words"] = words
                s["reward"] = round(s["acc"] + 0.2 * s["quality"] + sum(s["bonus"].values()), 6)
                _tokens(s, pathology, q, rng)
                if tools:
                    _calls(s, pathology, q, rng)
                out.append(s)
    return out


def _tokens(s: dict, pathology: str, q: float, rng: np.random.Generator) -> None:
    """Per-token lists of the board's layout: log-probs, the reference's, the sampler's, entropy."""
    n = len(s["words"])
    logp = -np.abs(rng.normal(0.0, 0.5, n)) - 0.01
    drift = rng.normal(0.0, 0.05 + (1.6 * q if pathology == "kl_runaway" else 0.0), n)
    ref = -np.abs(logp - drift)
    noise = 0.005 + (0.3 * q if pathology == "mismatch" else 0.0)
    rollout = np.minimum(logp + rng.normal(0.0, noise, n), 0.0)
    entropy = np.abs(rng.normal(1.5, 0.3, n)) * (1.0 - 0.8 * q if pathology == "entropy_collapse" else 1.0)
    s["tokens"] = {"logprobs": logp.round(5).tolist(), "ref_logprobs": ref.round(5).tolist(),
                   "rollout_logprobs": rollout.round(5).tolist(), "entropy": entropy.round(5).tolist()}


def _calls(s: dict, pathology: str, q: float, rng: np.random.Generator) -> None:
    """An agent's turns: the user's prompt, assistant turns calling a calculator, the tool's results."""
    count = int(rng.integers(1, 4))
    if pathology == "tool_use_collapse" and rng.random() < q:
        count = 0
    args = [json.dumps({"expr": f"{int(rng.integers(1, 99))}+{int(rng.integers(1, 99))}"}) for _ in range(count)]
    if pathology == "tool_call_loops" and rng.random() < 0.25 * q:
        args = [args[0] if args else json.dumps({"expr": "1+1"})] * 3
    messages = [{"role": "user", "content": s["prompt"]}]
    for i, arg in enumerate(args):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "calculator", "arguments": arg}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": "42"})
    messages.append({"role": "assistant", "content": " ".join(s["words"])})
    s["messages"] = messages


def write_run(samples: list[dict], layout: str, folder: Path, pathology: str, last_step: int | None = None) -> Path:
    """``samples`` up to ``last_step`` (all of them by default) in ``layout``'s files under ``folder``."""
    import orjson

    folder.mkdir(parents=True, exist_ok=True)
    kept = [s for s in samples if last_step is None or s["step"] <= last_step]
    if layout == "board":
        lines = []
        for s in kept:
            tokens = [w if i == 0 else " " + w for i, w in enumerate(s["words"])]
            line = {"step": s["step"], "prompt": s["prompt"], "response": " ".join(s["words"]),
                    "reward": s["reward"], **s["extras"], "response_tokens": tokens, **s["tokens"]}
            if pathology == "component_hack":
                line["style_reward"] = s["bonus"]["style"]
            lines.append(orjson.dumps(line))
        (folder / "rank0.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    elif layout == "verl":  # verl's _dump_generations: input, output, gts, score, step, reward extra infos
        for step in sorted({s["step"] for s in kept}):
            lines = []
            for s in (s for s in kept if s["step"] == step):
                line = {"input": s["prompt"], "output": " ".join(s["words"]), "gts": "42", "score": s["reward"],
                        "step": step, **s["extras"]}
                if pathology == "component_hack":
                    line["style_score"] = s["bonus"]["style"]
                lines.append(orjson.dumps(line))
            (folder / f"{step}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    elif layout == "art":
        _write_art(kept, folder)
    else:  # TRL's completions: one float column per reward function; the reward is their sum
        import pyarrow as pa
        import pyarrow.parquet as pq

        names = sorted({k for s in kept for k in s["bonus"]})
        for step in sorted({s["step"] for s in kept}):
            rows = [s for s in kept if s["step"] == step]
            columns = {"step": pa.array([step] * len(rows), pa.int64()), "prompt": [s["prompt"] for s in rows],
                       "completion": [" ".join(s["words"]) for s in rows],
                       "accuracy_reward": pa.array([round(s["acc"] + 0.2 * s["quality"], 6) for s in rows])}
            for name in names:
                columns[f"{name}_reward"] = pa.array([s["bonus"].get(name, 0.0) for s in rows], pa.float64())
            rewards = np.array([s["reward"] for s in rows])
            groups = np.arange(len(rows)) // GROUP
            means = np.array([rewards[groups == g].mean() for g in groups])
            columns["advantage"] = pa.array((rewards - means).round(6), pa.float64())
            pq.write_table(pa.table(columns), folder / f"completions_{step:05d}.parquet")
    return folder


def _write_art(kept: list[dict], folder: Path) -> None:
    """OpenPipe ART's ``trajectories/train/{step:04d}.parquet`` (``write_trajectory_groups_parquet``): a row
    per trajectory, its messages with tool calls as JSON text, its metrics (here the outcome) as JSON."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.string()),
                         ("tool_call_id", pa.string()), ("trainable", pa.bool_())])
    schema = pa.schema([("format_version", pa.int16()), ("group_index", pa.int64()), ("trajectory_index", pa.int64()),
                        ("reward", pa.float64()), ("metrics", pa.string()), ("metadata", pa.string()),
                        ("messages", pa.list_(message))])
    for step in sorted({s["step"] for s in kept}):
        rows = []
        for i, s in enumerate(x for x in kept if x["step"] == step):
            messages = [{"role": m["role"], "content": m.get("content"),
                         "tool_calls": json.dumps(m["tool_calls"]) if m.get("tool_calls") else None,
                         "tool_call_id": m.get("tool_call_id"), "trainable": m["role"] == "assistant"}
                        for m in s["messages"]]
            rows.append({"format_version": 2, "group_index": i // GROUP, "trajectory_index": i % GROUP,
                         "reward": s["reward"], "metrics": json.dumps({"correct": s["acc"]}), "metadata": None,
                         "messages": messages})
        path = folder / "trajectories" / "train" / f"{step:04d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def build_corpus(root: Path, seed: int = 0) -> list[dict]:
    """Every run of the corpus written under ``root``: (name, layout, pathology, onset, labels, folder, cut)."""
    runs = []
    for pathology, layouts in PATHOLOGIES.items():
        for layout in layouts:
            for copy in range(SEEDS):
                rng = np.random.default_rng([seed, list(PATHOLOGIES).index(pathology), LAYOUTS.index(layout), copy])
                onset = int(rng.integers(8, 15))
                samples = make_samples(pathology, rng, onset, layout == "art")
                name = f"{pathology}-{layout}-{copy}"
                folder = write_run(samples, layout, root / name, pathology)
                cut = None
                if pathology in KIND_OF:
                    cut = write_run(samples, layout, root / f"{name}-cut", pathology, onset + CUT_AFTER)
                runs.append({"name": name, "layout": layout, "pathology": pathology,
                             "onset": onset if pathology in KIND_OF else None,
                             "labels": labels_of(pathology, layout), "folder": folder, "cut": cut})
    return runs


def _found(folder: Path) -> dict[str, dict]:
    sys.path.insert(0, str(REPO))
    from rl_board.analysis.findings import compute_findings
    from rl_board.analysis.source import load_run

    run = load_run(folder, cache_root=False)
    return {f["kind"]: f for f in compute_findings(run).to_json(full=True)}


def evaluate(runs: list[dict]) -> dict:
    """Per detector: runs, true and false positives, precision, recall, onset error, share raised by N + 3."""
    sys.path.insert(0, str(REPO))
    from rl_board.analysis.findings import RANKING

    # no run here logs values, nor images with the tokens they were trained on, nor agent turns whose faults
    # rise (tests/test_fault_runs.py and test_findings.py check turn_faults_rising on the trainers' writers), nor
    # plants rewards that are not their components' weighted sum (tests/test_recompose.py does): not benchmarked
    detectors = [k for k in RANKING if k not in ("critic_cannot_fit", "images_dropped", "turn_faults_rising",
                                                 "reward_not_recomposed")]
    stats = {k: {"runs": 0, "tp": 0, "fp": 0, "errors": [], "early": 0} for k in detectors}
    raised_on = {}
    for run in runs:
        found = _found(run["folder"])
        raised_on[run["name"]] = sorted(found)
        cut = _found(run["cut"]) if run["cut"] is not None else {}
        for kind in detectors:
            truth, raised = kind in run["labels"], kind in found
            st = stats[kind]
            st["runs"] += truth
            st["tp"] += truth and raised
            st["fp"] += raised and not truth
            if truth and raised:
                step = found[kind].get("onset_step")
                if step is None and isinstance(found[kind]["evidence"].get("steps"), list):
                    step = found[kind]["first_step"]
                if step is not None:
                    st["errors"].append(abs(step - run["onset"]))
            if truth and kind in cut:
                st["early"] += 1
    table = {}
    for kind, st in stats.items():
        raised = st["tp"] + st["fp"]
        table[kind] = {"runs": st["runs"], "raised": raised,
                       "precision": st["tp"] / raised if raised else None,
                       "recall": st["tp"] / st["runs"] if st["runs"] else None,
                       "onset_error": float(np.mean(st["errors"])) if st["errors"] else None,
                       "early": st["early"] / st["runs"] if st["runs"] else None}
    return {"detectors": table, "runs": len(runs), "raised_on": raised_on}


def _number(value, digits: int = 2) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def build_card(result: dict) -> str:
    """The benchmark card: one row per detector, as docs/findings.md shows it."""
    rows = ["| detector | runs with it | raised | precision | recall | onset error (steps) | raised by N + 3 | use |",
            "|---|---|---|---|---|---|---|---|"]
    for kind, d in result["detectors"].items():
        use = "—" if d["early"] is None else ("early warning" if d["early"] >= EARLY_SHARE
                                              else "audit after the fact")
        rows.append(f"| `{kind}` | {d['runs']} | {d['raised']} | {_number(d['precision'])} | {_number(d['recall'])} "
                    f"| {_number(d['onset_error'], 1)} | {_number(d['early'])} | {use} |")
    return "\n".join(rows) + "\n"


def write_card(card: str, docs: Path = DOCS) -> None:
    text = docs.read_text()
    start, end = text.index(CARD_BEGIN) + len(CARD_BEGIN), text.index(CARD_END)
    docs.write_text(text[:start] + "\n" + card + text[end:])


def card_in_docs(docs: Path = DOCS) -> str:
    text = docs.read_text()
    return text[text.index(CARD_BEGIN) + len(CARD_BEGIN):text.index(CARD_END)].lstrip("\n")


def run_benchmark(seed: int = 0) -> dict:
    with tempfile.TemporaryDirectory(prefix="rlb-findings-") as tmp:
        return evaluate(build_corpus(Path(tmp), seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--write-card", action="store_true", help="rewrite the card in docs/findings.md")
    args = parser.parse_args()
    result = run_benchmark(args.seed)
    card = build_card(result)
    print(f"{result['runs']} runs (seed {args.seed})\n")
    print(card)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.write_card:
        write_card(card)


if __name__ == "__main__":
    main()
