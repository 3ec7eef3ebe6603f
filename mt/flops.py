"""How close a run is to the hardware: FLOPs of a training step, counted from real token counts, and the
device's matmul peak measured on the spot (MFU = achieved FLOP/s / measured peak).
"""

from __future__ import annotations

import time

import torch

from mt.config import ModelConfig


def training_flops(cfg: ModelConfig, vocab: int, src_lengths: torch.Tensor, tgt_lengths: torch.Tensor) -> float:
    """Matmul FLOPs of forward + backward (3x forward) for pairs of real lengths S_i, T_i (EOS/BOS included).

    Per layer, with D = d_model, F = d_ff, 2 FLOPs per multiply-add:
      encoder, per source token: Q,K,V,O projections 8D^2, FFN 4DF, attention scores and sum 4*S_i*D
      decoder, per target token: self-attention 8D^2 + 2*T_i*D (causal: half the square),
               cross-attention Q,O 4D^2 + 4*S_i*D, FFN 4DF; per source token: cross K,V 4D^2
      output projection, per target token: 2DV.
    Padding, layer norms, softmax and element-wise work are not counted (the usual MFU convention).
    """
    d, f, n = cfg.d_model, cfg.d_ff, cfg.n_layers
    s, t = src_lengths.double(), tgt_lengths.double()
    encoder = n * (s * (8 * d * d + 4 * d * f) + 4 * s * s * d)
    decoder = n * (t * (12 * d * d + 4 * d * f) + 2 * t * t * d + 4 * t * s * d + s * 4 * d * d)
    output = t * 2 * d * vocab
    return 3.0 * float((encoder + decoder + output).sum())


def matmul_peak_flops(device: torch.device, dtype: torch.dtype = torch.float32, seconds: float = 0.5) -> float:
    """FLOP/s of a large square matmul on `device` in `dtype`, measured now (a practical peak, not the spec;
    on a machine shared with other work it is what this process can get at that moment)."""
    size = 8192 if device.type == "cuda" else 1024
    own = torch.Generator(device=device).manual_seed(0)  # leave the global RNG (dropout, exact resume) alone
    a = torch.randn(size, size, device=device, dtype=dtype, generator=own)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=own)
    _sync(device)
    a @ b  # warm-up (kernel selection, caches)
    _sync(device)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or runs < 3:
        a @ b
        runs += 1
        if device.type == "cuda" and runs % 10:
            continue
        _sync(device)
    _sync(device)
    return 2.0 * size ** 3 * runs / (time.perf_counter() - start)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
