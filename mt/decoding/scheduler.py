"""Which sentences decode together, decided in one place: the token budget, length-sorted admission, and refilling
a running batch as its sentences end.

A `Scheduler` feeds one search (mt/decoding/search.py) with what is submitted to it, before each step:

- submitted sentences wait in parts, length-sorted, of at most `part_tokens` source tokens (EOS and padding
  counted, beams and samples not: CTranslate2's `max_batch_size` with `batch_type="tokens"`); submissions (a
  server's requests) take turns, a part each, so that a request arriving behind a long document's thousands of
  sentences joins after the document's next part, not after all of them;
- an idle search takes the next part; a running one takes the next parts while its rows and theirs, each as
  wide as the widest source among them, stay within `budget` source tokens, and only if `join_running`.

Sentences can be submitted while the search runs (a server's requests): they join at a step boundary when the
budget has room, at most every `join_every` steps (each join encodes the new sources and widens the batch's
buffers: under a steady stream of requests, fewer and larger joins cost less). Offline the policies are the
fastest measured: greedy search refills its batch in parts of a quarter of the budget (a step's time is mostly
fixed cost when it has few rows: on a CPU, 0.21 ms a row at 10 rows, 0.07 at 80); beam search decodes static
batches of the whole budget (refilling it measured slower).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from mt.data.batching import token_batches
from mt.decoding.protocol import Search
from mt.decoding.search import Ended

REFILL_PARTS = 4  # a refilled batch takes new sentences in parts of a quarter of its source tokens


@dataclass(frozen=True)
class Policy:
    budget: int  # source tokens a batch may hold, every row as wide as the widest (padding counted)
    part_tokens: int  # source tokens of a part that joins at once
    join_running: bool  # whether parts join a running batch (else only an idle one)
    join_every: int = 1  # a running batch takes parts at most every this many steps

    @classmethod
    def refilling(cls, budget: int) -> Policy:
        return cls(budget, max(1, budget // REFILL_PARTS), True)

    @classmethod
    def static(cls, budget: int) -> Policy:
        return cls(budget, budget, False)


@dataclass(frozen=True)
class Waiting:
    id: int  # what the search reports it by
    item: object  # what the search's `join` takes for it
    width: int  # its source length with EOS


class Scheduler:
    """Admission into one search; `run()` offline, or `submit` and `step` in turns while requests arrive."""

    def __init__(self, search: Search, policy: Policy):
        self.search, self.policy = search, policy
        self.waiting: list[list[list[Waiting]]] = []  # per submission, its parts in order; submissions take turns
        self.steps_since_join = 0

    @property
    def idle(self) -> bool:
        return not self.waiting and self.search.rows == 0

    def submit(self, items: list[Waiting]) -> None:
        """Sentences that join when there is room: as length-sorted parts, one submission taking turns with the
        others waiting."""
        parts = [[items[i] for i in part] for part in static_batches([w.width for w in items], self.policy.part_tokens)]
        if parts:
            self.waiting.append(parts)

    def cancel(self, ids: set[int]) -> set[int]:
        """Drop the waiting sentences whose ids are in `ids`; returns those dropped (the others are decoding)."""
        dropped = {w.id for parts in self.waiting for part in parts for w in part if w.id in ids}
        kept = [[kept for part in parts if (kept := [w for w in part if w.id not in ids])] for parts in self.waiting]
        self.waiting = [parts for parts in kept if parts]
        return dropped

    def step(self) -> Ended:
        """Admit what fits, then one step of the search: what ended in it."""
        joining = self._coalesced(self._admitted())
        if joining:
            self.search.join([[(w.id, w.item) for w in part] for part in joining])
            self.steps_since_join = 0
        self.steps_since_join += 1
        return self.search.step() if self.search.rows else []

    def run(self) -> Iterator[tuple[int, list]]:
        """Step until everything submitted has ended."""
        while not self.idle:
            yield from self.step()

    def _admitted(self) -> list[list[Waiting]]:
        """The parts that start now: none, or the next one when the search is idle; when running batches may be
        joined, also the next parts that fit beside the rows there, every row counted as wide as the widest."""
        taken: list[list[Waiting]] = []
        rows, width = self.search.rows, self.search.width
        if rows and self.steps_since_join < self.policy.join_every:
            return taken
        while self.waiting:
            parts = self.waiting[0]
            part_width = max(width, max(w.width for w in parts[0]))
            if rows and not (self.policy.join_running and (rows + len(parts[0])) * part_width <= self.policy.budget):
                break
            taken.append(parts.pop(0))
            rows, width = rows + len(taken[-1]), part_width
            self.waiting.pop(0)
            if parts:  # its next part waits behind the other submissions' next ones
                self.waiting.append(parts)
        return taken

    def _coalesced(self, parts: list[list[Waiting]]) -> list[list[Waiting]]:
        """Parts that join at one step, regrouped as `submit` groups sentences (length-sorted, at most
        `part_tokens` each): a server's requests arrive as many small parts, and each part is encoded as one
        batch."""
        joining = [w for part in parts for w in part]
        return [[joining[i] for i in part] for part in static_batches([w.width for w in joining],
                                                                      self.policy.part_tokens)]


def static_batches(widths: list[int], budget: int) -> list[list[int]]:
    """Indices grouped by length (ties by index), each group's size x its widest within `budget` (one too wide
    alone: a group of its own)."""
    plan = token_batches(widths, budget)
    return list(plan)


def in_static_batches(widths: list[int], budget: int, decode) -> list:
    """`decode(index)` of every static batch of `widths`, its results put back in input order."""
    results: list = [None] * len(widths)
    for index in static_batches(widths, budget):
        for i, found in zip(index, decode(index)):
            results[i] = found
    return results
