"""Token batching (mt/data/batching.py): the plan covers every pair within the budget, collate builds the paper's
teacher-forcing tensors, the schedule resumes and shards exactly, the prefetcher changes nothing but timing."""

import random

import pytest
import torch

from mt.data.batching import (
    BatchPrefetcher,
    BatchSchedule,
    collate,
    pad_sequences,
    padding_fraction,
    token_batches,
    training_batches,
)
from mt.config import load_config
from mt.data.corpus import encode_corpus
from mt.masks import target_mask
from mt.data.prepare import prepare_data
from mt.symbols import BOS, EOS, PAD
from tests.conftest import TINY, tiny_overrides


class _Identity:
    def encode(self, lines):
        return [list(line) for line in lines]


def _corpus(n=40, seed=0, dtype=None):
    g = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, 60, (int(torch.randint(1, 20, (1,), generator=g)),), generator=g).tolist()
           for _ in range(n)]
    tgt = [torch.randint(4, 60, (int(torch.randint(1, 20, (1,), generator=g)),), generator=g).tolist()
           for _ in range(n)]
    corpus, _ = encode_corpus(src, tgt, _Identity(), _Identity(), None)
    if dtype is not None:
        corpus.src, corpus.tgt = corpus.src.to(dtype), corpus.tgt.to(dtype)
    return corpus


def _tiny_data(tmp_path):
    cfg = load_config(TINY, [s for s in tiny_overrides(tmp_path) if s != "--set"])
    return prepare_data(cfg, log=lambda m: None)


# ---------------------------------------------------------------- the plan: which pairs form each batch


def test_token_batches_respect_the_budget_and_cover_everything():
    lengths = [((i * 7919) % 61) + 1 for i in range(500)]
    plan = token_batches(lengths, 256)
    assert sorted(i for b in plan for i in b) == list(range(500))
    for b in plan:
        assert max(lengths[i] for i in b) * len(b) <= 256


def _one_pair_at_a_time(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """The greedy bucketing written the obvious way: the reference the array version must match."""
    batches, current, longest = [], [], 0
    for i in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        if current and max(longest, lengths[i]) * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, lengths[i])
    return batches + [current] if current else batches


def test_token_batches_equal_the_one_pair_at_a_time_bucketing():
    rng = random.Random(5)
    for budget in (1, 7, 64, 300, 4096):
        lengths = [rng.choice([1, 2, 3, 5, 8, 40, 130, 700]) + rng.randrange(3) for _ in range(2000)]
        assert list(token_batches(lengths, budget)) == _one_pair_at_a_time(lengths, budget)
    assert list(token_batches([], 64)) == []


def test_padding_fraction_counts_the_padded_cells(tmp_path):
    corpus = _tiny_data(tmp_path).train
    plan = training_batches(corpus, 300)
    for multiple in (1, 8):
        padded = real = 0
        for b in plan:
            for side in (0, 1):
                lengths = [len(corpus.pair(i)[side]) + 1 for i in b]
                padded += -(-max(lengths) // multiple) * multiple * len(b)
                real += sum(lengths)
        assert padding_fraction(corpus, plan, multiple) == pytest.approx(1 - real / padded)


# ---------------------------------------------------------------- a Batch: collate


def test_collate_builds_teacher_forcing_pairs_and_matching_masks(tmp_path):
    data = _tiny_data(tmp_path)
    plan = training_batches(data.train, 512)
    batch = collate(data.train, plan[len(plan) // 2])
    src_ids, tgt_ids = data.train.pair(plan[len(plan) // 2][0])
    assert batch.tgt_in[0, 0] == BOS and batch.tgt_in[0, 1:len(tgt_ids) + 1].tolist() == tgt_ids.tolist()
    assert batch.tgt_out[0, :len(tgt_ids)].tolist() == tgt_ids.tolist() and batch.tgt_out[0, len(tgt_ids)] == EOS
    assert batch.src[0, len(src_ids)] == EOS
    B, S = batch.src.shape
    T = batch.tgt_in.size(1)
    tgt_mask = target_mask(batch.tgt_in)
    assert batch.src_mask.shape == (B, 1, 1, S) and tgt_mask.shape == (B, 1, T, T)
    assert torch.equal(batch.src_mask[:, 0, 0], batch.src != PAD)
    for t in range(T):  # row t may see real keys at positions <= t, nothing else
        allowed = (batch.tgt_in != PAD) & (torch.arange(T) <= t)
        assert torch.equal(tgt_mask[:, 0, t], allowed)
    assert batch.n_tokens == int((batch.tgt_out != PAD).sum())
    assert torch.equal(batch.real_targets, (batch.tgt_out != PAD).view(-1).nonzero().squeeze(1))
    real = max(batch.src.size(1), batch.tgt_in.size(1)) * B
    assert real <= 512


def _collate_one_by_one(corpus, indices):
    """What collate did before it was vectorised: one torch.cat per sentence, then pad_sequence."""
    bos, eos = torch.tensor([BOS]), torch.tensor([EOS])
    pairs = [corpus.pair(i) for i in indices]
    return (pad_sequences([torch.cat([s.long(), eos]) for s, _ in pairs]),
            pad_sequences([torch.cat([bos, t.long()]) for _, t in pairs]),
            pad_sequences([torch.cat([t.long(), eos]) for _, t in pairs]))


@pytest.mark.parametrize("dtype", [None, torch.uint16])
def test_vectorised_collate_equals_the_sentence_loop_and_pads_to_a_multiple(dtype):
    corpus = _corpus(dtype=dtype)
    indices = [3, 17, 0, 25, 9]
    expected = _collate_one_by_one(corpus, indices)
    exact = collate(corpus, indices)
    for ours, theirs in zip((exact.src, exact.tgt_in, exact.tgt_out), expected):
        assert torch.equal(ours, theirs)
    padded = collate(corpus, indices, pad_to_multiple=8)
    for ours, theirs in zip((padded.src, padded.tgt_in, padded.tgt_out), expected):
        assert ours.size(1) % 8 == 0 and ours.size(1) - theirs.size(1) < 8
        assert torch.equal(ours[:, :theirs.size(1)], theirs) and (ours[:, theirs.size(1):] == 0).all()
    assert exact.n_tokens == int((exact.tgt_out != 0).sum())


# ---------------------------------------------------------------- the schedule and the prefetcher


def test_batch_schedule_resumes_at_the_same_batch_and_shards_disjointly(tmp_path):
    data = _tiny_data(tmp_path)
    plan = training_batches(data.train, 512)
    schedule = BatchSchedule(data.train, plan, seed=3)
    for _ in range(len(plan) + 5):  # into the second epoch
        schedule.next_batch()
    state = schedule.state()
    expected = [schedule.next_batch().src for _ in range(3)]
    resumed = BatchSchedule(data.train, plan, seed=3)
    resumed.load_state(state)
    assert all(torch.equal(a, resumed.next_batch().src) for a in expected)
    ranks = [BatchSchedule(data.train, plan, seed=3, rank=r, world=2) for r in range(2)]
    assert not set(ranks[0]._order) & set(ranks[1]._order)
    assert len(ranks[0]._order) == len(ranks[1]._order) == len(plan) // 2


def test_prefetcher_hands_out_the_schedule_in_order_with_exact_positions():
    corpus = _corpus(n=60)
    plan = training_batches(corpus, 64)
    plain = BatchSchedule(corpus, plan, seed=2)
    prefetcher = BatchPrefetcher(BatchSchedule(corpus, plan, seed=2), torch.device("cpu"), depth=3)
    try:
        for _ in range(len(plan) + 4):  # into the second epoch
            batch = prefetcher.next_batch()
            assert torch.equal(batch.src, plain.next_batch().src)
            assert prefetcher.state() == plain.state()
    finally:
        prefetcher.close()


def test_a_prefetcher_moved_to_a_saved_position_continues_from_there():
    corpus = _corpus(n=60)
    plan = training_batches(corpus, 64)
    plain = BatchSchedule(corpus, plan, seed=2)
    for _ in range(len(plan) + 2):
        plain.next_batch()
    resumed = BatchPrefetcher(BatchSchedule(corpus, plan, seed=2), torch.device("cpu"), depth=3)
    try:
        resumed.load_state(plain.state())
        assert resumed.state() == plain.state()
        for _ in range(3):
            assert torch.equal(resumed.next_batch().src, plain.next_batch().src)
        with pytest.raises(RuntimeError, match="after the first batch"):
            resumed.load_state(plain.state())
    finally:
        resumed.close()
    BatchPrefetcher(BatchSchedule(corpus, plan, seed=2), torch.device("cpu")).close()  # never started: no hang


def test_pairs_longer_than_the_models_positions_are_left_out_of_training():
    corpus = _corpus(n=60)
    costs = corpus.costs().tolist()
    plan = training_batches(corpus, 64, max_positions=12)
    kept = sorted(i for batch in plan for i in batch)
    assert kept == [i for i, cost in enumerate(costs) if cost <= 12] and len(kept) < len(costs)
    assert all(collate(corpus, batch).src.size(1) <= 12 and collate(corpus, batch).tgt_in.size(1) <= 12
               for batch in plan)
    with pytest.raises(Exception, match=r"every training pair is longer than model.max_positions \(1\)"):
        training_batches(corpus, 64, max_positions=1)
