"""Write tests/data/slime_run the way slime writes it (needs torch; run where torch is installed):
``python tests/make_slime_fixtures.py OUT`` writes OUT/slime_run/rollout_data/*.pt through
``ray_writers.slime_save_debug_rollout_data`` (slime's ``save_debug_rollout_data``) and, for each
file, what ``rl_board/readers/torch_load.py`` prints for it (OUT/slime_json/NAME.json)."""

import json
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ray_writers import slime_sample_dict, slime_save_debug_rollout_data  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GLUED = ('Let me compute.<tool_call>\n{"name": "calc", "arguments": {"expr": "2+2"}}\n</tool_call><|im_end|>\n'
         "<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is 4 — vier.<|im_end|>")


class Opaque:
    """A class of the trainer's own: the restricted loader refuses to build it."""

    def __init__(self):
        self.x = 1


def main(out: Path) -> None:
    template = str(out / "slime_run" / "rollout_data" / "{rollout_id}.pt")
    train0 = [
        slime_sample_dict(group_index=0, index=0, prompt=[{"role": "system", "content": "Use tools."},
                                                          {"role": "user", "content": "2+2?"}],
                          tokens=list(range(100, 113)), response=GLUED, response_length=8,
                          loss_mask=[1, 1, 1, 0, 0, 0, 1, 1], rollout_log_probs=[-0.5] * 8, label="4", reward=1.0,
                          status="completed", metadata={"turns": 2}),
        slime_sample_dict(group_index=0, index=1, prompt="What is 3+3?", tokens=[1, 2, 3, 4, 5, 6], response="6",
                          response_length=2, loss_mask=[1, 1], rollout_log_probs=[-0.1, -0.2], label="6",
                          reward={"score": 0.5, "acc": 1}, status="truncated",
                          rollout_top_p_token_ids=torch.tensor([5, 6], dtype=torch.int32)),
        slime_sample_dict(group_index=1, index=2, prompt="bad", tokens=[1, 2, 3], response="x", response_length=2,
                          loss_mask=[1, 1], rollout_log_probs=[-0.1, -0.2, -0.3], reward=0.0, status="completed"),
    ]
    slime_save_debug_rollout_data(template, train0, rollout_id=0, evaluation=False)
    slime_save_debug_rollout_data(template, [slime_sample_dict(index=0, prompt="1+1?", tokens=[1, 2], response="2",
                                                               response_length=1, reward=0.0, status="completed")],
                                  rollout_id=1, evaluation=False)
    evals = {"math": {"samples": [slime_sample_dict(index=0, prompt="5*5?", tokens=[1, 2], response="25",
                                                    response_length=1, reward=1.0, status="completed")]},
             "code": {"samples": [slime_sample_dict(index=1, prompt="print?", tokens=[1, 2], response="no",
                                                    response_length=1, reward=0.0, status="completed")]}}
    slime_save_debug_rollout_data(template, evals, rollout_id=1, evaluation=True)
    slime_save_debug_rollout_data(template, [slime_sample_dict(index=0, reward=1.0, metadata={"obj": Opaque()})],
                                  rollout_id=2, evaluation=False)
    (out / "slime_json").mkdir(parents=True, exist_ok=True)
    for path in sorted((out / "slime_run" / "rollout_data").glob("*.pt")):
        proc = subprocess.run([sys.executable, str(REPO / "rl_board" / "readers" / "torch_load.py"), str(path)],
                              capture_output=True, text=True, check=False)
        (out / "slime_json" / f"{path.stem}.json").write_text(json.dumps(
            {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}, ensure_ascii=False))
    print("torch", torch.__version__)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
