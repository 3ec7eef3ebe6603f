"""mt/model/kernels.py against plain torch (its one switch): a training step and a decode give the same results.

Tolerance: token outputs identical; losses, gradients, logits and scores within 1e-5 (absolute). The kernels
sum in another order than torch's, so the numbers agree to float32 rounding, not bit for bit. Dropout is off:
mt's dropout draws its mask from other random numbers than F.dropout's (tests/model/test_transformer.py checks its rate).
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from mt.model import kernels
from mt.decoding.model_backend import ModelBackend
from mt.config import DecodeConfig
from mt.decoding.lines import LineIds, translate_ids
from mt.masks import padding_mask
from mt.symbols import BOS, EOS, PAD
from tests.conftest import random_model, random_sources

VOCAB = 20
TOLERANCE = 1e-5


def _batch(n: int = 16):
    """Padded source, decoder input and labels of `n` random pairs: (n, S), (n, T), (n, T); n * S >= 160 rows,
    so that inference takes oneDNN's matmul (kernels.ONEDNN_MIN_ROWS)."""
    sources, targets = random_sources(n, VOCAB, 8, 14, seed=1), random_sources(n, VOCAB, 3, 12, seed=2)

    def pad(rows):
        width = max(map(len, rows))
        return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])

    return pad(sources), pad([[BOS] + t for t in targets]), pad([t + [EOS] for t in targets])


def _training_step(plain: bool):
    """Label-smoothed loss of one batch in training mode and every parameter's gradient."""
    model = random_model(VOCAB, seed=3).train()
    src, tgt_in, tgt_out = _batch()
    with kernels.plain_torch(plain):
        logits = model(src, padding_mask(src), tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, label_smoothing=0.1)
        loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


def test_a_training_step_gives_plain_torchs_loss_and_gradients():
    fast_loss, fast_grads = _training_step(plain=False)
    plain_loss, plain_grads = _training_step(plain=True)
    torch.testing.assert_close(fast_loss, plain_loss, atol=TOLERANCE, rtol=0)
    assert fast_grads.keys() == plain_grads.keys()
    for name in fast_grads:
        torch.testing.assert_close(fast_grads[name], plain_grads[name], atol=TOLERANCE, rtol=0, msg=name)


def test_inference_logits_equal_plain_torchs():
    """Teacher-forced logits in eval mode: oneDNN's matmul, its fused ReLU and eq. 1 written out (the decoder's
    few queries) against F.linear, F.relu and SDPA."""
    model = random_model(VOCAB, seed=3)
    src, tgt_in, _ = _batch()
    with torch.inference_mode():
        fast = model(src, padding_mask(src), tgt_in)
        with kernels.plain_torch():
            plain = model(src, padding_mask(src), tgt_in)
    torch.testing.assert_close(fast, plain, atol=TOLERANCE, rtol=0)


def test_the_projection_through_a_kept_transpose_follows_weights_written_in_place():
    """A decoding step's projection multiplies by W^T kept between calls; an optimizer step or a loaded state
    writes W in place, and the next projection uses the new W (as F.linear does)."""
    x = torch.randn(4, 8)
    weight, bias, kept = torch.randn(20, 8), torch.randn(20), kernels.Transposed()
    with torch.inference_mode():
        first = kernels.projection(x, weight, bias, kept)
        torch.testing.assert_close(first, F.linear(x, weight, bias), atol=TOLERANCE, rtol=0)
    with torch.no_grad():
        weight.mul_(2.0)  # in place, as an optimizer or load_state_dict writes
    with torch.inference_mode():
        torch.testing.assert_close(kernels.projection(x, weight, bias, kept), F.linear(x, weight, bias),
                                   atol=TOLERANCE, rtol=0)
        torch.testing.assert_close(kernels.projection(x, weight, None, kept), x @ weight.t(), atol=TOLERANCE, rtol=0)


def _decode(model, sources, plain: bool, beam_size: int, nbest: int):
    opts = DecodeConfig(beam_size=beam_size, alpha=0.6, max_len_a=1.0, max_len_b=10, batch_tokens=4096)
    with kernels.plain_torch(plain):
        lines = [LineIds(source, line) for line, source in enumerate(sources)]
        return translate_ids(ModelBackend(model, True), lines, opts, nbest=nbest)


@pytest.mark.parametrize("beam_size, nbest", [(1, 1), (4, 1), (4, 2)])
def test_a_decode_gives_plain_torchs_outputs_and_scores(beam_size, nbest):
    model, sources = random_model(VOCAB), random_sources(24, VOCAB)
    fast = _decode(model, sources, False, beam_size, nbest)
    plain = _decode(model, sources, True, beam_size, nbest)
    assert [[h.tokens for h in per] for per in fast] == [[h.tokens for h in per] for per in plain]
    for fast_hyps, plain_hyps in zip(fast, plain):
        for f, p in zip(fast_hyps, plain_hyps):
            assert f.score == pytest.approx(p.score, abs=TOLERANCE)
            assert f.log_prob == pytest.approx(p.log_prob, abs=TOLERANCE)


def test_the_switch_turns_every_kernel_off():
    x, q = torch.randn(kernels.ONEDNN_MIN_ROWS, 8), torch.randn(1, 2, 1, 4)
    with torch.inference_mode():
        assert kernels.few_queries_on_cpu(q)
        assert kernels.onednn_inference(x) == torch.backends.mkldnn.is_available()
        with kernels.plain_torch():
            assert not kernels.fast() and not kernels.few_queries_on_cpu(q) and not kernels.onednn_inference(x)
        assert kernels.fast()
    with kernels.plain_torch():
        assert not kernels.onednn_training(x, torch.randn(4, 8))


@pytest.mark.parametrize("value, fast", [("1", "False"), ("0", "True"), ("", "True")])
def test_mt_plain_torch_in_the_environment_sets_the_switch(value, fast):
    env = {**os.environ, "MT_PLAIN_TORCH": value}
    out = subprocess.run([sys.executable, "-c", "import mt.model.kernels; print(mt.model.kernels.fast())"], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == [fast]
