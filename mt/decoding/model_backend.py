"""mt's own model as a decoding backend (the protocol is in mt/decoding/protocol.py), and loading it from checkpoints.

The front end (mt/decoding/lines.py) turns lines into requests once for every backend; this backend decodes them through
its stepping engine, which hands each group of requests with the same settings to its search, fed by a scheduler
(mt/decoding/scheduler.py): offline it is given every request and stepped until idle, in `mt serve` requests join it as
they arrive (mt/serving/decode_thread.py). mt/decoding/ct2_backend.py is the
other backend (an exported CTranslate2 directory). A new backend is a class with `max_positions`, `search`,
`attention` and `engine`, and a loader that returns a `Translator`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from mt.decoding.attention_alignment import cross_attention
from mt.checkpoint import load_checkpoint, load_weights, translation_weights
from mt.config import config_from_dict
from mt.decoding.constraints import ConstrainedBeamSearch
from mt.decoding.protocol import DecodeHooks, Hypothesis, SentenceRequest, Translator, Work, grouped
from mt.model.ensemble import Ensemble
from mt.errors import MtError
from mt.model.transformer import Transformer, build_model
from mt.model.quantize import quantize_int8
from mt.runtime import pick_device
from mt.decoding.scheduler import Policy, Scheduler, Waiting
from mt.decoding.sampling import Sampler
from mt.decoding.search import BeamSearch, GreedySearch
from mt.data.tokenizer import Tokenizer

# In `mt serve`, a request of more than BULK_TOKENS source tokens (a document of more than about 60 sentences)
# decodes in a batch of its own, stepped while no shorter request decodes, and at least every BULK_EVERY steps of
# theirs. One-sentence requests while a 100-page document decoded in the same batch: about 1.8 s (p50), each step
# holding the document's hundreds of rows (docs/benchmarks.md).
BULK_TOKENS = 2048
BULK_EVERY = 16


@dataclass
class ModelBackend:
    """mt's Transformer: greedy search for one hypothesis of beam 1, sampling, beam search, or constrained beam
    search, each request by its own settings; requests with the same settings share batches (mt/decoding/scheduler.py).
    `use_cache=False` recomputes every prefix at every step (the reference the KV cache is tested against)."""

    model: Transformer | Ensemble
    use_cache: bool = True

    @property
    def max_positions(self) -> int:
        return self.model.cfg.max_positions

    def search(self, requests: list[SentenceRequest]) -> list[list[Hypothesis]]:
        """Add every request to an engine of its own, and step it until idle."""
        work, engine = Work(requests), self.engine()
        engine.add([work])
        while engine.stepping:
            engine.step()
        return work.hypotheses

    def engine(self, hooks: DecodeHooks | None = None, join_every: int | None = None) -> SteppingEngine:
        return SteppingEngine(self, hooks, join_every)

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


@dataclass
class _Group:
    """One group of search settings in a stepping engine: its scheduler, and who each row belongs to."""

    scheduler: Scheduler
    rows: int  # rows per request (a sampled request: one per sample)
    owners: dict[int, tuple[_Found, int, int]] = field(default_factory=dict)  # row id -> (found, request, row)


@dataclass(eq=False)
class _Found:
    """A work's hypotheses as its rows end."""

    work: Work
    rows: dict[tuple[int, int], list[Hypothesis]] = field(default_factory=dict)  # (request, row) -> hypotheses
    left: int = 0  # rows still decoding or waiting
    bulk: bool = False  # whether its requests decode in the bulk searches (BULK_TOKENS)

    def hypotheses(self, rows_per_request: list[int]) -> list[list[Hypothesis]]:
        return [[h for j in range(rows) for h in self.rows[k, j]] for k, rows in enumerate(rows_per_request)]


class SteppingEngine:
    """mt's model decoding sentences that arrive between steps: one scheduler per group of search settings
    (mt/decoding/scheduler.py), fed by `add`, advanced by `step`. It hides a request's rows (a sampled request has one per
    sample) and which search serves it: a work is delivered once all its rows have ended. Offline (`join_every`
    None) batches are static or refilled as `ModelBackend.new_search` decides; `mt serve` lets sentences join a
    running batch at most every `join_every` steps."""

    def __init__(self, backend: ModelBackend, hooks: DecodeHooks | None = None, join_every: int | None = None):
        self.backend, self.hooks, self.join_every = backend, hooks or DecodeHooks(), join_every
        self.groups: dict[tuple, _Group] = {}  # (bulk, the requests' group) -> its search
        self.found: dict[Work, _Found] = {}
        self.ids = itertools.count()
        self.steps = 0  # steps of short requests' batches since a bulk batch last stepped

    @property
    def stepping(self) -> bool:
        return not all(group.scheduler.idle for group in self.groups.values())

    @property
    def idle(self) -> bool:
        return not self.stepping

    def share(self, waiting: list[int]) -> int:
        return len(waiting)  # every waiting work: its scheduler decides when its sentences join

    def add(self, works: list[Work]) -> None:
        """Each work's requests wait to join their group's search, a group's in one submission."""
        for work in works:
            bulk = self.join_every is not None and sum(len(r.source) + 1 for r in work.requests) > BULK_TOKENS
            found = self.found[work] = _Found(work, bulk=bulk)
            for index in grouped(work.requests):
                self._submit(found, [(k, work.requests[k]) for k in index])
            if not work.requests:
                del self.found[work]
                work.deliver([])

    def _submit(self, found: _Found, requests: list[tuple[int, SentenceRequest]]) -> None:
        group = self._group(requests[0][1], found.bulk)
        search, items = group.scheduler.search, []
        search.reserve([request for _, request in requests])
        for k, request in requests:
            for j in range(group.rows):
                row_id = next(self.ids)
                group.owners[row_id] = (found, k, j)
                items.append(Waiting(row_id, search.item(request, j), len(request.source) + 1))
        found.left += len(items)
        group.scheduler.submit(items)

    def _group(self, request: SentenceRequest, bulk: bool) -> _Group:
        key = (bulk, request.group)
        if key not in self.groups:
            search, policy, rows = self.backend.new_search(request, join_running=self.join_every is not None)
            if self.join_every is not None:
                policy = replace(policy, join_every=self.join_every)
            self.groups[key] = _Group(Scheduler(search, policy), rows)
        return self.groups[key]

    def cancel(self, work: Work) -> None:
        found = self.found.get(work)
        for group in self.groups.values():
            ids = {row_id for row_id, (owner, _, _) in group.owners.items() if owner is found}
            for row_id in group.scheduler.cancel(ids):
                del group.owners[row_id]
                found.left -= 1
        if found is not None and found.left == 0:
            del self.found[work]

    def step(self) -> None:
        """One step of every group's search that has rows or sentences waiting (a bulk one's only while no other
        is busy, or after BULK_EVERY steps of theirs); the works whose every row has ended get their
        hypotheses."""
        busy = [(bulk, group) for (bulk, _), group in self.groups.items() if not group.scheduler.idle]
        short = any(not bulk for bulk, _ in busy)
        self.steps = self.steps + 1 if short else 0
        bulk_turn = not short or self.steps % BULK_EVERY == 0
        for group in [group for bulk, group in busy if bulk_turn or not bulk]:
            ended = group.scheduler.step()
            self.hooks.step(group.scheduler.search.rows + len(ended))
            for row_id, hyps in ended:
                found, k, j = group.owners.pop(row_id)
                found.rows[k, j] = hyps
                found.left -= 1
                if found.left == 0:  # delivered, then forgotten: a fault on the way leaves it `held`, to fail
                    rows = [self.groups[found.bulk, r.group].rows for r in found.work.requests]
                    if len(found.rows) == sum(rows):  # none dropped by `cancel`
                        found.work.deliver(found.hypotheses(rows))
                    del self.found[found.work]

    def held(self) -> list[Work]:
        works = [found.work for found in self.found.values()]
        self.groups.clear()
        self.found.clear()
        return works

    def close(self) -> None:
        pass


def load_model_translator(path: str | Path, device: str = "auto", quantize: str | None = None,
                          raw_weights: bool = False) -> Translator:
    """A checkpoint's model in eval mode on `device`, with its tokenizers and config, from the file alone.
    `quantize="int8"` decodes with int8 weights (mt.model.quantize; CPU only). The weights are the checkpoint's
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
    """Checkpoints with the same vocabularies decoding as one model (mt/model/ensemble.py); the first one's config
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
