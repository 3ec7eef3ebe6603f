import math

import torch

from mt.checkpoint import load_checkpoint
from tests.conftest import TINY, read_metrics, run_mt, tiny_overrides


def test_tiny_training_lowers_the_loss_and_writes_everything(trained_tiny):
    rows = read_metrics(trained_tiny)
    assert [r["step"] for r in rows] == [10, 20, 30, 40, 50, 60]
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert all({"loss", "lr", "tokens_per_s"} <= r.keys() for r in rows)
    dev = read_metrics(trained_tiny, "dev")
    assert dev and {"loss", "ppl", "bleu"} <= dev[-1].keys()
    assert dev[-1]["loss"] < math.log(500) - 0.5  # clearly better than a uniform guess over the vocabulary
    for name in ("checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_30.pt", "checkpoint_60.pt", "config.yaml"):
        assert (trained_tiny / name).exists(), name
    ckpt = load_checkpoint(trained_tiny / "checkpoint_last.pt")
    assert ckpt["step"] == 60 and ckpt["config"]["model"]["d_model"] == 64


def test_keep_last_removes_older_step_checkpoints(tmp_path):
    run_mt("train", TINY, *tiny_overrides(tmp_path, **{"train.max_steps": 8, "train.save_every": 2,
                                                       "train.keep_last": 2, "train.eval_every": 100}))
    assert sorted(p.name for p in tmp_path.glob("checkpoint_*.pt")) == \
        ["checkpoint_6.pt", "checkpoint_8.pt", "checkpoint_best.pt", "checkpoint_last.pt"]


def test_rerunning_resumes_and_continues_the_step_count(tmp_path):
    args = tiny_overrides(tmp_path, **{"train.max_steps": 10, "train.log_every": 5, "train.save_every": 10,
                                       "train.eval_every": 100})
    run_mt("train", TINY, *args)
    proc = run_mt("train", TINY, *args, "--set", "train.max_steps=20")
    assert "resuming from" in proc.stderr and "at step 10" in proc.stderr
    assert [r["step"] for r in read_metrics(tmp_path)] == [5, 10, 15, 20]
    assert load_checkpoint(tmp_path / "checkpoint_last.pt")["step"] == 20
    proc = run_mt("train", TINY, *args, "--restart")
    assert "resuming" not in proc.stderr and load_checkpoint(tmp_path / "checkpoint_last.pt")["step"] == 10
    assert list(tmp_path.glob("previous-*/checkpoint_last.pt")), "--restart keeps the old run aside"


def test_same_seed_gives_the_same_losses(tmp_path):
    losses = []
    for name in ("a", "b"):
        run_mt("train", TINY, *tiny_overrides(tmp_path / name, **{"train.max_steps": 10, "train.log_every": 1,
                                                                  "train.eval_every": 100}))
        losses.append([r["loss"] for r in read_metrics(tmp_path / name)])
    assert losses[0] == losses[1] and len(losses[0]) == 10


def test_info_prints_the_exact_parameter_count():
    out = run_mt("info", TINY).stdout
    d, ff, layers, vocab = 64, 128, 2, 500
    attention = 4 * (d * d + d)
    ffn = d * ff + ff + ff * d + d
    encoder = layers * (attention + ffn + 2 * 2 * d)
    decoder = layers * (2 * attention + ffn + 3 * 2 * d)
    assert f"parameters: {vocab * d + encoder + decoder}" in out.splitlines()
