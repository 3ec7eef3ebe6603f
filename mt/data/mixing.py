"""Several training corpora in one run (`data.train`), e.g. real and back-translated pairs, or the directions of
a multilingual model.

Weighted corpora (`MixedSchedule`): each corpus is bucketed into batches of its own (`token_batches`), with its
own shuffled epochs and rank shards (`BatchSchedule`). Each update's batch comes from one corpus, drawn with
probability weight / sum of weights: a corpus' weight is its share of the batches, and so of the training
tokens, whatever its size (a small corpus with a large weight is repeated; OpenNMT-py's weighted corpora work
this way, counted in batches rather than sentences). The draws depend on the seed and the batch's number alone,
so every rank draws the same corpus for the same update and a resumed run draws exactly as an uninterrupted one.

The directions of a multilingual run sampled with a temperature (`PooledSchedule`): every batch mixes them, as
Johnson et al. (2017) shuffle their language pairs together. Each epoch takes each corpus' share of the pairs
(all of its pairs as many times as the share holds them, then a random part, drawn from the seed and the
epoch), shuffles them, and buckets them together by length, so that the pairs of one length, and so each batch,
mix the corpora. Batches of one direction each learned far slower: on the shipped de-en corpus trained both
ways (the demo's model, 600 updates), dev loss 5.75 and BLEU 0.65 with a corpus drawn per batch, 5.05 and 1.00
with the corpora pooled but each length's pairs in corpus order (four batches in five of one direction), 4.20
and 4.71 with every batch mixed.
"""

from __future__ import annotations

import numpy as np
import torch

from mt.data.batching import Batch, BatchPlan, BatchSchedule, token_batches, training_batches
from mt.data.corpus import Corpus
from mt.data.languages import temperature_weights
from mt.data.parallel_text import TrainingCorpus
from mt.errors import DataError

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


class PooledSchedule(BatchSchedule):
    """Batches that mix the corpora (the module's docstring): `corpus` holds them one after another, `sizes`
    pairs each, and `shares` says each one's share of an epoch's pairs."""

    def __init__(self, corpus: Corpus, sizes: list[int], shares: list[float], batch_tokens: int, seed: int,
                 rank: int = 0, world: int = 1, pad_to_multiple: int = 1, max_positions: int | None = None):
        self.bounds = np.cumsum([0, *sizes])
        self.shares = [s / sum(shares) for s in shares]
        self.batch_tokens, self.max_positions, self.seed = batch_tokens, max_positions, seed
        self.costs = corpus.costs().numpy()
        self._plan_epoch = 1
        super().__init__(corpus, self._epoch_plan(1), seed, rank, world, pad_to_multiple)

    def _epoch_plan(self, epoch: int) -> BatchPlan:
        rng = np.random.default_rng([self.seed, epoch])
        pool, total = [], int(self.bounds[-1])
        for start, stop, share in zip(self.bounds[:-1].tolist(), self.bounds[1:].tolist(), self.shares):
            repeats, rest = divmod(round(share * total), stop - start)
            drawn = start + np.sort(rng.choice(stop - start, rest, replace=False))
            pool += [np.tile(np.arange(start, stop), repeats), drawn]
        pool = rng.permutation(np.concatenate(pool))  # pairs of one length in random order: batches mix corpora
        if self.max_positions is not None:  # as training_batches: pairs longer than the model's positions left out
            pool = pool[self.costs[pool] <= self.max_positions]
        plan = token_batches(self.costs[pool], self.batch_tokens)
        return BatchPlan(pool[plan.order], plan.bounds)

    def _epoch_order(self) -> list[int]:
        if self._plan_epoch != self.epoch:
            self.plan, self._plan_epoch = self._epoch_plan(self.epoch), self.epoch
        return super()._epoch_order()

    def load_state(self, state: dict) -> None:
        if "drawn" in state:
            raise DataError("the checkpoint's batch position is of batches drawn per corpus (an earlier mt's "
                            "multilingual run): continue it with that version, or pass --restart")
        super().load_state(state)


def pools_directions(corpora: list[TrainingCorpus]) -> bool:
    """Whether a run samples its corpora with a temperature and mixes them in every batch: languages named, no
    weight given."""
    return any(c.src_lang for c in corpora) and all(c.weight is None for c in corpora)


def corpus_weights(corpora: list[TrainingCorpus], sizes: list[int], temperature: float) -> list[float]:
    """Each corpus' weight: the one data.train gives it (1 if unset); with languages named and no weight given, its
    share by temperature sampling over the pairs kept (`temperature_weights`)."""
    if pools_directions(corpora):
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
