"""Section 5's training recipe: the label-smoothed loss (5.4), the learning-rate schedule (5.3) and Adam (5.3)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mt.config import TrainConfig
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
