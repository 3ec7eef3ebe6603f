import os
import subprocess
import sys

from mt.checkpoint import load_checkpoint
from tests.conftest import ROOT, TINY, read_metrics, tiny_overrides


def test_torchrun_two_cpu_processes_train_with_ddp(tmp_path):
    """`torchrun --nproc_per_node 2 -m mt train` on CPU (gloo): ranks share batches, only rank 0 writes."""
    args = tiny_overrides(tmp_path, **{"train.max_steps": 6, "train.log_every": 2, "train.save_every": 3,
                                       "train.eval_every": 6, "train.device": "cpu"})  # gloo, even beside a GPU
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", "29517", "-m", "mt", "train", str(TINY), *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "x 2 processes" in proc.stderr
    assert proc.stderr.count("model: ") == 1, "only rank 0 logs"
    assert [r["step"] for r in read_metrics(tmp_path)] == [2, 4, 6]
    assert len(read_metrics(tmp_path, "dev")) == 1
    ckpt = load_checkpoint(tmp_path / "checkpoint_last.pt")
    assert ckpt["step"] == 6
    assert not any(k.startswith("module.") for k in ckpt["model"]), "the unwrapped model is saved"
