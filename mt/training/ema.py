"""An exponential moving average of the weights (`train.ema_decay`): a second copy of the model that follows
the trained one slowly, and often translates better than the weights of the last update.

Not in the paper, which averages the last checkpoints instead (section 6.1; `mt average` does that). This is
fairseq's `--store-ema`, Marian's `--exponential-smoothing` and OpenNMT-py's `average_decay`.
"""

from __future__ import annotations

import copy

import torch
from torch.optim.swa_utils import get_ema_multi_avg_fn

from mt.model.transformer import Transformer


def effective_decay(decay: float, step: int) -> float:
    """The decay at update `step` (from 1): `decay`, but lower in a run's first updates, (1 + step) / (10 + step),
    so the average forgets the random initial weights quickly. This is TensorFlow's ExponentialMovingAverage
    with num_updates, and OpenNMT-py's average_decay; with it one setting suits short runs and long ones."""
    return min(decay, (1 + step) / (10 + step))


class WeightAverage:
    """The averaged weights, as a Transformer on the trained model's device, updated in one fused step."""

    def __init__(self, model: Transformer, decay: float):
        self.decay = decay
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        self._averaged = list(self.model.parameters())
        self._trained = list(model.parameters())

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Move the average towards the trained weights after update `step`: avg = d * avg + (1 - d) * w."""
        get_ema_multi_avg_fn(effective_decay(self.decay, step))(self._averaged, self._trained, None)

    def state_dict(self) -> dict:
        return self.model.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state)
