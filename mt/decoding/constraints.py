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

Finishing (K finished hypotheses, or the length limit) and scoring are those of mt.decoding.search.BeamSearch, which
`ConstrainedBeamSearch` extends: the candidates of a step and which of them live on are its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mt.decoding.protocol import SentenceRequest
from mt.decoding.search import BeamSearch, Candidates, top_k
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


class ConstrainedBeamSearch(BeamSearch):
    """Beam search whose hypotheses contain every term of their sentence (see the module docstring). Sentences
    join an idle search only: the banks are counted over the sentences that start together."""

    @torch.no_grad()
    def join(self, parts: list[list[tuple[int, SentenceRequest]]]) -> None:
        if self.sentences:
            raise ValueError("constrained beam search takes sentences into an idle search only")
        super().join(parts)
        device, k = self.live.memory.device, self.k
        self.terms = _Terms.of([[list(t) for t in r.terms] for part in parts for _, r in part], device)
        self.banks = int(self.terms.lengths.sum(1).max()) + 1
        rows = self.sentences * k
        self.progress = _Progress((self.terms.lengths == 0).repeat_interleave(k, 0),
                                  torch.full((rows,), -1, device=device), torch.zeros(rows, dtype=torch.long,
                                                                                       device=device))

    @torch.no_grad()
    def step(self):
        k, n = self.k, self.sentences
        row_terms, row_lengths = (t.repeat_interleave(k, 0) for t in (self.terms.tokens, self.terms.lengths))
        at_limit = self.live.max_len <= self.step_number
        anyway = self._ending_anyway(at_limit)
        log_probs = self._may_end(self._log_probs(), anyway, at_limit)
        tokens, token_log_probs = _candidates(log_probs, self.progress, row_terms, k)
        after = _after(self.progress, tokens, row_terms, row_lengths)
        c = tokens.size(1)
        score = (self.score[:, None] + token_log_probs).view(n, k * c)
        tokens, bank = tokens.view(n, k * c), after.bank(row_lengths[:, None, :]).view(n, k * c)
        beam_of = torch.arange(k, device=tokens.device).repeat_interleave(c).expand(n, -1)
        # As in beam search, EOS candidates among the K best finish; here the K best of those that met every term.
        complete = (bank == self.terms.lengths.sum(1)[:, None]) | anyway[:, None]
        best_complete = score.masked_fill(~complete, float("-inf")).topk(k, dim=1).indices
        ends = (tokens == EOS) & torch.isfinite(score)
        first = Candidates(score, beam_of, tokens.masked_fill(~ends, -1)).gather(best_complete)
        self._collect_finished(first)
        live = _allocate(score, bank, ~ends, k, self.banks)  # (N, K) candidate indices
        done = at_limit | torch.isfinite(self.finished.score[:, k - 1])
        chosen_rows = (torch.arange(n, device=tokens.device)[:, None] * k * c + live).view(-1)  # in (N*K*C) order
        self.progress = _Progress(after.met.flatten(0, 1)[chosen_rows], after.inside.flatten()[chosen_rows],
                                  after.done_tokens.flatten()[chosen_rows])
        return self._advance(Candidates(score, beam_of, tokens).gather(live), done)

    def _keep_sentences(self, keep) -> None:
        index, k = keep.rows, self.k
        self.progress = self.progress.rows((index[:, None] * k + torch.arange(k, device=index.device)).view(-1))
        self.terms = _Terms(self.terms.tokens[index], self.terms.lengths[index])
        super()._keep_sentences(keep)

    def _ending_anyway(self, at_limit: torch.Tensor) -> torch.Tensor:
        """(N,) sentences at their length limit with no finished hypothesis and no live one that met every term:
        they end with terms unmet, so that every line gets an output."""
        met_all = (self.progress.met.all(1) & torch.isfinite(self.score)).view(-1, self.k).any(1)
        return at_limit & ~torch.isfinite(self.finished.score[:, 0]) & ~met_all

    def _may_end(self, log_probs: torch.Tensor, anyway: torch.Tensor, at_limit: torch.Tensor) -> torch.Tensor:
        """EOS only for rows that met every term (all rows of the sentences in `anyway`); at the length limit a
        row may only end."""
        may_end = self.progress.met.all(1) | anyway.repeat_interleave(self.k)
        eos = log_probs[:, EOS].masked_fill(~may_end, float("-inf"))
        log_probs = log_probs.masked_fill(at_limit.repeat_interleave(self.k)[:, None], float("-inf"))
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

