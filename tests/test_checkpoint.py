"""Checkpoints (mt/checkpoint.py): what training writes is the one definition, averaging drops exactly the
resume part, and loading is safe: bad files give one line, writes are atomic, GPU files open on a CPU."""

import os

import pytest
import torch

import mt.checkpoint
from mt.checkpoint import (
    MODEL_KEYS,
    RESUME_KEYS,
    average_checkpoints,
    load_checkpoint,
    read_resume_part,
    save_checkpoint,
)
from mt.errors import CheckpointError
from tests.conftest import one_error_line, run_mt


# ---------------------------------------------------------------- what a checkpoint holds


ALWAYS = [key for key in MODEL_KEYS if key != "ema_model"]  # the model part's keys that every checkpoint holds


def test_the_keys_are_those_of_every_checkpoint_mt_has_written():
    """The format is fixed: renaming a field of ModelPart or ResumePart would orphan old checkpoints (best_score,
    once best_bleu, is read under either name)."""
    assert MODEL_KEYS == ("config", "model", "step", "src_tokenizer", "tgt_tokenizer", "ema_model")
    assert RESUME_KEYS == ("optimizer", "scaler", "rng", "data_state", "best_score", "bad_steps", "skipped_updates",
                           "best_step", "evals_since_best", "log_window")


def test_training_writes_exactly_the_defined_keys(trained_tiny):
    for name in ("checkpoint_last.pt", "checkpoint_best.pt", "checkpoint_60.pt"):
        ckpt = load_checkpoint(trained_tiny / name)
        assert list(ckpt) == ["format", *ALWAYS, *RESUME_KEYS], name  # no ema_model without train.ema_decay
        resume = read_resume_part(ckpt, name)
        assert resume.data_state.keys() == {"epoch", "position"} and resume.best_score >= 0


def test_a_checkpoint_from_before_early_stopping_still_resumes(trained_tiny):
    ckpt = load_checkpoint(trained_tiny / "checkpoint_last.pt")
    del ckpt["best_step"], ckpt["evals_since_best"]
    resume = read_resume_part(ckpt, "old.pt")
    assert resume.best_step == -1 and resume.evals_since_best == 0


def test_a_checkpoint_whose_best_score_is_named_best_bleu_still_resumes(trained_tiny):
    ckpt = load_checkpoint(trained_tiny / "checkpoint_last.pt")
    ckpt["best_bleu"] = ckpt.pop("best_score")
    assert read_resume_part(ckpt, "old.pt").best_score == ckpt["best_bleu"]


def test_average_drops_exactly_the_resume_part(trained_tiny, tmp_path):
    paths = [trained_tiny / "checkpoint_30.pt", trained_tiny / "checkpoint_60.pt"]
    averaged = average_checkpoints(paths)
    assert set(averaged) == {*ALWAYS, "averaged_from"} and not set(averaged) & set(RESUME_KEYS)
    assert averaged["averaged_from"] == [str(p) for p in paths]
    save_checkpoint(tmp_path / "avg.pt", averaged)
    with pytest.raises(CheckpointError, match="cannot resume"):
        read_resume_part(load_checkpoint(tmp_path / "avg.pt"), tmp_path / "avg.pt")


# ---------------------------------------------------------------- loading and writing safely


def test_checkpoint_missing_truncated_or_foreign(tmp_path, trained_tiny):
    missing = one_error_line(run_mt("translate", "-c", tmp_path / "none.pt", input="x\n", check=False))
    assert missing == f"error: {tmp_path / 'none.pt'}: no such file"
    data = (trained_tiny / "checkpoint_last.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    cut = one_error_line(run_mt("translate", "-c", tmp_path / "cut.pt", input="x\n", check=False))
    assert "not a readable checkpoint" in cut
    (tmp_path / "text.pt").write_text("hello")
    assert "not a readable checkpoint" in one_error_line(run_mt("info", tmp_path / "text.pt", check=False))
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    assert "not an mt checkpoint" in one_error_line(run_mt("info", tmp_path / "other.pt", check=False))


class Payload:
    """Unpickling this would run code; weights_only loading must refuse it."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_checkpoint_carrying_a_pickled_object_is_refused(tmp_path):
    torch.save({"format": mt.checkpoint.FORMAT, "model": {}, "extra": Payload()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="not an mt checkpoint"):
        load_checkpoint(tmp_path / "evil.pt")
    proc = run_mt("translate", "-c", tmp_path / "evil.pt", input="x\n", check=False)
    assert "not an mt checkpoint" in one_error_line(proc) and "pwned" not in proc.stdout


def test_gpu_checkpoint_loads_on_cpu(trained_tiny, tmp_path, monkeypatch):
    """A file whose tensors are tagged as CUDA tensors (as a GPU run writes them) opens and translates here."""
    ckpt = load_checkpoint(trained_tiny / "checkpoint_last.pt")
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        save_checkpoint(tmp_path / "gpu.pt", {k: v for k, v in ckpt.items() if k != "format"})
    assert b"cuda:0" in (tmp_path / "gpu.pt").read_bytes()
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            torch.load(tmp_path / "gpu.pt", weights_only=True)  # what a naive load does on a CPU machine
    out = run_mt("translate", "-c", tmp_path / "gpu.pt", "--device", "cpu", input="Ein Texteditor.\n")
    assert out.stdout.count("\n") == 1


def test_failed_checkpoint_write_keeps_the_previous_one(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint_last.pt"
    save_checkpoint(path, {"step": 1, "model": {"w": torch.ones(3)}})
    before = path.read_bytes()

    def broken_save(obj, f):
        f.write(b"partial bytes")
        raise OSError("disk full")
    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(CheckpointError, match=r"checkpoint_last.pt: cannot write the checkpoint: disk full$"):
        save_checkpoint(path, {"step": 2, "model": {"w": torch.zeros(3)}})
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path], "no temporary file is left behind"
