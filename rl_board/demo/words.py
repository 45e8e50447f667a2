"""The words, prompts and odd responses every demo run draws from, and the tokenizer the token runs ship with."""

from __future__ import annotations

from pathlib import Path

import numpy as np

PAD_TOKEN = "<|endoftext|>"


_WORDS = (
    "the answer is step first then we compute sum of each term so total equals "
    "therefore check again result value number because given problem solve "
    "let x be and 2 3 5 7 11 + - = ( ) . , 答案 是 所以 计算 首先 ✓ café naïve"
).split()


_PROMPTS = (
    "Solve: what is {a} + {b}?",
    "计算 {a} 乘以 {b} 的结果。",
    "Explain why {a} is less than {b}.",
    "Write a haiku about the number {a}.",
)


_HACK = ["▁so", "▁the", "▁answer", "▁is", "▁correct", "!"]  # a phrase a reward model overrates


# A few responses a reward model might love or a browser might execute.
_ODD_RESPONSES = (
    "<img src=x onerror=alert(1)> I am sure the answer is correct!!!",
    "# heading\n**bold** claim: the answer is {a}.",
)


def _tokens(rng: np.random.Generator, n: int) -> list[str]:
    picks = rng.integers(0, len(_WORDS), size=n)
    return ["▁" + _WORDS[i] if j % 3 == 0 else _WORDS[i] for j, i in enumerate(picks)]


def _answer(rng: np.random.Generator, a: int, b: int, skill: float) -> tuple[int, bool]:
    """(the model's answer to a + b, whether it is right) for a policy right with probability ``skill``."""
    correct = bool(rng.random() < skill)
    return (a + b if correct else a + b + int(rng.integers(1, 9))), correct


_TOOL_RESULTS = ("sunny, 21 degrees", "rain, 12 degrees", "the sum is {s}")


def write_tokenizer(path: Path, extra: tuple[str, ...] = ()) -> Path:
    """Train a small byte-level BPE tokenizer on the demo's words and prompts (and the texts ``extra``)
    with the ``tokenizers`` library (no download; the same bytes every time) and save it as ``path``
    (a tokenizer.json)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, show_progress=False,
                                  special_tokens=[PAD_TOKEN, "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = [" ".join(_WORDS), *(p.format(a=17, b=25) for p in _PROMPTS), "".join(_HACK).replace("▁", " "),
              "user assistant tool weather: " + " ".join(r.format(s=42) for r in _TOOL_RESULTS), *extra]
    tokenizer.train_from_iterator(corpus, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(path))
    return path
