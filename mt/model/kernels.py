"""CPU kernels of the Transformer's hot paths: linear layers through oneDNN, dropout masks from paired random
bits, and attention written out for a decoding step. Each gives plain torch's numbers (up to the order of
summation) in less time; mt/model/transformer.py calls them and reads as the paper.

One switch routes every kernel here to plain torch (F.linear, F.relu, F.dropout, F.scaled_dot_product_attention):
`MT_PLAIN_TORCH=1` in the environment (read at import), or the block `with mt.model.kernels.plain_torch():`.
tests/model/test_kernels.py checks that a training step and a decode give the same results both ways.
"""

from __future__ import annotations

import contextlib
import math
import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from mt.masks import Causal

_plain = os.environ.get("MT_PLAIN_TORCH", "") not in ("", "0")
_ONEDNN = torch.backends.mkldnn.is_available()


def fast() -> bool:
    """Whether the kernels of this module may run (False under `plain_torch` or with MT_PLAIN_TORCH=1)."""
    return not _plain


@contextlib.contextmanager
def plain_torch(plain: bool = True):
    """Within the block every kernel of this module is plain torch's (with `plain` False: mt's own)."""
    global _plain
    before, _plain = _plain, plain
    try:
        yield
    finally:
        _plain = before


ONEDNN_MIN_ROWS = 160  # inference with fewer rows takes F.linear's MKL sgemm (see onednn_inference)


def onednn_inference(x: torch.Tensor) -> bool:
    """Inference on a CPU in float32 (no gradient asked for) with at least ONEDNN_MIN_ROWS rows, where `linear`
    takes oneDNN's matmul.

    Fewer rows are a decoding step's, whose row count changes almost every step (sentences end, a refilled batch
    grows): oneDNN builds a kernel for every new shape (0.3-0.9 ms at its first call; 704 of them in a greedy
    pass of the dev set), MKL's sgemm does not. Greedy search of the dev set took 5-8% less time with MKL below
    160 rows (both demo models, fresh processes in turns), beam 4 (four rows a sentence) the same within noise,
    and the output texts were the same (docs/design.md, "Linear layers on a CPU")."""
    return (x.numel() >= ONEDNN_MIN_ROWS * x.size(-1) and not _plain and _ONEDNN and not torch.is_grad_enabled()
            and x.device.type == "cpu" and x.dtype == torch.float32)


def onednn_training(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Training on a CPU in float32, eager (not under torch.compile or autocast): `linear` takes `_OneDnnLinear`."""
    return (torch.is_grad_enabled() and not _plain and _ONEDNN and x.device.type == "cpu"
            and x.dtype == weight.dtype == torch.float32 and not torch.is_autocast_enabled("cpu")
            and not torch.compiler.is_compiling())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x W^T + b. On a CPU in float32 through oneDNN's matmul (torch.ops.mkldnn._linear_pointwise, the op
    torch.compile emits for a CPU linear) instead of F.linear's MKL sgemm: with the few rows of a decoding step
    it took 20% less time (40 x 256 by 256 x 4,000: 0.51 against 0.65 ms; torch 2.13, 2 cores), and a greedy
    step of the demo model 10% less; for training see `_OneDnnLinear`."""
    if onednn_inference(x):
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")
    if onednn_training(x, weight):
        return _OneDnnLinear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


class _OneDnnLinear(torch.autograd.Function):
    """x W^T + b and its gradients, for training on a CPU: the forward and the input's gradient (g W) through
    oneDNN's matmul, the weight's gradient (g^T x, a long reduction) through MKL as F.linear's backward does.
    The op has no gradient of its own, hence this function; the numbers are those of a matmul, in another
    order of summation."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")

    @staticmethod
    @once_differentiable  # the op has no gradient: a second derivative through it is refused, not wrong
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        grad_x = grad_weight = grad_bias = None
        rows = grad.reshape(-1, grad.size(-1))
        if ctx.needs_input_grad[0]:
            grad_x = torch.ops.mkldnn._linear_pointwise(grad, weight.t(), None, "none", [], "")
        if ctx.needs_input_grad[1]:
            grad_weight = rows.t() @ x.reshape(-1, x.size(-1))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = rows.sum(0)
        return grad_x, grad_weight, grad_bias


class Transposed:
    """A weight's W^T (in, out), contiguous, for `projection`: made at the first decoding step and again when W
    changes (another tensor, or written in place: an optimizer step, a loaded state)."""

    def __init__(self):
        self.key, self.value = None, None

    def of(self, weight: torch.Tensor) -> torch.Tensor:
        key = (weight.data_ptr(), weight._version, weight.shape)
        if key != self.key:
            self.key, self.value = key, weight.detach().t().contiguous()
        return self.value


def projection(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, kept: Transposed) -> torch.Tensor:
    """x W^T + b for the projection to the vocabulary. A decoding step on a CPU (fewer than ONEDNN_MIN_ROWS rows,
    no gradient) multiplies by W^T kept contiguous (`kept`) rather than by W transposed on the fly: MKL's sgemm
    took 81 against 120 us for a sentence's 4 beams (4 x 256 by 256 x 4,000; 16 rows: 167 against 263; torch
    2.13, 2 cores), for a copy of the matrix in memory while decoding; else `linear`."""
    if (x.numel() < ONEDNN_MIN_ROWS * x.size(-1) and not _plain and not torch.is_grad_enabled()
            and x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32):
        transposed = kept.of(weight)
        return x @ transposed if bias is None else torch.addmm(bias, x.flatten(0, -2), transposed).view(
            *x.shape[:-1], -1)
    return linear(x, weight, bias)


def linear_layer(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """layer(x): an nn.Linear through `linear`; any other module (an int8 Linear of mt/model/quantize.py) by its own
    call."""
    if type(layer) is nn.Linear:
        return linear(x, layer.weight, layer.bias)
    return layer(x)


def linear_relu(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """max(0, layer(x)). For inference on a CPU with an nn.Linear, the ReLU runs inside oneDNN's matmul (a
    post-op) rather than as a pass of its own over the (rows, d_ff) output: the same numbers, and an encoder FFN
    of 4,096 rows took 10.6 ms against 11.1 with freed memory kept, as decoding keeps it (d 256, d_ff 1,024;
    torch 2.13, 2 cores; at 100 rows the same time)."""
    if type(layer) is nn.Linear and onednn_inference(x):
        return torch.ops.mkldnn._linear_pointwise(x, layer.weight, layer.bias, "relu", [], "")
    return F.relu(linear_layer(layer, x))


def training_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """x with each element zeroed with probability p and the others scaled by 1 / (1 - p) (training's dropout).

    On a CPU the mask comes from random bits, two elements to one draw (`keep_mask`): torch's F.dropout draws a
    float per element with bernoulli_, and uniform floats compared with p took most of the time still
    (forward and backward of a 3584 x 256 activation, torch 2.13 on 2 cores: bernoulli_ 6.8 ms, uniform floats
    3.2 ms, paired bits 1.8 ms; 17 dropouts a step in the protocol model). Elsewhere F.dropout (CUDA's kernel
    is fused)."""
    if _plain or x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    return x * (keep_mask(x.shape, p) * (1.0 / (1.0 - p))).to(x.dtype)  # no-op in float32


def keep_mask(shape: torch.Size, p: float) -> torch.Tensor:
    """An int16 CPU tensor of `shape`: each element 0 with probability p rounded to a multiple of 2^-15 (0.1 is
    0.100006), else 1. One int32 draw of torch's generator (31 random bits) gives two elements 15 bits each:
    its two int16 halves, the sign bit of the low one masked off. Compared in place: a bool result took 0.5 ms
    more per 3584 x 256 mask."""
    n = math.prod(shape)
    bits = torch.empty((n + 1) // 2, dtype=torch.int32).random_().view(torch.int16)[:n]
    return bits.bitwise_and_(0x7FFF).ge_(round(p * 32768)).view(shape)


FEW_QUERIES = 32  # at most this many queries per row: a decoding step (a sentence's beams, grouped)


def few_queries_on_cpu(q: torch.Tensor) -> bool:
    """A decoding step on the CPU, where torch's fused attention kernels are slower than eq. 1 written out:
    2-4x on a decoding step's shapes (a few queries per row, 10-60 keys), measured with torch 2.13 on 2 cores;
    the gap is the kernel's per-block work, which a handful of queries cannot amortise."""
    return not _plain and q.device.type == "cpu" and q.size(2) <= FEW_QUERIES


def attention(q, k, v, mask: torch.Tensor | Causal | None, dropout: float, training: bool) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k)) v (eq. 1): q (B, H, Lq, D/H), k/v (B, H, Lk, D/H) -> (B, H, Lq, D/H).
    `mask`: (B, 1, Lq|1, Lk) boolean, True = may attend; CAUSAL (mt/masks.py): key j is visible from query i
    when j <= i, left to SDPA (no mask tensor, so it may pick its fastest kernel); None: every key is visible.
    torch's fused kernel, or eq. 1 written out for a decoding step on a CPU (`few_queries_on_cpu`)."""
    causal = isinstance(mask, Causal)
    if causal:
        mask = None
    if not training and few_queries_on_cpu(q):
        return written_out_attention(q, k, v, mask, causal)[0]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal)


def written_out_attention(q, k, v, mask, causal: bool = False, dropout: float = 0.0):
    """softmax(q k^T / sqrt(d_k)) v (eq. 1) written out -> the output (B, H, Lq, D/H) and the weights
    (B, H, Lq, Lk); masked keys get exactly 0. `mask` and `causal` mean what they mean to SDPA."""
    scores = (q @ k.transpose(-2, -1)).div_(math.sqrt(q.size(-1)))  # in place: a decoding step makes fewer tensors
    if causal:  # SDPA's is_causal: key j is visible from query i when j <= i
        scores.masked_fill_(~torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril(), float("-inf"))
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return (F.dropout(weights, p=dropout) if dropout else weights) @ v, weights
