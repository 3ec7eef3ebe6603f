"""Section 5's training recipe: the label-smoothed loss (5.4), the learning-rate schedule (5.3) and Adam (5.3)."""

from __future__ import annotations

import torch

from mt.config import TrainConfig
from mt.symbols import PAD


def noam_lr(step: int, d_model: int, warmup_steps: int, lr_scale: float = 1.0) -> float:
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (section 5.3, eq. 3), times lr_scale."""
    step = max(step, 1)
    return lr_scale * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)


def label_smoothed_loss(logits: torch.Tensor, tgt_out: torch.Tensor, smoothing: float):
    """logits (B, T, V), tgt_out (B, T) (or (N, V) and (N,)) -> (smoothed loss, NLL), each summed over non-PAD
    tokens (section 5.4).

    The smoothed loss per token is torch's cross_entropy with label_smoothing: (1 - eps) * -log p(y) +
    eps / V * sum_v -log p(v). Its gradient is written in one pass (`_SmoothedCrossEntropy`)."""
    flat_logits, flat_target = logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1)
    return _SmoothedCrossEntropy.apply(flat_logits, flat_target, smoothing)


class _SmoothedCrossEntropy(torch.autograd.Function):
    """The label-smoothed cross-entropy and the NLL from one log_softmax, with the gradient with respect to the
    logits written out: softmax - (1 - eps) * onehot(y) - eps / V (rows of PAD targets: 0).

    On a CPU, torch's cross_entropy spent a tenth of a training step of the protocol model (8k vocabulary) in
    log_softmax's backward, filling and adding (N, V) gradients of its parts, and the NLL took a second
    log_softmax; this is one pass each way (docs/benchmarks.md, "Training against fairseq")."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, smoothing: float):
        log_probs = logits.float().log_softmax(-1)
        keep = target != PAD
        nll = -(log_probs.gather(1, target[:, None]).squeeze(1) * keep).sum()
        uniform = -(log_probs.sum(-1) * keep).sum()
        loss = (1.0 - smoothing) * nll + smoothing / logits.size(-1) * uniform
        ctx.save_for_backward(log_probs, target, keep)
        ctx.smoothing, ctx.dtype = smoothing, logits.dtype
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, grad_nll: torch.Tensor):
        log_probs, target, keep = ctx.saved_tensors
        eps, vocab = ctx.smoothing, log_probs.size(-1)
        keep = keep.to(log_probs.dtype)[:, None]  # PAD rows: 0, folded into each row's factors (no pass of its own)
        scale, shift = (grad_loss + grad_nll) * keep, grad_loss * eps / vocab * keep
        grad = log_probs.exp_().mul_(scale).sub_(shift)  # in place: the saved log-probs are ours alone
        grad.scatter_add_(1, target[:, None], -(grad_loss * (1.0 - eps) + grad_nll) * keep)
        return grad.to(ctx.dtype), None, None


def make_optimizer(model: torch.nn.Module, tc: TrainConfig) -> torch.optim.Adam:
    """Adam with the paper's betas and epsilon (section 5.3). Fused: one kernel updates every parameter, and
    it can skip a non-finite update on the device (`found_inf`, as under GradScaler) without a host read."""
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=(tc.adam_beta1, tc.adam_beta2), eps=tc.adam_eps,
                            fused=True)
