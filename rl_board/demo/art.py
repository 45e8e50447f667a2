"""OpenPipe ART trajectories (``trajectories/train/{step:04d}.parquet``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .prime_rl import _agent_rollout


def write_art_run(out: Path, steps: int = 8, prompts: int = 3, group: int = 4, seed: int = 6) -> list[Path]:
    """Write what OpenPipe ART's backend leaves in ``.art/{project}/models/{model}/``:
    ``trajectories/train/{step:04d}.parquet`` per step (``write_trajectory_groups_parquet``: one row
    per trajectory, the model's choices trainable, tool calls as JSON text, metrics as JSON)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    message = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.string()),
                         ("tool_call_id", pa.string()), ("trainable", pa.bool_())])
    schema = pa.schema([("format_version", pa.int16()), ("group_index", pa.int64()), ("trajectory_index", pa.int64()),
                        ("reward", pa.float64()), ("metrics", pa.string()), ("metadata", pa.string()),
                        ("messages", pa.list_(message))])
    rng = np.random.default_rng(seed)
    paths = []
    for step in range(1, steps + 1):
        skill = 0.3 + 0.6 * (step - 1) / max(steps - 1, 1)
        rows = []
        for g in range(prompts):
            for t in range(group):
                rollout = _agent_rollout(rng, skill)
                messages = []
                for turn, sampled in rollout["turns"]:
                    calls = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"], "arguments": c["arguments"]}}
                             for c in turn.get("tool_calls", [])]
                    messages.append({"role": turn["role"], "content": turn.get("content"),
                                     "tool_calls": json.dumps(calls) if calls else None,
                                     "tool_call_id": turn.get("tool_call_id"), "trainable": sampled})
                reward = sum(score * weight for score, weight in rollout["rewards"].values())
                metrics = {name: score for name, (score, _) in rollout["rewards"].items()}
                rows.append({"format_version": 2, "group_index": g, "trajectory_index": t, "reward": reward,
                             "metrics": json.dumps(metrics, separators=(",", ":")), "metadata": None,
                             "messages": messages})
        path = out / "trajectories" / "train" / f"{step:04d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")
        paths.append(path)
    return paths
