"""The one mask convention: boolean, True means "may attend", broadcastable to (B, heads, query, key).

src_mask (B, 1, 1, S): padding of the source. tgt_mask (B, 1, T, T): padding of the target AND no peeking at
later positions, or CAUSAL: no peeking only, left to the attention kernel (the fast path of training).
"""

import torch

from mt.symbols import PAD


def padding_mask(tokens: torch.Tensor) -> torch.Tensor:
    """(B, S) token ids -> (B, 1, 1, S): True at real tokens."""
    return (tokens != PAD)[:, None, None, :]


def subsequent_mask(size: int, device=None) -> torch.Tensor:
    """(1, 1, T, T): True where key position <= query position (no peeking ahead)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]


def target_mask(tgt_in: torch.Tensor) -> torch.Tensor:
    """(B, T) decoder input -> (B, 1, T, T): target padding AND causal."""
    return padding_mask(tgt_in) & subsequent_mask(tgt_in.size(1), tgt_in.device)


class Causal:
    """The target mask "key j is visible from query i when j <= i", without a mask tensor: attention passes it
    to SDPA as `is_causal`. Target padding is not masked; it only ever follows the real tokens."""

    def __repr__(self) -> str:
        return "CAUSAL"


CAUSAL = Causal()
