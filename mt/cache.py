"""The decoder's key/value cache for incremental decoding (greedy and beam search), kept per sentence."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class DecoderCache:
    """Keys and values for incremental decoding, held per sentence.

    Each of a sentence's G target rows (its beams in beam search; G = 1 otherwise) owns a slot.
    Self-attention: per layer, key and value buffers (B, H, capacity, G, D/H), preallocated at the first step;
    each step writes every row's new position into the row's own slot, in place, and `length` positions are
    filled. When beam search picks the next beams, no key moves: `ancestry` (B, G, capacity) names, for each
    row and earlier position, the slot its ancestor wrote that position into, and the row attends to those keys
    only (`beam_mask`). Reordering K/V buffers instead copies the whole cache every step.
    Cross-attention: per layer, keys and values (one row per memory row, H, S, D/H), computed once.
    """

    self_k: list[torch.Tensor | None] = field(default_factory=list)
    self_v: list[torch.Tensor | None] = field(default_factory=list)
    cross_kv: list[tuple[torch.Tensor, torch.Tensor] | None] = field(default_factory=list)
    capacity: int = 0  # positions to preallocate (search knows its length limit); a buffer grows if it must
    group: int = 1  # G, target rows per sentence
    ancestry: torch.Tensor | None = None  # (B, G, capacity) slot of each earlier position; None: a row's own
    length: int = 0

    @classmethod
    def empty(cls, n_layers: int, capacity: int = 0, group: int = 1) -> DecoderCache:
        return cls([None] * n_layers, [None] * n_layers, [None] * n_layers, capacity, group)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new positions' k, v (B*G, H, t, D/H) after the `length` cached ones (Transformer.decode
        advances `length` once all layers have); return k, v of all positions in all the sentence's slots, views
        (B, H, (length+t)*G, D/H) ordered position-major: key j is position j // G of slot j % G."""
        end = self.length + k.size(2)
        if self.group > 1 and k.size(2) > 1:
            raise ValueError("a cache shared by several rows per sentence takes one position per step")
        if self.self_k[layer] is None or end > self.self_k[layer].size(2):
            self.self_k[layer] = self._grown(self.self_k[layer], k, end)
            self.self_v[layer] = self._grown(self.self_v[layer], v, end)
        for buffer, new in ((self.self_k[layer], k), (self.self_v[layer], v)):
            # (B*G, H, t, D/H) -> (B, H, t, G, D/H)
            buffer[:, :, self.length:end] = new.unflatten(0, (-1, self.group)).permute(0, 2, 3, 1, 4)
        return self.self_k[layer][:, :, :end].flatten(2, 3), self.self_v[layer][:, :, :end].flatten(2, 3)

    def _grown(self, buffer: torch.Tensor | None, new: torch.Tensor, end: int) -> torch.Tensor:
        size = max(end, self.capacity, 2 * buffer.size(2) if buffer is not None else 0)
        grown = new.new_empty(new.size(0) // self.group, new.size(1), size, self.group, new.size(3))
        if buffer is not None:
            grown[:, :, :self.length] = buffer[:, :, :self.length]
        return grown

    def beam_mask(self, batch: int, device) -> torch.Tensor | None:
        """(B, 1, G, (length+1)*G) True where a row may attend, for a step that feeds one new position to `batch`
        sentences: at each position, the slot its ancestor wrote (its own slot for the new one). None when G = 1."""
        if self.group == 1:
            return None
        slots = torch.arange(self.group, device=device)
        seen = self._ancestry(batch, self.length + 1, device)[:, :, :self.length + 1, None] == slots
        return seen.flatten(2)[:, None]  # (B, G, length+1, G) -> (B, 1, G, (length+1)*G)

    def reorder(self, parent: torch.Tensor) -> None:
        """Row g of sentence b continues row parent[b, g] (B, G): it reads its ancestor's slots from now on."""
        filled = self._ancestry(parent.size(0), self.length, parent.device)[:, :, :self.length]
        filled.copy_(filled.gather(1, parent[:, :, None].expand(-1, -1, self.length)))

    def _ancestry(self, batch: int, size: int, device) -> torch.Tensor:
        """`ancestry` with room for `size` positions; positions no reorder has reached are the row's own slot."""
        if self.ancestry is None or self.ancestry.size(2) < size:
            own = torch.arange(self.group, device=device)[None, :, None]
            grown = own.repeat(batch, 1, max(size, self.capacity))
            if self.ancestry is not None:
                grown[:, :, :self.ancestry.size(2)] = self.ancestry
            self.ancestry = grown
        return self.ancestry

    def keep(self, sentences: torch.Tensor) -> None:
        """Drop the sentences not in `sentences` (their self- and cross-attention keys); copies the filled
        positions of those that go on."""
        def rows(buffer):
            if buffer is None:
                return None
            picked = buffer.new_empty(sentences.size(0), *buffer.shape[1:])
            torch.index_select(buffer[:, :, :self.length], 0, sentences, out=picked[:, :, :self.length])
            return picked
        self.self_k = [rows(k) for k in self.self_k]
        self.self_v = [rows(v) for v in self.self_v]
        self.cross_kv = [None if kv is None else (kv[0].index_select(0, sentences), kv[1].index_select(0, sentences))
                         for kv in self.cross_kv]
        if self.ancestry is not None:
            self.ancestry = self.ancestry.index_select(0, sentences)
