"""Several training corpora in one run (`data.train`), e.g. real and back-translated pairs.

Each corpus is bucketed into batches of its own (`token_batches`), with its own shuffled epochs and rank shards
(`BatchSchedule`). Each update's batch comes from one corpus, drawn with probability weight / sum of weights: a
corpus' weight is its share of the batches, and so of the training tokens, whatever its size (a small corpus
with a large weight is repeated; OpenNMT-py's weighted corpora work this way, counted in batches rather than
sentences). The draws depend on the seed and the batch's number alone, so every rank draws the same corpus for
the same update and a resumed run draws exactly as an uninterrupted one.
"""

from __future__ import annotations

import torch

from mt.data.batching import Batch, BatchSchedule, training_batches
from mt.data.corpus import Corpus
from mt.data.languages import temperature_weights
from mt.data.parallel_text import TrainingCorpus

DRAWS_PER_BLOCK = 4096  # corpus draws made at once, from (seed, block number)


class MixedSchedule:
    """Which batch comes next when there are several corpora; `state()` / `load_state()` as BatchSchedule's."""

    def __init__(self, schedules: list[BatchSchedule], weights: list[float], seed: int):
        self.schedules, self.seed = schedules, seed
        self.shares = torch.tensor(weights, dtype=torch.float64) / sum(weights)
        self.pad_to_multiple = schedules[0].pad_to_multiple
        self.drawn = [0] * len(schedules)  # batches handed out from each corpus, on this rank
        self._block_number, self._block = -1, []

    def corpus_of(self, n: int) -> int:
        """The corpus of the n-th batch (from 0): the same on every rank and in every run with this seed."""
        block_number, offset = divmod(n, DRAWS_PER_BLOCK)
        if block_number != self._block_number:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + 7_919 * block_number + 1)
            self._block = torch.multinomial(self.shares, DRAWS_PER_BLOCK, replacement=True,
                                            generator=generator).tolist()
            self._block_number = block_number
        return self._block[offset]

    def next_batch(self) -> Batch:
        k = self.corpus_of(sum(self.drawn))
        self.drawn[k] += 1
        return self.schedules[k].next_batch()

    def state(self) -> dict:
        return {"drawn": list(self.drawn), "corpora": [s.state() for s in self.schedules]}

    def load_state(self, state: dict) -> None:
        if len(state.get("drawn", ())) != len(self.schedules):
            raise ValueError(f"a batch position of {len(state.get('drawn', ()))} corpora, not {len(self.schedules)}")
        self.drawn = list(state["drawn"])
        for schedule, corpus_state in zip(self.schedules, state["corpora"]):
            schedule.load_state(corpus_state)


def corpus_weights(corpora: list[TrainingCorpus], sizes: list[int], temperature: float) -> list[float]:
    """Each corpus' weight: the one data.train gives it (1 if unset); with languages named and no weight given, its
    share by temperature sampling over the pairs kept (`temperature_weights`)."""
    if any(c.src_lang for c in corpora) and all(c.weight is None for c in corpora):
        return temperature_weights(sizes, temperature)
    return [1.0 if c.weight is None else c.weight for c in corpora]


def training_schedule(parts: list[Corpus], batch_tokens: int, weights: list[float], seed: int, rank: int, world: int,
                      pad_to_multiple: int, max_positions: int | None = None) -> BatchSchedule | MixedSchedule:
    """The batch schedule of a run: one corpus' BatchSchedule, or a MixedSchedule over several; pairs longer than
    the model's positions are left out."""
    schedules = [BatchSchedule(part, training_batches(part, batch_tokens, max_positions), seed + k, rank, world,
                               pad_to_multiple) for k, part in enumerate(parts)]
    # One corpus gets seed + 0: exactly the schedule of a run with train_src/train_tgt.
    return schedules[0] if len(schedules) == 1 else MixedSchedule(schedules, weights, seed)


def batch_shares(state: dict) -> list[float] | None:
    """Each corpus' share of the batches handed out so far, from a MixedSchedule's state (None for one corpus)."""
    if "drawn" not in state:
        return None
    total = max(sum(state["drawn"]), 1)
    return [n / total for n in state["drawn"]]
