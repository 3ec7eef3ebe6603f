"""Search strategies over mt's model: greedy search (and sampling) and beam search, with incremental (KV-cached)
decoding, each as an object whose rows join between steps and leave as they end.

A search holds the sentences it decodes and nothing else: `join(parts)` adds sentences before the next step,
`step()` advances every live sentence by one token and returns those that ended with their hypotheses. Which
sentences join when is the scheduler's decision (mt/decoding/scheduler.py); what a sentence wants is its request
(mt/decoding/protocol.py). Constrained beam search (mt/decoding/constraints.py) extends `BeamSearch`. A search drives the cache
(mt/model/kv_cache.py) through `begin_step`, `advance`, `keep` and `join`.

Scores are sums of token log-probabilities (EOS included) divided by the GNMT length penalty (mt/decoding/protocol.py).
Every live tensor is row-aligned; what both searches keep per sentence (ids, length limits, positions, memory,
source mask) is one `Sentences`. When sentences end, their rows are dropped from all of them at once (`compacted`
then `kept`), so a search's memory is that of the sentences it decodes now. Sampling's draw is mt/decoding/sampling.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mt.data.batching import source_batch
from mt.model.kv_cache import DecoderCache, KeptRows, kept, kept_rows
from mt.decoding.protocol import Hypothesis, SentenceRequest, length_penalty
from mt.masks import target_mask
from mt.decoding.sampling import Sampler
from mt.symbols import BOS, EOS


@dataclass(frozen=True)
class Row:
    """A row of greedy search: a request, and which of its samples the row draws (0 unless sampling)."""

    request: SentenceRequest
    sample: int = 0


Ended = list[tuple[int, list[Hypothesis]]]  # (id given at join, its hypotheses) of the rows or sentences that ended


# ---------------------------------------------------------------- a step's scores


def next_token_logits(model, memory, src_mask, tgt_in, cache: DecoderCache | None) -> torch.Tensor:
    """(N, V) logits of each row's next token. memory (B, S, D) has one row per sentence, shared by its
    G = N / B rows. With a cache `tgt_in` is each row's last token (N, 1); without one (the reference the cache
    is tested against), the whole prefix (N, t+1) is recomputed, and the memory repeated per row."""
    if cache is not None:
        cache.begin_step(tgt_in.size(1), memory.size(0), tgt_in.device)
        return model.decode_step(memory, src_mask, tgt_in, cache)[:, -1]
    group = tgt_in.size(0) // memory.size(0)
    memory, src_mask = memory.repeat_interleave(group, 0), src_mask.repeat_interleave(group, 0)
    return model.decode(memory, src_mask, tgt_in, target_mask(tgt_in))[:, -1]


def forced_tokens(prefix: torch.Tensor | None, position: int | torch.Tensor) -> torch.Tensor | None:
    """The token each row must take now (N,), -1 where it is free; None when no row is forced. `prefix` (N, P)
    holds each row's target prefix (-1 after it); `position` is the step of every row, or (N,) each row's own."""
    if prefix is None:
        return None
    if isinstance(position, torch.Tensor):
        rows = torch.arange(prefix.size(0), device=prefix.device)
        return torch.where(position < prefix.size(1), prefix[rows, position.clamp(max=prefix.size(1) - 1)], -1)
    return None if position >= prefix.size(1) else prefix[:, position]


def only_forced(log_probs: torch.Tensor, forced: torch.Tensor | None) -> torch.Tensor:
    """Rows with a forced token (>= 0) keep that token's log-prob alone (-inf elsewhere); the others keep all."""
    if forced is None:
        return log_probs
    token = forced.clamp(min=0)[:, None]
    only = torch.full_like(log_probs, float("-inf")).scatter(1, token, log_probs.gather(1, token))
    return torch.where((forced >= 0)[:, None], only, log_probs)


def top_tokens(log_probs: torch.Tensor, force_eos: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `n` most probable next tokens per row and their log-probs, both (N, min(n, V)), best first; rows in
    `force_eos` (N,) may only end (EOS first, then -inf).

    The log-probs come from one fused log_softmax, then top_k: on a CPU, 2x faster than topk on the logits
    shifted by their logsumexp (which never writes the (N, V) log-probs, but takes three passes over them)."""
    top, tokens = top_k(log_probs, n)
    only_eos = torch.full_like(top, float("-inf"))
    only_eos[:, 0] = log_probs[:, EOS]
    top = torch.where(force_eos[:, None], only_eos, top)
    return top, tokens.masked_fill(force_eos[:, None], EOS)


TOP_K_CHUNK = 64  # `top_k` looks at a row's scores in chunks of this many
TOP_K_WALK = 32_768  # below this many scores `top_k` is torch's topk


def top_k(scores: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `n` best scores of each row (N, V) and their indices, both (N, min(n, V)), best first: topk(dim=1).

    On a CPU through chunk maxima: a row's n best lie in the n chunks whose maxima are highest (and in the
    entries after the last whole chunk), so topk looks at the chunks' maxima, then at those entries only.
    torch's topk (and max with indices) walks every entry one by one; a vectorised amax does not: a step of 400
    rows over 8,000 tokens, n = 8, took 1.3 ms against 2.2 ms (100 rows over 32,000, n = 2: 0.55 against 1.9 ms;
    torch 2.13, 2 cores). Its nine operations cost more than topk's walk over fewer than TOP_K_WALK entries, or
    rows narrower than 8n chunks: one sentence's beam step over 4,000 tokens (4 rows, n = 8) took 55 against
    26 us. Equal scores may come out in another order than topk's."""
    rows, width = scores.shape
    n = min(n, width)
    if scores.device.type != "cpu" or width < 8 * n * TOP_K_CHUNK or scores.numel() < TOP_K_WALK:
        return scores.topk(n, dim=1)
    whole = width - width % TOP_K_CHUNK
    chunks = scores[:, :whole].unflatten(1, (-1, TOP_K_CHUNK))  # (N, whole / chunk, chunk)
    best_chunks = chunks.amax(-1).topk(n, dim=1).indices  # (N, n)
    candidates = chunks[torch.arange(rows)[:, None], best_chunks].flatten(1)  # (N, n * chunk)
    index = (best_chunks[:, :, None] * TOP_K_CHUNK + torch.arange(TOP_K_CHUNK)).flatten(1)
    if whole < width:
        candidates = torch.cat([candidates, scores[:, whole:]], dim=1)
        index = torch.cat([index, torch.arange(whole, width).expand(rows, -1)], dim=1)
    top, at = candidates.topk(n, dim=1)
    return top, index.gather(1, at)


def compacted(going: torch.Tensor, count: int) -> torch.Tensor:
    """Indices of the `count` True entries of `going` (N,) in the order that moves fewest rows: a row that goes
    on keeps its place among the first `count`, and the places of those that end are taken by the rows after
    them that go on (the cache then copies only those: `cache.kept_rows`). Unlike nonzero() it does not ask the
    device how many there are."""
    head_ends = ~going[:count]
    tail_going = (~going[count:]).byte().argsort(stable=True) + count  # the rows after `count` that go on, first
    hole = (head_ends.long().cumsum(0) - 1).clamp(min=0)  # the i-th ended place takes the i-th of those
    return torch.where(head_ends, tail_going[hole] if tail_going.numel() else hole,
                       torch.arange(count, device=going.device))


def first_eos(tokens: torch.Tensor) -> torch.Tensor:
    """(..., L) -> (...) position of the first EOS, i.e. the hypothesis length without EOS."""
    return (tokens == EOS).byte().argmax(-1)  # argmax returns the first of equal maxima


# ---------------------------------------------------------------- what sentences bring when they join


@dataclass
class Sentences:
    """The row bookkeeping both searches share: per live sentence, row-aligned, the id it joined with, its length
    limit, the steps it has taken, its encoder memory (B, S, D) and source mask (B, 1, 1, S), S the widest live
    source. Sentences that join are `merged` after the live ones; when some end, the others are `kept`."""

    ids: torch.Tensor  # (B,)
    max_len: torch.Tensor  # (B,) most target tokens before EOS
    position: torch.Tensor  # (B,) steps taken, i.e. the target position of the next token
    memory: torch.Tensor
    src_mask: torch.Tensor

    @classmethod
    def joining(cls, model, parts: list[list[tuple[int, SentenceRequest]]], device) -> Sentences:
        """Sentences (id, request) in parts, each part's sources encoded as one batch as wide as it needs, then
        stacked (padded: masked)."""
        masks, memories = [], []
        for part in parts:
            src, src_mask = source_batch([list(r.source) for _, r in part], device)
            masks.append(src_mask)
            memories.append(model.encode(src, src_mask))
        requests = [pair for part in parts for pair in part]
        ids = torch.tensor([i for i, _ in requests], device=device)
        max_len = torch.tensor([r.max_len for _, r in requests], device=device)
        return cls(ids, max_len, torch.zeros_like(ids), stacked(memories), stacked(masks))

    @property
    def width(self) -> int:
        """Source positions of the memory (every sentence counted as wide as the widest)."""
        return self.memory.size(1)

    def merged(self, other: Sentences) -> Sentences:
        return Sentences(torch.cat([self.ids, other.ids]), torch.cat([self.max_len, other.max_len]),
                         torch.cat([self.position, other.position]), stacked([self.memory, other.memory]),
                         stacked([self.src_mask, other.src_mask]))

    def kept(self, keep: KeptRows) -> Sentences:
        """The sentences `keep` names (memory and mask in place on a CPU: mt/model/kv_cache.py `kept_rows`)."""
        index = keep.rows
        return Sentences(self.ids[index], self.max_len[index], self.position[index], kept_rows(self.memory, keep),
                         kept_rows(self.src_mask, keep))


def stacked(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Memories (B, S, D) or source masks (B, 1, 1, S), one after the other, each padded (zeros: masked) to the
    widest one's source positions."""
    source_dim = 1 if tensors[0].dim() == 3 else 3
    width = max(t.size(source_dim) for t in tensors)

    def padded(t):
        missing = width - t.size(source_dim)
        return t if missing == 0 else F.pad(t, (0, 0) * (t.dim() - 1 - source_dim) + (0, missing))
    return torch.cat([padded(t) for t in tensors]) if len(tensors) > 1 else tensors[0]


def _prefix_rows(requests: list[SentenceRequest], device) -> torch.Tensor | None:
    """Target prefixes as (N, longest) token ids, -1 after each; None when no request has one."""
    if not any(r.prefix for r in requests):
        return None
    longest = max(len(r.prefix) for r in requests)
    rows = torch.full((len(requests), longest), -1, dtype=torch.long)
    for i, r in enumerate(requests):
        rows[i, :len(r.prefix)] = torch.tensor(r.prefix, dtype=torch.long)
    return rows.to(device)


def _joined_prefixes(old: torch.Tensor | None, n_old: int, new: torch.Tensor | None, n_new: int):
    """Row-aligned prefixes of the live rows, then of the joining ones (-1 where a row has none)."""
    if old is None and new is None:
        return None
    device = (old if old is not None else new).device
    width = max(t.size(1) for t in (old, new) if t is not None)
    parts = [t if t is not None else torch.full((n, width), -1, dtype=torch.long, device=device)
             for t, n in ((old, n_old), (new, n_new))]
    return torch.cat([F.pad(t, (0, width - t.size(1)), value=-1) for t in parts])


# ---------------------------------------------------------------- greedy search and sampling


class GreedySearch:
    """The most probable next token at each step, or with a `Sampler` a drawn one (sampling). A row's target
    prefix is taken first, then decoding goes on freely; its tokens count in the score.

    Rows join between steps (`join`, each part of sources encoded as wide as it needs) and leave as they end;
    each step reads one number from the device, how many rows go on, and where some ended, which. Without the
    cache (the reference it is tested against) rows join an empty search only. A row is a sentence (one sample
    of it when sampling): its `Sentences` entry is the row's."""

    def __init__(self, model, use_cache: bool = True, sampler: Sampler | None = None):
        self.model, self.use_cache, self.sampler = model, use_cache, sampler
        self.live: Sentences | None = None  # ids, length limits, positions, memory and source mask per live row
        self.requests: dict[int, Row] = {}  # id -> the live row
        self.tokens: torch.Tensor | None = None  # (N, steps) tokens so far, EOS after them
        self.log_prob: torch.Tensor | None = None  # (N,) sum of the tokens' log-probs
        self.prefix: torch.Tensor | None = None  # (N, P) target prefixes, -1 after each; None: no row has one
        self.last: torch.Tensor | None = None  # (N, 1) each row's last token
        self.cache: DecoderCache | None = None
        self.rows = self.since_start = 0
        self.capacity = 0  # positions a fresh batch's cache preallocates at least (the scheduler knows its longest)

    @property
    def width(self) -> int:
        """Source positions of the live rows' memory (every row counted as wide as the widest)."""
        return 0 if self.rows == 0 else self.live.width

    def reserve(self, requests: list[SentenceRequest]) -> None:
        """A fresh batch preallocates its cache for the longest sentence submitted."""
        self.capacity = max([self.capacity] + [request.max_len + 1 for request in requests])

    def item(self, request: SentenceRequest, row: int) -> Row:
        return Row(request, row)

    @torch.no_grad()
    def join(self, parts: list[list[tuple[int, Row]]]) -> None:
        """Rows (id, Row), in parts, start before the next step."""
        rows = [row for part in parts for row in part]
        if self.rows and not self.use_cache:
            raise ValueError("without the cache, rows join an empty search only")
        device = self.model_device
        new = Sentences.joining(self.model, [[(i, r.request) for i, r in part] for part in parts], device)
        steps = max(r.request.max_len for _, r in rows) + 1
        tokens = torch.full((len(rows), steps), EOS, dtype=torch.long, device=device)
        prefix = _prefix_rows([r.request for _, r in rows], device)
        first = torch.full((len(rows), 1), BOS, dtype=torch.long, device=device)
        if self.sampler is not None:
            for i, r in rows:
                self.sampler.add(i, r.request.line, r.sample)
        self.requests.update(rows)
        if self.rows == 0:  # a fresh batch
            self.live, self.tokens, self.prefix, self.last = new, tokens, prefix, first
            self.log_prob, self.since_start = torch.zeros(len(rows), device=device), 0
            capacity = max(steps, self.capacity)
            self.cache = DecoderCache(len(self.model.decoder_layers), capacity) if self.use_cache else None
        else:  # rows join those still decoding
            self.prefix = _joined_prefixes(self.prefix, self.rows, prefix, len(rows))
            self.live = self.live.merged(new)
            self.tokens = torch.cat([_widened_tokens(self.tokens, steps), _widened_tokens(tokens, self.tokens.size(1))])
            self.log_prob = torch.cat([self.log_prob, torch.zeros(len(rows), device=device)])
            self.last = torch.cat([self.last, first])
            self.cache.join(len(rows), device)
        self.rows += len(rows)

    @property
    def model_device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def step(self) -> Ended:
        """One token for every live row; the rows that ended, with their hypotheses."""
        live = self.live
        if self.use_cache:
            tgt_in = self.last
        else:
            tgt_in = torch.cat([torch.full_like(self.last, BOS), self.tokens[:, :self.since_start]], dim=1)
        logits = next_token_logits(self.model, live.memory, live.src_mask, tgt_in, self.cache)
        log_probs = logits.float().log_softmax(-1)
        force_eos = live.max_len <= live.position
        log_probs = only_forced(log_probs, forced_tokens(self.prefix, live.position))
        if self.sampler is None:
            best_log_prob, best = (t.squeeze(1) for t in top_tokens(log_probs, force_eos, 1))
        else:
            best = self.sampler.draw(log_probs, live.ids.tolist()).masked_fill(force_eos, EOS)
            best_log_prob = log_probs.gather(1, best[:, None]).squeeze(1)  # the model's own, temperature 1
        if self.cache is not None:
            self.cache.advance()
        self.log_prob += best_log_prob
        self.tokens[torch.arange(self.rows, device=best.device), live.position] = best
        live.position, self.since_start = live.position + 1, self.since_start + 1
        going = best != EOS
        n_going = int(going.sum())  # the step's one read from the device
        ended = self._ended(~going) if n_going < self.rows else []
        if 0 < n_going < self.rows:
            keep = kept(compacted(going, n_going))  # the moved rows found once for every buffer
            index = keep.rows
            best, self.tokens, self.log_prob = best[index], self.tokens[index], self.log_prob[index]
            self.prefix = None if self.prefix is None else self.prefix[index]
            self.live = live.kept(keep)
            if self.cache is not None:
                self.cache.keep(keep)
        self.rows = n_going
        self.last = best[:, None]
        if n_going == 0:  # an empty search holds no buffers (a server's idle search kept its last batch's cache)
            self.live = self.cache = self.tokens = self.log_prob = self.prefix = None
        return ended

    def _ended(self, ends: torch.Tensor) -> Ended:
        """The rows in `ends` (N,) as hypotheses, by id."""
        ids, tokens, log_prob = self.live.ids[ends].tolist(), self.tokens[ends], self.log_prob[ends].tolist()
        lengths = first_eos(tokens).tolist()
        if self.sampler is not None:
            self.sampler.drop(ids)
        found = []
        for i, row, n, lp in zip(ids, tokens.tolist(), lengths, log_prob):
            alpha = self.requests.pop(i).request.opts.alpha
            found.append((i, [Hypothesis(row[:n], lp / length_penalty(n + 1, alpha), lp)]))
        return found


def _beam_rows(per_sentence: torch.Tensor | None, k: int) -> torch.Tensor | None:
    return None if per_sentence is None else per_sentence.repeat_interleave(k, 0)


def _widened_tokens(tokens: torch.Tensor, steps: int) -> torch.Tensor:
    """Token rows padded with EOS to `steps` columns."""
    missing = steps - tokens.size(1)
    return tokens if missing <= 0 else F.pad(tokens, (0, missing), value=EOS)


# ---------------------------------------------------------------- beam search


@dataclass
class Finished:
    """The best `slots` finished hypotheses of every live sentence, best first."""

    score: torch.Tensor  # (N, slots) float64 length-penalized log-prob, -inf in empty slots
    log_prob: torch.Tensor  # (N, slots)
    tokens: torch.Tensor  # (N, slots, steps) EOS after the hypothesis

    @classmethod
    def empty(cls, batch: int, slots: int, steps: int, device) -> Finished:
        return cls(torch.full((batch, slots), float("-inf"), dtype=torch.float64, device=device),
                   torch.zeros(batch, slots, device=device),
                   torch.full((batch, slots, steps), EOS, dtype=torch.long, device=device))

    def rows(self, index: torch.Tensor) -> Finished:
        return Finished(self.score[index], self.log_prob[index], self.tokens[index])

    def joined(self, other: Finished) -> Finished:
        steps = max(self.tokens.size(2), other.tokens.size(2))
        return Finished(torch.cat([self.score, other.score]), torch.cat([self.log_prob, other.log_prob]),
                        torch.cat([F.pad(t, (0, steps - t.size(2)), value=EOS) for t in (self.tokens, other.tokens)]))

    def hypotheses(self, nbest: int) -> list[list[Hypothesis]]:
        lengths = first_eos(self.tokens[:, :nbest])
        per_sentence = zip(self.score[:, :nbest].tolist(), self.log_prob[:, :nbest].tolist(),
                           self.tokens[:, :nbest].tolist(), lengths.tolist())
        return [[Hypothesis(row[:n], score, log_prob) for score, log_prob, row, n in zip(*slots)
                 if score != float("-inf")] for slots in per_sentence]


@dataclass
class Candidates:
    """A step's candidates per sentence (N, C): scores, the beam each extends, tokens."""

    score: torch.Tensor
    beam: torch.Tensor
    token: torch.Tensor

    def gather(self, index: torch.Tensor) -> Candidates:
        return Candidates(self.score.gather(1, index), self.beam.gather(1, index), self.token.gather(1, index))


class BeamSearch:
    """The `beam_size` best hypotheses of every sentence, extended a token a step; `nbest` of them returned.

    A sentence stops as soon as it has `beam_size` finished hypotheses (the paper's "terminate early when
    possible", by fairseq's and CTranslate2's rule), or at its length limit. Departs from an exact search, which
    would go on while a live hypothesis could still beat the worst finished one at the longest allowed length:
    on the dev set that decoded 1.5x the rows for +0.06 BLEU.

    Rows are sentence-major, K = beam_size rows per sentence. Sentences that join a running search (a server's
    late arrivals) count their own steps (`position`); until one does, every sentence is at the same step and
    the step is a number, not a tensor.
    """

    def __init__(self, model, k: int, nbest: int, alpha: float, use_cache: bool = True):
        self.model, self.k, self.nbest, self.alpha, self.use_cache = model, k, nbest, alpha, use_cache
        self.sentences = 0
        self.live: Sentences | None = None  # ids, length limits, positions, memory and source mask per sentence
        self.tokens: torch.Tensor | None = None  # (N*K, steps) each beam's tokens so far, EOS after them
        self.score: torch.Tensor | None = None  # (N*K,) each beam's sum of log-probs
        self.last: torch.Tensor | None = None  # (N*K, 1) each beam's last token
        self.prefix: torch.Tensor | None = None  # (N*K, P) target prefixes, -1 after each; None: no beam has one
        self.finished: Finished | None = None  # the best finished hypotheses of each sentence
        self.cache: DecoderCache | None = None
        self.step_number = 0  # steps since the search started
        self.staggered = False  # whether sentences joined after the first step (then `position` differs)

    @property
    def rows(self) -> int:
        return self.sentences

    @property
    def width(self) -> int:
        return 0 if self.sentences == 0 else self.live.width

    def reserve(self, requests: list[SentenceRequest]) -> None:
        """Nothing: a beam search's cache grows as it steps."""

    def item(self, request: SentenceRequest, row: int) -> SentenceRequest:
        return request  # a sentence, whose K beams are rows of its own

    @torch.no_grad()
    def join(self, parts: list[list[tuple[int, SentenceRequest]]]) -> None:
        """Sentences (id, request), in parts, start before the next step: K beams each, only the first of which
        may expand at their first step."""
        requests = [r for part in parts for r in part]
        if self.sentences and (not self.use_cache or self.cache is None):
            raise ValueError("without the cache, sentences join an empty search only")
        device = next(self.model.parameters()).device
        new = Sentences.joining(self.model, parts, device)
        n, k = len(requests), self.k
        steps = max(r.max_len for _, r in requests) + 1
        start_score = torch.full((n, k), float("-inf"), device=device)
        start_score[:, 0] = 0.0  # all beams start identical: only the first may expand at step 0
        tokens = torch.full((n * k, steps), EOS, dtype=torch.long, device=device)
        last = torch.full((n * k, 1), BOS, dtype=torch.long, device=device)
        prefix = _beam_rows(_prefix_rows([r for _, r in requests], device), k)
        finished = Finished.empty(n, max(k, self.nbest), steps, device)
        if self.sentences == 0:
            self.live, self.tokens, self.score, self.last, self.prefix = new, tokens, start_score.view(-1), last, prefix
            self.finished, self.step_number, self.staggered = finished, 0, False
            self.cache = DecoderCache(len(self.model.decoder_layers), steps, group=k) if self.use_cache else None
        else:
            self.staggered = self.staggered or self.step_number > 0
            self.prefix = _joined_prefixes(self.prefix, self.sentences * k, prefix, n * k)
            self.tokens = torch.cat([_widened_tokens(self.tokens, steps), _widened_tokens(tokens, self.tokens.size(1))])
            self.score, self.last = torch.cat([self.score, start_score.view(-1)]), torch.cat([self.last, last])
            self.finished = self.finished.joined(finished)
            self.live = self.live.merged(new)
            self.cache.join(n, device)
        self.sentences += n

    @property
    def _position(self) -> int | torch.Tensor:
        """Each sentence's step: one number while all are at the same step."""
        return self.live.position if self.staggered else self.step_number

    def _row_position(self) -> int | torch.Tensor:
        return self.live.position.repeat_interleave(self.k) if self.staggered else self.step_number

    def _penalty(self) -> float | torch.Tensor:
        """The length penalty of a hypothesis ending now: one number, or (N, 1) per sentence (the same floats)."""
        if not self.staggered:
            return length_penalty(self.step_number + 1, self.alpha)
        position = self.live.position
        table = torch.tensor([length_penalty(t + 1, self.alpha) for t in range(int(position.max()) + 1)],
                             dtype=torch.float64, device=position.device)
        return table[position][:, None]

    def _decoder_input(self) -> torch.Tensor:
        """Each row's last token (N*K, 1) with the cache; BOS + its tokens so far without it."""
        if self.use_cache:
            return self.last
        bos = torch.full((self.tokens.size(0), 1), BOS, dtype=torch.long, device=self.tokens.device)
        return torch.cat([bos, self.tokens[:, :self.step_number]], dim=1)

    def _log_probs(self) -> torch.Tensor:
        return next_token_logits(self.model, self.live.memory, self.live.src_mask, self._decoder_input(),
                                 self.cache).float().log_softmax(-1)

    @torch.no_grad()
    def step(self) -> Ended:
        """One token for every live beam; the sentences that ended, with their hypotheses."""
        k = self.k
        at_limit = self.live.max_len <= self._position
        log_probs = only_forced(self._log_probs(), forced_tokens(self.prefix, self._row_position()))
        top_log_probs, top = top_tokens(log_probs, at_limit.repeat_interleave(k), 2 * k)
        candidates = self._expand(top_log_probs, top)
        self._collect_finished(candidates.gather(self._first_k(candidates)))
        done = at_limit | torch.isfinite(self.finished.score[:, k - 1])
        return self._advance(self._best_live(candidates), done)

    def _first_k(self, candidates: Candidates) -> torch.Tensor:
        return torch.arange(self.k, device=candidates.score.device).expand(candidates.score.size(0), -1)

    def _expand(self, top_log_probs: torch.Tensor, top: torch.Tensor) -> Candidates:
        """Every beam's best one-token extensions (N*K, n) -> the 2K best per sentence. A sentence's 2K best
        extensions are among its beams' n = 2K best each."""
        k, n = self.k, top.size(1)
        total = (self.score[:, None] + top_log_probs).view(-1, k * n)  # (N, K*n)
        score, flat = total.topk(min(2 * k, k * n), dim=1)
        return Candidates(score, flat // n, top.view(-1, k * n).gather(1, flat))

    def _collect_finished(self, first: Candidates) -> None:
        """EOS candidates among `first` (N, K) join their sentence's finished hypotheses, scored with the length
        penalty of this step; each sentence keeps its best, earlier ones first among equals."""
        k, finished = self.k, self.finished
        ends = (first.token == EOS) & torch.isfinite(first.score)  # (N, K)
        if ends.device.type == "cpu" and not ends.any():  # most steps (asking a GPU would wait for it)
            return
        new_score = torch.where(ends, first.score.double() / self._penalty(), float("-inf"))
        rows = torch.arange(ends.size(0), device=ends.device)[:, None] * k + first.beam  # (N, K)
        slots = finished.score.size(1)
        score = torch.cat([finished.score, new_score], dim=1)  # (N, slots+K)
        order = score.sort(dim=1, descending=True, stable=True).indices[:, :slots]
        finished.score = score.gather(1, order)
        finished.log_prob = torch.cat([finished.log_prob, first.score], dim=1).gather(1, order)
        tokens = torch.cat([finished.tokens, self.tokens[rows]], dim=1)  # (N, slots+K, steps)
        finished.tokens = tokens.gather(1, order[:, :, None].expand(-1, -1, tokens.size(2)))

    def _best_live(self, candidates: Candidates) -> Candidates:
        """The K best candidates that do not end, in score order (N, K)."""
        score = candidates.score
        rank = torch.arange(score.size(1), device=score.device)
        order = ((candidates.token == EOS).long() * score.size(1) + rank).argsort(dim=1)[:, :self.k]
        return candidates.gather(order)

    def _advance(self, live: Candidates, done: torch.Tensor) -> Ended:
        """Extend the live beams of the sentences not `done` (N,) by their chosen tokens; the done ones leave.
        The cache learns which beam each row continues (no keys move) and forgets the sentences that end."""
        k = self.k
        n_going = int((~done).sum())  # the step's one read from the device
        ended = self._ended(done) if n_going < self.sentences else []
        if n_going == 0:
            self.sentences = 0
            self._free()
            return ended
        rows = torch.arange(done.size(0), device=done.device)[:, None] * k + live.beam  # (N, K)
        score, token = live.score, live.token
        if self.cache is not None:
            self.cache.advance(parents=live.beam)
        if n_going < self.sentences:
            keep = kept(compacted(~done, n_going))  # the moved rows found once for every buffer
            index = keep.rows
            rows, score, token = rows[index], score[index], token[index]
            self._keep_sentences(keep)
        self.tokens = self.tokens[rows.view(-1)]
        if self.staggered:
            self.tokens[torch.arange(self.tokens.size(0), device=token.device),
                        self.live.position.repeat_interleave(k)] = token.view(-1)
        else:
            self.tokens[:, self.step_number] = token.view(-1)
        self.score, self.last = score.reshape(-1), token.reshape(-1, 1)
        self.live.position = self.live.position + 1
        self.step_number += 1
        self.sentences = n_going
        return ended

    def _keep_sentences(self, keep) -> None:
        index = keep.rows
        self.live = self.live.kept(keep)
        self.prefix = None if self.prefix is None else self.prefix[
            (index[:, None] * self.k + torch.arange(self.k, device=index.device)).view(-1)]
        self.finished = self.finished.rows(index)
        if self.cache is not None:
            self.cache.keep(keep)

    def _ended(self, done: torch.Tensor) -> Ended:
        return list(zip(self.live.ids[done].tolist(), self.finished.rows(done).hypotheses(self.nbest)))

    def _free(self) -> None:
        """An empty search holds no buffers (a server's idle search kept its last batch's cache alive)."""
        self.live = self.cache = self.tokens = self.finished = self.prefix = self.score = self.last = None
