"""What a checkpoint holds, defined once; save, load, average and upgrade. Writes are atomic; loads never run
code from the file.

A checkpoint is a dict of tensors, numbers, strings, lists and dicts, so `torch.load(weights_only=True)` reads
it: "format" (`FORMAT`), the keys of `ModelPart` (all that translating needs) and, in what training writes,
the keys of `ResumePart` (what continuing the run needs). An averaged checkpoint holds no resume part; it
names its sources in "averaged_from".
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import NamedTuple

import torch

from mt.config import model_settings
from mt.errors import CheckpointError
from mt.atomic_files import atomic_write

FORMAT = "mt-checkpoint-1"


class ModelPart(NamedTuple):
    """The keys every checkpoint holds: enough to rebuild the model and its tokenizers and translate."""

    config: dict  # config_to_dict(cfg)
    model: dict  # the state_dict of the Transformer (never of its DDP or compiled wrapper)
    step: int  # updates done
    src_tokenizer: torch.Tensor  # the SentencePiece model as bytes (Tokenizer.to_tensor)
    tgt_tokenizer: torch.Tensor
    ema_model: dict | None = None  # with train.ema_decay: the averaged weights (mt/training/ema.py), which translating,
    # averaging and exporting use unless asked for the raw ones (`translation_weights`)


class ResumePart(NamedTuple):
    """The keys only continuing a run needs; training writes them, averaging drops them."""

    optimizer: dict  # Adam's state_dict (fused)
    scaler: dict  # the GradScaler's state_dict
    rng: dict  # {"torch": CPU generator state, "cuda": one state per GPU, where CUDA is available}
    data_state: dict  # the batch schedule's position after the last batch trained on: {"epoch", "position"}
    best_score: float  # the best dev score of train.best_metric so far (BLEU, chrF, or minus the dev loss), -1 or
    # -inf before the first evaluation; read from `best_bleu` in checkpoints written before it had this name
    bad_steps: int  # consecutive non-finite losses
    skipped_updates: int  # updates skipped for a non-finite loss since the run began
    best_step: int = -1  # the step of that best score (absent before early stopping: -1)
    evals_since_best: int = 0  # dev evaluations since it, for train.patience
    log_window: tuple = ()  # the updates since the last log line (mt.training.loop.Window.pending), so that the first
    # line after a resume covers the same updates as an uninterrupted run's


MODEL_KEYS = ModelPart._fields
RESUME_KEYS = ResumePart._fields


def checkpoint_dict(model_part: ModelPart, resume_part: ResumePart | None = None) -> dict:
    """The dict `save_checkpoint` writes: the model part's keys (ema_model only when there is one), then the
    resume part's if given."""
    model_keys = {k: v for k, v in model_part._asdict().items() if not (k == "ema_model" and v is None)}
    return {**model_keys, **(resume_part._asdict() if resume_part is not None else {})}


def translation_weights(ckpt: dict, raw: bool = False) -> dict:
    """The model state a checkpoint translates with: its averaged weights when it has them (train.ema_decay),
    unless `raw`; otherwise the weights of its last update."""
    return ckpt["model"] if raw or ckpt.get("ema_model") is None else ckpt["ema_model"]


def read_resume_part(ckpt: dict, path: str | Path) -> ResumePart:
    """The resume part of a loaded checkpoint; a CheckpointError if it cannot continue a run."""
    if ckpt.get("separate_qkv"):
        raise CheckpointError(f"{path}: saved by an older mt (separate Q, K, V projections); it still translates "
                              "and averages, but its optimizer state cannot resume: pass --restart to start over")
    if "best_bleu" in ckpt and "best_score" not in ckpt:  # written before the key had its present name
        ckpt = {**ckpt, "best_score": ckpt["best_bleu"]}
    missing = [key for key in RESUME_KEYS if key not in ckpt and key not in ResumePart._field_defaults]
    if missing:
        raise CheckpointError(f"{path}: holds no {', '.join(missing)} (an averaged checkpoint?); it translates but "
                              "cannot resume: pass --restart to start over")
    if not all(group.get("fused") for group in ckpt["optimizer"]["param_groups"]):
        raise CheckpointError(f"{path}: saved by an older mt (unfused Adam); it still translates and averages, but "
                              "cannot resume: pass --restart to start over")
    return ResumePart(**{key: ckpt[key] for key in RESUME_KEYS if key in ckpt})


def load_tensors(path: str | Path) -> dict:
    """`torch.load` on the CPU with weights_only=True; every failure becomes a one-line CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:  # a random file, or a pickle of arbitrary objects (unsafe to load)
        raise CheckpointError(f"{path}: not an mt checkpoint (not a file of tensors and plain values)") from None
    except Exception as e:  # truncated zip, a text file, a legacy pickle...: torch raises many kinds
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt)") from e  # MT_DEBUG shows e
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: not an mt file")
    return obj


def load_checkpoint(path: str | Path) -> dict:
    """A checkpoint dict; one saved before fused attention projections gets its model state upgraded and
    `separate_qkv` set (it translates and averages, but its optimizer state no longer fits for resuming)."""
    ckpt = load_tensors(path)
    if ckpt.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an mt checkpoint")
    missing = [key for key in MODEL_KEYS if key not in ckpt and key not in ModelPart._field_defaults]
    if missing or not isinstance(ckpt["model"], dict):
        raise CheckpointError(f"{path}: damaged, it holds no {(missing or ['model'])[0]}; use another checkpoint")
    if any(".q_proj." in name for name in ckpt["model"]):  # (no such checkpoint holds ema_model)
        ckpt = {**ckpt, "model": upgrade_state_dict(ckpt["model"]), "separate_qkv": True}
    return ckpt


def load_weights(model: torch.nn.Module, state: dict, path: str | Path) -> None:
    """`model.load_state_dict(state)`; weights that do not fit the model the checkpoint's config describes
    (a damaged file, an edited config) are a one-line CheckpointError naming the first misfit."""
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        detail = next((line.strip() for line in str(e).splitlines()[1:] if line.strip()), str(e))
        raise CheckpointError(f"{path}: its weights do not fit the model its config describes ({detail})") from None


def upgrade_state_dict(state: dict) -> dict:
    """A model state from before fused projections (separate q_proj, k_proj, v_proj) in today's layout."""
    state = dict(state)
    for q_name in [k for k in state if k.endswith(".q_proj.weight") or k.endswith(".q_proj.bias")]:
        prefix, kind = q_name.rsplit(".q_proj.", 1)
        parts = [state.pop(f"{prefix}.{name}.{kind}") for name in ("q_proj", "k_proj", "v_proj")]
        state[f"{prefix}.in_proj.{kind}"] = torch.cat(parts)
    return state


def save_checkpoint(path: Path, ckpt: dict) -> None:
    """Write `ckpt` to `path` completely or not at all; a failure is a one-line CheckpointError with the
    operating system's reason, and whatever `path` held before is left as it was."""
    try:
        atomic_save(path, {"format": FORMAT, **ckpt})
    except OSError as e:
        raise CheckpointError(f"{path}: cannot write the checkpoint: {e.strerror or e}") from None


def average_checkpoints(paths: list[str | Path], raw: bool = False) -> dict:
    """The first checkpoint without its resume part, its model parameters replaced by the mean over all `paths`
    (section 6.1) of their `translation_weights`, and "averaged_from" naming `paths`."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    first = load_checkpoint(paths[0])
    first["model"] = translation_weights(first, raw)
    total = {k: v.double() if v.is_floating_point() else v for k, v in first["model"].items()}
    for path in paths[1:]:
        ckpt = load_checkpoint(path)
        model = translation_weights(ckpt, raw)
        if model.keys() != total.keys() or any(model[k].shape != total[k].shape for k in total):
            raise CheckpointError(f"{path}: model differs in shape from {paths[0]}; cannot average")
        for side in ("src_tokenizer", "tgt_tokenizer"):  # same sizes are not enough: the ids must mean the same
            if not torch.equal(ckpt[side], first[side]):
                raise CheckpointError(f"{path}: its {side.split('_')[0]} vocabulary differs from {paths[0]}'s; "
                                      "cannot average")
        for k, v in model.items():
            if v.is_floating_point():
                total[k] += v.double()
    averaged = {k: (v / len(paths)).to(first["model"][k].dtype) if v.is_floating_point() else v
                for k, v in total.items()}
    dropped = {*RESUME_KEYS, "format", "separate_qkv", "ema_model"}  # saved in today's layout, one set of weights
    return {**{k: v for k, v in first.items() if k not in dropped}, "model": averaged,
            "averaged_from": [str(p) for p in paths]}


def step_checkpoints(output_dir: str | Path) -> list[Path]:
    """`checkpoint_<step>.pt` files in step order."""
    found = [(int(p.stem.split("_")[1]), p) for p in Path(output_dir).glob("checkpoint_*.pt")
             if p.stem.split("_")[1].isdigit()]
    return [p for _, p in sorted(found)]


def init_source(path: str | Path, model_cfg: dict, joint: bool) -> dict:
    """The checkpoint `train.init_from` names, loaded, after checking that this config builds the same model
    from it: the model settings and tokenizer.joint equal the checkpoint's (a one-line error names those that
    differ)."""
    ckpt = load_checkpoint(path)
    saved = ckpt["config"]
    saved_model = model_settings(saved["model"])
    differ = [f"model.{key}" for key, value in model_cfg.items() if saved_model.get(key) != value]
    if saved["tokenizer"].get("joint") != joint:
        differ.append("tokenizer.joint")
    if differ:
        raise CheckpointError(f"train.init_from {path}: this config's {', '.join(differ)} differ from the "
                              "checkpoint's; fine-tuning keeps its model")
    return ckpt


def atomic_save(path: Path, obj) -> None:
    """torch.save, atomically. A failed write raises the operating system's OSError (disk full, file too large,
    ...), which torch's zip writer would only report as "unexpected pos"."""
    def save(f):
        sink = _RecordingWriter(f)
        try:
            torch.save(obj, sink)
        except RuntimeError:
            if sink.error is not None:
                raise sink.error from None
            raise

    atomic_write(path, save)


class _RecordingWriter:
    """A file's `write` that keeps the first OSError it raised."""

    def __init__(self, file):
        self.file, self.error = file, None

    def write(self, data) -> int:
        try:
            return self.file.write(data)
        except OSError as e:
            self.error = self.error or e
            raise

    def flush(self) -> None:
        self.file.flush()
