"""One optimizer update: the model as the loop calls it (DDP, torch.compile), accumulated batches whose loss
sums stay on the device, and a step that skips a non-finite update without reading the device."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel

from mt.data.batching import BatchPrefetcher
from mt.config import Config, TrainConfig
from mt.training.ema import WeightAverage
from mt.training.flops import training_flops
from mt.model.transformer import Transformer
from mt.training.recipe import label_smoothed_loss, make_optimizer
from mt.runtime import Runtime


@dataclass
class Learner:
    """What an update changes, and what changes it."""

    model: Transformer  # the parameters; what a checkpoint saves
    step_model: torch.nn.Module  # what the loop calls: `model` wrapped in DDP and/or compiled, or `model` itself
    optimizer: torch.optim.Adam
    scaler: torch.amp.GradScaler  # enabled under fp16 only
    ema: WeightAverage | None = None  # with train.ema_decay: the moving average of `model`'s weights

    @property
    def eval_model(self) -> Transformer:
        """What dev evaluation (and so checkpoint_best.pt) scores: the moving average when there is one."""
        return self.ema.model if self.ema is not None else self.model


def make_learner(model: Transformer, tc: TrainConfig, rt: Runtime) -> Learner:
    scaler = torch.amp.GradScaler("cuda", enabled=rt.autocast_dtype == torch.float16)
    ema = WeightAverage(model, tc.ema_decay) if tc.ema_decay > 0 else None
    return Learner(model, training_model(model, tc, rt), make_optimizer(model, tc), scaler, ema)


def training_model(model: torch.nn.Module, tc: TrainConfig, rt: Runtime) -> torch.nn.Module:
    """What the loop calls: the model, wrapped in DDP under torchrun, compiled with `train.compile`.

    torch.compile specialises on the first batch shape and recompiles once with dynamic shapes when a second
    shape arrives, so a run compiles about two graphs, not one per batch shape.
    """
    wrapped = DistributedDataParallel(model) if rt.distributed else model
    return torch.compile(wrapped) if tc.compile else wrapped


def train_step(cfg: Config, rt: Runtime, learner: Learner,
               prefetcher: BatchPrefetcher) -> tuple[torch.Tensor, float, torch.Tensor]:
    """One optimizer update over `accum_steps` batches -> (device tensor [smoothed loss, NLL, target tokens]
    summed on all ranks, this rank's FLOPs, device bool: the update was skipped for a non-finite loss).

    Gradients are of the loss per target token over the whole update (summed, then divided by the token count).
    """
    tc = cfg.train
    micro = [prefetcher.next_batch() for _ in range(tc.accum_steps)]
    n_tokens = sum(b.n_tokens for b in micro)
    sums = torch.zeros(3, device=rt.device)
    sums[2] = n_tokens
    for i, batch in enumerate(micro):
        sync = i == len(micro) - 1 or not rt.distributed
        with (contextlib.nullcontext() if sync else learner.step_model.no_sync()), rt.autocast():
            real = batch.real_targets
            logits = learner.step_model(batch.src, batch.src_mask, batch.tgt_in, at=real)  # (real targets, V)
            loss, nll = label_smoothed_loss(logits, batch.tgt_out.view(-1)[real], tc.label_smoothing)
        learner.scaler.scale(loss / n_tokens).backward()
        sums[:2] += torch.stack([loss.detach(), nll.detach()])
    sums = rt.sum(sums)
    skipped = ~torch.isfinite(sums[0])
    apply_update(tc, learner, skipped)
    vocab = learner.model.tgt_embed.tokens.num_embeddings
    flops = sum(training_flops(cfg.model, vocab, b.src_lengths, b.tgt_lengths) for b in micro)
    return sums, flops, skipped


def apply_update(tc: TrainConfig, learner: Learner, skip: torch.Tensor) -> None:
    """Clip (optional) and step. With a non-finite loss the fused optimizer leaves parameters and moments
    untouched (`found_inf`); under fp16 the GradScaler does the same for overflowing gradients and backs off."""
    optimizer, scaler = learner.optimizer, learner.scaler
    if tc.clip_norm:  # None (a TrainConfig made in code, not by config_from_dict) or 0: not clipped
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(learner.model.parameters(), tc.clip_norm, foreach=True)
    if scaler.is_enabled():
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.found_inf = skip.float()
        optimizer.step()
        del optimizer.found_inf
    optimizer.zero_grad(set_to_none=True)
