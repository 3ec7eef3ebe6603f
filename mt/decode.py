"""Greedy and beam search with incremental (KV-cached) decoding, and batched translation of lines.

Hypothesis scores are sum of token log-probabilities (EOS included) divided by the GNMT length penalty
((5 + |Y|) / 6) ** alpha, with |Y| counting EOS, as in the paper's section 6.1 (not len ** alpha).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mt.batching import pad_sequences, token_batches
from mt.masks import padding_mask, target_mask
from mt.model import DecoderCache, Transformer
from mt.tokenizer import BOS, EOS, Tokenizer


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # length-penalized log-probability
    log_prob: float  # plain sum of log-probabilities


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty (Wu et al., 2016), used by the paper with alpha = 0.6."""
    return ((5.0 + length) / 6.0) ** alpha


def max_output_lengths(src_lengths: torch.Tensor, a: float, b: int, limit: int) -> torch.Tensor:
    """Most target tokens (before EOS) per sentence: a * source length + b, capped so positions fit the model."""
    return (src_lengths.double() * a + b).floor().long().clamp(min=1, max=limit)


def _step_log_probs(model, memory, src_mask, prefix, cache, force_eos: torch.Tensor) -> torch.Tensor:
    """Log-probs (N, V) of the token after `prefix` (N, t+1); rows in `force_eos` (N,) may only end.

    With a cache only the last prefix token is fed; without one the whole prefix is recomputed.
    """
    if cache is not None:
        logits = model.decode(memory, src_mask, prefix[:, -1:], None, cache)
    else:
        logits = model.decode(memory, src_mask, prefix, target_mask(prefix))
    log_probs = logits[:, -1].float().log_softmax(-1)
    if force_eos.any():
        only_eos = torch.full_like(log_probs[0], float("-inf"))
        only_eos[EOS] = 0.0
        log_probs[force_eos] = log_probs[force_eos] + only_eos
    return log_probs


@torch.no_grad()
def greedy_search(model: Transformer, src, src_mask, *, max_len: torch.Tensor, alpha: float = 0.6,
                  use_cache: bool = True) -> list[Hypothesis]:
    """src (B, S), src_mask (B, 1, 1, S), max_len (B,) -> one hypothesis per sentence."""
    batch = src.size(0)
    memory = model.encode(src, src_mask)
    cache = DecoderCache.empty(len(model.decoder_layers)) if use_cache else None
    alive = torch.arange(batch, device=src.device)  # original index of each row still decoding
    prefix = torch.full((batch, 1), BOS, dtype=torch.long, device=src.device)  # (N, t+1)
    max_len = max_len.to(src.device)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    log_prob = torch.zeros(batch, device=src.device)
    results: list[Hypothesis | None] = [None] * batch
    for step in range(int(max_len.max()) + 1):
        log_probs = _step_log_probs(model, memory, src_mask, prefix, cache, max_len[alive] <= step)
        best = log_probs.argmax(-1)
        log_prob[alive] += log_probs.gather(1, best[:, None]).squeeze(1)
        for row, token in enumerate(best.tolist()):
            i = int(alive[row])
            if token == EOS:
                results[i] = Hypothesis(tokens[i], float(log_prob[i]) / length_penalty(len(tokens[i]) + 1, alpha),
                                        float(log_prob[i]))
            else:
                tokens[i].append(token)
        keep = (best != EOS).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        if keep.numel() < best.numel():
            alive, memory, src_mask, prefix, best = alive[keep], memory[keep], src_mask[keep], prefix[keep], best[keep]
            cache = cache.select(keep, keep) if cache is not None else None
        prefix = torch.cat([prefix, best[:, None]], dim=1)
    return results


@dataclass
class _Beams:
    """Live hypotheses of the sentences still searching; rows are sentence-major, K rows per sentence."""

    sentence: torch.Tensor  # (N,) original index of each live sentence
    prefix: torch.Tensor  # (N*K, t+1) BOS + tokens
    score: torch.Tensor  # (N*K,) summed log-probs
    memory: torch.Tensor  # (N*K, S, D)
    src_mask: torch.Tensor  # (N*K, 1, 1, S)
    cache: DecoderCache | None


@torch.no_grad()
def beam_search(model: Transformer, src, src_mask, *, beam_size: int, alpha: float, max_len: torch.Tensor,
                nbest: int = 1, use_cache: bool = True) -> list[list[Hypothesis]]:
    """src (B, S), src_mask (B, 1, 1, S), max_len (B,) -> the `nbest` best hypotheses per sentence.

    A sentence stops when it has `beam_size` finished hypotheses and none of its live ones can still beat
    the worst of them, even at the longest allowed length (the paper's early termination).
    """
    k, batch = beam_size, src.size(0)
    memory = model.encode(src, src_mask).repeat_interleave(k, dim=0)
    start_score = torch.full((batch, k), float("-inf"), device=src.device)
    start_score[:, 0] = 0.0  # all beams start identical: only the first may expand at step 0
    beams = _Beams(torch.arange(batch, device=src.device),
                   torch.full((batch * k, 1), BOS, dtype=torch.long, device=src.device), start_score.view(-1),
                   memory, src_mask.repeat_interleave(k, dim=0),
                   DecoderCache.empty(len(model.decoder_layers)) if use_cache else None)
    max_len = max_len.to(src.device)
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    for step in range(int(max_len.max()) + 1):
        force = (max_len[beams.sentence] <= step).repeat_interleave(k)
        log_probs = _step_log_probs(model, beams.memory, beams.src_mask, beams.prefix, beams.cache, force)
        cand_score, cand_beam, cand_token = _expand(beams.score, log_probs, k)
        _collect_finished(finished, beams, cand_score, cand_beam, cand_token, k, alpha)
        live_score, live_beam, live_token = _best_live(cand_score, cand_beam, cand_token, k)
        done = _sentences_done(finished, beams.sentence, live_score[:, 0], max_len, step, k, alpha)
        if bool(done.all()):
            break
        beams = _advance(beams, live_score, live_beam, live_token, ~done, k)
    return [sorted(hyps, key=lambda h: -h.score)[:nbest] for hyps in finished]


def _expand(score, log_probs, k):
    """Every one-token extension of every beam -> the 2K best per sentence: scores, source beams, tokens (N, 2K)."""
    vocab = log_probs.size(-1)
    total = (score[:, None] + log_probs).view(-1, k * vocab)  # (N, K*V)
    cand_score, flat = total.topk(min(2 * k, k * vocab), dim=1)
    return cand_score, flat // vocab, flat % vocab


def _collect_finished(finished, beams: _Beams, cand_score, cand_beam, cand_token, k, alpha):
    """EOS candidates ranked within the top K become finished hypotheses of their sentence."""
    ends = (cand_token == EOS) & torch.isfinite(cand_score)
    ends[:, k:] = False
    for n, j in ends.nonzero().tolist():
        row = n * k + int(cand_beam[n, j])
        tokens = beams.prefix[row, 1:].tolist()
        log_prob = float(cand_score[n, j])
        hyp = Hypothesis(tokens, log_prob / length_penalty(len(tokens) + 1, alpha), log_prob)
        finished[int(beams.sentence[n])].append(hyp)


def _best_live(cand_score, cand_beam, cand_token, k):
    """The K best candidates that do not end, in score order: (N, K) scores, source beams, tokens."""
    rank = torch.arange(cand_score.size(1), device=cand_score.device)
    order = ((cand_token == EOS).long() * cand_score.size(1) + rank).argsort(dim=1)[:, :k]
    return cand_score.gather(1, order), cand_beam.gather(1, order), cand_token.gather(1, order)


def _sentences_done(finished, sentence, best_live, max_len, step, k, alpha) -> torch.Tensor:
    """(N,) True where the sentence reached its length limit or no live hypothesis can beat its finished ones."""
    done = []
    for n, i in enumerate(sentence.tolist()):
        if step >= int(max_len[i]):
            done.append(True)
        elif len(finished[i]) < k:
            done.append(False)
        else:
            worst_kept = sorted(h.score for h in finished[i])[-k]
            # log-probs only fall as a hypothesis grows, so the best it can reach is at the longest length
            best_possible = float(best_live[n]) / length_penalty(int(max_len[i]) + 1, alpha)
            done.append(worst_kept >= best_possible)
    return torch.tensor(done, device=sentence.device)


def _advance(beams: _Beams, live_score, live_beam, live_token, keep, k) -> _Beams:
    """Extend the live beams of the sentences in `keep` (N,) by their chosen tokens; drop the others."""
    n_sent = keep.size(0)
    rows = (torch.arange(n_sent, device=keep.device)[:, None] * k + live_beam)[keep].view(-1)
    prefix = torch.cat([beams.prefix[rows], live_token[keep].view(-1, 1)], dim=1)
    if bool(keep.all()):
        memory, src_mask, cross_rows = beams.memory, beams.src_mask, None
    else:
        cross_rows = (keep.nonzero()[:, :1] * k + torch.arange(k, device=keep.device)).view(-1)
        memory, src_mask = beams.memory[cross_rows], beams.src_mask[cross_rows]
    cache = beams.cache.select(rows, cross_rows) if beams.cache is not None else None
    return _Beams(beams.sentence[keep], prefix, live_score[keep].view(-1), memory, src_mask, cache)


def search(model, src, src_mask, *, beam_size: int, alpha: float, max_len, nbest: int = 1,
           use_cache: bool = True) -> list[list[Hypothesis]]:
    """Greedy search when beam_size is 1 and one hypothesis is wanted, beam search otherwise."""
    if beam_size == 1 and nbest == 1:
        return [[h] for h in greedy_search(model, src, src_mask, max_len=max_len, alpha=alpha, use_cache=use_cache)]
    return beam_search(model, src, src_mask, beam_size=beam_size, alpha=alpha, max_len=max_len, nbest=nbest,
                       use_cache=use_cache)


def translate_ids(model: Transformer, sources: list[list[int]], *, beam_size: int, alpha: float, max_len_a: float,
                  max_len_b: int, batch_tokens: int, nbest: int = 1, use_cache: bool = True,
                  device=None, on_truncate=None) -> list[list[Hypothesis]]:
    """Translate token-id sentences (no EOS) in length-sorted batches of at most `batch_tokens` source tokens
    (beam rows counted); results come back in input order. Empty sources give one empty hypothesis.

    Sources too long for the model's positions are cut, calling `on_truncate(index, length, kept)` for each.
    """
    device = device or next(model.parameters()).device
    limit = model.cfg.max_positions - 1
    keep = limit - 1  # room for EOS
    if on_truncate is not None:
        for i, s in enumerate(sources):
            if len(s) > keep:
                on_truncate(i, len(s), keep)
    sources = [s[:keep] for s in sources]
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0, 0.0)] for _ in sources]
    todo = [i for i, s in enumerate(sources) if s]
    lengths = [len(sources[i]) + 1 for i in todo]
    for batch in token_batches(lengths, max(1, batch_tokens // beam_size)):
        index = [todo[j] for j in batch]
        src = pad_sequences([torch.tensor(sources[i] + [EOS]) for i in index]).to(device)
        src_lengths = torch.tensor([len(sources[i]) for i in index])
        max_len = max_output_lengths(src_lengths, max_len_a, max_len_b, limit)
        hyps = search(model, src, padding_mask(src), beam_size=beam_size, alpha=alpha, max_len=max_len,
                      nbest=nbest, use_cache=use_cache)
        for i, h in zip(index, hyps):
            results[i] = h
    return results


def translate_lines(model: Transformer, src_tok: Tokenizer, tgt_tok: Tokenizer, lines: list[str],
                    **options) -> list[list[tuple[str, float]]]:
    """Detokenized (text, score) hypotheses per input line; see `translate_ids` for the options."""
    hyps = translate_ids(model, src_tok.encode(lines), **options)
    return [[(tgt_tok.decode(h.tokens), h.score) for h in per_line] for per_line in hyps]
