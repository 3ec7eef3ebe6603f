"""What decoding takes and gives, shared by every backend and search: a request per sentence, the hypotheses it
gets, the length penalty that scores them, and the backend protocol.

The front end (mt/decode.py) builds one `SentenceRequest` per input line, once: its source ids, its length
limit, its prefix and terms, how many hypotheses it wants and the search settings it wants. Backends and
searches read requests and nothing else; a new per-sentence option is a new field here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from mt.config import Config, DecodeConfig
from mt.tokenizer import Tokenizer


@dataclass(frozen=True)
class SentenceRequest:
    """One sentence to decode."""

    source: tuple[int, ...]  # token ids, no EOS, at most the model's positions - 2 (the front end cuts them)
    max_len: int  # most target tokens before EOS, a prefix and terms included
    opts: DecodeConfig  # the search it wants: beam_size, alpha, sampling and its settings, batch_tokens
    line: int = 0  # its input line number from 0: with opts.seed, what sampling draws for it
    nbest: int = 1  # hypotheses (beam search) or samples (sampling) wanted, best or first drawn first
    prefix: tuple[int, ...] = ()  # target tokens its output starts with
    terms: tuple[tuple[int, ...], ...] = ()  # target token sequences that must all appear in its output

    @property
    def search(self) -> str:
        """greedy, sampling, beam or constrained: the search that serves it."""
        if self.terms:
            return "constrained"
        if self.opts.sampling:
            return "sampling"
        return "greedy" if self.opts.beam_size == 1 and self.nbest == 1 else "beam"

    @property
    def group(self) -> tuple:
        """Requests with equal groups can decode in one batch: the same search with the same settings."""
        o, search = self.opts, self.search
        if search == "greedy":
            return search, o.batch_tokens
        if search == "sampling":
            return search, o.batch_tokens, self.nbest, o.topk, o.topp, o.temperature, o.seed
        return search, o.batch_tokens, self.nbest, o.beam_size, o.alpha


def grouped(requests: list[SentenceRequest]) -> list[list[int]]:
    """Indices of the requests that can share batches (equal `group`), in order of first appearance."""
    groups: dict[tuple, list[int]] = {}
    for i, request in enumerate(requests):
        groups.setdefault(request.group, []).append(i)
    return list(groups.values())


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # length-penalized log-probability
    log_prob: float  # plain sum of log-probabilities
    attention: torch.Tensor | None = None  # (len(tokens), source length): asked for by word alignment


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty (Wu et al., 2016), used by the paper with alpha = 0.6: ((5 + |Y|) / 6) ** alpha, |Y|
    counting EOS (section 6.1)."""
    return ((5.0 + length) / 6.0) ** alpha


def max_output_lengths(src_lengths: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Most target tokens (before EOS) per sentence: a * source length + b, capped so positions fit the model."""
    return (src_lengths.double() * a + b).floor().long().clamp(min=1, max=limit)


class Backend(Protocol):
    max_positions: int  # target and source positions the model has (EOS included)

    def search(self, requests: list[SentenceRequest]) -> list[list[Hypothesis]]:
        """Non-empty requests -> each one's `nbest` hypotheses, best first (its prefix included, its terms all in
        them); with sampling, its `nbest` samples in the order drawn."""
        ...

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[torch.Tensor]:
        """Per (source, target) pair, the cross-attention that aligns words (mt/alignment.py): (len(target),
        len(source)), row j the step that predicted target token j."""
        ...


@dataclass
class Translator:
    """A backend with its tokenizers and the config it was trained with (its `decode` section: the defaults)."""

    backend: Backend
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    cfg: Config
