"""The key/value cache of incremental decoding (mt/model/kv_cache.py): every cached step equals the full pass."""

import pytest
import torch

from mt.model.kv_cache import DecoderCache, KeptRows, kept, kept_rows
from mt.config import ModelConfig
from mt.masks import padding_mask, target_mask
from mt.model.transformer import build_model
from mt.decoding.search import compacted
from mt.symbols import BOS, PAD

VOCAB = 50


def _model():
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=3, dropout=0.0, max_positions=64)
    return build_model(cfg, VOCAB, VOCAB, joint_vocab=True).eval()


def _sources(batch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (batch, 9), generator=g)
    src[1:, 6:] = PAD
    return src


def _step(model, memory, src_mask, tokens, cache, parents=None) -> torch.Tensor:
    """One step of a search: begin, decode the new positions, advance."""
    cache.begin_step(tokens.size(1), memory.size(0), tokens.device)
    logits = model.decode_step(memory, src_mask, tokens, cache)
    cache.advance(parents)
    return logits


def _full(model, memory, src_mask, tgt):
    """The uncached pass: every row's whole prefix, the memory repeated for each of a sentence's rows."""
    group = tgt.size(0) // memory.size(0)
    memory, src_mask = memory.repeat_interleave(group, 0), src_mask.repeat_interleave(group, 0)
    return model.decode(memory, src_mask, tgt, target_mask(tgt))


def test_incremental_decoding_matches_the_full_pass():
    model = _model()
    src = _sources(2)
    tgt = torch.randint(4, VOCAB, (2, 5), generator=torch.Generator().manual_seed(3))
    tgt[:, 0] = BOS
    with torch.no_grad():
        memory = model.encode(src, padding_mask(src))
        full = model.decode(memory, padding_mask(src), tgt, target_mask(tgt))
        cache = DecoderCache(model.cfg.n_layers)
        steps = [_step(model, memory, padding_mask(src), tgt[:, t:t + 1], cache) for t in range(5)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    assert cache.length == 5


def test_several_positions_in_one_step_see_the_earlier_ones_causally():
    """A row may feed several positions at once (e.g. a forced prefix): each sees those before it only."""
    model = _model()
    src = _sources(2)
    tgt = torch.randint(4, VOCAB, (2, 6), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        memory = model.encode(src, padding_mask(src))
        full = model.decode(memory, padding_mask(src), tgt, target_mask(tgt))
        cache = DecoderCache(model.cfg.n_layers)
        steps = [_step(model, memory, padding_mask(src), tgt[:, :2], cache),
                 _step(model, memory, padding_mask(src), tgt[:, 2:5], cache),
                 _step(model, memory, padding_mask(src), tgt[:, 5:], cache)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_target_rows_sharing_one_memory_row_decode_as_with_the_memory_repeated():
    """Beam search passes each sentence's memory once for its K beams; the decoder must read it as if repeated."""
    model, group = _model(), 3
    src = _sources(2)
    g = torch.Generator().manual_seed(5)
    tgt = torch.randint(4, VOCAB, (2 * group, 5), generator=g)  # rows 0-2 belong to sentence 0, rows 3-5 to 1
    with torch.no_grad():
        memory, src_mask = model.encode(src, padding_mask(src)), padding_mask(src)
        repeated = model.decode(memory.repeat_interleave(group, 0), src_mask.repeat_interleave(group, 0), tgt,
                                target_mask(tgt))
        cache = DecoderCache(model.cfg.n_layers, group=group)
        steps = [_step(model, memory, src_mask, tgt[:, t:t + 1], cache) for t in range(5)]
    assert torch.allclose(torch.cat(steps, dim=1), repeated, atol=1e-5)
    assert cache.layers[0].cross_kv[0].size(0) == 2  # the source's keys are kept once per sentence, not per beam


def test_beams_that_switch_parents_read_their_ancestors_keys_from_the_shared_cache():
    """Beam search reorders a grouped cache by ancestry (no key moves); each step must still equal the full pass
    over the token history each row has after the reorders, for a source shared by the sentence's beams."""
    model, group, steps = _model(), 3, 6
    src = _sources(2)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        memory, src_mask = model.encode(src, padding_mask(src)), padding_mask(src)
        cache = DecoderCache(model.cfg.n_layers, steps, group=group)
        history = torch.full((2 * group, 1), BOS)
        for t in range(steps):
            parent = torch.randint(0, group, (2, group), generator=g)  # each new beam continues some old one
            step = _step(model, memory, src_mask, history[:, -1:], cache, parent)[:, -1]
            full = _full(model, memory, src_mask, history)[:, -1]  # no cache: recomputes each row's prefix
            assert torch.allclose(step, full, atol=1e-5), f"step {t}"
            rows = (torch.arange(2)[:, None] * group + parent).view(-1)
            history = torch.cat([history[rows], torch.randint(4, VOCAB, (2 * group, 1), generator=g)], dim=1)
        assert cache.layers[0].k.shape[0] == 2  # keys are held per sentence, one slot per beam
        cache.keep(torch.tensor([1]))  # the first sentence ends: the second decodes on alone
        alone = _step(model, memory[1:], src_mask[1:], history[group:, -1:], cache)[:, -1]
        assert torch.allclose(alone, _full(model, memory[1:], src_mask[1:], history[group:])[:, -1], atol=1e-5)


def test_a_grouped_cache_takes_one_position_per_step():
    cache = DecoderCache(2, group=2)
    with pytest.raises(ValueError, match="one position per step"):
        cache.begin_step(3, 1, "cpu")


def test_the_beam_mask_shows_each_row_its_ancestors_slots():
    """After row 0 continues row 1 and row 1 continues row 0, row 0 sees slot 1 at position 0 and its own slot
    at the new position: the (B, 1, G, (length+1)*G) mask, keys position-major."""
    cache = DecoderCache(1, capacity=4, group=2)
    cache.begin_step(1, 1, "cpu")
    cache.advance(torch.tensor([[1, 0]]))
    cache.begin_step(1, 1, "cpu")
    expected = torch.tensor([[False, True, True, False],   # row 0: position 0 from slot 1, then its own slot 0
                             [True, False, False, True]])  # row 1: position 0 from slot 0, then its own slot 1
    assert cache.step_mask.shape == (1, 1, 2, 4)
    assert torch.equal(cache.step_mask[0, 0], expected)


def test_kept_rows_in_place_equal_a_gather_for_any_order():
    """Keeping rows copies only those that change place on a CPU; the result is the gather all the same, whether
    the moves are found for one buffer or found once (`kept`) and used for several, as the search does; the path
    for other devices (no moves found: a new tensor) gives the same rows."""
    g = torch.Generator().manual_seed(2)
    for rows in ([0, 5, 2, 3, 7], [3, 1], [4, 3, 2, 1, 0], [0, 1, 2], []):
        index = torch.tensor(rows, dtype=torch.long)
        plan = kept(index)
        assert plan.moved.tolist() == [i for i, r in enumerate(rows) if r != i]
        for how in (index, plan, plan, KeptRows(index, None, None)):
            buffer = torch.randn(8, 2, 6, 1, 3, generator=g)
            expected = buffer[rows, :, :4].clone()
            whole = torch.randn(8, 2, 5, 3, generator=g)
            expected_whole = whole[rows].clone()
            kept_buffer, kept_whole = kept_rows(buffer, how, length=4), kept_rows(whole, how)
            assert kept_buffer.shape[0] == len(rows) and torch.equal(kept_buffer[:, :, :4], expected)
            assert torch.equal(kept_whole, expected_whole)


def test_compaction_keeps_the_rows_that_go_on_in_place_and_moves_the_last_ones_into_the_gaps():
    going = torch.tensor([1, 0, 1, 1, 0, 1, 0, 1], dtype=torch.bool)
    order = compacted(going, 5)
    assert order.tolist() == [0, 5, 2, 3, 7]
    assert sorted(order.tolist()) == going.nonzero().squeeze(1).tolist()
    assert compacted(torch.tensor([0, 0, 1], dtype=torch.bool), 1).tolist() == [2]
