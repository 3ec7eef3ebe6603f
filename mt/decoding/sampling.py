"""Sampling's draw: each row's next token from the model's distribution (temperature, top-k, top-p), from a
random stream of the row's own. Greedy search (mt/decoding/search.py) calls it instead of taking the most probable token."""

from __future__ import annotations

import numpy as np
import torch

from mt.config import DecodeConfig


class Sampler:
    """Draws each row's next token from the model's distribution, reshaped by temperature, top-k and top-p (the
    nucleus, Holtzman et al., 2020), by inverse transform: one uniform number per row and step.

    Every row has a random stream of its own, seeded from (seed, line number, sample number), so what a line
    draws depends on those alone, not on the lines that share its batch or on the batch size.
    """

    def __init__(self, opts: DecodeConfig):
        self.temperature, self.topk, self.topp, self.seed = opts.temperature, opts.topk, opts.topp, opts.seed
        self.streams: dict[int, torch.Generator] = {}

    def add(self, row: int, line: int, sample: int) -> None:
        self.streams[row] = torch.Generator().manual_seed(_row_seed(self.seed, line, sample))

    def drop(self, rows: list[int]) -> None:
        for row in rows:
            del self.streams[row]

    def draw(self, log_probs: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """(N, V) next-token log-probs of the rows `rows` (their ids) -> (N,) drawn tokens."""
        logits = log_probs / self.temperature
        if 0 < self.topk < logits.size(-1):
            kth = logits.topk(self.topk, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs, order = logits.softmax(-1), None
        if self.topp < 1.0:  # keep the most probable tokens until they hold topp (the first always stays)
            probs, order = probs.sort(dim=-1, descending=True, stable=True)
            probs = probs.masked_fill(probs.cumsum(-1) - probs >= self.topp, 0.0)
        cdf = probs.cumsum(-1)  # in token order, or in order of probability for top-p (no sort otherwise)
        uniform = torch.tensor([torch.rand((), generator=self.streams[r]).item() for r in rows], dtype=cdf.dtype)
        pick = (cdf < uniform.to(cdf.device)[:, None] * cdf[:, -1:]).sum(-1).clamp(max=cdf.size(-1) - 1)
        return pick if order is None else order.gather(1, pick[:, None]).squeeze(1)


def _row_seed(seed: int, line: int, sample: int) -> int:
    """A 64-bit seed mixed from three numbers (numpy's SeedSequence: nearby inputs give unrelated streams)."""
    return int(np.random.SeedSequence([seed, line, sample]).generate_state(1, np.uint64)[0])
