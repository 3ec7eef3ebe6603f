"""How keys and values persist between the steps of incremental decoding, and how a sentence's beams share them.

The paper's decoder is auto-regressive (section 3): each step adds one target position, whose self-attention
reads the keys and values of every earlier position, and whose cross-attention reads the source's. Recomputing
them each step is quadratic work; this cache keeps them. It is the one place that knows how they are kept:

- the model asks, per layer, through `LayerCache.self_attention` and `LayerCache.cross_attention`;
- the search says what happened, through `DecoderCache.begin_step`, `advance` and `keep`.

Rows and groups: a sentence may have G target rows (its beams in beam search; G = 1 otherwise). Its G rows
share the sentence's memory, its source keys and values, and one self-attention buffer in which each row owns
a slot. When beam search picks the next beams, no key moves: `ancestry` (B, G, capacity) names, for each row
and earlier position, the slot its ancestor wrote that position into, and each row attends to those keys only.
The G rows of a sentence attend together, as G queries of one row (`group_rows`), so a sentence's keys are read
once per step, not once per beam.

Joining: a search takes new sentences while others decode (`DecoderCache.join`: greedy search refilling its
batch, a server's late requests joining a running beam search). A sentence that joins at cache position p
writes its keys from p on and attends to positions p and later only (`start`); its own positions count from 0
(`offset`). Positions no live sentence can see are dropped at the next join.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


def group_rows(q: torch.Tensor, group: int) -> torch.Tensor:
    """(N*G, H, T, D/H) -> (N, H, G*T, D/H): the queries of G consecutive rows attend as one row's."""
    if group == 1:
        return q
    return q.unflatten(0, (-1, group)).transpose(1, 2).flatten(2, 3)


class DecoderCache:
    """Keys and values of all decoder layers for `batch` sentences of `group` rows each.

    A step: `begin_step(t)` (t new positions per row; one when G > 1), then one `Transformer.decode_step`, whose
    layers store the new keys and values through `layers`, then `advance(parents)`; `keep(sentences)` drops the
    sentences that ended.
    """

    def __init__(self, n_layers: int, capacity: int = 0, group: int = 1):
        self.capacity = capacity  # positions to preallocate (search knows its length limit); buffers grow if they must
        self.group = group  # G, target rows per sentence
        self.length = 0  # positions whose keys and values every layer holds
        self.ancestry: torch.Tensor | None = None  # (B, G, capacity) slot of each earlier position; None: own slot
        self.layers = [LayerCache(self) for _ in range(n_layers)]
        self.step_positions = 0  # positions the current step feeds
        self.step_mask: torch.Tensor | None = None  # the current step's self-attention mask (see `begin_step`)
        self.start: torch.Tensor | None = None  # (B,) cache position of each row's first token; None: all 0
        self.joined = 0  # rows that joined before this step: the last rows of the step's memory

    @property
    def offset(self) -> int | torch.Tensor:
        """Each row's own position of the step's first new token: `length`, or (B*G,) when sentences joined
        later."""
        if self.start is None:
            return self.length
        own = self.length - self.start
        return own if self.group == 1 else own.repeat_interleave(self.group)

    def begin_step(self, positions: int, batch: int, device) -> None:
        """Start a step that feeds `positions` new positions to each row of `batch` sentences.

        Makes the step's self-attention mask once for all layers: None when G = 1 (a row sees all of its own
        earlier positions, and the new ones causally); for G > 1, (B, 1, G, (length+1)*G), True where a row may
        attend, i.e. at each position the slot its ancestor wrote (its own slot for the new one); keys are ordered
        position-major: key j is position j // G of slot j % G.
        """
        if positions > 1 and (self.group > 1 or self.start is not None):
            raise ValueError("a cache shared by several rows per sentence, or joined by rows, takes one position "
                             "per step")
        self.step_positions = positions
        self.step_mask = None
        visible = None
        if self.start is not None:  # a sentence sees its own positions only: from its start on
            visible = torch.arange(self.length + 1, device=device) >= self.start[:, None]  # (B, length+1)
        if self.group > 1:
            slots = torch.arange(self.group, device=device)
            seen = self._ancestry(batch, self.length + 1, device)[:, :, :self.length + 1, None] == slots
            if visible is not None:
                seen = seen & visible[:, None, :, None]
            self.step_mask = seen.flatten(2)[:, None]  # (B, G, length+1, G) -> (B, 1, G, (length+1)*G)
        elif visible is not None:
            self.step_mask = visible[:, None, None, :]  # (B, 1, 1, length+1)

    def advance(self, parents: torch.Tensor | None = None) -> None:
        """End the step: its positions join the cache. With `parents` (B, G), row g of sentence b continues row
        parents[b, g] from now on, and reads its ancestor's slots."""
        self.length += self.step_positions
        self.step_positions, self.step_mask, self.joined = 0, None, 0
        if parents is not None:
            filled = self._ancestry(parents.size(0), self.length, parents.device)[:, :, :self.length]
            filled.copy_(filled.gather(1, parents[:, :, None].expand(-1, -1, self.length)))

    def keep(self, sentences: torch.Tensor | KeptRows) -> None:
        """Keep only the sentences in `sentences` (indices, in order, or `kept(indices)`); copies the filled
        positions of those that change place (`kept_rows`)."""
        sentences = kept(sentences)
        for layer in self.layers:
            layer.keep(sentences, self.length)
        self.ancestry = kept_rows(self.ancestry, sentences)
        if self.start is not None:
            self.start = self.start.index_select(0, sentences.rows)

    def join(self, sentences: int, device) -> None:
        """`sentences` new sentences (G rows each) join after the others; they start at the next step, and the
        step's memory and source mask end with theirs (their source keys and values are projected then).
        Positions before the first start of any sentence are dropped (none can see them; finding them reads one
        number from the device, once per join) when they are half of those filled or the buffers must grow
        anyway: else the new rows are written in place, beside positions they do not see."""
        start = self.start if self.start is not None else torch.zeros(self._rows(), dtype=torch.long, device=device)
        drop = int(start.min()) if start.numel() else self.length
        if 2 * drop < self.length and all(layer.has_room(sentences) for layer in self.layers):
            drop = 0
        for layer in self.layers:
            layer.join(sentences, drop, self.length)
        if self.ancestry is not None:  # positions shift by `drop`; the new sentences' rows read their own slots
            kept_positions = self.ancestry[:, :, drop:]
            own = torch.arange(self.group, device=device)[None, :, None]
            tail = own.expand(kept_positions.size(0), -1, drop)
            self.ancestry = torch.cat([torch.cat([kept_positions, tail], dim=2),
                                       own.expand(sentences, -1, self.ancestry.size(2))])
        self.length -= drop
        self.start = torch.cat([start - drop, torch.full((sentences,), self.length, dtype=torch.long, device=device)])
        self.joined = sentences

    def _rows(self) -> int:
        keys = self.layers[0].k if self.layers else None
        return 0 if keys is None else keys.size(0)

    def _ancestry(self, batch: int, size: int, device) -> torch.Tensor:
        """`ancestry` with room for `size` positions; positions no reorder has reached are the row's own slot."""
        if self.ancestry is None or self.ancestry.size(2) < size:
            own = torch.arange(self.group, device=device)[None, :, None]
            grown = own.repeat(batch, 1, max(size, self.capacity))
            if self.ancestry is not None:
                grown[:, :, :self.ancestry.size(2)] = self.ancestry
            self.ancestry = grown
        return self.ancestry


class LayerCache:
    """One decoder layer's keys and values: what the layer's attention sees of the cache.

    Self-attention: key and value buffers (B, H, capacity, G, D/H), preallocated at the first step; each step
    writes every row's new positions into the row's own slot, in place.
    Cross-attention: keys and values (B, H, S, D/H) of the source, computed once per sentence.
    """

    def __init__(self, cache: DecoderCache):
        self.cache = cache
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.cross_kv: tuple[torch.Tensor, torch.Tensor] | None = None

    def self_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """The step's q, k, v (B*G, H, t, D/H) -> what self-attention computes with: the queries grouped per
        sentence (B, H, G*t, D/H), the keys and values of every position so far (B, H, (length+t)*G, D/H), and
        the mask: the step's (`DecoderCache.begin_step`), or causal over the t new positions when G = 1."""
        cache = self.cache
        start, end = cache.length, cache.length + k.size(2)
        if self.k is None or end > self.k.size(2):
            self.k, self.v = self._grown(self.k, k, end), self._grown(self.v, v, end)
        for buffer, new in ((self.k, k), (self.v, v)):
            # (B*G, H, t, D/H) -> (B, H, t, G, D/H)
            buffer[:, :, start:end] = new.unflatten(0, (-1, cache.group)).permute(0, 2, 3, 1, 4)
        keys, values = self.k[:, :, :end].flatten(2, 3), self.v[:, :, :end].flatten(2, 3)
        mask = cache.step_mask
        if mask is None and k.size(2) > 1:  # several new positions of one row: each sees those before it
            mask = torch.ones(k.size(2), end, dtype=torch.bool, device=k.device).tril(start)[None, None]
        return group_rows(q, cache.group), keys, values, mask

    def cross_attention(self, q: torch.Tensor, project_memory):
        """The step's queries (B*G, H, t, D/H) -> the queries grouped per sentence (B, H, G*t, D/H) and the
        source's keys and values (B, H, S, D/H), from `project_memory(0)` (all of the step's memory) at the first
        step, kept after; rows that joined get theirs from `project_memory(-rows)` (the memory's last rows)."""
        joined = self.cache.joined
        if self.cross_kv is None:
            # Contiguous once: as projected they are views into one (B, S, 2D) tensor, which every step's
            # attention matmul would copy again (1 ms of a 5 ms greedy step, 40 sentences of 25 tokens).
            self.cross_kv = tuple(kv.contiguous() for kv in project_memory(0))
        elif joined:  # the joining rows' keys and values after the others', all as wide as the memory now
            self.cross_kv = tuple(torch.cat([_widened(old, new.size(2)), new.contiguous()])
                                  for old, new in zip(self.cross_kv, project_memory(-joined)))
        return group_rows(q, self.cache.group), *self.cross_kv

    def _grown(self, buffer: torch.Tensor | None, new: torch.Tensor, end: int) -> torch.Tensor:
        group, length = self.cache.group, self.cache.length
        size = max(end, self.cache.capacity, 2 * buffer.size(2) if buffer is not None else 0)
        grown = new.new_empty(new.size(0) // group, new.size(1), size, group, new.size(3))
        if buffer is not None:
            grown[:, :, :length] = buffer[:, :, :length]
        return grown

    def has_room(self, rows: int) -> bool:
        """Whether `rows` more rows fit in the buffers' memory (a batch that lost rows keeps their room)."""
        return self.k is None or _with_rows(self.k, self.k.size(0) + rows) is not None

    def join(self, rows: int, drop: int, length: int) -> None:
        """`rows` rows after the others, zero at the positions before their start (masked, but a product with
        uninitialised memory could be NaN); the first `drop` of the `length` filled positions left out. In place
        when nothing is dropped and the rows fit; else new buffers with room for as many rows again."""
        def joined(buffer):
            if buffer is None:
                return None
            total = buffer.size(0) + rows
            grown = _with_rows(buffer, total) if drop == 0 else None
            if grown is None:
                spare = buffer.new_empty(2 * total, *buffer.shape[1:])
                grown = spare[:total]
                grown[:buffer.size(0), :, :length - drop] = buffer[:, :, drop:length]
            grown[buffer.size(0):, :, :length - drop] = 0
            return grown
        self.k, self.v = joined(self.k), joined(self.v)

    def keep(self, sentences: KeptRows, length: int) -> None:
        self.k, self.v = (kept_rows(buffer, sentences, length) for buffer in (self.k, self.v))
        if self.cross_kv is not None:
            self.cross_kv = tuple(kept_rows(kv, sentences) for kv in self.cross_kv)


class KeptRows(NamedTuple):
    """The rows a batch keeps (indices, in order) and, on a CPU, the places whose row changes and the rows that
    move there: found once when sentences end, then used for every buffer the batch holds (`kept_rows`)."""

    rows: torch.Tensor
    moved: torch.Tensor | None  # places i with rows[i] != i (None off the CPU)
    sources: torch.Tensor | None  # rows[moved]


def kept(rows: torch.Tensor | KeptRows) -> KeptRows:
    """`rows` (indices, in order) with its moves found; on other devices without them (finding them would read
    from the device)."""
    if isinstance(rows, KeptRows):
        return rows
    if rows.device.type != "cpu":
        return KeptRows(rows, None, None)
    moved = (rows != torch.arange(rows.size(0))).nonzero().squeeze(1)
    return KeptRows(rows, moved, rows.index_select(0, moved))


def kept_rows(buffer: torch.Tensor | None, rows: torch.Tensor | KeptRows,
              length: int | None = None) -> torch.Tensor | None:
    """Rows `rows` (indices, in order, or `kept(indices)`) of `buffer` (up to `length` along dim 2 where given; the
    rest is not kept).

    On a CPU in place: the first len(rows) rows are kept and only the rows whose index changes are copied, so
    when the search fills the places of ended rows with the last ones (`search.compacted`), a step where one
    sentence ends copies one row, not all (the copies took 0.7 s of 4.4 s of a refilled greedy search of the
    dev set). Elsewhere a new tensor."""
    if buffer is None:
        return None
    rows = kept(rows)
    count = rows.rows.size(0)
    filled = buffer if length is None else buffer[:, :, :length]
    if rows.moved is None:
        picked = buffer.new_empty(count, *buffer.shape[1:])
        torch.index_select(filled, 0, rows.rows, out=picked if length is None else picked[:, :, :length])
        return picked
    if rows.moved.numel():  # the moved rows are read (a copy) before any is written
        filled[:count].index_copy_(0, rows.moved, filled.index_select(0, rows.sources))
    return buffer[:count]


def _widened(kv: torch.Tensor, width: int) -> torch.Tensor:
    """Source keys or values (B, H, S, D/H) zero-padded to `width` source positions (masked there)."""
    if kv.size(2) >= width:
        return kv
    return torch.nn.functional.pad(kv, (0, 0, 0, width - kv.size(2)))


def _with_rows(buffer: torch.Tensor, rows: int) -> torch.Tensor | None:
    """`buffer`'s first `rows` rows, in place, when its memory holds them (it is a batch's first rows, as `kept_rows`
    leaves it on a CPU); else None."""
    if buffer.storage_offset() != 0 or not buffer.is_contiguous():
        return None
    if buffer.untyped_storage().nbytes() < rows * buffer.stride(0) * buffer.element_size():
        return None
    return buffer.as_strided((rows, *buffer.shape[1:]), buffer.stride())
