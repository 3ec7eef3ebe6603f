"""What decoding takes and gives, shared by every backend and search: a request per sentence, the hypotheses it
gets, the length penalty that scores them, the backend protocol and the engine a backend hands out.

The front end (mt/decoding/lines.py) builds one `SentenceRequest` per input line, once: its source ids, its length
limit, its prefix and terms, how many hypotheses it wants and the search settings it wants. Backends and
searches read requests and nothing else; a new per-sentence option is a new field here. Each backend decodes
through its `Engine` (Eole's inference engines are the model): sentences are added as `Work`, stepped (mt's own
model) or called (CTranslate2) until idle, and delivered to their work; offline and `mt serve` drive the same one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import torch

from mt.config import Config, DecodeConfig, batch_settings
from mt.data.corpus import prefixed
from mt.data.languages import pick_direction, source_prefix, target_prefix
from mt.data.tokenizer import Tokenizer


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
    attention: bool = False  # its word alignment is wanted: a backend that can keep the attention while searching
    # does (CTranslate2), else the front end asks `Backend.attention` after the search

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
        """Requests with equal groups can decode in one batch: the same search and nbest, and equal values of every
        decode field that search takes once for the batch (as DecodeConfig declares them: `batch_settings`)."""
        search = self.search
        return search, self.nbest, *(getattr(self.opts, name) for name in batch_settings(search))


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


@dataclass(eq=False)
class Work:
    """Sentences handed to an engine together (one request of `mt serve`, or every line offline): `deliver` gets
    their hypotheses in order, or `fail` the error that stopped them."""

    requests: list[SentenceRequest]
    cancelled: bool = False  # its sender went away: what has not started decoding is dropped
    hypotheses: list[list[Hypothesis]] | None = None
    error: Exception | None = None

    def deliver(self, hypotheses: list[list[Hypothesis]]) -> None:
        self.hypotheses = hypotheses

    def fail(self, error: Exception) -> None:
        self.error = error


class DecodeHooks:
    """What an engine and the server's queue tell whoever watches them (mt serve's metrics); by default nothing."""

    def step(self, rows: int) -> None:
        """A step decoded `rows` rows (a CTranslate2 call: its sentences)."""

    def queued(self, tokens: int) -> None:
        """`tokens` source tokens are now waiting or decoding."""

    def call_ended(self) -> None:
        """A CTranslate2 call ended: its engine can start another."""


class Engine(Protocol):
    """How sentences join a backend's decoding while others decode (mt/decoding/model_backend.py, mt/decoding/ct2_backend.py)."""

    @property
    def idle(self) -> bool:
        """Nothing it was given is waiting or decoding."""
        ...

    @property
    def stepping(self) -> bool:
        """Whether `step` has work: rows to advance or sentences waiting to join them."""
        ...

    def share(self, waiting: list[int]) -> int:
        """How many of the works waiting in a queue (their source tokens, in order) it takes now."""
        ...

    def add(self, works: list[Work]) -> None:
        ...

    def cancel(self, work: Work) -> None:
        """Drop the sentences of `work` that have not started decoding (those decoding finish unseen)."""
        ...

    def step(self) -> None:
        ...

    def held(self) -> list[Work]:
        """After a failed step: the works it held, forgotten."""
        ...

    def close(self) -> None:
        ...


class Search(Protocol):
    """What a scheduler (mt/decoding/scheduler.py) and the stepping engine drive: GreedySearch and BeamSearch
    (mt/decoding/search.py), ConstrainedBeamSearch (mt/decoding/constraints.py). Rows join between steps; each
    step ends some."""

    @property
    def rows(self) -> int:
        """Rows (greedy, sampling) or sentences (beam) decoding now."""
        ...

    @property
    def width(self) -> int:
        """Source positions of the live rows' memory."""
        ...

    def reserve(self, requests: list[SentenceRequest]) -> None:
        """Told before `requests` are submitted (a search that preallocates for its longest sentence grows)."""
        ...

    def item(self, request: SentenceRequest, row: int):
        """What `join` takes for row `row` of `request` (a sampled request has one row per sample)."""
        ...

    def join(self, parts: list[list[tuple[int, object]]]) -> None:
        """Items (id, item), in parts, start before the next step."""
        ...

    def step(self) -> list[tuple[int, list[Hypothesis]]]:
        """One step: (id given at join, its hypotheses) of the rows or sentences that ended."""
        ...


class Backend(Protocol):
    max_positions: int  # target and source positions the model has (EOS included)

    def search(self, requests: list[SentenceRequest]) -> list[list[Hypothesis]]:
        """Non-empty requests -> each one's `nbest` hypotheses, best first (its prefix included, its terms all in
        them); with sampling, its `nbest` samples in the order drawn."""
        ...

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[torch.Tensor]:
        """Per (source, target) pair, the cross-attention that aligns words (mt/decoding/attention_alignment.py): (len(target),
        len(source)), row j the step that predicted target token j."""
        ...

    def engine(self, hooks: DecodeHooks | None = None, join_every: int | None = None) -> Engine:
        """Its engine for sentences that arrive while others decode (`search` is: add every request, decode until
        idle); with `join_every`, they join a running batch at most every this many steps (`mt serve`)."""
        ...


@dataclass
class Translator:
    """A backend with its tokenizers and the config it was trained with (its `decode` section: the defaults); for a
    model of several directions, the one it is asked for (`toward`)."""

    backend: Backend
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    cfg: Config
    direction: tuple[str, str] | None = None  # (source, target) language codes, when the model names them
    source_prefix: tuple[int, ...] = ()  # token ids before each source: the target's >>xx<< (mt/data/languages.py)
    target_prefix: tuple[int, ...] = ()  # token ids each output starts with, forced and dropped from its text (M2M100)

    def toward(self, source: str | None, target: str | None, model: str,
               options: tuple[str, str] = ("--source-lang", "--target-lang")) -> Translator:
        """The same model asked for one of its directions (--source-lang, --target-lang; `pick_direction`), sharing
        the backend; an MtError naming `model` if it does not know the direction."""
        direction = pick_direction(self.cfg, source, target, model, options)
        if direction is None:
            return self
        languages = self.cfg.languages
        return replace(self, direction=direction,
                       source_prefix=tuple(source_prefix(languages, self.src_tokenizer, direction, model)),
                       target_prefix=tuple(target_prefix(languages, self.tgt_tokenizer, direction, model)))

    @property
    def carries_tags(self) -> bool:
        """Whether the model was trained to carry documents' inline markup as tags (data.inline_tags:
        mt/documents/model_tags.py)."""
        return self.cfg.data.inline_tags > 0

    def encode_sources(self, texts: list[str]) -> list[list[int]]:
        """Sources as token ids, each non-empty one after the source prefix (a multilingual model's target token)."""
        return prefixed(self.source_prefix, self.src_tokenizer.encode(texts))

    def encode_targets(self, texts: list[str]) -> list[list[int]]:
        """Targets (scored pairs) as token ids after the target prefix."""
        return [[*self.target_prefix, *ids] for ids in self.tgt_tokenizer.encode(texts)]

    def output_tokens(self, tokens: list[int]) -> list[int]:
        """An output's own tokens: those after the forced target prefix."""
        return tokens[len(self.target_prefix):] if self.target_prefix else tokens
