"""The scheduler feeds a running search: a sentence submitted mid-batch joins it at a step boundary and gets the
output it gets alone; offline, batches are the length-sorted parts of the budget."""

from dataclasses import replace

import pytest
import torch

from mt.decoding.model_backend import ModelBackend
from mt.config import DecodeConfig
from mt.decoding.lines import LineIds, sentence_requests
from mt.decoding.scheduler import Policy, Scheduler, Waiting, static_batches
from mt.decoding.search import Row
from tests.conftest import random_model, random_sources

VOCAB = 40


def _requests(sources, opts, nbest=1):
    return sentence_requests([LineIds(s, i) for i, s in enumerate(sources)], opts, nbest, max_positions=64)


def _alone(backend, request):
    return backend.search([request])[0]


def _item(request, i, greedy: bool) -> Waiting:
    return Waiting(i, Row(request) if greedy else request, len(request.source) + 1)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_a_sentence_submitted_mid_batch_joins_the_running_batch_and_gets_its_output_alone(beam_size):
    model = random_model(VOCAB, seed=3)
    backend = ModelBackend(model)
    opts = DecodeConfig(beam_size=beam_size, alpha=0.6, max_len_a=1.0, max_len_b=10, batch_tokens=4096)
    first, late = _requests(random_sources(6, VOCAB, seed=5), opts), _requests(random_sources(3, VOCAB, seed=9), opts)
    greedy = beam_size == 1
    search, _, _ = backend.new_search(first[0], join_running=True)
    scheduler = Scheduler(search, Policy.refilling(opts.batch_tokens))
    scheduler.submit([_item(r, i, greedy) for i, r in enumerate(first)])
    found = dict(scheduler.step())
    found.update(scheduler.step())
    running = search.rows
    assert running > 0  # the first sentences are still decoding
    scheduler.submit([_item(r, 100 + i, greedy) for i, r in enumerate(late)])
    found.update(scheduler.step())
    assert not scheduler.waiting  # the late ones joined at this step, beside the rows still decoding
    assert search.rows + len([i for i in found if i >= 100]) >= len(late)
    found.update(scheduler.run())
    for i, request in [*enumerate(first), *((100 + i, r) for i, r in enumerate(late))]:
        alone = _alone(backend, request)
        assert [h.tokens for h in found[i]] == [h.tokens for h in alone]
        assert [h.score for h in found[i]] == pytest.approx([h.score for h in alone], abs=1e-5)


def test_late_beam_sentences_see_only_their_own_positions():
    """A late sentence's beams start at a later cache position: the same output however late it comes."""
    model = random_model(VOCAB, seed=4)
    backend = ModelBackend(model)
    opts = DecodeConfig(beam_size=3, alpha=0.6, max_len_a=1.0, max_len_b=12, batch_tokens=4096)
    (late,) = _requests(random_sources(1, VOCAB, seed=21, shortest=6), opts, nbest=2)
    alone = _alone(backend, late)
    for steps_before in (1, 3, 6):
        search, _, _ = backend.new_search(late, join_running=True)
        scheduler = Scheduler(search, Policy.refilling(opts.batch_tokens))
        scheduler.submit([_item(r, i, False) for i, r in enumerate(_requests(random_sources(4, VOCAB, seed=2,
                                                                                          shortest=10), opts, 2))])
        found = {}
        for _ in range(steps_before):
            found.update(scheduler.step())
        scheduler.submit([_item(late, 99, False)])
        found.update(scheduler.run())
        assert [h.tokens for h in found[99]] == [h.tokens for h in alone]
        assert [h.score for h in found[99]] == pytest.approx([h.score for h in alone], abs=1e-5)


@pytest.mark.parametrize("join_every", [1, 3])
def test_waves_of_late_sentences_join_mostly_in_place_and_each_gets_its_output_alone(join_every):
    """A server's traffic: a wave of sentences every two steps. The cache takes most waves into the room that
    ended sentences left (the same memory), and every sentence gets the output it gets alone."""
    model = random_model(VOCAB, seed=6)
    backend = ModelBackend(model)
    opts = DecodeConfig(beam_size=3, alpha=0.6, max_len_a=1.0, max_len_b=12, batch_tokens=4096)
    waves = [_requests(random_sources(4, VOCAB, seed=30 + w), opts) for w in range(6)]
    search, policy, _ = backend.new_search(waves[0][0], join_running=True)
    scheduler = Scheduler(search, replace(policy, join_every=join_every))
    found, buffers = {}, set()
    for w, wave in enumerate(waves):
        scheduler.submit([_item(r, 100 * w + i, False) for i, r in enumerate(wave)])
        for _ in range(2):
            found.update(scheduler.step())
            if search.rows:
                buffers.add(search.cache.layers[0].k.untyped_storage().data_ptr())
    found.update(scheduler.run())
    assert len(buffers) < len(waves)  # some waves joined without new buffers
    for w, wave in enumerate(waves):
        for i, request in enumerate(wave):
            alone = _alone(backend, request)
            assert [h.tokens for h in found[100 * w + i]] == [h.tokens for h in alone]
            assert [h.score for h in found[100 * w + i]] == pytest.approx([h.score for h in alone], abs=1e-5)


def test_sentences_submitted_one_by_one_join_as_one_encoded_part_when_they_fit(monkeypatch):
    """A server submits each request on its own: those that join at one step are merged into parts of at most
    `part_tokens` (rows x widest), each encoded as one batch, and each still gets its output alone."""
    model = random_model(VOCAB, seed=8)
    backend = ModelBackend(model)
    opts = DecodeConfig(beam_size=2, alpha=0.6, max_len_a=1.0, max_len_b=8, batch_tokens=4096)
    first = _requests(random_sources(3, VOCAB, seed=11, shortest=12, longest=12), opts)
    late = _requests(random_sources(6, VOCAB, seed=12, shortest=3, longest=9), opts)
    encoded = []
    monkeypatch.setattr(model, "encode", lambda src, mask, encode=model.encode: encoded.append(src.shape)
                        or encode(src, mask))
    for part_tokens in (4096, 25):  # widths 4-10: all in one part, or a few in each
        search, policy, _ = backend.new_search(first[0], join_running=True)
        scheduler = Scheduler(search, replace(policy, part_tokens=part_tokens))
        scheduler.submit([_item(r, i, False) for i, r in enumerate(first)])
        found = dict(scheduler.step())
        for i, request in enumerate(late):
            scheduler.submit([_item(request, 100 + i, False)])
        assert len(scheduler.waiting) == len(late)
        encoded.clear()
        found.update(scheduler.step())
        assert not scheduler.waiting and sum(rows for rows, _ in encoded) == len(late)
        assert len(encoded) == 1 if part_tokens == 4096 else 1 < len(encoded) < len(late)
        assert all(rows * width <= part_tokens for rows, width in encoded)
        found.update(scheduler.run())
        for i, request in enumerate(late):
            alone = _alone(backend, request)
            assert [h.tokens for h in found[100 + i]] == [h.tokens for h in alone]
            assert [h.score for h in found[100 + i]] == pytest.approx([h.score for h in alone], abs=1e-5)


def test_an_idle_search_takes_one_part_and_a_static_policy_waits_for_the_batch_to_end():
    model = random_model(VOCAB)
    backend = ModelBackend(model)
    opts = DecodeConfig(beam_size=2, alpha=0.6, max_len_a=1.0, max_len_b=5, batch_tokens=30)
    requests = _requests(random_sources(8, VOCAB, seed=7, shortest=4, longest=4), opts)  # 5 tokens with EOS
    search, policy, _ = backend.new_search(requests[0])
    assert policy == Policy.static(30)
    scheduler = Scheduler(search, policy)
    scheduler.submit([_item(r, i, False) for i, r in enumerate(requests)])
    assert [[len(part) for part in parts] for parts in scheduler.waiting] == [[6, 2]]  # 6 x 5 = 30 source tokens
    scheduler.step()
    assert search.rows <= 6 and [len(parts) for parts in scheduler.waiting] == [1]
    while search.rows:
        scheduler.step()
        assert len(scheduler.waiting) == 1 or search.rows == 0
    assert sorted(i for i, _ in scheduler.run()) == [6, 7]


def test_static_batches_are_length_sorted_within_the_budget():
    widths = [5, 2, 9, 2, 5, 30]
    batches = static_batches(widths, 10)
    assert sorted(i for b in batches for i in b) == list(range(6))
    assert all(len(b) * max(widths[i] for i in b) <= 10 or len(b) == 1 for b in batches)
    assert [widths[b[0]] for b in batches] == sorted(widths[b[0]] for b in batches)
    assert torch.tensor(batches[-1]).tolist() == [5]  # too wide alone: a batch of its own


def test_submissions_take_turns_so_a_short_request_does_not_wait_for_a_long_document():
    class Idle:
        rows, width = 0, 0

    scheduler = Scheduler(Idle(), Policy(budget=10_000, part_tokens=10, join_running=True))
    scheduler.submit([Waiting(i, None, 5) for i in range(8)])  # a document: 4 parts of 2 sentences
    scheduler.submit([Waiting(100, None, 5)])  # a one-sentence request that came after it
    order = [[w.id for w in part] for part in scheduler._admitted()]
    assert order[:2] == [[0, 1], [100]] and sorted(i for part in order for i in part) == [*range(8), 100]


def test_a_short_request_steps_ahead_of_a_bulk_one_which_still_steps_every_bulk_every(monkeypatch):
    """In `mt serve`, a document's sentences (more than BULK_TOKENS) decode in a search of their own, stepped
    only every BULK_EVERY steps while a short request decodes; each gets the output it gets alone."""
    from mt.decoding import model_backend
    from mt.decoding.protocol import Work

    monkeypatch.setattr(model_backend, "BULK_TOKENS", 40)
    monkeypatch.setattr(model_backend, "BULK_EVERY", 3)
    backend = ModelBackend(random_model(VOCAB, seed=3))
    opts = DecodeConfig(beam_size=4, alpha=0.6, max_len_a=1.0, max_len_b=20, batch_tokens=4096)
    document = Work(_requests(random_sources(12, VOCAB, seed=5), opts))
    short = Work(_requests(random_sources(1, VOCAB, seed=9), opts))
    assert sum(len(r.source) + 1 for r in document.requests) > 40 >= len(short.requests[0].source) + 1
    stepped = []
    real_step = Scheduler.step
    monkeypatch.setattr(Scheduler, "step", lambda self: stepped.append(self) or real_step(self))
    engine = backend.engine(join_every=1)
    engine.add([document])
    engine.step()
    engine.add([short])
    turns = []  # the searches each step of the engine stepped
    while short.hypotheses is None:
        before = len(stepped)
        engine.step()
        turns.append(stepped[before:])
    bulk = next(group.scheduler for (is_bulk, _), group in engine.groups.items() if is_bulk)
    assert document.hypotheses is None and len(turns) >= 3
    assert [len(turn) for turn in turns] == [2 if i % 3 == 2 else 1 for i in range(len(turns))]
    assert [bulk in turn for turn in turns] == [i % 3 == 2 for i in range(len(turns))]  # every third step
    while engine.stepping:
        engine.step()
    for work in (document, short):
        assert [[h.tokens for h in hyps] for hyps in work.hypotheses] == [
            [h.tokens for h in _alone(backend, r)] for r in work.requests]


def test_a_fault_while_delivering_leaves_the_work_held_so_that_it_fails(monkeypatch):
    """A work whose hypotheses cannot be handed over stays among the engine's `held` works (mt serve fails
    those), instead of being forgotten with its request waiting for ever."""
    from mt.decoding import model_backend
    from mt.decoding.protocol import Work

    backend = ModelBackend(random_model(VOCAB, seed=3))
    opts = DecodeConfig(beam_size=2, alpha=0.6, max_len_a=1.0, max_len_b=6, batch_tokens=4096)
    work = Work(_requests(random_sources(2, VOCAB, seed=5), opts))
    monkeypatch.setattr(model_backend._Found, "hypotheses", lambda self, rows: (_ for _ in ()).throw(
        RuntimeError("a fault")))
    engine = backend.engine(join_every=1)
    engine.add([work])
    with pytest.raises(RuntimeError, match="a fault"):
        while engine.stepping:
            engine.step()
    assert engine.held() == [work] and work.hypotheses is None
