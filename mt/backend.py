"""mt's own model as a decoding backend (the protocol is in mt/decoding.py), and loading it from checkpoints.

The front end (mt/decode.py) turns lines into requests once for every backend; this backend hands each group of
requests with the same settings to its search, fed by a scheduler (mt/scheduler.py). mt/ct2_backend.py is the
other backend (an exported CTranslate2 directory). A new backend is a class with `max_positions`, `search` and
`attention`, and a loader that returns a `Translator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from mt.alignment import cross_attention
from mt.checkpoint import load_checkpoint, load_weights, translation_weights
from mt.config import config_from_dict
from mt.constraints import ConstrainedBeamSearch
from mt.decoding import Hypothesis, SentenceRequest, Translator, grouped
from mt.ensemble import Ensemble
from mt.errors import MtError
from mt.model import Transformer, build_model
from mt.quantize import quantize_int8
from mt.runtime import pick_device
from mt.scheduler import Policy, Scheduler, Waiting
from mt.search import BeamSearch, GreedySearch, Row, Sampler
from mt.tokenizer import Tokenizer


@dataclass
class ModelBackend:
    """mt's Transformer: greedy search for one hypothesis of beam 1, sampling, beam search, or constrained beam
    search, each request by its own settings; requests with the same settings share batches (mt/scheduler.py).
    `use_cache=False` recomputes every prefix at every step (the reference the KV cache is tested against)."""

    model: Transformer | Ensemble
    use_cache: bool = True

    @property
    def max_positions(self) -> int:
        return self.model.cfg.max_positions

    def search(self, requests: list[SentenceRequest]) -> list[list[Hypothesis]]:
        results: list[list[Hypothesis]] = [[] for _ in requests]
        for index in grouped(requests):
            scheduler, rows = self.scheduler([requests[i] for i in index])
            found = dict(scheduler.run())
            for k, i in enumerate(index):  # a request's rows (its samples) in the order drawn
                results[i] = [h for row in range(k * rows, k * rows + rows) for h in found[row]]
        return results

    def scheduler(self, requests: list[SentenceRequest]) -> tuple[Scheduler, int]:
        """A scheduler with every request submitted, of the search the requests share, and its rows per request
        (ids: request i's rows are i * rows ... i * rows + rows - 1)."""
        first = requests[0]
        search, policy, rows = self.new_search(first)
        if isinstance(search, GreedySearch):  # a row per sample
            items = [Waiting(i * rows + j, Row(r, j), len(r.source) + 1) for i, r in enumerate(requests)
                     for j in range(rows)]
        else:
            items = [Waiting(i, r, len(r.source) + 1) for i, r in enumerate(requests)]
        scheduler = Scheduler(search, policy)
        if isinstance(search, GreedySearch):
            search.capacity = max(r.max_len for r in requests) + 1
        scheduler.submit(items)
        return scheduler, rows

    def new_search(self, request: SentenceRequest, join_running: bool = False):
        """The search of `request`'s group, the policy that feeds it and its rows per request. Greedy search and
        sampling refill their batch; beam search refills it only when asked (`join_running`, for sentences that
        arrive while it decodes), else decodes static batches."""
        opts, budget = request.opts, request.opts.batch_tokens
        if request.search in ("greedy", "sampling"):
            sampler = Sampler(opts) if request.search == "sampling" else None
            rows = request.nbest if sampler is not None else 1
            policy = Policy.refilling(budget * rows) if self.use_cache else Policy.static(budget * rows)
            return GreedySearch(self.model, self.use_cache, sampler), policy, rows
        if request.search == "constrained":
            search = ConstrainedBeamSearch(self.model, opts.beam_size, request.nbest, opts.alpha, self.use_cache)
            return search, Policy.static(budget), 1
        search = BeamSearch(self.model, opts.beam_size, request.nbest, opts.alpha, self.use_cache)
        return search, Policy.refilling(budget) if join_running and self.use_cache else Policy.static(budget), 1

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[torch.Tensor]:
        """An ensemble's attention is the mean of its models'."""
        models = list(self.model.models) if isinstance(self.model, Ensemble) else [self.model]
        each = [cross_attention(model, sources, targets) for model in models]
        return [sum(per_model) / len(models) for per_model in zip(*each)]


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
    load_weights(model, translation_weights(ckpt, raw_weights), path)
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
