"""rLLM episodes: ``{episode_log_dir}/episodes/{train|val}_step_{N}_epoch_{E}/episode_*.json``.

rLLM's ``EpisodeLogger`` writes one episode a file (indented JSON): ``training_step``,
``epoch``, ``episode_id``, ``is_correct``, ``metrics``, ``termination_reason`` and
``trajectories[]`` {name, uid, reward, num_steps, steps[] {observation, thought, action,
reward, done, model_response, chat_completions}}. One sample per trajectory: its turns are
the last step's ``chat_completions`` when every step's extends the one before (a
conversation), else every step's in turn (a step without them is its observation as a user
turn and its model response as an assistant turn); ``trainable`` null. The reward is the
trajectory's ``reward`` (none when null); the extras ``is_correct`` (1 or 0) and the numbers
of the episode's ``metrics``. The step and split come from the folder name (``train`` by
default, ``val``). The episode's ``termination_reason`` goes in the last turn's ``meta``
(``turns.with_outcome``). Point the board at the ``episodes`` folder. A sample's ``line`` is its
trajectory's number in the file.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pyarrow as pa

from ...base import fields as F
from ...base.compression import read_bytes
from ...base.location import as_path
from ..base import FileError, ReadOptions, SourceChanged
from ..layout import step_in
from ..turns import number, numbers, sample_rows, turn, turns, with_outcome

NAME = "rllm"
SUFFIX = ".json"
APPENDABLE = False
ALIASES: dict[str, str] = {}
GLOBS = ("episodes/*_step_*_epoch_*/episode_*.json", "*_step_*_epoch_*/episode_*.json")  # the log folder, or its episodes/
DEFAULT_SPLIT = "train"


def split_of(name: str) -> str | None:
    parts = PurePosixPath(name).parts
    return parts[-2].split("_step_", 1)[0] if len(parts) >= 2 and "_step_" in parts[-2] else None


def messages_of(trajectory: dict) -> list[dict]:
    """A trajectory's conversation (see the module's docstring)."""
    steps = [s for s in trajectory.get("steps") or [] if isinstance(s, dict)]
    chats = [s.get("chat_completions") if isinstance(s.get("chat_completions"), list) else None for s in steps]
    if chats and all(c for c in chats) and all(b[:len(a)] == a for a, b in zip(chats, chats[1:])):
        return turns(chats[-1])
    out = []
    for s, chat in zip(steps, chats):
        if chat:
            out.extend(turns(chat))
            continue
        if s.get("observation") is not None:
            out.append(turn({"role": "user", "content": s["observation"]}))
        if s.get("model_response") is not None:
            out.append(turn({"role": "assistant", "content": s["model_response"]}))
    return out


def episode_samples(episode: dict, step: int) -> list[dict]:
    """The sample dict of each trajectory of an episode, without where it lies."""
    extras = numbers(episode.get("metrics"))
    if number(episode.get("is_correct")) is not None:
        extras["is_correct"] = number(episode["is_correct"])
    outcome = {"termination_reason": episode.get("termination_reason")}
    return [{F.STEP: step, F.REWARD: number(t.get("reward")), F.MESSAGES: with_outcome(messages_of(t), outcome),
             "extras": dict(extras)}
            for t in episode.get("trajectories") or [] if isinstance(t, dict)]


def _step(name: str, episode: dict) -> int:
    step = step_in(name)
    if step is None and isinstance(episode.get("training_step"), int):
        step = episode["training_step"]
    return 0 if step is None else step


def _load(data: bytes) -> dict | str:
    try:
        episode = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return f"not JSON ({exc})"
    return episode if isinstance(episode, dict) else "not a JSON object"


def read_table(path: Path, options: ReadOptions = ReadOptions()) -> tuple[pa.Table, list[tuple[int, str]], int]:
    """(canonical rows, [] or (1, why the episode can't be read), 1)."""
    try:
        episode = _load(read_bytes(path))  # compressed or not
    except OSError as exc:
        raise FileError(f"can't be read: {exc.strerror or exc}") from exc
    if isinstance(episode, str):
        raise FileError(episode)
    samples = [{**s, "line": i + 1, "offset": i}
               for i, s in enumerate(episode_samples(episode, _step(as_path(path).as_posix(), episode)))]
    errors = [] if samples else [(1, "episode has no trajectories")]
    return sample_rows(samples), errors, 1


def record(fh, name: str, offset: int, length: int, line: int) -> dict:
    """Trajectory ``offset`` of the episode: step, reward, ``messages``, extras, the episode's other fields."""
    episode = _load(fh.read())
    samples = episode_samples(episode, _step(name, episode)) if isinstance(episode, dict) else []
    if not 0 <= offset < len(samples):
        raise SourceChanged(f"{name}:{line} changed since the run was read; refresh it.")
    got = samples[offset]
    trajectory = episode["trajectories"][offset]
    shown = {k: v for k, v in episode.items() if k not in ("trajectories", "metrics", "is_correct")}
    shown["trajectory"] = {k: v for k, v in trajectory.items() if k != "steps"}
    return {**shown, **got["extras"], F.STEP: got[F.STEP], F.REWARD: got[F.REWARD], F.MESSAGES: got[F.MESSAGES]}
