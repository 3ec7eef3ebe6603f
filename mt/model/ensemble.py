"""Several trained models decoding as one (`mt translate -c A.pt -c B.pt`): at every step the next-token
distributions of the models are averaged, and every search (greedy, beam, sampling) runs on the average.

Probabilities are averaged, not log-probabilities: the mixture is itself a distribution (the search needs no
renormalisation) and a token only one model believes in keeps some probability; it is what fairseq does.
(Marian and OpenNMT-py average log-probabilities: a product of the models, sharper, which needs the renormalising
log_softmax the search applies anyway.)

The ensemble looks like a Transformer to the search: `encode` gives the models' memories side by side in one
tensor (so the search keeps and drops sentences of all models at once), and one DecoderCache holds every
model's decoder layers, each model reading and writing its own.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import torch
from torch import nn

from mt.model.kv_cache import DecoderCache
from mt.masks import CAUSAL
from mt.model.transformer import Transformer


class Ensemble(nn.Module):
    def __init__(self, models: list[Transformer]):
        super().__init__()
        self.models = nn.ModuleList(models)
        self.cfg = replace(models[0].cfg, max_positions=min(m.cfg.max_positions for m in models))
        self.decoder_layers = [layer for m in models for layer in m.decoder_layers]
        self._widths = [m.cfg.d_model for m in models]
        starts = list(itertools.accumulate((len(m.decoder_layers) for m in models), initial=0))
        self._layer_ranges = list(zip(starts, starts[1:]))

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """-> the models' memories side by side, (B, S, sum of their d_model)."""
        return torch.cat([m.encode(src, src_mask) for m in self.models], dim=-1)

    def decode(self, memory, src_mask, tgt_in, tgt_mask=CAUSAL, at: torch.Tensor | None = None) -> torch.Tensor:
        """-> (B, T, V) log of the mean of the models' next-token probabilities (log-probs: a log_softmax of them
        changes nothing); with `at`, (N, V) at those positions only (Transformer.decode)."""
        return _mean_of_probabilities([m.decode(part, src_mask, tgt_in, tgt_mask, at)
                                       for m, part in zip(self.models, self._memories(memory))])

    def decode_step(self, memory, src_mask, tgt_new, cache: DecoderCache) -> torch.Tensor:
        """Transformer.decode_step of every model on its own layers' part of `cache`, averaged as `decode`."""
        return _mean_of_probabilities([m.decode_step(part, src_mask, tgt_new, _LayersOf(cache, *layers))
                                       for m, part, layers in zip(self.models, self._memories(memory),
                                                                  self._layer_ranges)])

    def _memories(self, memory: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return memory.split(self._widths, dim=-1)


def _mean_of_probabilities(logits: list[torch.Tensor]) -> torch.Tensor:
    log_probs = torch.stack([x.float().log_softmax(-1) for x in logits])
    return torch.logsumexp(log_probs, dim=0) - math.log(len(logits))


class _LayersOf:
    """What one model of the ensemble sees of the shared cache: the caches of its own decoder layers."""

    def __init__(self, cache: DecoderCache, start: int, stop: int):
        self.cache, self.start, self.stop = cache, start, stop

    @property
    def offset(self) -> int | torch.Tensor:
        return self.cache.offset

    @property
    def layers(self):
        return self.cache.layers[self.start:self.stop]
