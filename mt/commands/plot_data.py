"""The numbers behind each `mt plot` picture, as arrays; mt/commands/plot.py draws them, the tests check them.

Every table comes from the code the model runs: `sinusoidal_positions`, the masks of mt/masks.py, and
attention weights captured during a real forward pass (`MultiHeadAttention.keep_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from mt.decoding.protocol import Translator
from mt.decoding.lines import LineIds, translate_ids
from mt.errors import MtError
from mt.masks import padding_mask, subsequent_mask, target_mask
from mt.model.transformer import kept_attention_weights, sinusoidal_positions
from mt.training.run_log import metric_curves
from mt.symbols import BOS, EOS, PAD


def positions_table(n_positions: int, d_model: int) -> np.ndarray:
    """(n_positions, d_model): the sinusoidal encodings the model adds to its embeddings (section 3.5)."""
    if n_positions < 1 or d_model < 2 or d_model % 2:
        raise MtError(f"positions need n_positions >= 1 and an even d_model >= 2, got {n_positions} and {d_model}")
    return sinusoidal_positions(n_positions, d_model).numpy()


def mask_tables(size: int, padding: int = 0) -> dict[str, np.ndarray]:
    """(size, size) boolean tables, True = may attend, rows are queries and columns keys:
    "subsequent" (no peeking ahead), and with `padding` > 0 also "target": the decoder's mask for a sentence
    of size - padding tokens followed by `padding` PADs (padding AND subsequent)."""
    if size < 1 or not 0 <= padding < size:
        raise MtError(f"mask needs size >= 1 and 0 <= padding < size, got size {size} and padding {padding}")
    tables = {"subsequent": subsequent_mask(size)[0, 0].numpy()}
    if padding:
        tgt_in = torch.full((1, size), PAD)  # (1, size)
        tgt_in[0, :size - padding] = BOS  # only PAD matters to the mask: any other id is a real token
        tables["target"] = target_mask(tgt_in)[0, 0].numpy()
    return tables


def training_curves(run_dirs: list[str | Path]) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """{run name: {split: {"step": ..., key: ...}}} for each run folder (see `metric_curves`)."""
    if not run_dirs:
        raise MtError("give at least one RUN_DIR")
    return {str(run_dir): metric_curves(run_dir) for run_dir in run_dirs}


@dataclass
class AttentionMaps:
    """Attention weights of one sentence pair, per layer, each (H, query, key); rows sum to 1.

    Query and key pieces are the sentencepiece pieces the model saw: the source with EOS, and the
    decoder input (BOS + target).
    """

    src_pieces: list[str]
    tgt_pieces: list[str]
    encoder: list[np.ndarray]  # (H, S, S) self-attention per encoder layer
    decoder: list[np.ndarray]  # (H, T, T) self-attention per decoder layer
    cross: list[np.ndarray]  # (H, T, S) decoder-to-encoder attention per decoder layer


@torch.no_grad()
def attention_maps(tr: Translator, text: str, target: str | None = None) -> AttentionMaps:
    """Attention of mt's model (`tr.backend.model`) on `text` and `target` (the model's own greedy translation
    when None)."""
    model, limit = tr.backend.model, tr.backend.model.cfg.max_positions
    src_ids = tr.src_tokenizer.encode([text.strip()])[0]
    if not src_ids:
        raise MtError("--text is empty")
    if len(src_ids) + 1 > limit:
        raise MtError(f"--text has {len(src_ids)} tokens plus EOS, more than the model's {limit} positions")
    if target is None:
        greedy = replace(tr.cfg.decode, beam_size=1, batch_tokens=limit)
        tgt_ids = translate_ids(tr.backend, [LineIds(src_ids)], greedy)[0][0].tokens
    else:
        tgt_ids = tr.tgt_tokenizer.encode([target.strip()])[0]
        if len(tgt_ids) + 1 > limit:
            raise MtError(f"--target has {len(tgt_ids)} tokens plus BOS, more than the model's {limit} positions")
    device = next(model.parameters()).device
    src = torch.tensor([src_ids + [EOS]], device=device)  # (1, S)
    tgt_in = torch.tensor([[BOS] + tgt_ids], device=device)  # (1, T)
    src_mask = padding_mask(src)
    model.eval()
    with kept_attention_weights(model):
        memory = model.encode(src, src_mask)
        encoder = [layer.self_attn.weights[0].cpu().numpy() for layer in model.encoder_layers]
        model.decode(memory, src_mask, tgt_in, target_mask(tgt_in))
        decoder = [layer.self_attn.weights[0].cpu().numpy() for layer in model.decoder_layers]
        cross = [layer.cross_attn.weights[0].cpu().numpy() for layer in model.decoder_layers]
    return AttentionMaps(_pieces(tr.src_tokenizer, src[0]), _pieces(tr.tgt_tokenizer, tgt_in[0]),
                         encoder, decoder, cross)


def _pieces(tokenizer, ids: torch.Tensor) -> list[str]:
    return [tokenizer.sp.id_to_piece(i) for i in ids.tolist()]


def select_heads(maps: AttentionMaps, layer: int, head: int | None) -> dict[str, np.ndarray]:
    """{"encoder", "decoder", "cross"}: (H, query, key) of `layer`, or (1, query, key) of `head` alone."""
    n_layers, n_heads = len(maps.encoder), maps.encoder[0].shape[0]
    if not 0 <= layer < n_layers:
        raise MtError(f"--layer {layer}: the model has {n_layers} layers (0 to {n_layers - 1})")
    if head is not None and not 0 <= head < n_heads:
        raise MtError(f"--head {head}: the model has {n_heads} heads (0 to {n_heads - 1})")
    picked = {"encoder": maps.encoder[layer], "decoder": maps.decoder[layer], "cross": maps.cross[layer]}
    return {name: w if head is None else w[head:head + 1] for name, w in picked.items()}
