"""Save, load and average checkpoints. Writes are atomic; loads never run code from the file.

A checkpoint holds only tensors, numbers, strings, lists and dicts, so `torch.load(weights_only=True)` reads it:
{"format", "config", "model", "step", "src_tokenizer", "tgt_tokenizer", and for resuming "optimizer", "scaler",
"rng", "data_state", "best_bleu", "bad_steps"}.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from pathlib import Path

import torch

from mt.errors import CheckpointError

FORMAT = "mt-checkpoint-1"


def atomic_write(path: Path, write) -> None:
    """Write through `write(file)` to a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_save(path: Path, obj) -> None:
    atomic_write(path, lambda f: torch.save(obj, f))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def load_tensors(path: str | Path) -> dict:
    """`torch.load` on the CPU with weights_only=True; every failure becomes a one-line CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "unsupported content"
        raise CheckpointError(f"{path}: refused to load: it contains objects other than tensors and plain "
                              f"values ({first})") from None
    except Exception as e:  # truncated zip, a text file, a legacy pickle...: torch raises many kinds
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt?): {reason}") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: not an mt file")
    return obj


def load_checkpoint(path: str | Path) -> dict:
    """A checkpoint dict; one saved before fused attention projections gets its model state upgraded and
    `separate_qkv` set (it translates and averages, but its optimizer state no longer fits for resuming)."""
    from mt.model import upgrade_state_dict

    ckpt = load_tensors(path)
    if ckpt.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an mt checkpoint")
    if any(".q_proj." in name for name in ckpt["model"]):
        ckpt = {**ckpt, "model": upgrade_state_dict(ckpt["model"]), "separate_qkv": True}
    return ckpt


def save_checkpoint(path: Path, ckpt: dict) -> None:
    atomic_save(path, {"format": FORMAT, **ckpt})


def average_checkpoints(paths: list[str | Path]) -> dict:
    """The first checkpoint with its model parameters replaced by the mean over all `paths` (section 6.1)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = load_checkpoint(paths[0])
    total = {k: v.double() if v.is_floating_point() else v for k, v in first["model"].items()}
    for path in paths[1:]:
        model = load_checkpoint(path)["model"]
        if model.keys() != total.keys() or any(model[k].shape != total[k].shape for k in total):
            raise CheckpointError(f"{path}: model differs in shape from {paths[0]}; cannot average")
        for k, v in model.items():
            if v.is_floating_point():
                total[k] += v.double()
    averaged = {k: (v / len(paths)).to(first["model"][k].dtype) if v.is_floating_point() else v
                for k, v in total.items()}
    resume_only = ("optimizer", "scaler", "rng", "data_state", "bad_steps")
    dropped = (*resume_only, "format", "separate_qkv")  # the averaged model is saved in today's layout
    return {**{k: v for k, v in first.items() if k not in dropped}, "model": averaged,
            "averaged_from": [str(p) for p in paths]}


def step_checkpoints(output_dir: str | Path) -> list[Path]:
    """`checkpoint_<step>.pt` files in step order."""
    found = [(int(p.stem.split("_")[1]), p) for p in Path(output_dir).glob("checkpoint_*.pt")
             if p.stem.split("_")[1].isdigit()]
    return [p for _, p in sorted(found)]
