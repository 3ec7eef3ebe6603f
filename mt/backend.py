"""Decoding backends: what searches a batch of encoded sources. Here the interface and mt's own model.

The front end (mt/decode.py) prepares lines (encoding, truncation, empty lines, length limits) once for every
backend; a backend searches them in batches of at most `decode.batch_tokens` source tokens (`per_batch`,
or refilled batches: mt/search.py). mt/ct2_backend.py is the other backend (an exported CTranslate2
directory). A new backend is a class with `max_positions` and `search` and a loader that returns a
`Translator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from mt.alignment import cross_attention
from mt.batching import pad_sequences, source_batch, token_batches
from mt.checkpoint import load_checkpoint, translation_weights
from mt.config import Config, DecodeConfig, config_from_dict
from mt.constraints import constrained_beam_search
from mt.ensemble import Ensemble
from mt.errors import MtError
from mt.model import Transformer, build_model
from mt.quantize import quantize_int8
from mt.runtime import pick_device
from mt.search import Hypothesis, Sampler, beam_search, greedy_search
from mt.tokenizer import Tokenizer


class Backend(Protocol):
    max_positions: int  # target and source positions the model has (EOS included)

    def search(self, sources: list[list[int]], max_len: torch.Tensor, opts: DecodeConfig, nbest: int,
               lines: list[int], prefixes: list[list[int]] | None = None,
               constraints: list[list[list[int]]] | None = None) -> list[list[Hypothesis]]:
        """Non-empty token-id sources (no EOS, none over max_positions - 2 tokens; searched in batches of at most
        `opts.batch_tokens` source tokens, padding counted, beams not), each with its most target
        tokens before EOS (max_len, (B,)), its input line number (`lines`, from 0) and, when given, the target
        tokens its output starts with (`prefixes`, no longer than its max_len) -> the `nbest` best hypotheses of
        each, best first (prefix included); with `opts.sampling`, `nbest` samples in the order drawn. With
        `constraints`, each source's terms (target token ids) all appear in its hypotheses (mt/constraints.py)."""
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


@dataclass
class ModelBackend:
    """mt's Transformer: greedy search when one hypothesis of beam 1 is wanted (or samples), beam search otherwise.
    `use_cache=False` recomputes every prefix at every step (the reference the KV cache is tested against)."""

    model: Transformer | Ensemble
    use_cache: bool = True

    @property
    def max_positions(self) -> int:
        return self.model.cfg.max_positions

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def search(self, sources: list[list[int]], max_len: torch.Tensor, opts: DecodeConfig, nbest: int,
               lines: list[int], prefixes: list[list[int]] | None = None,
               constraints: list[list[list[int]]] | None = None) -> list[list[Hypothesis]]:
        if constraints is not None and any(constraints):
            return self._constrained(sources, max_len, opts, nbest, lines, constraints)
        if opts.sampling or (opts.beam_size == 1 and nbest == 1):
            return self._greedy(sources, max_len, opts, nbest, lines, prefixes)

        def beams(index: list[int]) -> list[list[Hypothesis]]:
            src, src_mask = source_batch([sources[i] for i in index], self.device)
            prefix = _prefix_tensor(None if prefixes is None else [prefixes[i] for i in index], self.device)
            return beam_search(self.model, src, src_mask, beam_size=opts.beam_size, alpha=opts.alpha,
                               max_len=max_len[index], nbest=nbest, use_cache=self.use_cache, prefix=prefix)
        return per_batch(sources, opts.batch_tokens, beams)

    def _greedy(self, sources, max_len: torch.Tensor, opts: DecodeConfig, nbest: int, lines, prefixes):
        """Greedy search, or `nbest` samples per sentence (rows of their own, each drawing on its own), over all
        the sentences: the search refills its own batch of `opts.batch_tokens` source tokens (samples, like
        beams, not counted)."""
        src, src_mask = source_batch(sources, self.device)
        prefix = _prefix_tensor(prefixes, self.device)
        if not opts.sampling:
            return [[h] for h in greedy_search(self.model, src, src_mask, max_len=max_len, alpha=opts.alpha,
                                               use_cache=self.use_cache, prefix=prefix, batch_tokens=opts.batch_tokens)]

        def repeat(t):
            return None if t is None else t.repeat_interleave(nbest, 0)
        hyps = greedy_search(self.model, repeat(src), repeat(src_mask), max_len=repeat(max_len), alpha=opts.alpha,
                             use_cache=self.use_cache, sampler=Sampler(opts, lines, nbest), prefix=repeat(prefix),
                             batch_tokens=opts.batch_tokens * nbest)
        return [hyps[i:i + nbest] for i in range(0, len(hyps), nbest)]

    def _constrained(self, sources, max_len, opts: DecodeConfig, nbest: int, lines, constraints):
        """Sentences with terms through constrained beam search; those without, as without the option."""
        if opts.sampling:
            raise MtError("constraints need beam search; they do not combine with sampling")
        with_terms = [i for i, terms in enumerate(constraints) if terms]
        others = [i for i, terms in enumerate(constraints) if not terms]
        results: list[list[Hypothesis]] = [[] for _ in sources]
        if others:
            found = self.search([sources[i] for i in others], max_len[others], opts, nbest, [lines[i] for i in others])
            for i, hyps in zip(others, found):
                results[i] = hyps

        term_sources, term_max_len = [sources[i] for i in with_terms], max_len[with_terms]
        term_constraints = [constraints[i] for i in with_terms]

        def constrained(index: list[int]) -> list[list[Hypothesis]]:
            src, src_mask = source_batch([term_sources[i] for i in index], self.device)
            return constrained_beam_search(self.model, src, src_mask, beam_size=opts.beam_size, alpha=opts.alpha,
                                           max_len=term_max_len[index], nbest=nbest,
                                           constraints=[term_constraints[i] for i in index], use_cache=self.use_cache)
        found = per_batch(term_sources, opts.batch_tokens, constrained)
        for i, hyps in zip(with_terms, found):
            results[i] = hyps
        return results

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[torch.Tensor]:
        """An ensemble's attention is the mean of its models'."""
        models = list(self.model.models) if isinstance(self.model, Ensemble) else [self.model]
        each = [cross_attention(model, sources, targets) for model in models]
        return [sum(per_model) / len(models) for per_model in zip(*each)]


def per_batch(sources: list[list[int]], batch_tokens: int, search) -> list:
    """`search(index)` of every length-sorted batch of `sources` with at most `batch_tokens` source tokens
    (EOS and padding counted), its results put back in input order."""
    results: list = [None] * len(sources)
    for index in token_batches([len(s) + 1 for s in sources], batch_tokens):
        for i, found in zip(index, search(index)):
            results[i] = found
    return results


def _prefix_tensor(prefixes: list[list[int]] | None, device) -> torch.Tensor | None:
    """Target prefixes as (B, longest) token ids, -1 after each; None when no sentence has one."""
    if not prefixes or not any(prefixes):
        return None
    return pad_sequences([torch.tensor(p, dtype=torch.long) for p in prefixes], padding_value=-1).to(device)


def load_model_translator(path: str | Path, device: str = "auto", quantize: str | None = None,
                          raw_weights: bool = False) -> Translator:
    """A checkpoint's model in eval mode on `device`, with its tokenizers and config, from the file alone.
    `quantize="int8"` decodes with int8 weights (mt.quantize; CPU only). The weights are the checkpoint's
    averaged ones when it has them, unless `raw_weights` (`translation_weights`)."""
    ckpt = load_checkpoint(path)
    cfg = config_from_dict(ckpt["config"], source=f"{path} (stored config)")
    src_tok = Tokenizer.from_tensor(ckpt["src_tokenizer"])
    tgt_tok = Tokenizer.from_tensor(ckpt["tgt_tokenizer"])
    model = build_model(cfg.model, len(src_tok), len(tgt_tok), cfg.tokenizer.joint)
    model.load_state_dict(translation_weights(ckpt, raw_weights))
    model.eval()
    target = pick_device(device, option="--device")
    if quantize is not None:
        if target.type != "cpu":
            raise MtError("--quantize int8 runs on the CPU; add --device cpu (or export to CTranslate2 for a GPU)")
        model = quantize_int8(model)
    return Translator(ModelBackend(model.to(target)), src_tok, tgt_tok, cfg)


def load_ensemble_translator(paths: list[str | Path], device: str = "auto", quantize: str | None = None,
                             raw_weights: bool = False) -> Translator:
    """Checkpoints with the same vocabularies decoding as one model (mt/ensemble.py); the first one's config
    gives the decode defaults. Vocabularies that differ are a one-line error naming the checkpoint and side."""
    members = [load_model_translator(p, device, quantize, raw_weights) for p in paths]
    first = members[0]
    for path, member in zip(paths[1:], members[1:]):
        for side, name in (("src_tokenizer", "source"), ("tgt_tokenizer", "target")):
            ours, theirs = _pieces(getattr(first, side)), _pieces(getattr(member, side))
            if ours != theirs:
                where = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
                raise MtError(f"{path}: its {name} vocabulary differs from {paths[0]}'s ({len(theirs)} and "
                              f"{len(ours)} pieces, first difference at id {where}); an ensemble needs the same "
                              "vocabularies")
    ensemble = Ensemble([member.backend.model for member in members])
    return Translator(ModelBackend(ensemble), first.src_tokenizer, first.tgt_tokenizer, first.cfg)


def _pieces(tokenizer: Tokenizer) -> list[str]:
    return [tokenizer.sp.id_to_piece(i) for i in range(len(tokenizer))]
