"""The decoding front end: lines in, hypotheses out, the same for every backend (mt/decoding/model_backend.py).

Line preparation is written once, here: encoding, cutting sources too long for the model's positions (with a
warning through `on_truncate`), empty lines (one empty hypothesis, not decoded) and the length limit of each
sentence (a * source length + b). The backend searches the sentences in batches of at most `batch_tokens`
source tokens (padding counted, beams not, as CTranslate2's `max_batch_size` with `batch_type="tokens"`);
mt's greedy search refills its batch as sentences end. Options travel as one DecodeConfig, whose fields are the
only defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import torch

from mt.decoding.attention_alignment import word_alignment
from mt.config import DecodeConfig
from mt.decoding.protocol import Backend, Hypothesis, SentenceRequest, Translator, max_output_lengths
from mt.decoding.scheduler import static_batches
from mt.errors import MtError



class Translation(NamedTuple):
    """One hypothesis of an input line, as text."""

    text: str
    score: float
    alignment: str | None = None  # Moses-format word alignment (mt/decoding/attention_alignment.py), when asked for
    memory: bool = False  # the translation memory's (mt/data/translation_memories.py), not the model's


@dataclass(frozen=True)
class LineIds:
    """An input line, encoded: its source, and what it asks of its output (target token ids)."""

    source: list[int]
    line: int = 0  # its input line number from 0 (with opts.seed, what sampling draws for it)
    prefix: list[int] = field(default_factory=list)  # the tokens its output starts with
    terms: list[list[int]] = field(default_factory=list)  # token sequences its output must contain


@dataclass(frozen=True)
class LineText:
    """An input line as text: its source, and what it asks of its output."""

    source: str
    line: int = 0
    prefix: str = ""
    terms: tuple[str, ...] = ()


def sentence_requests(lines: list[LineIds], opts: DecodeConfig, nbest: int, max_positions: int,
                      on_truncate=None, attention: bool = False) -> list[SentenceRequest | None]:
    """A request per line (None for an empty one with no prefix or terms, which is not decoded). A source too long for the model's
    positions is cut (`on_truncate(index, length, kept)`); a prefix too, and terms that cannot all fit are
    reported (`on_truncate(index, length, room, part)`). A line's length limit is a * source length + b, grown
    to hold its prefix, and by its terms' tokens."""
    limit = max_positions - 1
    keep = limit - 1  # room for EOS
    lengths = [min(len(line.source), keep) for line in lines]
    limits = max_output_lengths(torch.tensor(lengths), opts.max_len_a, opts.max_len_b, limit).tolist()
    requests: list[SentenceRequest | None] = []
    for i, (line, max_len) in enumerate(zip(lines, limits)):
        if len(line.source) > keep and on_truncate is not None:
            on_truncate(i, len(line.source), keep)
        source = tuple(line.source[:keep])
        if not (source or line.prefix or line.terms):
            requests.append(None)
            continue
        prefix = tuple(line.prefix[:limit - 1])
        _report_cut(on_truncate, i, len(line.prefix), limit - 1, "target prefix")
        term_tokens = sum(map(len, line.terms))
        _report_cut(on_truncate, i, term_tokens, limit, "constraint terms")
        max_len = min(max(max_len, len(prefix)) + term_tokens, limit) if line.terms else max(max_len, len(prefix))
        requests.append(SentenceRequest(source, max_len, opts, line.line, nbest, prefix,
                                        tuple(tuple(t) for t in line.terms), attention))
    return requests


def search_options(opts: DecodeConfig, nbest: int) -> DecodeConfig:
    """A line's decode settings: beam search keeps at least `nbest` beams (sampling draws `nbest`)."""
    return opts if opts.sampling else replace(opts, beam_size=max(opts.beam_size, nbest))


def _report_cut(on_truncate, index: int, length: int, room: int, part: str) -> None:
    if on_truncate is not None and length > room:
        on_truncate(index, length, room, part)


class LineBatch:
    """Lines on their way through any backend, the one front end: `todo` the requests to decode (an empty line has
    none), then `hypotheses` of what the backend found, with every line's place kept."""

    def __init__(self, lines: list[LineIds], opts: DecodeConfig, nbest: int, max_positions: int, on_truncate=None,
                 attention: bool = False):
        self.opts = search_options(opts, nbest)
        self.requests = sentence_requests(lines, self.opts, nbest, max_positions, on_truncate, attention)
        self.todo = [r for r in self.requests if r is not None]

    def hypotheses(self, found: list[list[Hypothesis]], attention_of: Backend | None = None) -> list[list[Hypothesis]]:
        """Per line, in input order: `found` (a list per request of `todo`), one empty hypothesis for an empty
        line. With `attention_of`, each hypothesis gets its cross-attention over the source from that backend
        (`Backend.attention`), in batches of opts.batch_tokens."""
        given = iter(found)
        results = [next(given) if r is not None else [Hypothesis([], 0.0, 0.0)] for r in self.requests]
        if attention_of is not None:
            for part in self.attention_parts(results, attention_of):
                part()
        return results

    def attention_parts(self, results: list[list[Hypothesis]], backend: Backend,
                        tokens: int | None = None) -> list[Callable[[], None]]:
        """Calls, one per static batch of `tokens` source tokens (default opts.batch_tokens), that each give their
        hypotheses of `results` their cross-attention over the source (`Backend.attention`): a server runs them one
        at a time between decoding steps, so a long document's alignment does not hold the decode thread for all
        of it at once."""
        pairs = [(list(r.source), h) for r, per in zip(self.requests, results) if r is not None for h in per
                 if h.attention is None]  # none: the search kept it (SentenceRequest.attention)

        def part(index: list[int]) -> Callable[[], None]:
            def run() -> None:
                found = backend.attention([pairs[j][0] for j in index], [pairs[j][1].tokens for j in index])
                for j, weights in zip(index, found):
                    pairs[j][1].attention = weights
            return run
        widths = [len(s) + 1 for s, _ in pairs]
        return [part(index) for index in static_batches(widths, tokens or self.opts.batch_tokens)]


def translate_ids(backend: Backend, lines: list[LineIds], opts: DecodeConfig, *, nbest: int = 1,
                  on_truncate=None, attention: bool = False) -> list[list[Hypothesis]]:
    """Hypotheses of encoded lines, in input order: `nbest` per line (beam size at least `nbest`; with
    opts.sampling, `nbest` samples), one empty hypothesis for an empty line (see `sentence_requests`). With
    `attention`, each hypothesis carries its cross-attention over the source (`Backend.attention`)."""
    batch = LineBatch(lines, opts, nbest, backend.max_positions, on_truncate, attention)
    found = backend.search(batch.todo) if batch.todo else []
    return batch.hypotheses(found, backend if attention else None)


def encode_lines(tr: Translator, texts: list[LineText]) -> list[LineIds]:
    """Lines as token ids: sources with the source tokenizer (after the translator's source prefix, a multilingual
    model's target token), prefixes and terms with the target one."""
    sources = tr.encode_sources([t.source for t in texts])
    prefixes = tr.tgt_tokenizer.encode([t.prefix for t in texts]) if any(t.prefix for t in texts) else None
    return [LineIds(source, t.line, _forced(tr, source, prefixes[i] if prefixes else []),
                    [ids for ids in tr.tgt_tokenizer.encode(list(t.terms)) if ids] if t.terms else [])
            for i, (source, t) in enumerate(zip(sources, texts))]


def _forced(tr: Translator, source: list[int], prefix: list[int]) -> list[int]:
    """What an output starts with: the translator's target prefix (an M2M100 model's language), then the line's
    own; an empty line with no prefix of its own stays empty (not decoded)."""
    return [*tr.target_prefix, *prefix] if source or prefix else []


def translations(tr: Translator, sources: list[list[int]], hyps: list[list[Hypothesis]],
                 alignment: bool = False) -> list[list[Translation]]:
    """Hypotheses as text (and word alignments when `alignment`), per line."""
    return [[Translation(tr.tgt_tokenizer.decode(tr.output_tokens(h.tokens)), h.score,
                         _alignment(tr, source, h) if alignment else None)
             for h in per_line] for source, per_line in zip(sources, hyps)]


def _alignment(tr: Translator, source: list[int], h: Hypothesis) -> str:
    if h.attention is None:  # an empty line: nothing decoded, nothing aligned
        return ""
    start, first = len(tr.source_prefix), len(tr.target_prefix)  # the words come after the language tokens
    src_pieces = [tr.src_tokenizer.sp.id_to_piece(t) for t in source[start:h.attention.size(1)]]
    tgt_pieces = [tr.tgt_tokenizer.sp.id_to_piece(t) for t in tr.output_tokens(h.tokens)]
    return word_alignment(h.attention[first:, start:], src_pieces, tgt_pieces)


@dataclass(frozen=True)
class LineFormat:
    """How `mt translate` reads its input lines and writes its results."""

    nbest: int | None = None  # K results per line, `index \t score \t text`
    scores: bool = False  # `score \t text`
    output_format: str = "text"  # text | json
    prefix: bool = False  # input lines are `source \t target prefix`
    constraints: bool = False  # input lines are `source \t term \t term ...`: terms the output must contain
    alignment: bool = False  # add each result's word alignment (mt/decoding/attention_alignment.py)

    def check(self, opts: DecodeConfig) -> None:
        """The rules for combining the line options, written once: `mt translate` prints a broken one, `mt serve`
        answers 400 (constraints with an exported model: mt/decoding/ct2_backend.py)."""
        if self.prefix and self.constraints:
            raise MtError("--prefix and --constraints both read the input's tab-separated fields; use one")
        if self.constraints and opts.sampling:
            raise MtError("--constraints need beam search; they do not combine with --sampling")


def line_text(line: str, number: int, fmt: LineFormat) -> LineText:
    """An input line read as `fmt` says: `source`, `source<TAB>target prefix` (no tab: no prefix) or
    `source<TAB>term<TAB>term...`; `number` counts from 0."""
    if fmt.prefix:
        source, _, prefix = line.partition("\t")
        return LineText(source.strip(), number, prefix=prefix.strip())
    if fmt.constraints:
        source, *terms = line.split("\t")
        return LineText(source.strip(), number, terms=tuple(t.strip() for t in terms if t.strip()))
    return LineText(line.strip(), number)
