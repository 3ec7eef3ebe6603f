"""The model against torch.nn.Transformer, its formulas, and its mask invariants (issue: prove it is the paper's)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mt.config import ModelConfig
from mt.masks import CAUSAL, padding_mask, subsequent_mask, target_mask
from mt.checkpoint import upgrade_state_dict
from mt.model.kernels import written_out_attention
from mt.model.transformer import Dropout, MultiHeadAttention, build_model, sinusoidal_positions
from mt.symbols import BOS, PAD

VOCAB = 50


def _model(norm="post", **kw):
    torch.manual_seed(0)
    cfg = ModelConfig(**{"d_model": 32, "d_ff": 64, "n_heads": 4, "n_layers": 3, "dropout": 0.0,
                         "max_positions": 64, "norm": norm, **kw})
    return build_model(cfg, VOCAB, VOCAB, joint_vocab=True).eval()


def _batch(batch=4, src_len=9, tgt_len=7, seed=1):
    """Random ids with per-sentence padding at the end (every sentence keeps at least 2 tokens)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (batch, src_len), generator=g)
    tgt = torch.randint(4, VOCAB, (batch, tgt_len), generator=g)
    tgt[:, 0] = BOS
    for i in range(1, batch):
        src[i, src_len - 2 * i:] = PAD
        tgt[i, tgt_len - i:] = PAD
    return src, tgt


def _reference(model, norm):
    """torch.nn.Transformer with this model's weights (same sizes, ReLU, dropout off)."""
    cfg = model.cfg
    ref = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_layers, cfg.n_layers, cfg.d_ff, dropout=0.0,
                         batch_first=True, norm_first=norm == "pre").eval()
    for ours, theirs in zip(model.encoder_layers, ref.encoder.layers):
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_ffn(ours.ffn, theirs)
        _copy_norms([ours.attn_block, ours.ffn_block], [theirs.norm1, theirs.norm2])
    for ours, theirs in zip(model.decoder_layers, ref.decoder.layers):
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_attention(ours.cross_attn, theirs.multihead_attn)
        _copy_ffn(ours.ffn, theirs)
        _copy_norms([ours.self_block, ours.cross_block, ours.ffn_block], [theirs.norm1, theirs.norm2, theirs.norm3])
    if norm == "pre":
        ref.encoder.norm.load_state_dict(model.encoder_norm.state_dict())
        ref.decoder.norm.load_state_dict(model.decoder_norm.state_dict())
    else:  # nn.Transformer always adds final norms; the paper's post-LN stack has none
        ref.encoder.norm = nn.Identity()
        ref.decoder.norm = nn.Identity()
    return ref


def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention):
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.in_proj.weight)
        theirs.in_proj_bias.copy_(ours.in_proj.bias)
        theirs.out_proj.load_state_dict(ours.out_proj.state_dict())


def _copy_ffn(ours, theirs):
    theirs.linear1.load_state_dict(ours.w1.state_dict())
    theirs.linear2.load_state_dict(ours.w2.state_dict())


def _copy_norms(blocks, norms):
    for block, norm in zip(blocks, norms):
        norm.load_state_dict(block.norm.state_dict())


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_matches_torch_nn_transformer(norm):
    model = _model(norm)
    ref = _reference(model, norm)
    src, tgt = _batch()
    src_mask, tgt_mask = padding_mask(src), target_mask(tgt)
    hidden = {}
    model.decoder_norm.register_forward_hook(lambda m, i, o: hidden.update(decoder=o))
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        logits = model.decode(memory, src_mask, tgt, tgt_mask)
        ref_memory = ref.encoder(model.src_embed(src), src_key_padding_mask=src == PAD)
        causal = ~subsequent_mask(tgt.size(1))[0, 0]
        ref_hidden = ref.decoder(model.tgt_embed(tgt), ref_memory, tgt_mask=causal,
                                 tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD)
        ref_logits = ref_hidden @ model.tgt_embed.tokens.weight.T
    real_src, real_tgt = src != PAD, tgt != PAD
    diffs = {"encoder": (memory - ref_memory)[real_src].abs().max().item(),
             "decoder": (hidden["decoder"] - ref_hidden)[real_tgt].abs().max().item(),
             "logits": (logits - ref_logits)[real_tgt].abs().max().item()}
    print(f"max abs difference vs nn.Transformer ({norm}-LN): {diffs}")
    assert all(d < 1e-5 for d in diffs.values()), diffs


def test_padding_and_batch_company_do_not_change_a_sentence():
    model = _model()
    src, tgt = _batch()
    with torch.no_grad():
        full = model(src, padding_mask(src), tgt, target_mask(tgt))
        for i in range(src.size(0)):
            s, t = src[i:i + 1, :int((src[i] != PAD).sum())], tgt[i:i + 1, :int((tgt[i] != PAD).sum())]
            alone = model(s, padding_mask(s), t, target_mask(t))
            assert torch.allclose(alone[0], full[i, :t.size(1)], atol=1e-5)


def test_changing_a_later_target_token_leaves_earlier_outputs_alone():
    model = _model()
    src, tgt = _batch(batch=1)
    with torch.no_grad():
        before = model(src, padding_mask(src), tgt, target_mask(tgt))
        for t in range(1, tgt.size(1)):
            changed = tgt.clone()
            changed[0, t] = (changed[0, t] + 1) % VOCAB
            after = model(src, padding_mask(src), changed, target_mask(changed))
            assert torch.equal(after[0, :t], before[0, :t])
            assert not torch.allclose(after[0, t:], before[0, t:])


def test_attention_weights_on_padded_keys_are_exactly_zero():
    """Whatever sits at padded positions, real positions' outputs are bit-for-bit the same."""
    model = _model()
    src, tgt = _batch()
    mask = padding_mask(src)
    garbage = src.clone()
    garbage[src == PAD] = 7
    with torch.no_grad():
        a, b = model.encode(src, mask), model.encode(garbage, mask)
        assert torch.equal(a[src != PAD], b[src != PAD])
        la = model.decode(a, mask, tgt, target_mask(tgt))
        lb = model.decode(b, mask, tgt, target_mask(tgt))
    assert torch.equal(la[tgt != PAD], lb[tgt != PAD])


def test_no_gradient_reaches_padded_positions():
    model = _model()
    model.train()  # dropout is 0, so this is deterministic
    src, tgt = _batch()
    embedded = {}

    def keep(module, inputs, output):
        output.retain_grad()
        embedded[len(embedded)] = output
    model.src_embed.register_forward_hook(keep)
    model.tgt_embed.register_forward_hook(keep)
    logits = model(src, padding_mask(src), tgt, target_mask(tgt))
    logits[tgt != PAD].logsumexp(-1).sum().backward()
    src_grad, tgt_grad = embedded[0].grad, embedded[1].grad
    assert src_grad[src == PAD].abs().max() == 0 and src_grad[src != PAD].abs().max() > 0
    assert tgt_grad[tgt == PAD].abs().max() == 0


def test_sinusoidal_positions_follow_section_3_5():
    d = 16
    table = sinusoidal_positions(50, d)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = _model()
    ids = torch.tensor([[5, 9, 11]])
    expected = model.src_embed.tokens(ids) * math.sqrt(32) + sinusoidal_positions(3, 32)
    assert torch.allclose(model.src_embed(ids), expected, atol=1e-6)
    assert model.src_embed.tokens is model.tgt_embed.tokens and model.output is None  # one shared matrix


def test_attention_passes_gradcheck_in_float64():
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2).double()
    query = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    memory = torch.randn(2, 4, 8, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])[:, None, None, :]
    assert torch.autograd.gradcheck(lambda q, m: attention(q, m, mask), (query, memory))


def test_written_out_attention_equals_the_fused_kernel_with_its_gradients():
    """Eq. 1 written out (kept weights, decoding steps on a CPU; its scores masked in place) gives SDPA's outputs
    and gradients, with a padding mask and with the causal mask, and its weights are 0 on hidden keys."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, True, False], [True, False, False]])[:, None, None, :]
    for kwargs in ({"mask": mask}, {"mask": None, "causal": True}):
        out, weights = written_out_attention(q, k, v, **kwargs)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=kwargs["mask"], is_causal="causal" in kwargs)
        assert torch.allclose(out, expected, atol=1e-12)
        hidden = ~mask if kwargs["mask"] is not None else ~torch.ones(3, 3, dtype=torch.bool).tril()
        assert torch.all(weights.masked_select(hidden.expand_as(weights)) == 0)
        grads = torch.autograd.grad(out.sum(), (q, k, v))
        expected_grads = torch.autograd.grad(expected.sum(), (q, k, v))
        assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grads, expected_grads))


def test_the_causal_target_mask_ignores_padding_and_equals_the_explicit_mask():
    """Training passes CAUSAL (SDPA's is_causal, no mask tensor): real positions equal the explicit-mask result."""
    model = _model()
    src, tgt = _batch()
    assert model.decode.__defaults__[0] is CAUSAL  # what a call without a target mask means, said in the signature
    with torch.no_grad():
        explicit = model(src, padding_mask(src), tgt, target_mask(tgt))
        implicit = model(src, padding_mask(src), tgt, CAUSAL)
    real = tgt != PAD
    assert (explicit - implicit)[real].abs().max() < 1e-5


def test_dropout_zeroes_each_element_with_probability_p_and_scales_the_rest():
    """On a CPU the mask comes in pairs of 15-bit halves of one draw: both halves of every draw keep 1 - p; the
    kept elements and their gradient are scaled by 1 / (1 - p); off in eval and at p = 0."""
    dropout = Dropout(0.1).train()
    x = torch.ones(1001, 999, requires_grad=True)  # an odd number of elements: the last draw is half used
    torch.manual_seed(0)
    y = dropout(x)
    kept = y != 0
    assert torch.allclose(y[kept], torch.tensor(1 / 0.9))
    for half in (kept.view(-1)[0::2], kept.view(-1)[1::2]):  # 500k elements each: 0.003 is 7 standard errors
        assert abs(half.float().mean().item() - 0.9) < 0.003
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # the gradient flows where kept, scaled alike
    torch.manual_seed(0)
    assert torch.equal(dropout(x), y)  # the run's seed decides the mask
    assert dropout.eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_logits_asked_at_the_real_targets_are_those_rows_of_all_logits():
    """Training projects only the real target positions to the vocabulary (`at`); they equal those rows of the
    full (B, T, V) logits, and so do their gradients."""
    model = _model()
    src, tgt = _batch()
    at = (tgt != PAD).view(-1).nonzero().squeeze(1)
    full = model(src, padding_mask(src), tgt)
    picked = model(src, padding_mask(src), tgt, at=at)
    assert picked.shape == (len(at), VOCAB) and len(at) < tgt.numel()
    assert torch.allclose(picked, full.flatten(0, 1)[at], atol=1e-6)
    weights = torch.randn(len(at), VOCAB)
    grad_full = torch.autograd.grad((full.flatten(0, 1)[at] * weights).sum(), model.tgt_embed.tokens.weight)[0]
    grad_picked = torch.autograd.grad((picked * weights).sum(), model.tgt_embed.tokens.weight)[0]
    assert torch.allclose(grad_picked, grad_full, atol=1e-5)


def test_no_gradient_reaches_padded_target_positions_without_a_mask():
    model = _model().train()
    src, tgt = _batch()
    embedded = {}

    def keep(module, inputs, output):
        output.retain_grad()
        embedded["tgt"] = output
    model.tgt_embed.register_forward_hook(keep)
    logits = model(src, padding_mask(src), tgt)
    logits[tgt != PAD].logsumexp(-1).sum().backward()
    grad = embedded["tgt"].grad
    assert grad[tgt == PAD].abs().max() == 0 and grad[tgt != PAD].abs().max() > 0


def test_q_k_v_start_at_the_scale_of_torch_multihead_attention():
    """in_proj is Xavier-initialised as one (3D, D) matrix, like nn.MultiheadAttention (fairseq: gain 1/sqrt 2)."""
    torch.manual_seed(0)
    d = 256
    ours = MultiHeadAttention(d, 4)
    build = build_model(ModelConfig(d_model=d, d_ff=512, n_heads=4, n_layers=1), VOCAB, VOCAB, True)
    theirs = nn.MultiheadAttention(d, 4)
    bound = math.sqrt(6 / (d + 3 * d))
    for weight in (build.encoder_layers[0].self_attn.in_proj.weight, theirs.in_proj_weight):
        assert weight.abs().max() <= bound
        assert weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    assert ours.in_proj.weight.shape == (3 * d, d)


def test_a_state_with_separate_q_k_v_projections_loads_with_identical_outputs():
    model = _model()
    old = {}
    for name, value in model.state_dict().items():
        if ".in_proj." in name:
            prefix, kind = name.split(".in_proj.")
            for part, chunk in zip(("q_proj", "k_proj", "v_proj"), value.chunk(3)):
                old[f"{prefix}.{part}.{kind}"] = chunk.clone()
        else:
            old[name] = value
    fresh = _model()
    torch.nn.init.zeros_(fresh.encoder_layers[0].self_attn.in_proj.weight)
    fresh.load_state_dict(upgrade_state_dict(old))
    src, tgt = _batch()
    with torch.no_grad():
        assert torch.equal(fresh(src, padding_mask(src), tgt), model(src, padding_mask(src), tgt))
