"""Write rollout logs the board reads, from any training loop. Standard library only.

    from rl_board.writer import RolloutWriter

    writer = RolloutWriter("rollouts/my_run")           # rank from $RANK, else 0
    writer.log_batch(step, prompt=prompts, response=responses, reward=rewards,
                     logprobs=logprobs, ref_logprobs=ref_logprobs)   # lists, numpy arrays, torch tensors

Importing this module loads neither numpy, torch nor streamlit: values are
converted through their own ``.tolist()``. Each line is one ``os.write`` on a file
opened with ``O_APPEND``, so lines of concurrent writers never interleave, and
nothing waits in a buffer: the board can follow the run as it trains.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


class RolloutWriter:
    """Appends one JSON line per sample to ``run_dir/{prefix}_rank{rank}.jsonl``.

    Args:
        run_dir: the run's folder (created if missing); point the board at its parent.
        rank: this process's data-parallel rank; default ``$RANK`` (set by torchrun), else 0.
        prefix: the file name's start.
    """

    def __init__(self, run_dir: str | os.PathLike, rank: int | None = None, prefix: str = "rollout_data"):
        if rank is None:
            rank = int(os.environ.get("RANK", "0"))
        self.path = Path(run_dir) / f"{prefix}_rank{int(rank)}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def log(self, step: int, **fields) -> None:
        """Write one sample: ``step`` and its fields (numbers, strings, lists, arrays, tensors)."""
        self._write_line({"step": int(step), **{k: _plain(v) for k, v in fields.items()}})

    def log_batch(self, step: int, **columns) -> None:
        """Write one line per sample of a batch. Each column holds one value per sample (a list, a 1-D
        array or tensor; per-token fields as a list of lists or a 2-D array); a plain number or
        string is the same for every sample. Raises ``ValueError`` when columns disagree in length."""
        plain = {name: _plain(value) for name, value in columns.items()}
        sizes = {name: len(v) for name, v in plain.items() if isinstance(v, list)}
        if not sizes:
            raise ValueError("log_batch needs at least one column with one value per sample")
        if len(set(sizes.values())) > 1:
            raise ValueError("columns differ in length: " + ", ".join(f"{k}={n}" for k, n in sizes.items()))
        for i in range(next(iter(sizes.values()))):
            self._write_line({"step": int(step),
                              **{name: v[i] if name in sizes else v for name, v in plain.items()}})

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RolloutWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write_line(self, obj: dict) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path} is closed")
        data = (json.dumps(obj, ensure_ascii=False, default=_plain_default) + "\n").encode("utf-8")
        written = os.write(self._fd, data)
        while written < len(data):  # a short write (a full disk, a signal): finish the line
            written += os.write(self._fd, data[written:])


def _plain(value):
    """Lists, numbers and strings as they are; arrays, tensors and numpy scalars via ``.tolist()``."""
    if hasattr(value, "detach"):  # a torch tensor that may need grad
        value = value.detach()
    if hasattr(value, "cpu"):
        value = value.cpu()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    return value  # NaN and Infinity are written as NaN / Infinity, which the board reads


def _plain_default(value):
    converted = _plain(value)
    if converted is value:
        raise TypeError(f"can't write a {type(value).__name__} to a rollout log")
    return converted
