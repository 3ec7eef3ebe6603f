"""`mt export`: a checkpoint as a CTranslate2 model directory, which `mt translate -c DIR` decodes with.

`export_ctranslate2` fills CTranslate2's own TransformerSpec (as its fairseq and OpenNMT-py converters do) and
writes, atomically, CTranslate2's model.bin, config.json and vocabularies, the sentencepiece model(s)
(source.spm, target.spm) and mt.yaml (the checkpoint's config, for the decode defaults).
"""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

from mt.decoding.attention_alignment import alignment_layer
from mt.decoding.model_backend import load_model_translator
from mt.config import config_to_dict
from mt.decoding.ct2_backend import MARKER, import_ctranslate2
from mt.decoding.ct2_model_bin import INT8_COMPUTE, in_int8_limit, model_bin_bytes, parse_model_bin
from mt.errors import MtError
from mt.atomic_files import atomic_write_dir
from mt.interop.export_folders import check_replaceable
from mt.model.transformer import Transformer
from mt.symbols import EOS, PAD, UNK
from mt.data.tokenizer import Tokenizer

LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which mt's model uses
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16",
                 "float32")
# An int8 export is saved in its float type, then its weights are quantized by mt (`_weights_in_int8`)
FLOATS_OF = {"int8": "float32", "int8_float32": "float32", "int8_float16": "float16", "int8_bfloat16": "bfloat16"}


def _linear(spec, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    spec.weight = weight.detach().float().numpy()
    if bias is not None:
        spec.bias = bias.detach().float().numpy()


def _layer_norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = norm.weight.detach().numpy(), norm.bias.detach().numpy()


def _attention(spec, attn, self_attention: bool) -> None:
    """Self-attention: CTranslate2's linear_0 is the fused (3D, D) q/k/v projection, as mt's `in_proj`;
    cross-attention: linear_0 is q (the first D rows) and linear_1 the fused k/v (the other 2D rows)."""
    d, w, b = attn.d_model, attn.in_proj.weight, attn.in_proj.bias
    if self_attention:
        _linear(spec.linear[0], w, b)
    else:
        _linear(spec.linear[0], w[:d], b[:d])
        _linear(spec.linear[1], w[d:], b[d:])
    _linear(spec.linear[-1], attn.out_proj.weight, attn.out_proj.bias)


def _ffn(spec, layer) -> None:
    _layer_norm(spec.layer_norm, layer.ffn_block.norm)
    _linear(spec.linear_0, layer.ffn.w1.weight, layer.ffn.w1.bias)
    _linear(spec.linear_1, layer.ffn.w2.weight, layer.ffn.w2.bias)


def _embeddings(spec, embed, embeddings_spec, weight) -> None:
    embeddings_spec.weight = weight
    spec.scale_embeddings = True  # times sqrt(d_model) (3.4)
    # CTranslate2's own sinusoids put sin and cos in two halves; mt interleaves them (3.5), or not
    # (model.positions): give the table.
    spec.position_encodings.encodings = embed.positions.numpy()


def exported_rows(model: Transformer) -> slice:
    """The vocabulary rows an export keeps: all, or all but PAD's where the decoder starts from PAD's zero row
    (model.decoder_start: pad), which CTranslate2 does with a flag of its own; then, as with its own Marian
    converter, CTranslate2 never outputs PAD (mt/decoding/ct2_backend.py maps pieces, not ids)."""
    return slice(PAD + 1, None) if model.cfg.decoder_start == "pad" else slice(None)


def transformer_spec(model: Transformer):
    """mt's Transformer as a CTranslate2 TransformerSpec (post-LN or pre-LN, ReLU or swish, tied or separate
    output, with or without an output bias, starting from BOS or from a zero embedding)."""
    from ctranslate2.specs import common_spec
    from ctranslate2.specs import transformer_spec as ts

    cfg = model.cfg
    pre = cfg.norm == "pre"
    activation = common_spec.Activation.SWISH if cfg.activation == "swish" else common_spec.Activation.RELU
    # Attention for word alignment: mt's layer (mt/decoding/attention_alignment.py) counted from the end, all heads averaged (0).
    spec = ts.TransformerSpec.from_config((cfg.encoder_layers, cfg.decoder_layers), cfg.n_heads, pre_norm=pre,
                                          activation=activation, alignment_heads=0,
                                          alignment_layer=alignment_layer(cfg.decoder_layers) - cfg.decoder_layers)
    rows = exported_rows(model)
    src_weight = model.src_embed.tokens.weight.detach()[rows].numpy()
    tgt_weight = src_weight if model.tgt_embed.tokens is model.src_embed.tokens else \
        model.tgt_embed.tokens.weight.detach()[rows].numpy()  # one array when tied: saved once
    _embeddings(spec.encoder, model.src_embed, spec.encoder.embeddings[0], src_weight)
    _embeddings(spec.decoder, model.tgt_embed, spec.decoder.embeddings, tgt_weight)
    spec.decoder.start_from_zero_embedding = cfg.decoder_start == "pad"
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers):
        _attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        _layer_norm(layer_spec.self_attention.layer_norm, layer.attn_block.norm)
        _ffn(layer_spec.ffn, layer)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers):
        _attention(layer_spec.self_attention, layer.self_attn, self_attention=True)
        _layer_norm(layer_spec.self_attention.layer_norm, layer.self_block.norm)
        _attention(layer_spec.attention, layer.cross_attn, self_attention=False)
        _layer_norm(layer_spec.attention.layer_norm, layer.cross_block.norm)
        _ffn(layer_spec.ffn, layer)
    if pre:
        _layer_norm(spec.encoder.layer_norm, model.encoder_norm)
        _layer_norm(spec.decoder.layer_norm, model.decoder_norm)
    if model.output is None:
        spec.decoder.projection.weight = tgt_weight  # the same array as the embedding: saved once
    else:
        _linear(spec.decoder.projection, model.output.weight[rows])
    if model.output_bias is not None:
        spec.decoder.projection.bias = model.output_bias.detach()[rows].float().numpy()
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    spec.config.add_source_eos = True  # mt appends EOS to every source
    return spec


def export_ctranslate2(checkpoint: str | Path, output_dir: str | Path, quantization: str | None = None,
                       force: bool = False, raw_weights: bool = False) -> Path:
    """Write the CTranslate2 model directory `output_dir`: built in a temporary directory beside it, then
    renamed, so it is complete or absent. `quantization` is one of QUANTIZATIONS (None keeps float32). The
    weights are the checkpoint's averaged ones when it has them, unless `raw_weights`."""
    import_ctranslate2()
    output_dir = Path(output_dir)
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise MtError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}, got '{quantization}'")
    check_replaceable(output_dir, force)
    tr = load_model_translator(checkpoint, "cpu", raw_weights=raw_weights)
    spec = transformer_spec(tr.backend.model)
    rows = exported_rows(tr.backend.model)
    spec.register_source_vocabulary(_pieces(tr.src_tokenizer)[rows])
    spec.register_target_vocabulary(_pieces(tr.tgt_tokenizer)[rows])
    spec.config.unk_token, spec.config.eos_token = (tr.tgt_tokenizer.sp.id_to_piece(i) for i in (UNK, EOS))
    if tr.backend.model.cfg.decoder_start in ("pad", "eos"):  # pad: any piece, the decoder starts from zeros
        spec.config.decoder_start_token = spec.config.eos_token
    spec.validate()
    spec.optimize(quantization=FLOATS_OF.get(quantization, quantization))

    def write(folder: Path) -> None:
        spec.save(str(folder))
        if quantization in INT8_COMPUTE:
            _weights_in_int8(folder / "model.bin")
        (folder / "source.spm").write_bytes(tr.src_tokenizer.model_proto)
        (folder / "target.spm").write_bytes(tr.tgt_tokenizer.model_proto)
        (folder / MARKER).write_text(yaml.safe_dump(config_to_dict(tr.cfg), sort_keys=False), encoding="utf-8")

    atomic_write_dir(output_dir, write)
    return output_dir


def _weights_in_int8(path: Path) -> None:
    """Quantize the weight matrices of a float model.bin to int8 in 7 bits (-63..63), which CTranslate2 decodes
    without saturating on every CPU (mt/decoding/ct2_model_bin.py), instead of its converter's 8 bits."""
    path.write_bytes(model_bin_bytes(in_int8_limit(parse_model_bin(path.read_bytes()))))


def _pieces(tok: Tokenizer) -> list[str]:
    return [tok.sp.id_to_piece(i) for i in range(len(tok))]
