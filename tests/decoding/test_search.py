import pytest
import torch

from mt.decoding.model_backend import ModelBackend
from mt.data.batching import token_batches
from mt.model.kv_cache import DecoderCache
from mt.config import DecodeConfig
from mt.decoding.lines import translate_ids
from mt.model.ensemble import Ensemble
from mt.masks import CAUSAL, padding_mask, target_mask
from mt.model.quantize import quantize_int8
from mt.decoding.protocol import length_penalty, max_output_lengths
from mt.decoding.scheduler import REFILL_PARTS, Policy, Scheduler, Waiting
from mt.decoding.search import BeamSearch, top_k
from mt.symbols import BOS, EOS
from tests.conftest import lines_of, random_model, requests_of

SOURCES = dict(n=24)  # the `sources` fixture (tests/conftest.py)
VOCAB = 20


def _translate(model, sources, nbest=1, use_cache=True, **options):
    """Through the decoding front end, with mt's model as the backend."""
    opts = DecodeConfig(**{**dict(beam_size=4, alpha=0.6, max_len_a=1.0, max_len_b=10, batch_tokens=4096), **options})
    return translate_ids(ModelBackend(model, use_cache), lines_of(sources), opts, nbest=nbest)


def _beam_search(model, requests, beam_size, alpha, nbest=1):
    """Beam search itself over `requests` in one batch, also where a backend would take greedy search (beam 1,
    one hypothesis): each request's hypotheses, in order."""
    scheduler = Scheduler(BeamSearch(model, beam_size, nbest, alpha), Policy.static(requests[0].opts.batch_tokens))
    scheduler.submit([Waiting(i, r, len(r.source) + 1) for i, r in enumerate(requests)])
    found = dict(scheduler.run())
    return [found[i] for i in range(len(requests))]


def _tokens(results):
    return [[h.tokens for h in per] for per in results]


def test_cached_decoding_equals_recomputing_the_prefix(model, sources):
    for beam in (1, 4):
        cached = _translate(model, sources, beam_size=beam, use_cache=True)
        full = _translate(model, sources, beam_size=beam, use_cache=False)
        assert _tokens(cached) == _tokens(full)
        for a, b in zip(cached, full):
            assert a[0].score == pytest.approx(b[0].score, abs=1e-4)


def test_beam_size_one_gives_greedy_output(model, sources):
    max_len = max_output_lengths(torch.tensor([len(s) for s in sources]), 1.0, 10, 255)
    opts = DecodeConfig(beam_size=1, alpha=0.0, batch_tokens=4096)
    greedy = [per[0] for per in ModelBackend(model).search(requests_of(sources, opts, max_len))]
    for alpha in (0.0, 0.6):  # a 1-wide beam stops at its first finished hypothesis, whatever the penalty
        beam = _beam_search(model, requests_of(sources, opts, max_len), beam_size=1, alpha=alpha)
        assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]
    assert len({tuple(h.tokens) for h in greedy}) > SOURCES["n"] // 2, "outputs should differ per sentence"
    assert len({len(h.tokens) for h in greedy}) > 3, "and end at different lengths"


@pytest.mark.parametrize("beam", [1, 4])
def test_translation_does_not_depend_on_batching(model, sources, beam):
    together = _translate(model, sources, beam_size=beam)
    alone = [_translate(model, [s], beam_size=beam)[0] for s in sources]
    small_batches = _translate(model, sources, beam_size=beam, batch_tokens=40)
    assert _tokens(together) == _tokens(alone) == _tokens(small_batches)


def test_scores_equal_the_length_penalized_log_probability(model, sources):
    results = _translate(model, sources[:8], nbest=3)
    for src_ids, hyps in zip(sources[:8], results):
        assert len(hyps) == 3 and hyps[0].score >= hyps[1].score >= hyps[2].score
        for h in hyps:
            src = torch.tensor([src_ids + [EOS]])
            tgt_in, tgt_out = torch.tensor([[BOS] + h.tokens]), torch.tensor([h.tokens + [EOS]])
            with torch.no_grad():
                logits = model(src, padding_mask(src), tgt_in, target_mask(tgt_in))
            log_prob = logits.log_softmax(-1).gather(2, tgt_out[..., None]).sum().item()
            assert h.log_prob == pytest.approx(log_prob, abs=1e-3)
            assert h.score == pytest.approx(log_prob / length_penalty(len(h.tokens) + 1, 0.6), abs=1e-3)


def test_a_sentence_stops_once_beam_size_hypotheses_have_finished(model, sources, monkeypatch):
    """fairseq's and CTranslate2's rule: the search ends at the step where the K-th hypothesis finished, so the
    longest of the K it returns ended at the last step. An exact search would go on to the length limit here."""
    steps, decode_step = [], model.decode_step
    eos_bias = torch.zeros(VOCAB).index_fill_(0, torch.tensor([EOS]), 3.0)  # so that hypotheses do end

    def counted(*args):
        steps.append(1)
        return decode_step(*args) + eos_bias

    monkeypatch.setattr(model, "decode_step", counted)
    stopped_early = 0
    opts = DecodeConfig(beam_size=4, alpha=0.6, batch_tokens=4096)
    for src_ids in sources:
        max_len = max_output_lengths(torch.tensor([len(src_ids)]), 1.0, 40, 63)
        steps.clear()
        hyps = ModelBackend(model).search(requests_of([src_ids], opts, max_len, nbest=4))[0]
        assert len(hyps) == 4
        if len(steps) <= max_len.item():  # not stopped by the length limit
            assert len(steps) == max(len(h.tokens) for h in hyps) + 1
            stopped_early += 1
    assert stopped_early > SOURCES["n"] // 2


def test_output_length_is_capped(model, sources):
    results = _translate(model, sources, max_len_a=0.0, max_len_b=3)
    assert all(len(h.tokens) <= 3 for per in results for h in per)


def test_gnmt_length_penalty_formula():
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx(2.0 ** 0.6)
    assert length_penalty(10, 0.0) == 1.0


@pytest.mark.int8
def test_int8_quantization_covers_every_linear_layer_but_the_sliced_one(model):
    quantized = quantize_int8(model)
    dynamic = {name for name, m in quantized.named_modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)}
    still_float = {name for name, m in quantized.named_modules() if type(m) is torch.nn.Linear}
    assert "output" in dynamic, "the tied pre-softmax projection is quantized through its own copy"
    assert still_float and all(name.endswith("cross_attn.in_proj") for name in still_float)
    assert len(dynamic) == 2 * 4 + 2 * 5 + 1  # per encoder layer: in_proj, out_proj, w1, w2; per decoder layer 5
    assert {quantized.get_submodule(name).weight().dtype for name in dynamic} == {torch.qint8}
    assert model.output is None, "the float model is left as it was"


@pytest.mark.int8
def test_int8_decoding_stays_close_to_float(model, sources):
    quantized = quantize_int8(model)
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(s + [EOS]) for s in sources], batch_first=True)
    tgt = src.clone()
    tgt[:, 0] = BOS
    with torch.no_grad():
        exact = model(src, padding_mask(src), tgt, CAUSAL).log_softmax(-1)
        approx = quantized(src, padding_mask(src), tgt, CAUSAL).log_softmax(-1)
    error = (exact - approx).abs()
    # Measured (torch 2.13, x86): log-prob error mean 0.020, largest 0.11. Int8 rounding moves every
    # log-probability (a float model copied as is gives 0.0); a wrong weight gives errors of order 1.
    assert 0.005 < error.mean() < 0.05 and error.max() < 0.3
    floats, int8s = _translate(model, sources), _translate(quantized, sources)
    same = [(f[0].score, q[0].score) for f, q in zip(floats, int8s) if f[0].tokens == q[0].tokens]
    differences = [abs(f - q) for f, q in same]
    # Measured: 20 of the 24 outputs the same tokens, their scores 0.0063 to 0.091 apart.
    assert len(same) >= 18 and min(differences) > 1e-4 and max(differences) < 0.2


@pytest.mark.parametrize("case", ["greedy", "prefix", "sampling", "ensemble"])
def test_a_refilled_batch_decodes_each_sentence_as_alone(model, sources, case, monkeypatch):
    """With a small batch_tokens, sentences join the greedy batch while others are still decoding, at other
    positions of the cache; each gives what it gives decoded alone."""
    joins = []
    original_join = DecoderCache.join
    monkeypatch.setattr(DecoderCache, "join", lambda cache, rows, device: (joins.append(cache.length),
                                                                             original_join(cache, rows, device)))
    decoder = Ensemble([model, random_model(VOCAB, seed=3)]) if case == "ensemble" else model
    options = dict(beam_size=1, sampling=case == "sampling", seed=5, max_len_a=1.0, max_len_b=10)
    prefixes = [s[:2] for s in sources] if case == "prefix" else None

    def decode(sentences, lines, batch_tokens):
        opts = DecodeConfig(**options, batch_tokens=batch_tokens)
        found = translate_ids(ModelBackend(decoder), lines_of(sentences, lines[0], None if prefixes is None else
                                                              [prefixes[i] for i in lines]), opts)
        return [per_line[0] for per_line in found]
    refilled = decode(sources, list(range(len(sources))), 40)
    assert any(length > 0 for length in joins), "sentences should have joined rows already decoding"
    alone = [decode([s], [i], 4096)[0] for i, s in enumerate(sources)]
    assert [h.tokens for h in refilled] == [h.tokens for h in alone]
    assert [h.score for h in refilled] == pytest.approx([h.score for h in alone], abs=1e-5)
    if prefixes is not None:
        assert all(h.tokens[:len(p)] == p for h, p in zip(refilled, prefixes))


def test_searches_leave_the_callers_requests_as_they_were(model, sources):
    """Sentences that end are dropped in place where the search owns the tensor, never in what the caller gave."""
    max_len = max_output_lengths(torch.tensor([len(s) for s in sources]), 1.0, 10, 255)
    given = [list(s) for s in sources]
    beam = requests_of(sources, DecodeConfig(beam_size=4, alpha=0.6, batch_tokens=4096), max_len)
    greedy = requests_of(sources, DecodeConfig(beam_size=1, alpha=0.6, batch_tokens=40), max_len)
    copies = (list(beam), list(greedy))
    ModelBackend(model).search(beam)
    ModelBackend(model).search(greedy)
    assert (beam, greedy) == copies and sources == given


def test_a_refilled_batch_encodes_each_part_as_wide_as_its_longest_source(model, sources, monkeypatch):
    """Parts that join together are encoded apart: the encoder sees the parts' rows x longest source, not all of
    their rows padded to the widest part's."""
    encoded = []
    original_encode = type(model).encode
    monkeypatch.setattr(type(model), "encode", lambda m, src, src_mask: (encoded.append(src.numel()),
                                                                         original_encode(m, src, src_mask))[1])
    lengths = [len(s) + 1 for s in sources]
    max_len = max_output_lengths(torch.tensor(lengths) - 1, 1.0, 10, 255)
    batch_tokens = 160
    ModelBackend(model).search(requests_of(sources, DecodeConfig(beam_size=1, alpha=0.6, batch_tokens=batch_tokens),
                                           max_len))
    parts = token_batches(lengths, batch_tokens // REFILL_PARTS)
    assert len(encoded) == len(parts) > 2
    assert encoded == [len(part) * max(lengths[i] for i in part) for part in parts]


@pytest.mark.parametrize("width", [1000, 4000, 8000])
@pytest.mark.parametrize("n", [1, 8])
def test_top_k_equals_torch_topk(width, n):
    """The chunked top-k (CPU) finds the same scores at the same indices as torch.topk: over whole chunks, over
    a tail after the last one (4,000 = 62 x 64 + 32), below the size where it pays (1,000: topk itself), and
    on rows where a prefix leaves one finite score."""
    generator = torch.Generator().manual_seed(width + n)
    scores = torch.stack([torch.randperm(width, generator=generator) for _ in range(50)]).float() / width  # no ties
    scores[:, -5:] += 2.0  # some rows' best in the tail
    scores[:3, 1:-5] -= 3.0  # and elsewhere
    found = top_k(scores, n)
    expected = scores.topk(n, dim=1)
    assert torch.equal(found[0], expected.values) and torch.equal(found[1], expected.indices)
    forced = torch.full((2, width), float("-inf"))
    forced[0, 7], forced[1, width - 1] = -0.5, -1.5
    top, index = top_k(forced, n)
    assert top[:, 0].tolist() == [-0.5, -1.5] and index[:, 0].tolist() == [7, width - 1]
    assert torch.isinf(top[:, 1:]).all()
