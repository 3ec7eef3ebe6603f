"""Search strategies over mt's model: greedy and beam search, with incremental (KV-cached) decoding.

A strategy takes encoded sources and returns hypotheses; preparing lines is the front end's (mt/decode.py),
batching them the backend's (mt/backend.py), except that greedy search refills its own batch (`batch_tokens`).
Sampling is greedy search with a `Sampler` choosing the tokens; constrained beam search (mt/constraints.py)
reuses beam search's bookkeeping (`start_beams`, `Beams`, `Finished`, `collect_finished`, `advance_beams`).
Each strategy scores a step through `_step_top_tokens` and drives the cache (mt/cache.py) through `begin_step`,
`advance`, `keep` and `join`; a new strategy is a new function here.

Hypothesis scores are sum of token log-probabilities (EOS included) divided by the GNMT length penalty
((5 + |Y|) / 6) ** alpha, with |Y| counting EOS, as in the paper's section 6.1 (not len ** alpha).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from mt.batching import token_batches
from mt.cache import DecoderCache, kept, kept_rows
from mt.config import DecodeConfig
from mt.masks import target_mask
from mt.model import Transformer
from mt.symbols import BOS, EOS


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # length-penalized log-probability
    log_prob: float  # plain sum of log-probabilities
    attention: torch.Tensor | None = None  # (len(tokens), source length): asked for by word alignment


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty (Wu et al., 2016), used by the paper with alpha = 0.6."""
    return ((5.0 + length) / 6.0) ** alpha


def max_output_lengths(src_lengths: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Most target tokens (before EOS) per sentence: a * source length + b, capped so positions fit the model."""
    return (src_lengths.double() * a + b).floor().long().clamp(min=1, max=limit)


def _forced_tokens(prefix: torch.Tensor | None, rows: torch.Tensor, step: int | torch.Tensor) -> torch.Tensor | None:
    """The token each row must take at `step` (N,), -1 where it is free; None when no row is forced. `prefix`
    (B, P) holds each sentence's target prefix (-1 after it), `rows` (N,) the sentence of each row; `step` may
    be (N,), each row's own (a refilled batch)."""
    if prefix is None:
        return None
    if isinstance(step, torch.Tensor):
        return torch.where(step < prefix.size(1), prefix[rows, step.clamp(max=prefix.size(1) - 1)], -1)
    return None if step >= prefix.size(1) else prefix[rows, step]


def _only_forced(log_probs: torch.Tensor, forced: torch.Tensor | None) -> torch.Tensor:
    """Rows with a forced token (>= 0) keep that token's log-prob alone (-inf elsewhere); the others keep all."""
    if forced is None:
        return log_probs
    token = forced.clamp(min=0)[:, None]
    only = torch.full_like(log_probs, float("-inf")).scatter(1, token, log_probs.gather(1, token))
    return torch.where((forced >= 0)[:, None], only, log_probs)


def _step_top_tokens(model, memory, src_mask, tgt_in, cache, force_eos: torch.Tensor, n: int,
                     forced: torch.Tensor | None = None):
    """The `n` most probable next tokens per row and their log-probs, both (N, min(n, V)), best first; rows in
    `force_eos` (N,) may only end (EOS first, then -inf), rows with a `forced` token (target prefix) only take it.

    One fused log_softmax, then topk: on a CPU, 2x faster than topk on the logits shifted by their logsumexp
    (which never writes the (N, V) log-probs, but takes three passes over the logits).
    """
    log_probs = next_token_logits(model, memory, src_mask, tgt_in, cache).float().log_softmax(-1)
    log_probs = _only_forced(log_probs, forced)
    top, tokens = top_k(log_probs, n)
    only_eos = torch.full_like(top, float("-inf"))
    only_eos[:, 0] = log_probs[:, EOS]
    top = torch.where(force_eos[:, None], only_eos, top)
    tokens = tokens.masked_fill(force_eos[:, None], EOS)
    return top, tokens


TOP_K_CHUNK = 64  # `top_k` looks at a row's scores in chunks of this many


def top_k(scores: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `n` best scores of each row (N, V) and their indices, both (N, min(n, V)), best first: topk(dim=1).

    On a CPU through chunk maxima: a row's n best lie in the n chunks whose maxima are highest (and in the
    entries after the last whole chunk), so topk looks at the chunks' maxima, then at those entries only.
    torch's topk (and max with indices) walks every entry one by one; a vectorised amax does not: a step of 400
    rows over 8,000 tokens, n = 8, took 1.0 ms against 2.3 ms (99 rows, n = 1: 0.10 against 0.47 ms; torch
    2.13, 2 cores). Equal scores may come out in another order than topk's."""
    rows, width = scores.shape
    n = min(n, width)
    if scores.device.type != "cpu" or width < 4 * n * TOP_K_CHUNK:
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


def decoder_input(tokens: torch.Tensor, step: int, cached: bool) -> torch.Tensor:
    """BOS + tokens[:, :step] (N, step+1) to recompute the prefix, or only its last token (N, 1) with a cache."""
    if cached and step > 0:
        return tokens[:, step - 1:step]
    bos = torch.full((tokens.size(0), 1), BOS, dtype=tokens.dtype, device=tokens.device)
    return bos if cached else torch.cat([bos, tokens[:, :step]], dim=1)


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


def _first_eos(tokens: torch.Tensor) -> torch.Tensor:
    """(..., L) -> (...) position of the first EOS, i.e. the hypothesis length without EOS."""
    return (tokens == EOS).byte().argmax(-1)  # argmax returns the first of equal maxima


class Sampler:
    """Draws each row's next token from the model's distribution, reshaped by temperature, top-k and top-p (the
    nucleus, Holtzman et al., 2020), by inverse transform: one uniform number per row and step.

    Every row has a random stream of its own, seeded from (seed, line number, sample number), so what a line
    draws depends on those alone, not on the lines that share its batch or on the batch size.
    """

    def __init__(self, opts: DecodeConfig, lines: list[int], samples: int):
        self.temperature, self.topk, self.topp = opts.temperature, opts.topk, opts.topp
        self.streams = [torch.Generator().manual_seed(_row_seed(opts.seed, line, j))
                        for line in lines for j in range(samples)]

    def draw(self, log_probs: torch.Tensor, rows: list[int]) -> torch.Tensor:
        """(N, V) next-token log-probs of the rows `rows` (indices of their streams) -> (N,) drawn tokens."""
        logits = log_probs / self.temperature
        if 0 < self.topk < logits.size(-1):
            kth = logits.topk(self.topk, dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs, order = logits.softmax(-1), None
        if self.topp < 1.0:  # keep the most probable tokens until they hold topp (the first always stays)
            probs, order = probs.sort(dim=-1, descending=True, stable=True)
            probs = probs.masked_fill(probs.cumsum(-1) - probs >= self.topp, 0.0)
        cdf = probs.cumsum(-1)  # in token order, or in order of probability for top-p (no sort otherwise)
        uniform = torch.tensor([torch.rand((), generator=self.streams[r]).item() for r in rows], dtype=cdf.dtype)
        pick = (cdf < uniform.to(cdf.device)[:, None] * cdf[:, -1:]).sum(-1).clamp(max=cdf.size(-1) - 1)
        return pick if order is None else order.gather(1, pick[:, None]).squeeze(1)


def _row_seed(seed: int, line: int, sample: int) -> int:
    """A 64-bit seed mixed from three numbers (numpy's SeedSequence: nearby inputs give unrelated streams)."""
    return int(np.random.SeedSequence([seed, line, sample]).generate_state(1, np.uint64)[0])


def _step_drawn_tokens(model, memory, src_mask, tgt_in, cache, force_eos: torch.Tensor, sampler: Sampler,
                       rows: torch.Tensor, forced: torch.Tensor | None):
    """Each row's drawn next token (EOS where `force_eos`, its `forced` token where it has one) and its
    log-probability under the model itself (temperature 1, nothing cut), so a sample is scored like a search
    result: both (N,)."""
    log_probs = next_token_logits(model, memory, src_mask, tgt_in, cache).float().log_softmax(-1)
    tokens = sampler.draw(_only_forced(log_probs, forced), rows.tolist()).masked_fill(force_eos, EOS)
    return log_probs.gather(1, tokens[:, None]).squeeze(1), tokens


REFILL_PARTS = 4  # a refilled batch takes new sentences in parts of a quarter of its source tokens


@torch.no_grad()
def greedy_search(model: Transformer, src, src_mask, *, max_len: torch.Tensor, alpha: float,
                  use_cache: bool = True, sampler: Sampler | None = None,
                  prefix: torch.Tensor | None = None, batch_tokens: int | None = None) -> list[Hypothesis]:
    """src (B, S), src_mask (B, 1, 1, S), max_len (B,) -> one hypothesis per sentence: the most probable next
    token at each step, or with a `sampler` a drawn one (sampling). A sentence's target `prefix` (B, P), -1
    after it) is taken first, then decoding goes on freely; its tokens count in the score.

    Sentences leave the batch as they end; each step reads one number from the device, how many go on. With
    `batch_tokens` at most that many source tokens (rows x widest source, padding counted) decode at once, and
    with the cache the batch is refilled: length-sorted parts of a quarter of that join as soon as they fit
    beside the rows still decoding, so that a step keeps many rows (a step's time is mostly fixed cost when it
    has few: on a CPU, 0.21 ms a row at 10 rows, 0.07 at 80). Without the cache a part starts when the rows
    before it have all ended.
    """
    batch, device = src.size(0), src.device
    max_len = max_len.to(device)
    steps = int(max_len.max()) + 1
    waiting = _source_parts(src_mask, batch_tokens, refill=use_cache)
    tokens = torch.full((batch, steps), EOS, dtype=torch.long, device=device)  # (B, steps) by original index
    log_prob = torch.zeros(batch, device=device)
    alive = position = last = memory = mask = cache = None  # per live row: original index, own step, last token
    n_alive = since_start = 0
    while True:
        parts = _joining(waiting, n_alive, batch_tokens if use_cache else None)
        if parts:
            joining = torch.cat([rows for rows, _ in parts])
            part_masks = [src_mask[rows, :, :, :width] for rows, width in parts]
            part_memories = [model.encode(src[rows, :width], part_mask)  # each part as wide as it needs
                             for (rows, width), part_mask in zip(parts, part_masks)]
            first = torch.full((joining.numel(), 1), BOS, dtype=torch.long, device=device)
            if n_alive == 0:  # a fresh batch
                alive, position, last, since_start = joining, torch.zeros_like(joining), first, 0
                memory, mask = _stacked(part_memories), _stacked(part_masks)
                cache = DecoderCache(len(model.decoder_layers), steps) if use_cache else None
            else:  # rows join those still decoding
                alive, position = torch.cat([alive, joining]), torch.cat([position, torch.zeros_like(joining)])
                last = torch.cat([last, first])
                memory, mask = _stacked([memory, *part_memories]), _stacked([mask, *part_masks])
                cache.join(joining.numel(), device)
            n_alive = alive.numel()
        if n_alive == 0:
            break
        tgt_in = last if use_cache else torch.cat([torch.full_like(last, BOS), tokens[alive, :since_start]], dim=1)
        force_eos, forced = max_len[alive] <= position, _forced_tokens(prefix, alive, position)
        if sampler is None:
            best_log_prob, best = (t.squeeze(1) for t in _step_top_tokens(model, memory, mask, tgt_in, cache,
                                                                            force_eos, 1, forced))
        else:
            best_log_prob, best = _step_drawn_tokens(model, memory, mask, tgt_in, cache, force_eos, sampler,
                                                     alive, forced)
        if cache is not None:
            cache.advance()
        log_prob[alive] += best_log_prob
        tokens[alive, position] = best
        position, since_start = position + 1, since_start + 1
        going = best != EOS
        n_going = int(going.sum())  # the step's one read from the device
        if 0 < n_going < n_alive:
            keep = kept(compacted(going, n_going))  # the moved rows found once for every buffer
            alive, best, position = alive[keep.rows], best[keep.rows], position[keep.rows]
            memory, mask = kept_rows(memory, keep), kept_rows(mask, keep)
            if cache is not None:
                cache.keep(keep)
        n_alive = n_going
        last = best[:, None]
    lengths = _first_eos(tokens)
    return [Hypothesis(row[:n], lp / length_penalty(n + 1, alpha), lp)
            for row, n, lp in zip(tokens.tolist(), lengths.tolist(), log_prob.tolist())]


def _source_parts(src_mask: torch.Tensor, batch_tokens: int | None, refill: bool) -> list[tuple[torch.Tensor, int]]:
    """The sentences in the order they will join, as (indices, longest source) parts: all at once without
    `batch_tokens`, else length-sorted parts of at most batch_tokens (a quarter of it when the batch is
    refilled) source tokens, padding counted."""
    lengths = src_mask[:, 0, 0].sum(1).cpu()
    rows = torch.arange(src_mask.size(0), device=src_mask.device)
    if batch_tokens is None:
        return [(rows, int(lengths.max()))]
    part_tokens = max(1, batch_tokens // REFILL_PARTS) if refill else batch_tokens
    return [(rows[part], int(lengths[part].max())) for part in token_batches(lengths.numpy(), part_tokens)]


def _joining(waiting: list[tuple[torch.Tensor, int]], n_alive: int, room: int | None) -> list[tuple[torch.Tensor, int]]:
    """The parts that start now, taken from `waiting`: none, or the next one when no row decodes; with `room`
    (source tokens), also the next parts that fit beside the `n_alive` rows, every row counted as wide as the
    widest source (the parts ascend; the cache pads to it)."""
    taken: list[tuple[torch.Tensor, int]] = []
    rows = n_alive
    while waiting and (rows == 0 or room is not None and (rows + waiting[0][0].numel()) * waiting[0][1] <= room):
        taken.append(waiting.pop(0))
        rows += taken[-1][0].numel()
    return taken


def _stacked(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Memories (B, S, D) or source masks (B, 1, 1, S), one after the other, each padded (zeros: masked) to the
    widest one's source positions."""
    source_dim = 1 if tensors[0].dim() == 3 else 3
    width = max(t.size(source_dim) for t in tensors)

    def padded(t):
        missing = width - t.size(source_dim)
        return t if missing == 0 else F.pad(t, (0, 0) * (t.dim() - 1 - source_dim) + (0, missing))
    return torch.cat([padded(t) for t in tensors]) if len(tensors) > 1 else tensors[0]


@dataclass
class Beams:
    """Live hypotheses of the sentences still searching; rows are sentence-major, K rows per sentence."""

    sentence: torch.Tensor  # (N,) original index of each live sentence
    tokens: torch.Tensor  # (N*K, steps) tokens so far, EOS after them
    score: torch.Tensor  # (N*K,) summed log-probs
    memory: torch.Tensor  # (N, S, D), shared by the sentence's K beams
    src_mask: torch.Tensor  # (N, 1, 1, S)
    cache: DecoderCache | None


@dataclass
class Finished:
    """The best `slots` finished hypotheses of every sentence (by original index), best first."""

    score: torch.Tensor  # (B, slots) float64 length-penalized log-prob, -inf in empty slots
    log_prob: torch.Tensor  # (B, slots)
    tokens: torch.Tensor  # (B, slots, steps) EOS after the hypothesis

    @classmethod
    def empty(cls, batch: int, slots: int, steps: int, device) -> Finished:
        return cls(torch.full((batch, slots), float("-inf"), dtype=torch.float64, device=device),
                   torch.zeros(batch, slots, device=device),
                   torch.full((batch, slots, steps), EOS, dtype=torch.long, device=device))

    def hypotheses(self, nbest: int) -> list[list[Hypothesis]]:
        lengths = _first_eos(self.tokens[:, :nbest])
        per_sentence = zip(self.score[:, :nbest].tolist(), self.log_prob[:, :nbest].tolist(),
                           self.tokens[:, :nbest].tolist(), lengths.tolist())
        return [[Hypothesis(row[:n], score, log_prob) for score, log_prob, row, n in zip(*slots)
                 if score != float("-inf")] for slots in per_sentence]


def start_beams(model: Transformer, src, src_mask, k: int, steps: int, nbest: int,
                use_cache: bool) -> tuple[Beams, Finished]:
    """K beams per sentence before the first step (the source encoded, the cache empty) and no finished
    hypotheses yet."""
    batch, device = src.size(0), src.device
    start_score = torch.full((batch, k), float("-inf"), device=device)
    start_score[:, 0] = 0.0  # all beams start identical: only the first may expand at step 0
    beams = Beams(torch.arange(batch, device=device),
                  torch.full((batch * k, steps), EOS, dtype=torch.long, device=device), start_score.view(-1),
                  model.encode(src, src_mask), src_mask,
                  DecoderCache(len(model.decoder_layers), steps, group=k) if use_cache else None)
    return beams, Finished.empty(batch, max(k, nbest), steps, device)


@torch.no_grad()
def beam_search(model: Transformer, src, src_mask, *, beam_size: int, alpha: float, max_len: torch.Tensor,
                nbest: int = 1, use_cache: bool = True, prefix: torch.Tensor | None = None) -> list[list[Hypothesis]]:
    """src (B, S), src_mask (B, 1, 1, S), max_len (B,) -> the `nbest` best hypotheses per sentence, each
    starting with the sentence's target `prefix` (B, P), -1 after it) when given.

    A sentence stops as soon as it has `beam_size` finished hypotheses (the paper's "terminate early when
    possible", by fairseq's and CTranslate2's rule), or at its length limit. All of it is tensor operations;
    each step reads one number from the device, how many sentences go on.
    """
    k = beam_size
    max_len = max_len.to(src.device)
    steps = int(max_len.max()) + 1
    beams, finished = start_beams(model, src, src_mask, k, steps, nbest, use_cache)
    for step in range(steps):
        force = (max_len[beams.sentence] <= step).repeat_interleave(k)
        tgt_in = decoder_input(beams.tokens, step, use_cache)
        forced = None if prefix is None else _forced_tokens(prefix, beams.sentence.repeat_interleave(k), step)
        top_log_probs, top_tokens = _step_top_tokens(model, beams.memory, beams.src_mask, tgt_in, beams.cache, force,
                                                     2 * k, forced)
        cand_score, cand_beam, cand_token = _expand(beams.score, top_log_probs, top_tokens, k)
        collect_finished(finished, beams, cand_score, cand_beam, cand_token, k, length_penalty(step + 1, alpha))
        live_score, live_beam, live_token = _best_live(cand_score, cand_beam, cand_token, k)
        done = _sentences_done(finished, beams.sentence, max_len, step, k)
        n_going = int((~done).sum())  # the step's one read from the device
        if n_going == 0:
            break
        beams = advance_beams(beams, live_score, live_beam, live_token, ~done, n_going, k, step)
    return finished.hypotheses(nbest)


def _expand(score, top_log_probs, top_tokens, k):
    """Every beam's best one-token extensions (N*K, n) -> the 2K best per sentence: scores, source beams,
    tokens (N, 2K). A sentence's 2K best extensions are among its beams' n = 2K best each."""
    n = top_tokens.size(1)
    total = (score[:, None] + top_log_probs).view(-1, k * n)  # (N, K*n)
    cand_score, flat = total.topk(min(2 * k, k * n), dim=1)
    return cand_score, flat // n, top_tokens.view(-1, k * n).gather(1, flat)


def collect_finished(finished: Finished, beams: Beams, cand_score, cand_beam, cand_token, k, penalty: float):
    """EOS candidates ranked within the top K join their sentence's finished hypotheses, scored with the
    length penalty of this step (`penalty`); each sentence keeps its best, earlier ones first among equals."""
    ends = (cand_token[:, :k] == EOS) & torch.isfinite(cand_score[:, :k])  # (N, K)
    new_score = torch.where(ends, cand_score[:, :k].double() / penalty, float("-inf"))
    rows = torch.arange(ends.size(0), device=ends.device)[:, None] * k + cand_beam[:, :k]  # (N, K)
    i, slots = beams.sentence, finished.score.size(1)
    score = torch.cat([finished.score[i], new_score], dim=1)  # (N, slots+K)
    order = score.sort(dim=1, descending=True, stable=True).indices[:, :slots]
    finished.score[i] = score.gather(1, order)
    finished.log_prob[i] = torch.cat([finished.log_prob[i], cand_score[:, :k]], dim=1).gather(1, order)
    tokens = torch.cat([finished.tokens[i], beams.tokens[rows]], dim=1)  # (N, slots+K, steps)
    finished.tokens[i] = tokens.gather(1, order[:, :, None].expand(-1, -1, tokens.size(2)))


def _best_live(cand_score, cand_beam, cand_token, k):
    """The K best candidates that do not end, in score order: (N, K) scores, source beams, tokens."""
    rank = torch.arange(cand_score.size(1), device=cand_score.device)
    order = ((cand_token == EOS).long() * cand_score.size(1) + rank).argsort(dim=1)[:, :k]
    return cand_score.gather(1, order), cand_beam.gather(1, order), cand_token.gather(1, order)


def _sentences_done(finished: Finished, sentence, max_len, step, k) -> torch.Tensor:
    """(N,) True where the sentence reached its length limit or has K finished hypotheses.

    Departs from an exact search, which would go on while a live hypothesis could still beat the worst
    finished one at the longest allowed length: on the dev set that decoded 1.5x the rows for +0.06 BLEU."""
    return (max_len[sentence] <= step) | torch.isfinite(finished.score[sentence, k - 1])


def advance_beams(beams: Beams, live_score, live_beam, live_token, going, n_going: int, k: int, step: int) -> Beams:
    """Extend the live beams of the `n_going` sentences in `going` (N,) by their chosen tokens; drop the others.
    The cache learns which beam each row continues (no keys move) and forgets the sentences that end."""
    rows = torch.arange(going.size(0), device=going.device)[:, None] * k + live_beam  # (N, K)
    sentence, memory, src_mask, cache = beams.sentence, beams.memory, beams.src_mask, beams.cache
    if cache is not None:
        cache.advance(parents=live_beam)
    if n_going < going.size(0):
        keep = kept(compacted(going, n_going))  # the moved rows found once for every buffer
        index = keep.rows
        rows, live_score, live_token, sentence = rows[index], live_score[index], live_token[index], sentence[index]
        memory, src_mask = kept_rows(memory, keep), src_mask[index]  # the mask may be the caller's: not in place
        if cache is not None:
            cache.keep(keep)
    tokens = beams.tokens[rows.view(-1)]
    tokens[:, step] = live_token.view(-1)
    return Beams(sentence, tokens, live_score.reshape(-1), memory, src_mask, cache)
