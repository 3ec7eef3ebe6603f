"""`mt translate --quantize int8`: dynamic int8 quantization for CPU decoding.

Linear weights are stored in int8 (one scale per output channel); activations are quantized per call at run
time (torch.ao.quantization.quantize_dynamic). Embedding lookups stay in float32.
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from mt.model.transformer import Transformer


def quantized_linears(model: Transformer) -> set[str]:
    """Names of the Linear layers to quantize: all but cross-attention's `in_proj`, whose rows mt slices into
    q and k/v (a quantized layer has no weight matrix to slice)."""
    return {name for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and not name.endswith("cross_attn.in_proj")}


def quantize_int8(model: Transformer) -> Transformer:
    """A CPU copy of `model` in eval mode with int8 Linear layers, the pre-softmax projection included.

    With tied embeddings the projection is F.linear with the embedding matrix (3.4); it is the largest matrix
    a decoding step multiplies by, so it gets its own int8 Linear copy while the lookups keep the float table.
    """
    model = copy.deepcopy(model).cpu().eval()
    if model.output is None:
        weight = model.tgt_embed.tokens.weight
        model.output = nn.Linear(weight.size(1), weight.size(0), bias=False)
        model.output.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
        return torch.ao.quantization.quantize_dynamic(model, quantized_linears(model), dtype=torch.qint8,
                                                      inplace=True)
