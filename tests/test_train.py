import math

import pytest
import torch

from mt.checkpoint import load_checkpoint
from mt.train import Window
from tests.conftest import TINY, read_metrics, run_mt, tiny_overrides


def test_tiny_training_lowers_the_loss_and_writes_everything(trained_tiny):
    rows = read_metrics(trained_tiny)
    assert [r["step"] for r in rows] == [10, 20, 30, 40, 50, 60]
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert all({"loss", "lr", "tokens_per_s", "seconds_per_update", "mfu"} <= r.keys() and 0 < r["mfu"] < 1
               and r["seconds_per_update"] > 0 for r in rows)
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
    out = run_mt("info", TINY, "--set", "output_dir=/nonexistent/no-tokenizer-here").stdout
    assert f"parameters: {_transformer_parameters(500, 64, 128, 2)}" in out.splitlines()


def _transformer_parameters(vocab, d, ff, layers):
    """Hand count: shared embedding + encoder/decoder layers (attention 4 projections with bias, FFN, LayerNorms)."""
    attention = 4 * (d * d + d)
    ffn = d * ff + ff + ff * d + d
    return vocab * d + layers * (attention + ffn + 2 * 2 * d) + layers * (2 * attention + ffn + 3 * 2 * d)


@pytest.mark.parametrize("config, paper", [("transformer-base", 65e6), ("transformer-big", 213e6)])
def test_table_3_sizes(config, paper):
    out = run_mt("info", f"configs/{config}.yaml", "--set", "tokenizer.vocab_size=37000").stdout
    count = int(out.split("parameters: ")[1].split()[0])
    d, ff = (512, 2048) if config == "transformer-base" else (1024, 4096)
    assert count == _transformer_parameters(37000, d, ff, 6)
    assert abs(count - paper) / paper < 0.05, f"{count:,} vs the paper's {paper:,.0f}"


def test_a_log_window_times_the_updates_alone():
    window = Window(torch.device("cpu"), peak_flops=1e12)
    window.start -= 10.0  # ten seconds went by ...
    window.exclude(9.0)  # ... nine of them evaluating and saving
    for _ in range(2):
        window.add(torch.tensor([2.0, 1.0, 100.0]), flops=1e9)
    row = window.row()
    assert 0.5 <= row["seconds_per_update"] < 0.6 and 180 < row["tokens_per_s"] <= 200
