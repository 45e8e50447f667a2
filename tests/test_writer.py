"""RolloutWriter: what a training loop writes is what the board reads, numbers checked by hand."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from rl_board.writer import RolloutWriter


class FakeTensor:
    """Stands in for a torch tensor (torch is not a test dependency): detach, cpu and tolist."""

    def __init__(self, values):
        self.values = values

    def detach(self):
        return self

    def cpu(self):
        return self

    def tolist(self):
        return self.values


def test_writer_imports_only_the_standard_library():
    """Importing rl_board.writer loads neither numpy, torch, pandas nor streamlit."""
    code = ("import sys, rl_board.writer; "
            "print(sorted(m for m in ('numpy', 'torch', 'pandas', 'streamlit', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_written_run_summarises_to_hand_computed_numbers(tmp_path):
    """Two ranks log batches (lists, numpy arrays, tensors); summary gives the numbers by hand."""
    run = tmp_path / "run"
    with RolloutWriter(run, rank=0) as w0, RolloutWriter(run, rank=1) as w1:
        w0.log_batch(1, prompt=["p", "q"], response=["a", "b"], reward=np.array([1.0, 3.0]),
                     logprobs=FakeTensor([[-1.0, -2.0], [-0.5, -0.5]]),
                     ref_logprobs=np.array([[-1.5, -1.0], [-0.5, -0.5]]), acc=[True, False])
        w1.log(1, prompt="r", response="c", reward=np.float32(2.0), logprobs=[-1.0], ref_logprobs=[-1.0], acc=True)
        w1.log(2, reward=-1.0, response="done")
    assert sorted(p.name for p in run.iterdir()) == ["rollout_data_rank0.jsonl", "rollout_data_rank1.jsonl"]
    proc = subprocess.run([sys.executable, "-m", "rl_board", "summary", str(run), "--json", "--no-cache"],
                          capture_output=True, text=True, cwd=REPO)
    got = json.loads(proc.stdout)
    assert proc.returncode == 0 and (got["files"], got["lines_ok"], got["lines_bad"]) == (2, 4, 0)
    first, second = got["steps"]
    assert first["samples"] == 3 and first["reward_mean"] == pytest.approx(2.0)
    assert first["reward_std"] == pytest.approx(math.sqrt(2 / 3))
    # k3 per token with d = ref - logp: sample 1 has d = -0.5 and 1.0, samples 2 and 3 have d = 0
    k3 = ((math.exp(-0.5) + 0.5 - 1) + (math.exp(1.0) - 2.0)) / 2
    assert first["kl_mean"] == pytest.approx(k3 / 3)
    assert first["log_ratio_mean"] == pytest.approx((0.5 - 1.0) / 2 / 3)
    assert first["response_len_mean"] == pytest.approx((2 + 2 + 1) / 3)
    assert first["extras"] == {"acc": pytest.approx(2 / 3)}
    assert second == {**second, "step": 2, "samples": 1, "reward_mean": -1.0, "extras": {}}  # no acc at step 2: not listed


def test_log_batch_rejects_columns_of_different_lengths(tmp_path):
    """Columns that disagree in length raise and write nothing."""
    writer = RolloutWriter(tmp_path, rank=3)
    with pytest.raises(ValueError, match="reward=2, response=1"):
        writer.log_batch(1, reward=[1.0, 2.0], response=["x"])
    writer.close()
    assert (tmp_path / "rollout_data_rank3.jsonl").read_bytes() == b""


def test_concurrent_writers_never_interleave_lines(tmp_path):
    """Four processes appending long lines to one file: every line is whole JSON."""
    code = ("import sys; from rl_board.writer import RolloutWriter\n"
            "w = RolloutWriter(sys.argv[1], rank=0)\n"
            "for i in range(200): w.log(i, reward=1.0, response='x' * 20000, tag=sys.argv[2])\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(k)], cwd=REPO) for k in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    lines = (tmp_path / "rollout_data_rank0.jsonl").read_text().splitlines()
    assert len(lines) == 800 and all(json.loads(line)["response"] == "x" * 20000 for line in lines)
