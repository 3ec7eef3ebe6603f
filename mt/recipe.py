"""One training update: the label-smoothed loss (section 5.4), the learning-rate schedule (5.3), Adam, and an
update over accumulated batches that keeps its sums on the device."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from mt.config import TrainConfig
from mt.flops import training_flops
from mt.runtime import Runtime
from mt.symbols import PAD


def noam_lr(step: int, d_model: int, warmup_steps: int, lr_scale: float = 1.0) -> float:
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (section 5.3, eq. 3), times lr_scale."""
    step = max(step, 1)
    return lr_scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def label_smoothed_loss(logits: torch.Tensor, tgt_out: torch.Tensor, smoothing: float):
    """logits (B, T, V), tgt_out (B, T) -> (smoothed loss, NLL), each summed over non-PAD tokens (section 5.4)."""
    flat_logits, flat_target = logits.reshape(-1, logits.size(-1)).float(), tgt_out.reshape(-1)
    loss = F.cross_entropy(flat_logits, flat_target, ignore_index=PAD, label_smoothing=smoothing, reduction="sum")
    nll = F.cross_entropy(flat_logits, flat_target, ignore_index=PAD, reduction="sum")
    return loss, nll


def make_optimizer(model: torch.nn.Module, tc: TrainConfig) -> torch.optim.Adam:
    """Adam with the paper's betas and epsilon (section 5.3). Fused: one kernel updates every parameter, and
    it can skip a non-finite update on the device (`found_inf`, as under GradScaler) without a host read."""
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=(tc.adam_beta1, tc.adam_beta2), eps=tc.adam_eps,
                            fused=True)


def training_model(model: torch.nn.Module, tc: TrainConfig, rt: Runtime) -> torch.nn.Module:
    """What the loop calls: the model, wrapped in DDP under torchrun, compiled with `train.compile`.

    torch.compile specialises on the first batch shape and recompiles once with dynamic shapes when a second
    shape arrives, so a run compiles about two graphs, not one per batch shape.
    """
    wrapped = DistributedDataParallel(model) if rt.distributed else model
    return torch.compile(wrapped) if tc.compile else wrapped


def train_step(cfg, rt, model, step_model, optimizer, scaler, batches) -> tuple[torch.Tensor, float, torch.Tensor]:
    """One optimizer update over `accum_steps` batches -> (device tensor [smoothed loss, NLL, target tokens]
    summed on all ranks, this rank's FLOPs, device bool: the update was skipped for a non-finite loss).

    Gradients are of the loss per target token over the whole update (summed, then divided by the token count).
    """
    tc = cfg.train
    micro = [batches.next_batch() for _ in range(tc.accum_steps)]
    n_tokens = sum(b.n_tokens for b in micro)
    sums = torch.zeros(3, device=rt.device)
    sums[2] = n_tokens
    for i, batch in enumerate(micro):
        sync = i == len(micro) - 1 or not rt.distributed
        with (contextlib.nullcontext() if sync else step_model.no_sync()), rt.autocast():
            logits = step_model(batch.src, batch.src_mask, batch.tgt_in)
            loss, nll = label_smoothed_loss(logits, batch.tgt_out, tc.label_smoothing)
        scaler.scale(loss / n_tokens).backward()
        sums[:2] += torch.stack([loss.detach(), nll.detach()])
    sums = rt.sum(sums)
    skipped = ~torch.isfinite(sums[0])
    apply_update(tc, model, optimizer, scaler, skipped)
    flops = sum(training_flops(cfg.model, model.tgt_embed.tokens.num_embeddings, b.src_lengths, b.tgt_lengths)
                for b in micro)
    return sums, flops, skipped


def apply_update(tc: TrainConfig, model, optimizer, scaler, skip: torch.Tensor) -> None:
    """Clip (optional) and step. With a non-finite loss the fused optimizer leaves parameters and moments
    untouched (`found_inf`); under fp16 the GradScaler does the same for overflowing gradients and backs off."""
    if tc.clip_norm > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc.clip_norm, foreach=True)
    if scaler.is_enabled():
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.found_inf = skip.float()
        optimizer.step()
        del optimizer.found_inf
    optimizer.zero_grad(set_to_none=True)
