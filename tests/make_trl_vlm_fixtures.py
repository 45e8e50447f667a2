"""Write tests/data/trl_vlm_run the way TRL 1.16's GRPOTrainer writes its completions for a vision-language model
trained on a conversational dataset (``log_completions=True``): ``GRPOTrainer.log`` itself is called, on a trainer
object that holds only what ``log`` reads, so the parquet files are TRL's own bytes. Run it in a throwaway venv
holding trl (``python -m venv /tmp/venv-trl && /tmp/venv-trl/bin/pip install trl==1.16.0``, then
``/tmp/venv-trl/bin/python tests/make_trl_vlm_fixtures.py tests/data``).

What TRL 1.16 does there (trl/trainer/grpo_trainer.py ``log``, trl/trainer/utils.py ``strip_images_from_messages``):
``prompt`` and ``completion`` are lists of messages; each ``{"type": "image", "image": <PIL.Image>}`` content block
of a prompt becomes ``{"type": "image"}`` (the pixels go only to W&B or trackio, never to the parquet). The prompts
below hold 1, 2, 0 and 1 image blocks (the four completions of step 1) and 2 and 1 (the two of step 2).
"""

import sys
from collections import defaultdict, deque
from pathlib import Path
from types import SimpleNamespace

from PIL import Image
from trl import GRPOTrainer

NAME = "trl_vlm_run"


def user(text: str, images: int) -> list[dict]:
    """A conversational prompt as a VLM dataset gives it: ``images`` image blocks (PIL images) then the text."""
    blocks = [{"type": "image", "image": Image.new("RGB", (8 + k, 6), (k * 40, 0, 0))} for k in range(images)]
    return [{"role": "user", "content": [*blocks, {"type": "text", "text": text}]}]


def answer(text: str) -> list[dict]:
    """A completion as ``_generate`` makes it for a conversational prompt: one assistant message."""
    return [{"role": "assistant", "content": text}]


def trainer(out: Path, step: int) -> GRPOTrainer:
    """A GRPOTrainer holding only what ``log`` reads (no model, no accelerator work): the main process, train
    mode, no logging backend, the completions folder ``_generate`` would have made."""
    self = object.__new__(GRPOTrainer)
    self.model = SimpleNamespace(training=True)
    self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    self.accelerator = SimpleNamespace(is_main_process=True)
    self.log_completions, self.log_unique_prompts, self.num_completions_to_print = True, False, 0
    self.args = SimpleNamespace(report_to=[], output_dir=str(out), include_num_input_tokens_seen="no")
    self.state = SimpleNamespace(epoch=None, global_step=step, log_history=[])
    self.callback_handler = SimpleNamespace(on_log=lambda args, state, control, logs: control)
    self.control = None
    size = 8
    self._logs = {"images": deque(maxlen=size), "prompt": deque(maxlen=size), "completion": deque(maxlen=size),
                  "rewards": defaultdict(lambda: deque(maxlen=size)), "advantages": deque(maxlen=size),
                  "extra": defaultdict(lambda: deque(maxlen=size))}
    return self


def write_step(out: Path, step: int, rows: list[tuple[str, int, str, float]]) -> None:
    """One ``log`` call of ``rows`` (question, image blocks, completion, accuracy reward)."""
    t = trainer(out, step)
    for question, images, completion, reward in rows:
        prompt = user(question, images)
        t._logs["prompt"].append(prompt)
        t._logs["completion"].append(answer(completion))
        t._logs["rewards"]["accuracy_reward"].append(reward)
        t._logs["advantages"].append(reward - 0.5)
        t._logs["images"].append([b["image"] for b in prompt[0]["content"] if b["type"] == "image"])
    t.log({"loss": 0.1})


def main(root: Path) -> None:
    out = root / NAME
    (out / "completions").mkdir(parents=True, exist_ok=True)
    write_step(out, 1, [("What shape is shown?", 1, "A circle.", 1.0),
                        ("Which of the two is larger?", 2, "The left one.", 0.0),
                        ("What is 2+2?", 0, "4", 1.0),
                        ("What colour is it?", 1, "Red.", 1.0)])
    write_step(out, 2, [("Compare the two images.", 2, "They are the same.", 0.0),
                        ("What shape is shown?", 1, "A square.", 1.0)])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
