"""Token-bucketed padded batches from an encoded Corpus, built ahead of time in a background thread.

Four pieces, each answering one question:
- `BatchPlan`: which pair indices form each batch (fixed for the run, `token_batches`).
- `BatchSchedule`: which batch comes next (epochs, shuffling, rank shards, a resumable position).
- `Batch`: one padded batch of tensors, gathered by `collate` from the corpus' flat token arrays in a few
  tensor operations (no loop over sentences).
- `BatchPrefetcher`: the next batches of a schedule kept ready by a background thread (pinned on CUDA), so
  the training loop never waits on Python building tensors.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import numpy as np
import torch

from mt.data.corpus import Corpus
from mt.errors import DataError
from mt.masks import padding_mask
from mt.symbols import BOS, EOS, PAD


def round_up(n: torch.Tensor | int, multiple: int):
    return (n + multiple - 1) // multiple * multiple


class BatchPlan:
    """Which pair indices form each batch, as two arrays: `order` holds the pair indices sorted by length and batch i is
    order[bounds[i]:bounds[i + 1]]. That is 8 bytes a pair, where a list of lists of Python ints costs
    about ten times more and grows a training process with the corpus."""

    def __init__(self, order: np.ndarray, bounds: np.ndarray):
        self.order, self.bounds = order, bounds

    def __len__(self) -> int:
        return len(self.bounds) - 1

    def __getitem__(self, i: int) -> list[int]:
        return self.order[self.bounds[i]:self.bounds[i + 1]].tolist()

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def sizes(self) -> np.ndarray:
        return np.diff(self.bounds)


def token_batches(lengths, batch_tokens: int) -> BatchPlan:
    """Group indices, sorted by length (ties by index), so that (batch size x longest length) <= batch_tokens.

    A single item longer than `batch_tokens` gets a batch of its own. The loop runs once per batch, not per item.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    ascending = lengths[order]
    bounds, start = [0], 0
    while start < len(order):
        # Lengths ascend, so a batch starting here holds at most batch_tokens // ascending[start] items, and
        # (longest x size) = ascending[j] * (j - start + 1) only grows with j: count the prefix that fits.
        window = ascending[start:start + max(1, batch_tokens // max(1, int(ascending[start])))]
        fits = window * np.arange(1, len(window) + 1) <= batch_tokens
        start += max(1, int(fits.sum()))
        bounds.append(start)
    small = np.int32 if len(order) < 2**31 else np.int64
    return BatchPlan(order.astype(small), np.array(bounds, dtype=np.int64))


def training_batches(corpus: Corpus, batch_tokens: int, max_positions: int | None = None) -> BatchPlan:
    """Token-bucketed batches; the cost of a pair is its longer side including BOS/EOS (fairseq's max_tokens).
    Rounding lengths up to `data.pad_to_multiple` widens the tensors, not the batch: the same pairs either way.
    Pairs that cost more than `max_positions` (data.max_len at or above the model's positions) are left out."""
    costs = corpus.costs().numpy()
    if max_positions is None:
        return token_batches(costs, batch_tokens)
    fits = np.flatnonzero(costs <= max_positions)
    if len(fits) == 0:
        raise DataError(f"every training pair is longer than model.max_positions ({max_positions}) with BOS/EOS")
    plan = token_batches(costs[fits], batch_tokens)
    return BatchPlan(fits[plan.order].astype(plan.order.dtype), plan.bounds)


def padding_fraction(corpus: Corpus, plan: BatchPlan, pad_to_multiple: int = 1) -> float:
    """Share of padded positions in the source and target tensors of the batches of `plan`."""
    if len(plan) == 0:
        return 0.0
    padded = real = 0
    for lengths in (corpus.src_lengths() + 1, corpus.tgt_lengths() + 1):
        in_order = lengths.numpy()[plan.order]
        longest = np.maximum.reduceat(in_order, plan.bounds[:-1])
        padded += int((round_up(longest, pad_to_multiple) * plan.sizes()).sum())
        real += int(in_order.sum())
    return 1.0 - real / padded if padded else 0.0


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids + EOS, PAD-padded
    tgt_in: torch.Tensor  # (B, T) BOS + target ids
    tgt_out: torch.Tensor  # (B, T) target ids + EOS
    src_lengths: torch.Tensor  # (B,) on the CPU, EOS included
    tgt_lengths: torch.Tensor  # (B,) on the CPU, EOS included

    @property
    def n_tokens(self) -> int:
        """Real target tokens, known on the host without reading the device."""
        return int(self.tgt_lengths.sum())

    @property
    def real_targets(self) -> torch.Tensor:
        """Indices of the real (non-PAD) positions among the B*T of tgt_out, on its device; found from the
        host's lengths, so picking them reads nothing back from the device."""
        real = torch.arange(self.tgt_out.size(1)) < self.tgt_lengths[:, None]
        return real.view(-1).nonzero().squeeze(1).to(self.tgt_out.device, non_blocking=True)

    @property
    def src_mask(self) -> torch.Tensor:
        """(B, 1, 1, S). The decoder needs no target mask: see Transformer.decode."""
        return padding_mask(self.src)

    def pin_memory(self) -> Batch:
        return Batch(self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(),
                     self.src_lengths, self.tgt_lengths)

    def to(self, device) -> Batch:
        return Batch(*(t.to(device, non_blocking=True) for t in (self.src, self.tgt_in, self.tgt_out)),
                     self.src_lengths, self.tgt_lengths)


def _gather_rows(flat: torch.Tensor, starts: torch.Tensor, lengths: torch.Tensor, width: int,
                 shift: int) -> torch.Tensor:
    """(B, width) int64: row i holds flat[starts[i]:starts[i] + lengths[i]] from column `shift`, PAD elsewhere."""
    cols = torch.arange(width) - shift
    inside = (cols >= 0) & (cols < lengths[:, None])
    where = (starts[:, None] + cols).clamp(0, max(len(flat) - 1, 0))
    return torch.where(inside, flat[where].long(), PAD)


def pad_sequences(seqs: list[torch.Tensor], padding_value: int = PAD) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence([s.long() for s in seqs], batch_first=True, padding_value=padding_value)


def source_batch(sources: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-id sources (no EOS) as one batch to decode: src (B, S), each + EOS, PAD-padded, and its mask."""
    src = pad_sequences([torch.tensor(s + [EOS]) for s in sources]).to(device)
    return src, padding_mask(src)


def collate(corpus: Corpus, indices: list[int], pad_to_multiple: int = 1) -> Batch:
    """Teacher-forcing tensors for the pairs `indices`: src = x + EOS, tgt_in = BOS + y, tgt_out = y + EOS,
    each padded to its longest row rounded up to `pad_to_multiple` (repeating shapes suit kernels and compile)."""
    idx = torch.as_tensor(indices, dtype=torch.long)
    rows = torch.arange(len(idx))
    src_start, tgt_start = corpus.src_offsets[idx], corpus.tgt_offsets[idx]
    src_len, tgt_len = corpus.src_offsets[idx + 1] - src_start, corpus.tgt_offsets[idx + 1] - tgt_start
    src_width = int(round_up(int(src_len.max()) + 1, pad_to_multiple))
    tgt_width = int(round_up(int(tgt_len.max()) + 1, pad_to_multiple))
    src = _gather_rows(corpus.src, src_start, src_len, src_width, 0)
    src[rows, src_len] = EOS
    tgt_out = _gather_rows(corpus.tgt, tgt_start, tgt_len, tgt_width, 0)
    tgt_out[rows, tgt_len] = EOS
    tgt_in = _gather_rows(corpus.tgt, tgt_start, tgt_len, tgt_width, 1)
    tgt_in[:, 0] = BOS
    return Batch(src, tgt_in, tgt_out, src_len + 1, tgt_len + 1)


class BatchSchedule:
    """Which batch comes next, endlessly: each epoch shuffles the plan's batches from (seed, epoch); rank r
    takes every world-th.

    `state()` / `load_state()` give the exact position so a resumed run sees the same batches.
    """

    def __init__(self, corpus: Corpus, plan: BatchPlan, seed: int, rank: int = 0, world: int = 1,
                 pad_to_multiple: int = 1):
        if len(plan) < world:
            raise DataError(f"only {len(plan)} batches for {world} processes; lower train.batch_tokens")
        self.corpus, self.plan, self.seed, self.rank, self.world = corpus, plan, seed, rank, world
        self.pad_to_multiple = pad_to_multiple
        self.epoch, self.position = 1, 0
        self._order = self._epoch_order()

    def _epoch_order(self) -> list[int]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(len(self.plan), generator=generator).tolist()
        per_rank = len(order) // self.world
        return order[self.rank::self.world][:per_rank]

    def next_batch(self) -> Batch:
        if self.position >= len(self._order):
            self.epoch, self.position = self.epoch + 1, 0
            self._order = self._epoch_order()
        batch = collate(self.corpus, self.plan[self._order[self.position]], self.pad_to_multiple)
        self.position += 1
        return batch

    def state(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state(self, state: dict) -> None:
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._epoch_order()


class BatchPrefetcher:
    """The next `depth` batches of a BatchSchedule, built by a background thread (and pinned for a CUDA device)
    that starts with the first `next_batch()`.

    `state()` is the schedule's position after the last batch handed out, so checkpoints resume exactly;
    `load_state()` moves a prefetcher that has handed out nothing yet to such a position.
    """

    def __init__(self, schedule: BatchSchedule, device: torch.device, depth: int = 4):
        self.schedule, self.device, self._state = schedule, device, schedule.state()
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, daemon=True, name="batches")

    def _produce(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self.schedule.next_batch()
                if self.device.type == "cuda":
                    batch = batch.pin_memory()
                self._put((batch, self.schedule.state()))
        except BaseException as e:  # hand the error to the training loop instead of dying silently
            self._put((e, None))

    def _put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def next_batch(self) -> Batch:
        """The next batch, on the device (the copy is queued, not waited for)."""
        if self._thread.ident is None:
            self._thread.start()
        batch, state = self._queue.get()
        if isinstance(batch, BaseException):
            raise batch
        self._state = state
        return batch.to(self.device)

    def state(self) -> dict:
        return self._state

    def load_state(self, state: dict) -> None:
        if self._thread.ident is not None:
            raise RuntimeError("BatchPrefetcher.load_state after the first batch: the queued batches would be stale")
        self.schedule.load_state(state)
        self._state = self.schedule.state()

    def close(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=5)
