import math
from types import SimpleNamespace
import resource
import shutil
import subprocess
import sys
import time

import pytest
import torch

from mt.checkpoint import load_checkpoint
from mt.training.loop import Window
from tests.conftest import DATA, ROOT, TINY, one_error_line, read_metrics, run_mt, tiny_overrides


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


def test_transformer_base_on_the_shipped_corpus_is_table_3s_model_with_its_8k_vocabulary():
    out = run_mt("info", "configs/transformer-base-ddtp.yaml").stdout
    assert f"parameters: {_transformer_parameters(8000, 512, 2048, 6)}" in out.splitlines()


def test_a_log_window_times_the_updates_alone():
    window = Window(torch.device("cpu"), SimpleNamespace(mfu=lambda flops_per_s: flops_per_s / 1e12))
    window.start -= 10.0  # ten seconds went by ...
    window.exclude(9.0)  # ... nine of them evaluating and saving
    for _ in range(2):
        window.add(torch.tensor([2.0, 1.0, 100.0]), flops=1e9)
    row = window.row()
    assert 0.5 <= row["seconds_per_update"] < 0.6 and 180 < row["tokens_per_s"] <= 200


def test_measuring_the_peak_again_is_left_out_of_the_next_log_window():
    """`mfu` may measure the matmul peak again (mt/training/flops.py), for a second or so: not training time."""
    window = Window(torch.device("cpu"), SimpleNamespace(mfu=lambda flops_per_s: time.sleep(0.5) or 0.5))
    window.add(torch.tensor([2.0, 1.0, 100.0]), flops=1e9)
    window.row()
    window.add(torch.tensor([2.0, 1.0, 100.0]), flops=1e9)
    assert window.pending()[-1] < 0.1


def test_a_checkpoint_that_cannot_be_written_stops_training_in_one_line(trained_tiny, tmp_path):
    """A file-size limit (as a full disk or a quota) during a save: one line naming the file, the system's reason
    and the checkpoint kept; the previous checkpoint still loads and no temporary file is left."""
    run = tmp_path / "run"
    shutil.copytree(trained_tiny, run)
    limit = 200_000  # bytes: enough for metrics.jsonl, not for a checkpoint
    assert (run / "checkpoint_last.pt").stat().st_size > limit
    proc = subprocess.run([sys.executable, "-m", "mt", "train", TINY, *tiny_overrides(run, **{"train.max_steps": 70})],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "cannot write the checkpoint: File too large" in last, proc.stderr
    assert f"training stopped at step 70, {run / 'checkpoint_last.pt'} (step 60) is kept" in last
    assert load_checkpoint(run / "checkpoint_last.pt")["step"] == 60
    assert not list(run.glob(".*.tmp"))


def test_patience_stops_a_run_whose_dev_score_stopped_improving_and_says_so(tmp_path):
    """One-token outputs (decode.max_len_* = 0) score BLEU 0 at every evaluation: the first is the best, and
    two more without improvement stop the run at step 30 of 100, saved as at the end of a run."""
    proc = run_mt("train", TINY, *tiny_overrides(tmp_path, **{
        "train.max_steps": 100, "train.eval_every": 10, "train.patience": 2, "decode.max_len_a": 0,
        "decode.max_len_b": 0}))
    assert [r["step"] for r in read_metrics(tmp_path, "dev")] == [10, 20, 30]
    assert "stopped early: dev bleu did not improve in 2 evaluations (train.patience)" in proc.stderr
    summary = proc.stderr.strip().splitlines()[-1]
    assert summary.startswith("stopped early") and "step 30 of 100" in summary
    assert f"best dev bleu 0.00 at step 10: {tmp_path / 'checkpoint_best.pt'}" in summary
    assert load_checkpoint(tmp_path / "checkpoint_last.pt")["step"] == 30
    assert load_checkpoint(tmp_path / "checkpoint_best.pt")["step"] == 10


def test_fine_tuning_starts_from_a_checkpoints_weights_and_tokenizers(trained_tiny, tmp_path):
    """train.init_from: a new run on another corpus (the dev set) starts where the trained model's loss was, not
    at a fresh model's ~ln V, with the checkpoint's tokenizer; a model setting that differs is one line."""
    base = load_checkpoint(trained_tiny / "checkpoint_last.pt")
    tuned = tmp_path / "tuned"
    overrides = {"train.init_from": trained_tiny / "checkpoint_last.pt", "train.max_steps": 10,
                 "train.log_every": 5, "train.eval_every": 10, "data.train_src": DATA / "dev.de",
                 "data.train_tgt": DATA / "dev.en"}
    proc = run_mt("train", TINY, *tiny_overrides(tuned, **overrides))
    assert "fine-tuning: weights of" in proc.stderr and "training sentencepiece" not in proc.stderr
    first = read_metrics(tuned)[0]
    fresh, trained = math.log(500), read_metrics(trained_tiny)[-1]["loss"]  # a new model starts near ln V
    assert first["step"] == 5 and first["loss"] < trained + 0.5 < fresh
    tuned_ckpt = load_checkpoint(tuned / "checkpoint_last.pt")
    assert tuned_ckpt["step"] == 10 and torch.equal(tuned_ckpt["src_tokenizer"], base["src_tokenizer"])
    resumed = run_mt("train", TINY, *tiny_overrides(tuned, **{**overrides, "train.max_steps": 15}))
    assert "resuming from" in resumed.stderr and load_checkpoint(tuned / "checkpoint_last.pt")["step"] == 15
    other = run_mt("train", TINY, *tiny_overrides(tmp_path / "other", **overrides, **{"model.d_ff": 96}),
                   check=False)
    assert "differ from the checkpoint's" in one_error_line(other) and "model.d_ff" in one_error_line(other)


def test_the_first_log_line_after_a_resume_covers_the_same_updates_as_an_uninterrupted_run(tmp_path):
    """A run stopped between two log lines (here at step 15, logging every 10) saves the updates since the last
    line with its checkpoint; resumed, its line at step 20 equals the uninterrupted run's."""
    base = {"train.log_every": 10, "train.save_every": 15, "train.eval_every": 100}
    run_mt("train", TINY, *tiny_overrides(tmp_path / "whole", **base, **{"train.max_steps": 20}))
    args = tiny_overrides(tmp_path / "parts", **base, **{"train.max_steps": 15})
    run_mt("train", TINY, *args)
    run_mt("train", TINY, *args, "--set", "train.max_steps=20")
    whole, parts = (read_metrics(tmp_path / name) for name in ("whole", "parts"))
    at = {name: next(r for r in rows if r["step"] == 20) for name, rows in (("whole", whole), ("parts", parts))}
    assert {k: at["parts"][k] for k in ("loss", "nll", "ppl")} == {k: at["whole"][k] for k in ("loss", "nll", "ppl")}
