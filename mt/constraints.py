"""Hard lexical constraints (`mt translate --constraints`): beam search whose outputs contain given terms.

Constrained beam search with dynamic beam allocation (Post & Vilar, 2018), in tensor operations over the whole
batch as Hu et al. (2019) vectorise it. Terms are unordered (fairseq's default): each may appear anywhere, in
any order. Per row the search tracks which terms are met, and the term it is inside (and how far):

- candidates at each step are every beam's 2K most probable tokens plus, for every term not yet met, its next
  token (the next token of the term the beam is inside, or the first token of any other);
- a candidate's bank is the number of term tokens it has produced (of met terms, and of the term it is inside;
  leaving a term half-way gives its tokens back);
- the K live beams are taken from the banks in turn, highest bank first: the best of each bank, then the second
  best of each, ... (fairseq's round-robin form of the allocation, which hands unused slots to other banks);
- a hypothesis may end only once it has met every term. At its length limit a sentence with no such
  hypothesis (finished or live) ends whatever it has, so every line gets an output; the front end lengthens
  the limit of a constrained line by its term tokens, so this is rare.

Finishing (K finished hypotheses, or the length limit) and scoring are those of mt.search.beam_search.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mt.model import Transformer
from mt.search import (  # beam search's bookkeeping, shared
    Finished,
    Hypothesis,
    advance_beams,
    collect_finished,
    decoder_input,
    compacted,
    length_penalty,
    next_token_logits,
    start_beams,
    top_k,
)
from mt.symbols import EOS


@dataclass
class _Terms:
    """Each sentence's terms, padded: tokens (B, M, L) with -1 after a term, lengths (B, M), 0 for no term."""

    tokens: torch.Tensor
    lengths: torch.Tensor

    @classmethod
    def of(cls, constraints: list[list[list[int]]], device) -> _Terms:
        most_terms = max(1, max(len(terms) for terms in constraints))
        longest = max(1, max((len(t) for terms in constraints for t in terms), default=1))
        tokens = torch.full((len(constraints), most_terms, longest), -1, dtype=torch.long)
        lengths = torch.zeros(len(constraints), most_terms, dtype=torch.long)
        for b, terms in enumerate(constraints):
            for m, term in enumerate(terms):
                tokens[b, m, :len(term)] = torch.tensor(term)
                lengths[b, m] = len(term)
        return cls(tokens.to(device), lengths.to(device))


@dataclass
class _Progress:
    """Per row (N*K): which terms are met (N*K, M), the term it is inside (-1: none) and how many of its tokens
    it has produced, both (N*K,)."""

    met: torch.Tensor
    inside: torch.Tensor
    done_tokens: torch.Tensor

    def bank(self, lengths: torch.Tensor) -> torch.Tensor:
        """Term tokens produced: those of met terms and of the term half-way through; lengths (rows, M)."""
        return (self.met * lengths).sum(-1) + self.done_tokens

    def rows(self, index: torch.Tensor) -> _Progress:
        return _Progress(self.met[index], self.inside[index], self.done_tokens[index])


def _after(progress: _Progress, tokens: torch.Tensor, terms: torch.Tensor, lengths: torch.Tensor) -> _Progress:
    """The progress of every candidate: row r extended by tokens[r, c] (R, C); terms (R, M, L), lengths (R, M).
    Continuing the term a row is inside takes precedence; otherwise a token that starts a term not yet met
    starts it (the first such term); any other token leaves the row outside every term."""
    met, inside, produced = progress.met, progress.inside, progress.done_tokens
    rows = torch.arange(len(inside), device=inside.device)
    next_in_term = terms[rows, inside.clamp(min=0), produced.clamp(max=terms.size(2) - 1)]
    next_in_term = torch.where((inside >= 0) & (produced < terms.size(2)), next_in_term, -1)  # (R,)
    continues = tokens == next_in_term[:, None]  # (R, C)
    starts = (tokens[:, :, None] == terms[:, None, :, 0]) & ~met[:, None, :]  # (R, C, M)
    started = starts.byte().argmax(2)  # the first term the token starts
    new_inside = torch.where(continues, inside[:, None], torch.where(starts.any(2), started, -1))
    new_produced = torch.where(continues, produced[:, None] + 1, starts.any(2).long())
    term_length = lengths[:, None, :].expand(-1, tokens.size(1), -1).gather(2, new_inside.clamp(min=0)[..., None])
    completes = (new_inside >= 0) & (new_produced == term_length.squeeze(2))
    newly_met = F.one_hot(new_inside.clamp(min=0), met.size(1)).bool() & completes[..., None]
    return _Progress(met[:, None, :] | newly_met, torch.where(completes, -1, new_inside),
                     torch.where(completes, 0, new_produced))


def _allocate(score: torch.Tensor, bank: torch.Tensor, usable: torch.Tensor, k: int, banks: int) -> torch.Tensor:
    """Dynamic beam allocation over candidates (N, P): the indices (N, K) of the live beams, taken from the
    banks in turn, highest bank first, each bank's candidates best first."""
    score = score.masked_fill(~usable, float("-inf"))
    order = score.argsort(dim=1, descending=True, stable=True)
    in_order_bank = bank.gather(1, order)
    one_hot = F.one_hot(in_order_bank, banks)
    rank_in_bank = (one_hot.cumsum(1) * one_hot).sum(2) - 1
    turn = rank_in_bank * banks + (banks - 1 - in_order_bank)
    turn = turn.masked_fill(~torch.isfinite(score.gather(1, order)), torch.iinfo(torch.long).max)
    return order.gather(1, turn.argsort(dim=1, stable=True)[:, :k])


@torch.no_grad()
def constrained_beam_search(model: Transformer, src, src_mask, *, beam_size: int, alpha: float,
                            max_len: torch.Tensor, constraints: list[list[list[int]]], nbest: int = 1,
                            use_cache: bool = True) -> list[list[Hypothesis]]:
    """src (B, S), src_mask (B, 1, 1, S), max_len (B,), each sentence's terms (lists of target token ids) -> the
    `nbest` best hypotheses per sentence that contain every term of it (see the module docstring)."""
    k, batch, device = beam_size, src.size(0), src.device
    max_len = max_len.to(device)
    steps = int(max_len.max()) + 1
    terms = _Terms.of(constraints, device)
    banks = int(terms.lengths.sum(1).max()) + 1
    beams, finished = start_beams(model, src, src_mask, k, steps, nbest, use_cache)
    no_term = (terms.lengths == 0).repeat_interleave(k, 0)
    progress = _Progress(no_term, torch.full((batch * k,), -1, device=device),
                         torch.zeros(batch * k, dtype=torch.long, device=device))
    for step in range(steps):
        n = beams.sentence.size(0)
        sentence_of_row = beams.sentence.repeat_interleave(k)
        row_terms, row_lengths = terms.tokens[sentence_of_row], terms.lengths[sentence_of_row]
        log_probs = next_token_logits(model, beams.memory, beams.src_mask, decoder_input(beams.tokens, step, use_cache),
                                       beams.cache).float().log_softmax(-1)
        anyway = _ending_anyway(progress, beams.score, finished, beams.sentence, max_len, step, k)
        log_probs = _may_end(log_probs, progress, anyway, beams.sentence, max_len, step, k)
        tokens, token_log_probs = _candidates(log_probs, progress, row_terms, k)
        after = _after(progress, tokens, row_terms, row_lengths)
        c = tokens.size(1)
        score = (beams.score[:, None] + token_log_probs).view(n, k * c)
        tokens, bank = tokens.view(n, k * c), after.bank(row_lengths[:, None, :]).view(n, k * c)
        beam_of = torch.arange(k, device=device).repeat_interleave(c).expand(n, -1)
        # As in beam_search, EOS candidates among the K best finish; here the K best of those that met every term.
        complete = (bank == terms.lengths.sum(1)[beams.sentence, None]) | anyway[:, None]
        best_complete = score.masked_fill(~complete, float("-inf")).topk(k, dim=1).indices
        ends = (tokens == EOS) & torch.isfinite(score)
        collect_finished(finished, beams, score.gather(1, best_complete), beam_of.gather(1, best_complete),
                          tokens.gather(1, best_complete).masked_fill(~ends.gather(1, best_complete), -1), k,
                          length_penalty(step + 1, alpha))
        live = _allocate(score, bank, ~ends, k, banks)  # (N, K) candidate indices
        done = (max_len[beams.sentence] <= step) | torch.isfinite(finished.score[beams.sentence, k - 1])
        n_going = int((~done).sum())
        if n_going == 0:
            break
        chosen_rows = (torch.arange(n, device=device)[:, None] * k * c + live).view(-1)  # in (N*K*C) order
        progress = _Progress(after.met.flatten(0, 1)[chosen_rows], after.inside.flatten()[chosen_rows],
                             after.done_tokens.flatten()[chosen_rows])
        if n_going < n:
            progress = progress.rows((compacted(~done, n_going)[:, None] * k + torch.arange(k, device=device)).view(-1))
        beams = advance_beams(beams, score.gather(1, live), beam_of.gather(1, live), tokens.gather(1, live), ~done,
                               n_going, k, step)
    return finished.hypotheses(nbest)


def _ending_anyway(progress: _Progress, row_score, finished: Finished, sentence, max_len, step: int,
                   k: int) -> torch.Tensor:
    """(N,) sentences at their length limit with no finished hypothesis and no live one that met every term:
    they end with terms unmet, so that every line gets an output."""
    met_all = (progress.met.all(1) & torch.isfinite(row_score)).view(-1, k).any(1)
    return (max_len[sentence] <= step) & ~torch.isfinite(finished.score[sentence, 0]) & ~met_all


def _may_end(log_probs, progress: _Progress, anyway: torch.Tensor, sentence, max_len, step: int, k: int):
    """EOS only for rows that met every term (all rows of the sentences in `anyway`); at the length limit a row
    may only end."""
    at_limit = (max_len[sentence] <= step).repeat_interleave(k)
    may_end = progress.met.all(1) | anyway.repeat_interleave(k)
    eos = log_probs[:, EOS].masked_fill(~may_end, float("-inf"))
    log_probs = log_probs.masked_fill(at_limit[:, None], float("-inf"))
    log_probs[:, EOS] = eos
    return log_probs


def _candidates(log_probs, progress: _Progress, terms: torch.Tensor, k: int):
    """Each row's candidate tokens and their log-probs (R, 2K + M): its 2K best tokens, then the next token of
    every term it has not met (-inf where there is none, or where the token is already a candidate)."""
    top_log_probs, top = top_k(log_probs, 2 * k)
    rows = torch.arange(len(top), device=top.device)[:, None]
    position = torch.where(torch.arange(terms.size(1), device=top.device) == progress.inside[:, None],
                           progress.done_tokens[:, None], 0).clamp(max=terms.size(2) - 1)
    nexts = terms[rows, torch.arange(terms.size(1), device=top.device), position]  # (R, M)
    open_terms = (nexts >= 0) & ~progress.met
    in_top = (nexts[:, :, None] == top[:, None, :]).any(2)
    same_as_earlier = ((nexts[:, :, None] == nexts[:, None, :]) & open_terms[:, None, :]).tril(-1).any(2)
    usable = open_terms & ~in_top & ~same_as_earlier
    term_log_probs = log_probs.gather(1, nexts.clamp(min=0)).masked_fill(~usable, float("-inf"))
    return torch.cat([top, nexts.clamp(min=0)], dim=1), torch.cat([top_log_probs, term_log_probs], dim=1)

