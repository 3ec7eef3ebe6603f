"""`mt import` of a CTranslate2 model directory (an mt export, an Argos package's model/, or what CTranslate2's
converters write for OpenNMT-py, fairseq or Marian models) as an mt checkpoint that translates and fine-tunes.

The Transformer in model.bin (mt/interop/ctranslate2_files.py reads it) is mapped onto mt's: CTranslate2's
fused q/k/v (self-attention) and q + fused k/v (cross-attention) are mt's `in_proj`; its options become
ModelConfig keys (pre/post norm, ReLU or swish, the position table's layout, tied or separate output, an output
bias, a decoder starting from a zero embedding). Anything else in the file (relative positions, alibi, extra
layer norms, several source embeddings, ...) is refused in one line naming the variable. Vocabularies are put in
mt's id order (PAD, UNK, BOS, EOS first) and the sentencepiece model(s) renumbered to them, as `mt import` of a
Marian model does (mt/interop/marian.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from mt.checkpoint import ModelPart, checkpoint_dict, save_checkpoint
from mt.config import Config, DataConfig, ModelConfig, TokenizerConfig, config_to_dict
from mt.data.tokenizer import Tokenizer, renumbered
from mt.errors import MtError
from mt.interop.ctranslate2_files import Ct2Model, read_ct2_model
from mt.interop.marian import sentencepiece_type
from mt.model.transformer import build_model, sinusoidal_positions

LAYER_NORM_EPS = 1e-5  # mt's nn.LayerNorm
ACTIVATIONS = {0: "relu", 2: "swish"}  # CTranslate2's Activation ids mt has (RELU, SWISH)
ACTIVATION_NAMES = ("ReLU", "GELUTanh", "swish", "GELU", "GELUSigmoid", "tanh", "sigmoid")
PAD_PIECES = ("<pad>", "<blank>")  # sentencepiece's and fairseq's; OpenNMT's
# Flags that change nothing at these values; any other value, and any variable not read here, is refused.
NEUTRAL = {"alibi": 0, "alibi_use_positive_positions": 0, "scale_alibi": 0, "multi_query_attention": 0,
           "embeddings_merge": None, "alignment_heads": None, "alignment_layer": None}


def import_ctranslate2(directory: Path, output: Path, log=print, languages: tuple[str, str] | None = None) -> Config:
    """Write the mt checkpoint `output` of the CTranslate2 model in `directory`; returns its config, which records
    `languages` (an Argos package's) as data.src_lang and data.tgt_lang."""
    model = read_ct2_model(directory)
    if model.spec != "TransformerSpec":
        raise MtError(f"{directory / 'model.bin'}: a {model.spec}: mt imports encoder-decoder Transformers "
                      "(TransformerSpec) only")
    _check_config(model.config, directory / "config.json", log)
    v, path = dict(model.variables), directory / "model.bin"
    sides = (("source", model.source_vocabulary), ("target", model.target_vocabulary))
    try:
        cfg_model = _model_config(v, path)
        orders = [_order(vocabulary, model.config, side, cfg_model, directory) for side, vocabulary in sides]
        state = _state(v, cfg_model, model, *orders, path)
    except KeyError as e:
        raise MtError(f"{path}: no variable {e}: not a Transformer mt can read") from None
    src_tok, tgt_tok = (_tokenizer(spm, order, side, log) for spm, order, (side, _) in
                        zip(_sentencepiece_models(directory), orders, sides))
    # One vocabulary (tokenizer.joint) shares the source embedding with the target's, as the file must then do.
    embeddings = state["src_embed.tokens.weight"], state["tgt_embed.tokens.weight"]
    joint = src_tok.model_proto == tgt_tok.model_proto and (not cfg_model.share_embeddings
                                                            or torch.equal(*embeddings))
    renumbered_ = any(order != _spm_pieces(tok) for order, tok in zip(orders, (src_tok, tgt_tok)))
    cfg = Config(tokenizer=TokenizerConfig(type=sentencepiece_type(src_tok), vocab_size=len(orders[1]), joint=joint,
                                           vocab_file=_vocabulary_name(model) if renumbered_ else None),
                 model=cfg_model, data=DataConfig(src_lang=languages[0], tgt_lang=languages[1]) if languages
                 else DataConfig())
    net = build_model(cfg_model, len(orders[0]), len(orders[1]), joint_vocab=joint)
    net.load_state_dict(state)  # every tensor accounted for, in its shape
    part = ModelPart(config=config_to_dict(cfg), model=net.state_dict(), step=0,
                     src_tokenizer=src_tok.to_tensor(), tgt_tokenizer=tgt_tok.to_tensor())
    save_checkpoint(Path(output), checkpoint_dict(part))
    return cfg


def _vocabulary_name(model: Ct2Model) -> str:
    shared = model.source_vocabulary == model.target_vocabulary
    return "shared_vocabulary.json" if shared else "source_vocabulary.json, target_vocabulary.json"


def _check_config(config: dict, path: Path, log) -> None:
    if config.get("add_source_bos", False):
        raise MtError(f"{path}: add_source_bos true: mt's sources start without BOS")
    # add_source_eos false says only that EOS is the caller's to add, as Hugging Face's tokenizers do: mt always
    # adds it (docs/pretrained.md says what that means for OpenNMT-py's models, trained without one).
    if config.get("multi_query_attention", False):
        raise MtError(f"{path}: multi_query_attention true: mt's attention has as many key/value heads as queries")
    eps = config.get("layer_norm_epsilon")  # None: not stated (Hugging Face's converter)
    if eps is not None and abs(eps - LAYER_NORM_EPS) > 1e-12:
        log(f"import: {path}: layer_norm_epsilon {eps:g}; mt's layer norms use {LAYER_NORM_EPS:g}, so scores "
            "may differ in the last digits")


def _model_config(v: dict, path: Path) -> ModelConfig:
    """The ModelConfig the variables describe; each variable read is taken out of `v`, and what is left must be a
    flag at a value that changes nothing."""
    stacks = {stack: _count_layers(v, stack) for stack in ("encoder", "decoder")}
    heads = {v.pop(f"{stack}/num_heads") for stack in stacks}
    norms = {v.pop(f"{stack}/pre_norm") for stack in stacks}
    activations = {v.pop(f"{stack}/activation") for stack in stacks}
    if len(heads) > 1 or len(norms) > 1 or len(activations) > 1:
        raise MtError(f"{path}: the encoder and decoder differ in heads, norm placement or activation; mt's "
                      "stacks share them")
    activation = activations.pop()
    if activation not in ACTIVATIONS:
        name = ACTIVATION_NAMES[activation] if 0 <= activation < len(ACTIVATION_NAMES) else activation
        raise MtError(f"{path}: activation {name}: mt has ReLU and swish")
    embedding = v["decoder/embeddings/weight"]
    table = v.pop("encoder/position_encodings/encodings", None)
    if table is None:
        raise MtError(f"{path}: encoder/position_encodings: absent (relative positions, or CTranslate2's own "
                      "OpenNMT-tf sinusoids): mt's model has a sinusoidal table of its own")
    d_ff = v["encoder/layer_0/ffn/linear_0/weight"].shape[0]
    cfg = ModelConfig(d_model=embedding.shape[1], d_ff=d_ff, n_heads=heads.pop(), n_layers=stacks["encoder"],
                      encoder_layers=stacks["encoder"], decoder_layers=stacks["decoder"],
                      norm="pre" if norms.pop() else "post", max_positions=table.shape[0],
                      activation=ACTIVATIONS[activation], positions=_layout(table, path),
                      share_embeddings=torch.equal(v["decoder/projection/weight"], embedding),
                      output_bias="decoder/projection/bias" in v,
                      decoder_start="pad" if v.pop("decoder/start_from_zero_embedding", 0) else "bos")
    for stack in stacks:
        scale = v.pop(f"{stack}/scale_embeddings", 1)  # 1 (true): times sqrt(depth); a float: times that
        if not (scale is True or (isinstance(scale, int) and scale == 1) or
                (isinstance(scale, float) and abs(scale - cfg.d_model ** 0.5) < 1e-4)):
            raise MtError(f"{path}: {stack}/scale_embeddings {scale!r}: mt multiplies embeddings by sqrt(d_model)")
    decoder_table = v.pop("decoder/position_encodings/encodings", None)
    if decoder_table is None or not torch.equal(decoder_table, table):
        raise MtError(f"{path}: decoder/position_encodings: not the encoder's table; mt's stacks share one")
    return cfg


def _count_layers(v: dict, stack: str) -> int:
    return len({m.group(1) for name in v if (m := re.match(rf"{stack}/layer_(\d+)/", name))})


def _layout(table: torch.Tensor, path: Path) -> str:
    for layout in ("interleaved", "concatenated"):
        if torch.allclose(table, sinusoidal_positions(*table.shape, layout), atol=1e-4):
            return layout
    raise MtError(f"{path}: encoder/position_encodings: neither sinusoidal table mt has (model.positions: "
                  "interleaved, concatenated); fairseq's offset table is not one")


def _order(vocabulary: list[str], config: dict, side: str, cfg: ModelConfig, directory: Path) -> list[str]:
    """The vocabulary in mt's id order: PAD, UNK, BOS, EOS, then the others in CTranslate2's order. Where the
    decoder starts from a zero embedding the export may have left PAD out: it comes back (its row all zeros)."""
    unk, eos = config.get("unk_token", "<unk>"), config.get("eos_token", "</s>")
    start = config.get("decoder_start_token", "<s>")
    pad = next((p for p in PAD_PIECES if p in vocabulary), None)
    for piece, what in ((unk, "unk_token"), (eos, "eos_token")):
        if piece not in vocabulary:
            raise MtError(f"{directory / 'config.json'}: {what} {piece!r} is not in the {side} vocabulary")
    if pad is None and not (side == "source" or cfg.decoder_start == "pad"):
        raise MtError(f"{directory}: the target vocabulary has no {' or '.join(PAD_PIECES)} piece, which mt's "
                      "model needs")
    others = [p for p in vocabulary if p not in (pad, unk, eos)]
    bos = start if side == "target" and cfg.decoder_start == "bos" else ("<s>" if "<s>" in others else others[0])
    if bos not in others:
        raise MtError(f"{directory / 'config.json'}: decoder_start_token {bos!r} is not in the target vocabulary")
    return [pad or "<pad>", unk, bos, eos] + [p for p in others if p != bos]


def _sentencepiece_models(directory: Path) -> tuple[bytes, bytes]:
    """(source, target) sentencepiece models: source.spm and target.spm beside model.bin (mt's export, a
    converted Marian model), or one sentencepiece.model there or one folder up (an Argos package)."""
    if (directory / "source.spm").is_file() and (directory / "target.spm").is_file():
        return (directory / "source.spm").read_bytes(), (directory / "target.spm").read_bytes()
    for folder in (directory, directory.parent):
        if (folder / "sentencepiece.model").is_file():
            model = (folder / "sentencepiece.model").read_bytes()
            return model, model
    raise MtError(f"{directory}: no source.spm and target.spm, nor a sentencepiece.model here or one folder up: "
                  "mt imports models with sentencepiece vocabularies (put the model's files beside model.bin)")


def _tokenizer(model_proto: bytes, order: list[str], side: str, log) -> Tokenizer:
    """The sentencepiece model itself where its ids are already `order`, else renumbered to it."""
    try:
        own = Tokenizer(model_proto)
    except RuntimeError as e:
        raise MtError(f"the {side} sentencepiece model is not readable ({str(e).splitlines()[0]})") from None
    if _spm_pieces(own) == order:
        return own
    tok, lacking = renumbered(model_proto, order)
    if lacking:
        log(f"import: {lacking} pieces of the {side} sentencepiece model are not in its vocabulary; text is cut "
            "around them")
    return tok


def _spm_pieces(tok: Tokenizer) -> list[str]:
    return [tok.sp.id_to_piece(i) for i in range(len(tok))]


def _state(v: dict, cfg: ModelConfig, model: Ct2Model, src_order: list[str], tgt_order: list[str],
           path: Path) -> dict:
    """mt's state dict from the variables (each one read taken out of `v`; anything left is refused)."""
    src_rows, tgt_rows = v.pop("encoder/embeddings_0/weight", None), v.pop("decoder/embeddings/weight")
    if src_rows is None:
        src_rows = v.pop("encoder/embeddings/weight")
    src, tgt = model.source_vocabulary, model.target_vocabulary
    state = {"src_embed.tokens.weight": _rows(src_rows, src, src_order),
             "tgt_embed.tokens.weight": _rows(tgt_rows, tgt, tgt_order)}
    projection = v.pop("decoder/projection/weight")
    if not cfg.share_embeddings:
        state["output.weight"] = _rows(projection, tgt, tgt_order)
    if cfg.output_bias:
        state["output_bias"] = _rows(v.pop("decoder/projection/bias"), tgt, tgt_order)
    for i in range(cfg.encoder_layers):
        at, mt = f"encoder/layer_{i}", f"encoder_layers.{i}"
        _attention(state, v, f"{at}/self_attention", f"{mt}.self_attn", f"{mt}.attn_block", fused=True)
        _ffn(state, v, at, mt)
    for i in range(cfg.decoder_layers):
        at, mt = f"decoder/layer_{i}", f"decoder_layers.{i}"
        _attention(state, v, f"{at}/self_attention", f"{mt}.self_attn", f"{mt}.self_block", fused=True)
        _attention(state, v, f"{at}/attention", f"{mt}.cross_attn", f"{mt}.cross_block", fused=False)
        _ffn(state, v, at, mt)
    if cfg.norm == "pre":
        _norm(state, v, "encoder/layer_norm", "encoder_norm")
        _norm(state, v, "decoder/layer_norm", "decoder_norm")
    _refuse_rest(v, path)
    return state


def _rows(weight: torch.Tensor, vocabulary: list[str], order: list[str]) -> torch.Tensor:
    """`weight`'s rows (one per piece of `vocabulary`) in mt's `order`; a piece the file lacks (PAD) gets a zero
    row."""
    index = {piece: i for i, piece in enumerate(vocabulary)}
    rows = torch.zeros(len(order), *weight.shape[1:])
    for i, piece in enumerate(order):
        if piece in index:
            rows[i] = weight[index[piece]]
    return rows


def _attention(state: dict, v: dict, at: str, mt: str, block: str, fused: bool) -> None:
    linears = [(v.pop(f"{at}/linear_{k}/weight"), v.pop(f"{at}/linear_{k}/bias")) for k in range(2 if fused else 3)]
    in_proj = linears[0] if fused else tuple(torch.cat(pair) for pair in zip(linears[0], linears[1]))
    state[f"{mt}.in_proj.weight"], state[f"{mt}.in_proj.bias"] = in_proj
    state[f"{mt}.out_proj.weight"], state[f"{mt}.out_proj.bias"] = linears[-1]
    _norm(state, v, f"{at}/layer_norm", f"{block}.norm")


def _ffn(state: dict, v: dict, at: str, mt: str) -> None:
    for k, name in ((0, "w1"), (1, "w2")):
        state[f"{mt}.ffn.{name}.weight"] = v.pop(f"{at}/ffn/linear_{k}/weight")
        state[f"{mt}.ffn.{name}.bias"] = v.pop(f"{at}/ffn/linear_{k}/bias")
    _norm(state, v, f"{at}/ffn/layer_norm", f"{mt}.ffn_block.norm")


def _norm(state: dict, v: dict, at: str, mt: str) -> None:
    state[f"{mt}.weight"], state[f"{mt}.bias"] = v.pop(f"{at}/gamma"), v.pop(f"{at}/beta")


def _refuse_rest(v: dict, path: Path) -> None:
    for name, value in sorted(v.items()):
        flag = name.rsplit("/", 1)[-1]
        if flag in NEUTRAL and (NEUTRAL[flag] is None or value == NEUTRAL[flag]):
            continue
        what = f"{value!r}" if not isinstance(value, torch.Tensor) else f"a {tuple(value.shape)} tensor"
        raise MtError(f"{path}: {name} ({what}): a part or option mt's Transformer does not have")
