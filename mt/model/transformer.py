"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), section 3.

Shapes: B batch, S source length, T target length, D d_model, H heads, V vocabulary.
Masks follow mt/masks.py: boolean, True = may attend, or CAUSAL.
The CPU kernels behind linear layers, dropout and attention live in mt/model/kernels.py.
"""

from __future__ import annotations

import contextlib

import math

import torch
import torch.nn.functional as F
from torch import nn

from mt.model.kv_cache import DecoderCache, LayerCache
from mt.config import ModelConfig
from mt.model.kernels import (Transposed, attention, linear, linear_layer, linear_relu, projection, training_dropout,
                              written_out_attention)
from mt.masks import CAUSAL, Causal
from mt.symbols import EOS, PAD


def sinusoidal_positions(n_positions: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """(n_positions, D): PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)) (3.5);
    `layout` concatenated departs from it: the same sines in the first half, cosines in the second (Marian);
    fairseq: [sin | cos] with frequencies 10000^(-i/(D/2 - 1)), position p at fairseq's row p + 2 (its padding
    index + 1), computed in float32 as fairseq and M2M100 do."""
    if layout == "fairseq":
        half = d_model // 2
        inv_freq = torch.exp(torch.arange(half).float() * -(math.log(10000) / (half - 1)))
        angle = (torch.arange(n_positions) + 2).float()[:, None] * inv_freq[None]
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]
    inv_freq = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    if layout == "concatenated":
        return torch.cat([torch.sin(position * inv_freq), torch.cos(position * inv_freq)], dim=1).float()
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table.float()


class Dropout(nn.Module):
    """Dropout (5.4): each element zeroed with probability p, the others scaled by 1 / (1 - p); off in eval."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return training_dropout(x, self.p)


class Embedding(nn.Module):
    """Token embedding scaled by sqrt(d_model) (3.4) plus sinusoidal positions (3.5), then dropout (5.4)."""

    def __init__(self, tokens: nn.Embedding, positions: torch.Tensor, dropout: float):
        super().__init__()
        self.tokens = tokens
        self.register_buffer("positions", positions, persistent=False)
        self.scale = math.sqrt(tokens.embedding_dim)
        self.dropout = Dropout(dropout)

    def forward(self, ids: torch.Tensor, offset: int | torch.Tensor = 0) -> torch.Tensor:
        """(B, L) ids -> (B, L, D); `offset` is the position of the first id (incremental decoding), or (B,) one
        per row (rows at different positions: a refilled batch)."""
        if isinstance(offset, torch.Tensor):
            pos = self.positions[offset[:, None] + torch.arange(ids.size(1), device=ids.device)]
        else:
            pos = self.positions[offset:offset + ids.size(1)]
        return self.dropout(self.tokens(ids) * self.scale + pos)


class MultiHeadAttention(nn.Module):
    """Multi-head scaled dot-product attention (3.2.2) through torch's fused kernel (mt.model.kernels.attention).

    W^Q, W^K and W^V are stacked in one (3D, D) `in_proj`, as in torch.nn.MultiheadAttention: self-attention
    projects q, k and v in one matmul; cross-attention projects q from the decoder and k, v (one matmul) from
    the memory.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0):
        super().__init__()
        self.d_model, self.n_heads, self.d_head, self.dropout = d_model, n_heads, d_model // n_heads, dropout
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.keep_weights, self.weights = False, None  # opt-in: keep (B, H, Lq, Lk) weights to look at them

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, D) -> (B, H, L, D/H)."""
        return x.view(x.size(0), x.size(1), self.n_heads, self.d_head).transpose(1, 2)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Self-attention: (B, L, D) -> q, k, v, each (B, H, L, D/H)."""
        q, k, v = linear_layer(self.in_proj, x).chunk(3, dim=-1)
        return self._split(q), self._split(k), self._split(v)

    def project_q(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, D) -> queries (B, H, L, D/H), from the first D rows of `in_proj`."""
        d = self.d_model
        return self._split(linear(x, self.in_proj.weight[:d], self.in_proj.bias[:d]))

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L, D) -> keys and values, each (B, H, L, D/H), from the last 2D rows of `in_proj`."""
        d = self.d_model
        k, v = linear(x, self.in_proj.weight[d:], self.in_proj.bias[d:]).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | Causal | None) -> torch.Tensor:
        """q (B, H, Lq, D/H), k/v (B, H, Lk, D/H) -> (B, Lq, D). `mask`: (B, 1, Lq|1, Lk) boolean, True = may
        attend; CAUSAL: key j is visible from query i when j <= i, left to SDPA (no mask tensor, so it may
        pick its fastest kernel); None: every key is visible."""
        p = self.dropout if self.training else 0.0
        if self.keep_weights:  # eq. 1 written out, to look at the weights
            causal = isinstance(mask, Causal)
            out, self.weights = written_out_attention(q, k, v, None if causal else mask, causal, p)
        else:
            out = attention(q, k, v, mask, p, self.training)
        return linear_layer(self.out_proj, out.transpose(1, 2).flatten(2))

    def forward(self, query, key_value, mask):
        if key_value is query:  # self-attention: one matmul for q, k and v
            return self.attend(*self.project_qkv(query), mask)
        return self.attend(self.project_q(query), *self.project_kv(key_value), mask)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (3.3); `activation` swish departs from it: swish(z) = z * sigmoid(z)
    in place of max(0, z) (OPUS-MT's base models)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.w1, self.w2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)
        self.activation = activation

    def forward(self, x):
        h = linear_relu(self.w1, x) if self.activation == "relu" else F.silu(linear_layer(self.w1, x))
        return linear_layer(self.w2, self.dropout(h))


class Residual(nn.Module):
    """LayerNorm(x + Dropout(sublayer(x))) (3.1, 5.4); pre-LN (x + Dropout(sublayer(LayerNorm(x)))) departs
    from the paper for stability of deep or high-lr runs."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = nn.LayerNorm(d_model), Dropout(dropout), pre_norm

    def forward(self, x, sublayer):
        if self.pre_norm:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout, cfg.activation)
        self.attn_block, self.ffn_block = (Residual(cfg.d_model, cfg.dropout, pre) for _ in range(2))

    def forward(self, x, src_mask):
        x = self.attn_block(x, lambda h: self.self_attn(h, h, src_mask))
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output, feed-forward; each in a residual
    block with LayerNorm (3.1)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        pre = cfg.norm == "pre"
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attention_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation_dropout, cfg.activation)
        self.self_block, self.cross_block, self.ffn_block = (Residual(cfg.d_model, cfg.dropout, pre) for _ in range(3))

    def forward(self, x, memory, src_mask, tgt_mask, cache: LayerCache | None = None):
        """With `cache` (incremental decoding), x holds only the new positions and the cache the earlier ones
        (mt/model/kv_cache.py); the cache then says which keys each position may see, in place of `tgt_mask`."""
        x = self.self_block(x, lambda h: self._self_attention(h, tgt_mask, cache))
        x = self.cross_block(x, lambda h: self._cross_attention(h, memory, src_mask, cache))
        return self.ffn_block(x, self.ffn)

    def _self_attention(self, h, tgt_mask, cache):
        q, k, v = self.self_attn.project_qkv(h)
        if cache is not None:
            q, k, v, tgt_mask = cache.self_attention(q, k, v)
        return self.self_attn.attend(q, k, v, tgt_mask).view(h.shape)

    def _cross_attention(self, h, memory, src_mask, cache):
        q = self.cross_attn.project_q(h)
        if cache is None:
            k, v = self.cross_attn.project_kv(memory)
        else:
            q, k, v = cache.cross_attention(q, lambda first_row: self.cross_attn.project_kv(memory[first_row:]))
        return self.cross_attn.attend(q, k, v, src_mask).view(h.shape)


class Transformer(nn.Module):
    """Encoder-decoder Transformer. `encode` and `decode` are separate so search can reuse the memory."""

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool):
        super().__init__()
        self.cfg = cfg
        positions = sinusoidal_positions(cfg.max_positions, cfg.d_model, cfg.positions)
        tgt_tokens = nn.Embedding(tgt_vocab, cfg.d_model, padding_idx=PAD)
        # Section 3.4: one matrix for both embeddings and the pre-softmax projection (needs a joint vocabulary).
        share_src = cfg.share_embeddings and joint_vocab and src_vocab == tgt_vocab
        src_tokens = tgt_tokens if share_src else nn.Embedding(src_vocab, cfg.d_model, padding_idx=PAD)
        self.src_embed = Embedding(src_tokens, positions, cfg.dropout)
        self.tgt_embed = Embedding(tgt_tokens, positions, cfg.dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        # Pre-LN needs a final norm on each stack; post-LN outputs are already normalized.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.output = None if cfg.share_embeddings else nn.Linear(cfg.d_model, tgt_vocab, bias=False)
        # Not in the paper: a bias on the pre-softmax projection (OPUS-MT's final_logits_bias), from 0.
        self.output_bias = nn.Parameter(torch.zeros(tgt_vocab)) if cfg.output_bias else None
        self._output_transposed = Transposed()  # the projection's W^T while decoding (mt.model.kernels.projection)
        self._init_parameters()

    def _init_parameters(self):
        # Xavier-uniform for every matrix, as torch.nn.Transformer. `in_proj` is initialised as one (3D, D)
        # matrix like torch.nn.MultiheadAttention's, which gives W^Q, W^K, W^V each fairseq's Xavier gain
        # 1/sqrt(2): a separate Xavier init per (D, D) matrix makes the initial attention logits twice as large.
        for name, p in self.named_parameters():
            if p.dim() > 1 and "tokens" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
        for emb in {id(m): m for m in (self.src_embed.tokens, self.tgt_embed.tokens)}.values():
            # N(0, D^-0.5): after the sqrt(D) scaling the embeddings have unit variance, like the positions.
            nn.init.normal_(emb.weight, mean=0.0, std=self.cfg.d_model ** -0.5)
            with torch.no_grad():
                emb.weight[PAD].zero_()

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """src (B, S), src_mask (B, 1, 1, S) -> memory (B, S, D)."""
        x = self.src_embed(src)
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def decode(self, memory, src_mask, tgt_in, tgt_mask=CAUSAL, at: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher forcing: memory (B, S, D), src_mask (B, 1, 1, S), tgt_in (B, T), tgt_mask (B, 1, T, T) or
        CAUSAL -> logits (B, T, V); with `at` (N,), indices into the B*T positions, logits (N, V) of those only.

        CAUSAL (mt/masks.py) leaves the no-peeking mask to the attention kernel and ignores target padding:
        padding follows every real token, so a real position never sees it, and the loss ignores the outputs
        at padded positions (training asks for the real ones only, `at`: in the protocol model the projection to
        the vocabulary and its gradients are over a quarter of a step's matmul time).
        """
        x = self.tgt_embed(self._started(tgt_in))
        for layer in self.decoder_layers:
            x = layer(x, memory, src_mask, tgt_mask)
        if at is not None:
            x = x.flatten(0, 1).index_select(0, at)
        return self._logits(x)

    def decode_step(self, memory, src_mask, tgt_new, cache: DecoderCache) -> torch.Tensor:
        """Incremental decoding: tgt_new (N, t), each row's next t tokens (one for G > 1), at positions
        `cache.offset` on -> logits (N, t, V). The cache holds the earlier positions and keeps this step's
        (mt/model/kv_cache.py); memory (B, S, D) and src_mask (B, 1, 1, S) have one row per sentence, shared by its
        G = N / B rows. The caller's search started the step (`cache.begin_step`) and ends it (`advance`)."""
        x = self.tgt_embed(self._started(tgt_new, cache.offset), offset=cache.offset)
        for layer, layer_cache in zip(self.decoder_layers, cache.layers):
            x = layer(x, memory, src_mask, CAUSAL, layer_cache)
        logits = self._logits(x)
        if self.cfg.decoder_start == "pad":  # Marian's vocabulary has no PAD: a search never outputs it
            logits[..., PAD] = float("-inf")
        return logits

    def _started(self, tgt: torch.Tensor, offset: int | torch.Tensor = 0) -> torch.Tensor:
        """tgt (N, t) at positions `offset` on, with the id at position 0 (BOS) read as PAD, whose row is all
        zeros, where the decoder starts from it (model.decoder_start: pad, Marian); searches and batches put
        BOS first either way."""
        if self.cfg.decoder_start == "bos":
            return tgt
        start = offset[:, None] if isinstance(offset, torch.Tensor) else offset
        first = PAD if self.cfg.decoder_start == "pad" else EOS  # eos: fairseq's and M2M100's decoder start
        return tgt.masked_fill(torch.arange(tgt.size(1), device=tgt.device) + start == 0, first)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        x = self.decoder_norm(x)
        if self.output is not None and type(self.output) is not nn.Linear:  # int8-quantized (mt.model.quantize)
            logits = self.output(x)
            return logits if self.output_bias is None else logits + self.output_bias
        weight = self.tgt_embed.tokens.weight if self.output is None else self.output.weight
        return projection(x, weight, self.output_bias, self._output_transposed)

    def forward(self, src, src_mask, tgt_in, tgt_mask=CAUSAL, at: torch.Tensor | None = None):
        return self.decode(self.encode(src, src_mask), src_mask, tgt_in, tgt_mask, at)


@contextlib.contextmanager
def kept_attention_weights(model: nn.Module):
    """Within the block every attention module of `model` keeps its last weights in `.weights`."""
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    for m in modules:
        m.keep_weights = True
    try:
        yield
    finally:
        for m in modules:
            m.keep_weights, m.weights = False, None


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool) -> Transformer:
    return Transformer(cfg, src_vocab, tgt_vocab, joint_vocab)


def count_parameters(model: nn.Module) -> int:
    """Distinct parameters (a tied matrix counts once)."""
    return sum(p.numel() for p in model.parameters())
