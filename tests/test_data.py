import random

import pytest
import torch

from mt.config import TokenizerConfig, load_config
from mt.batching import BatchSchedule, collate, padding_fraction, token_batches, training_batches
from mt.corpus import encode_corpus
from mt.data import read_parallel
from mt.masks import target_mask
from mt.prepare import load_prepared, prepare_data
from mt.symbols import BOS, EOS, PAD, UNK
from mt.tokenizer import train_tokenizer
from tests.conftest import DATA, TINY, tiny_overrides

SENTENCES = [f"the {w} number {i} is here" for i, w in enumerate(["cat", "dog", "bird", "fish"] * 30)]


def test_sentencepiece_has_fixed_special_ids_and_round_trips():
    tok = train_tokenizer(SENTENCES, TokenizerConfig(vocab_size=60))
    assert [tok.sp.id_to_piece(i) for i in (PAD, UNK, BOS, EOS)] == ["<pad>", "<unk>", "<s>", "</s>"]
    ids = tok.encode(["the dog number 7 is here"])[0]
    assert all(i > EOS for i in ids)
    assert tok.decode(ids) == "the dog number 7 is here"


def test_prepare_writes_a_cache_that_loads_back_identically(tmp_path):
    cfg = load_config(TINY, [s for s in tiny_overrides(tmp_path) if s != "--set"])
    first = prepare_data(cfg, log=lambda m: None)
    again = prepare_data(cfg, log=lambda m: None)  # second call reads the cache
    assert (tmp_path / "data" / "train.src.bin").exists() and first.train.src.dtype == torch.uint16
    for name in ("src", "src_offsets", "tgt", "tgt_offsets"):
        assert torch.equal(getattr(first.train, name), getattr(again.train, name))
    assert first.src_tokenizer.model_proto == again.src_tokenizer.model_proto
    # the cache holds what encoding the raw text gives, minus the pairs over max_len
    src, tgt = read_parallel(DATA / "sample-2k.de", DATA / "sample-2k.en")
    corpus, counts = encode_corpus(src, tgt, first.src_tokenizer, first.tgt_tokenizer, cfg.data.max_len)
    assert torch.equal(corpus.src.long(), again.train.src.long()) and len(corpus) + counts["too_long"] == len(src)
    assert first.stats["skipped_too_long"] == counts["too_long"] > 0
    assert len(load_prepared(cfg).dev_ref) == len(first.dev_ref) == 883


def test_token_batches_respect_the_budget_and_cover_everything():
    lengths = [((i * 7919) % 61) + 1 for i in range(500)]
    batches = token_batches(lengths, 256)
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
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
    cfg = load_config(TINY, [s for s in tiny_overrides(tmp_path) if s != "--set"])
    corpus = prepare_data(cfg, log=lambda m: None).train
    batches = training_batches(corpus, 300)
    for multiple in (1, 8):
        padded = real = 0
        for b in batches:
            for side in (0, 1):
                lengths = [len(corpus.pair(i)[side]) + 1 for i in b]
                padded += -(-max(lengths) // multiple) * multiple * len(b)
                real += sum(lengths)
        assert padding_fraction(corpus, batches, multiple) == pytest.approx(1 - real / padded)


def test_collate_builds_teacher_forcing_pairs_and_matching_masks(tmp_path):
    cfg = load_config(TINY, [s for s in tiny_overrides(tmp_path) if s != "--set"])
    data = prepare_data(cfg, log=lambda m: None)
    batches = training_batches(data.train, 512)
    batch = collate(data.train, batches[len(batches) // 2])
    src_ids, tgt_ids = data.train.pair(batches[len(batches) // 2][0])
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
    real = max(batch.src.size(1), batch.tgt_in.size(1)) * B
    assert real <= 512


def test_batch_stream_resumes_at_the_same_batch_and_shards_disjointly(tmp_path):
    cfg = load_config(TINY, [s for s in tiny_overrides(tmp_path) if s != "--set"])
    data = prepare_data(cfg, log=lambda m: None)
    batches = training_batches(data.train, 512)
    stream = BatchSchedule(data.train, batches, seed=3)
    for _ in range(len(batches) + 5):  # into the second epoch
        stream.next_batch()
    state = stream.state()
    expected = [stream.next_batch().src for _ in range(3)]
    resumed = BatchSchedule(data.train, batches, seed=3)
    resumed.load_state(state)
    assert all(torch.equal(a, resumed.next_batch().src) for a in expected)
    ranks = [BatchSchedule(data.train, batches, seed=3, rank=r, world=2) for r in range(2)]
    assert not set(ranks[0]._order) & set(ranks[1]._order)
    assert len(ranks[0]._order) == len(ranks[1]._order) == len(batches) // 2
