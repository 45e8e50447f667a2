"""Writers of token-level dumps exactly as the trainers write them, for fixtures (no torch, no download).

- ``train_tokenizer``: a byte-level BPE tokenizer trained here from a few sentences with the
  ``tokenizers`` library (as every Hugging Face model folder's ``tokenizer.json`` is made).
- ``PrimeTokenExporter``: prime-rl's ``TokenExporter`` (src/prime_rl/trainer/rl/token_export.py):
  one micro batch packs several sequences (padding has an empty env name and a false loss mask and is
  trimmed), the export columns (``_export_columns``) go through float32 and ``_json_float`` (non-finite
  -> null), ``importance_ratio``/``mismatch_kl`` by ``compute_importance_ratio_and_mismatch_kl``, each
  kept sequence is one line ``json.dumps(record, separators=(",", ":"), allow_nan=False)`` appended to
  ``token_exports/step_{N}/rank_{R}.jsonl``, and ``mark_stable`` touches ``STABLE``.
- ``write_nemo_step``: NeMo-RL's ``Logger.log_batched_dict_as_jsonl`` of GRPO's ``log_data``
  (nemo_rl/algorithms/grpo.py): lists of the batch, token lists right-padded to the longest
  (``batched_message_log_to_flat_message``), cut into one-sample slices ``v[i:i+1]`` and written as
  ``json.dumps({**sample, "idx": i}, default=str)`` to ``train_data_step{N}.jsonl``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SENTENCES = [
    "What is 5 + 39? The answer is 44.",
    "Let me check the weather tool first.",
    "The tool says: sunny, 21 degrees.",
    "So the answer is correct! café naïve 答案",
    "Compute the sum of each term, then the total equals the result.",
]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def train_tokenizer(folder: Path, sentences=SENTENCES, vocab_size: int = 400) -> Path:
    """Train a byte-level BPE tokenizer on ``sentences`` and save ``folder/tokenizer.json``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(sentences, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def _float32(values) -> list[float]:
    return [float(np.float32(v)) for v in values]


def _json_float(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass
class Sequence:
    """One training sample as prime-rl's ``prepare_sample`` makes it: aligned per-token lists."""

    token_ids: list[int]
    loss_mask: list[bool]
    advantages: list[float]
    inference_logprobs: list[float]
    trainer_logprobs: list[float]
    entropy: list[float]
    env_name: str = "gsm8k"


@dataclass
class PrimeTokenExporter:
    """prime-rl's ``TokenExporter`` for one rank, writing under ``output_dir / "token_exports"``."""

    output_dir: Path
    rank: int = 0
    dppo_mask_high: float = 0.2
    dppo_mask_low: float = 0.2
    _initialized: set = field(default_factory=set)
    _counts: dict = field(default_factory=dict)
    _pending: set = field(default_factory=set)

    def export(self, step: int, micro_step: int, sequences: list[Sequence], padding: int = 0) -> None:
        """One micro batch: ``sequences`` packed one after another, then ``padding`` pad positions
        (the last sequence's length includes them, as the packer's padding joins the last sample)."""
        columns = {k: [] for k in ("token_ids", "loss_mask", "advantages", "inference_logprobs",
                                   "trainer_logprobs", "entropy", "env_names")}
        lengths = []
        for seq in sequences:
            columns["token_ids"] += seq.token_ids
            columns["loss_mask"] += [bool(m) for m in seq.loss_mask]
            columns["advantages"] += seq.advantages
            columns["inference_logprobs"] += seq.inference_logprobs
            columns["trainer_logprobs"] += seq.trainer_logprobs
            columns["entropy"] += seq.entropy
            columns["env_names"] += [seq.env_name] * len(seq.token_ids)
            lengths.append(len(seq.token_ids))
        columns["token_ids"] += [0] * padding
        columns["loss_mask"] += [False] * padding
        columns["advantages"] += [0.0] * padding
        columns["inference_logprobs"] += [0.0] * padding
        columns["trainer_logprobs"] += [-5.0] * padding
        columns["entropy"] += [1.0] * padding
        columns["env_names"] += [""] * padding
        lengths[-1] += padding
        out = self._export_columns(columns)
        start = 0
        for index, length in enumerate(lengths):
            raw_end = start + length
            end = raw_end
            while end > start and out["env_names"][end - 1] == "" and not out["loss_mask"][end - 1]:
                end -= 1
            if end > start and any(out["loss_mask"][start:end]):
                key = (step, self.rank)
                record = {"schema_version": 1, "step": step, "rank": self.rank, "micro_step": micro_step,
                          "micro_sequence_idx": index, "export_sequence_idx": self._counts.get(key, 0),
                          "env_name": next((e for e in out["env_names"][start:end] if e), None),
                          **{k: list(v[start:end]) for k, v in out.items() if k != "env_names"}}
                self._write(record, step)
                self._counts[key] = self._counts.get(key, 0) + 1
            start = raw_end

    def _export_columns(self, c: dict) -> dict:
        n = len(c["token_ids"])
        trainer = np.array(_float32(c["trainer_logprobs"]), dtype=np.float32)
        inference = np.array(_float32(c["inference_logprobs"]), dtype=np.float32)
        advantages = np.array(_float32(c["advantages"]), dtype=np.float32)
        loss_mask = np.array(c["loss_mask"], dtype=bool)
        with np.errstate(all="ignore"):
            log_ratio = trainer - inference
            ratio = np.exp(log_ratio)
            mismatch = ratio - log_ratio - 1
            prob_delta = np.exp(trainer) - np.exp(inference)
        invalid = np.where(advantages > 0, prob_delta > self.dppo_mask_high, prob_delta < -self.dppo_mask_low)

        def floats(values):
            return [_json_float(v) for v in np.asarray(values, dtype=np.float32).tolist()]

        return {
            "token_ids": [int(v) for v in c["token_ids"]],
            "position_ids": list(range(n)),
            "loss_mask": [bool(v) for v in loss_mask],
            "advantages": floats(advantages),
            "inference_logprobs": floats(inference),
            "trainer_logprobs": floats(trainer),
            "entropy": floats(c["entropy"]),
            "mismatch_kl": floats(mismatch),
            "log_importance_ratio": floats(log_ratio),
            "importance_ratio": floats(ratio),
            "prob_delta": floats(prob_delta),
            "is_masked": [bool(v) for v in loss_mask & invalid],
            "is_masked_high": [bool(v) for v in loss_mask & (advantages > 0) & (prob_delta > self.dppo_mask_high)],
            "is_masked_low": [bool(v) for v in loss_mask & (advantages < 0) & (prob_delta < -self.dppo_mask_low)],
            "rl_weights": [None] * n,
            "ce_weights": [None] * n,
            "ref_kl_weights": [None] * n,
            "env_names": list(c["env_names"]),
        }

    def _write(self, record: dict, step: int) -> None:
        key = (step, self.rank)
        mode = "a" if key in self._initialized else "w"
        folder = self.output_dir / "token_exports" / f"step_{step}"
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"rank_{self.rank}.jsonl").open(mode, encoding="utf-8") as fh:
            fh.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
        self._initialized.add(key)
        self._pending.add(folder)

    def mark_stable(self) -> None:
        while self._pending:
            (self._pending.pop() / "STABLE").touch()


@dataclass
class NemoSample:
    """One GRPO sample as NeMo-RL flattens it: per-token lists of its own (unpadded) length."""

    content: list[str]
    reward: float
    token_ids: list[int]
    token_loss_mask: list[int]
    advantages: list[float]
    generation_logprobs: list[float]
    prev_logprobs: list[float]


def write_nemo_step(log_dir: Path, step: int, samples: list[NemoSample], pad_token_id: int = 0) -> Path:
    """GRPO's ``log_data`` of one step written by ``log_batched_dict_as_jsonl`` to
    ``log_dir/train_data_step{step}.jsonl`` (step = total_steps + 1, as GRPO names it)."""
    longest = max(len(s.token_ids) for s in samples)

    def pad(values, value):
        return list(values) + [value] * (longest - len(values))

    log_data = {
        "content": [list(s.content) for s in samples],
        "rewards": [float(s.reward) for s in samples],  # rewards.tolist()
        "input_lengths": [len(s.token_ids) for s in samples],
        "token_ids": [pad(s.token_ids, pad_token_id) for s in samples],
        "token_loss_mask": [pad(s.token_loss_mask, 0) for s in samples],
        "sample_loss_mask": [1.0 for _ in samples],
        "advantages": [pad(_float32(s.advantages), 0.0) for s in samples],
        "generation_logprobs": [pad(_float32(s.generation_logprobs), 0.0) for s in samples],
        "prev_logprobs": [pad(_float32(s.prev_logprobs), 0.0) for s in samples],
    }
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"train_data_step{step}.jsonl"
    with open(path, "w") as f:
        for i in range(len(samples)):
            sample = {key: value[i:i + 1] for key, value in log_data.items()}  # make_microbatch_iterator(1)
            f.write(json.dumps({**sample, "idx": i}, default=str) + "\n")
    return path


def hostile_tokenizer(folder: Path) -> Path:
    """Save ``folder/tokenizer.json`` whose decoder is a backtracking regular expression, ``(a|aa)+$``: the
    real ``tokenizers`` library panics (``PanicException``: Oniguruma's retry limit) decoding id 2, whose
    token is 40 a's and a b. Ids 0 and 1 ("hello", "world") alone decode without trouble."""
    from tokenizers import Regex, Tokenizer, decoders, models

    tokenizer = Tokenizer(models.WordLevel({"hello": 0, "world": 1, "a" * 40 + "b": 2, "<unk>": 3}, unk_token="<unk>"))
    tokenizer.decoder = decoders.Replace(Regex("(a|aa)+$"), "")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tokenizer.json"
    tokenizer.save(str(path))
    return path
