"""`mt import`: a Hugging Face Marian directory (an OPUS-MT model) as an mt checkpoint, which translates,
evaluates, exports and fine-tunes (`train.init_from`) like any other.

A directory holds config.json, model.safetensors or pytorch_model.bin, source.spm, target.spm and vocab.json;
reading them needs no `transformers`. Marian's Transformer is the paper's with five differences, each a key of
mt/config.py: swish activations (model.activation), [sin | cos] positions (model.positions), a bias on the
output projection (model.output_bias), a decoder that starts from PAD's all-zero row (model.decoder_start), and
one vocabulary file in front of two sentencepiece models (tokenizer.vocab_file). What mt cannot represent is a
one-line error naming the field and its value.

A multi-target model (OPUS-MT's en-ROMANCE, ...) has a `>>xx<<` piece per target language in vocab.json: each
becomes a direction of the checkpoint (languages.token target, as mt trains them), from tokenizer_config.json's
`source_lang` when it names one language, else from `mul` (ISO 639's "multiple languages", OPUS-MT's name for a
multi-source side), so that `mt translate --target-lang fra` puts `>>fra<<` before each source.

Marian's ids are renumbered to mt's fixed ones (mt.symbols): PAD, UNK, one ordinary piece at BOS, EOS, then
the rest in Marian's order; the rows of the shared embedding and of the output bias move with them.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from mt.checkpoint import ModelPart, checkpoint_dict, load_tensors, save_checkpoint
from mt.config import LANGUAGE_CODE, Config, DecodeConfig, LanguagesConfig, ModelConfig, TokenizerConfig, config_to_dict
from mt.errors import MtError
from mt.atomic_files import read_json_object
from mt.model.transformer import build_model, sinusoidal_positions
from mt.symbols import BOS, EOS, PAD, UNK
from mt.data.tokenizer import Tokenizer, renumbered

# MarianConfig's defaults (transformers' configuration_marian.py): config.json leaves out fields at their default.
MARIAN_DEFAULTS = {
    "vocab_size": 58101, "decoder_vocab_size": None, "max_position_embeddings": 1024, "encoder_layers": 12,
    "encoder_ffn_dim": 4096, "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096,
    "decoder_attention_heads": 16, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0, "is_encoder_decoder": True,
    "activation_function": "gelu", "d_model": 1024, "dropout": 0.1, "attention_dropout": 0.0,
    "activation_dropout": 0.0, "decoder_start_token_id": 58100, "scale_embedding": False, "pad_token_id": 58100,
    "eos_token_id": 0, "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
}
# Fields whose value must be the one mt's model has (absent ones too: Bart's options Marian leaves out).
REQUIRED = {"scale_embedding": True, "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True,
            "is_encoder_decoder": True, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
            "normalize_before": False, "normalize_embedding": False, "add_final_layer_norm": False}
ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish"}
# mt has one number of heads and one FFN width for both stacks, and one vocabulary (each stack its own depth).
SAME = [("decoder_attention_heads", "encoder_attention_heads"),
        ("decoder_ffn_dim", "encoder_ffn_dim"), ("decoder_vocab_size", "vocab_size")]
FILES = ("config.json", "source.spm", "target.spm", "vocab.json")
LANGUAGE_TAG = re.compile(r"^>>.+<<$")  # >>fra<<: the target language of a multilingual model, one piece


def import_marian(directory: str | Path, output: str | Path, log=print) -> Config:
    """Write the mt checkpoint `output` of the Marian model in `directory`; returns its config."""
    directory = Path(directory)
    if not directory.is_dir():
        raise MtError(f"{directory}: no such directory")
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        raise MtError(f"{directory / missing[0]}: missing (a Hugging Face Marian directory holds "
                      f"{', '.join(FILES)} and model.safetensors or pytorch_model.bin)")
    hf = {**MARIAN_DEFAULTS, **read_json_object(directory / "config.json")}
    weights = load_weights(directory)
    cfg_model = model_config(hf, directory / "config.json", positions_layout(weights, hf, directory))
    order = marian_order(hf, _read_vocabulary(directory, hf))
    if cfg_model.decoder_start == "bos" and order[BOS][1] != hf["decoder_start_token_id"]:
        raise MtError(f"{directory / 'config.json'}: decoder_start_token_id {hf['decoder_start_token_id']!r}: mt's "
                      f"decoder starts from pad_token_id or from the first id that is not pad, eos or <unk> "
                      f"({order[BOS][1]})")
    vocabulary = [piece for piece, _ in order]
    tags = [piece for piece in vocabulary if LANGUAGE_TAG.match(piece)]
    src_tok, src_lacking = renumbered((directory / "source.spm").read_bytes(), vocabulary, tags)
    tgt_tok, tgt_lacking = renumbered((directory / "target.spm").read_bytes(), vocabulary)
    for name, lacking in (("source.spm", src_lacking), ("target.spm", tgt_lacking)):
        if lacking:
            log(f"import: {lacking} pieces of {name} are not in vocab.json; text is cut around them")
    state = mt_state(weights, [marian_id for _, marian_id in order], cfg_model)
    model = build_model(cfg_model, len(vocabulary), len(vocabulary), joint_vocab=True)
    model.load_state_dict(state)  # every tensor accounted for, in its shape
    cfg = Config(tokenizer=TokenizerConfig(type=sentencepiece_type(src_tok), vocab_size=len(vocabulary), joint=True,
                                           vocab_file="vocab.json"),
                 model=cfg_model, decode=DecodeConfig(beam_size=int(hf.get("num_beams") or DecodeConfig.beam_size)),
                 languages=target_languages(directory, tags, log))
    part = ModelPart(config=config_to_dict(cfg), model=model.state_dict(), step=0,
                     src_tokenizer=src_tok.to_tensor(), tgt_tokenizer=tgt_tok.to_tensor())
    save_checkpoint(Path(output), checkpoint_dict(part))
    return cfg


def target_languages(directory: Path, tags: list[str], log) -> LanguagesConfig:
    """The directions of a multi-target model: one per `>>xx<<` piece whose xx is a language code."""
    targets = [tag[2:-2] for tag in tags if LANGUAGE_CODE.match(tag[2:-2])]
    if not targets:
        return LanguagesConfig()
    if len(targets) < len(tags):
        log(f"import: {len(tags) - len(targets)} >>xx<< pieces are not language codes, and name no direction")
    settings = directory / "tokenizer_config.json"
    named = read_json_object(settings).get("source_lang") if settings.is_file() else None
    source = named if isinstance(named, str) and LANGUAGE_CODE.match(named) else "mul"
    return LanguagesConfig(directions=tuple(f"{source}:{t}" for t in targets), token="target")


def model_config(hf: dict, source: Path, positions: str = "concatenated") -> ModelConfig:
    """The ModelConfig of a Marian config.json (defaults filled in); a field mt cannot represent is an error."""
    if hf.get("model_type") != "marian":
        raise MtError(f"{source}: model_type {hf.get('model_type')!r}: mt imports Marian models (model_type "
                      "'marian') only")
    architectures = hf.get("architectures") or ["MarianMTModel"]
    if architectures != ["MarianMTModel"]:
        raise MtError(f"{source}: architectures {architectures!r}: mt imports MarianMTModel only")
    for key, value in REQUIRED.items():
        if key in hf and hf[key] != value:
            raise MtError(f"{source}: {key} {hf[key]!r}: mt's model has {value!r}")
    activation = ACTIVATIONS.get(hf["activation_function"])
    if activation is None:
        raise MtError(f"{source}: activation_function {hf['activation_function']!r}: mt has "
                      f"{', '.join(ACTIVATIONS)}")
    return ModelConfig(**bart_sizes(hf, source), norm="post", activation=activation, positions=positions,
                       output_bias=True,
                       decoder_start="pad" if hf["decoder_start_token_id"] == hf["pad_token_id"] else "bos")


def bart_sizes(hf: dict, source: Path) -> dict:
    """The ModelConfig fields that a config.json of the BART family (Marian's, M2M100's) gives alike: sizes,
    depths, dropouts, positions, one shared embedding; mt has one number of heads, one FFN width and one
    vocabulary for both stacks, so a config with two is an error."""
    for key, other in SAME:
        if hf.get(key) is not None and hf[key] != hf[other]:
            raise MtError(f"{source}: {key} {hf[key]!r}: mt needs it equal to {other} ({hf[other]!r})")
    if hf["d_model"] % hf["encoder_attention_heads"] or hf["d_model"] % 2:
        raise MtError(f"{source}: d_model {hf['d_model']!r}: mt needs an even multiple of encoder_attention_heads")
    return dict(d_model=hf["d_model"], d_ff=hf["encoder_ffn_dim"], n_heads=hf["encoder_attention_heads"],
                n_layers=hf["encoder_layers"], encoder_layers=hf["encoder_layers"], decoder_layers=hf["decoder_layers"],
                dropout=float(hf["dropout"]), attention_dropout=float(hf["attention_dropout"]),
                activation_dropout=float(hf["activation_dropout"]), share_embeddings=True,
                max_positions=hf["max_position_embeddings"])


def marian_order(hf: dict, vocab: dict[str, int]) -> list[tuple[str, int]]:
    """(piece, Marian id) in mt's id order: PAD, UNK, Marian's first ordinary piece (at BOS, an ordinary id
    here), EOS, then the others in Marian's order."""
    by_id = {i: piece for piece, i in vocab.items()}
    pad, eos, unk = hf["pad_token_id"], hf["eos_token_id"], vocab.get("<unk>")
    if unk is None:
        raise MtError("vocab.json: no <unk> piece")
    others = [i for i in range(len(by_id)) if i not in (pad, eos, unk)]
    ids = {PAD: pad, UNK: unk, BOS: others[0], EOS: eos}
    order = [ids[i] for i in range(len(ids))] + others[1:]
    return [(by_id[i], i) for i in order]


def depths(cfg: ModelConfig) -> tuple[int, int]:
    """(encoder layers, decoder layers) of a model: the one place both directions read them."""
    return cfg.encoder_layers, cfg.decoder_layers


# Each stack's sublayers: {Marian's attention: mt's}, {Marian's layer norm: mt's residual block}.
STACKS = (("encoder", {"self_attn": "self_attn"}, {"self_attn_layer_norm": "attn_block"}),
          ("decoder", {"self_attn": "self_attn", "encoder_attn": "cross_attn"},
           {"self_attn_layer_norm": "self_block", "encoder_attn_layer_norm": "cross_block"}))


def layer_names(cfg: ModelConfig) -> list[tuple[str, tuple[str, ...]]]:
    """(mt's name, Marian's names) of every tensor of the layers, used both ways (`mt import`, and `mt export
    --format huggingface`): mt's tensor is Marian's ones concatenated (q, k and v stacked into `in_proj`)."""
    names = []
    for (stack, attentions, norms), n in zip(STACKS, depths(cfg)):
        for i in range(n):
            names += _layer_names(f"{stack}.layers.{i}", f"{stack}_layers.{i}", attentions, norms)
    return names


def _layer_names(hf: str, mt: str, attentions: dict[str, str], norms: dict[str, str]) -> list:
    names = []
    for kind in ("weight", "bias"):
        for theirs, ours in attentions.items():
            names.append((f"{mt}.{ours}.in_proj.{kind}", tuple(f"{hf}.{theirs}.{p}_proj.{kind}" for p in "qkv")))
            names.append((f"{mt}.{ours}.out_proj.{kind}", (f"{hf}.{theirs}.out_proj.{kind}",)))
        for theirs, ours in {**norms, "final_layer_norm": "ffn_block"}.items():
            names.append((f"{mt}.{ours}.norm.{kind}", (f"{hf}.{theirs}.{kind}",)))
        for theirs, ours in (("fc1", "w1"), ("fc2", "w2")):
            names.append((f"{mt}.ffn.{ours}.{kind}", (f"{hf}.{theirs}.{kind}",)))
    return names


def mt_state(weights: dict[str, torch.Tensor], order: list[int], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """mt's Transformer state from a MarianMTModel state dict: the q, k and v projections of each attention
    stacked into its `in_proj`, the vocabulary's rows in mt's order."""
    w = {k.removeprefix("model."): v.float() for k, v in weights.items()}
    embedding = next((w[k] for k in ("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
                                     "lm_head.weight") if k in w), None)
    if embedding is None or "final_logits_bias" not in w:
        raise MtError("the weights hold no shared.weight or no final_logits_bias: not a MarianMTModel's")
    rows = torch.tensor(order)
    state = {"src_embed.tokens.weight": embedding[rows], "tgt_embed.tokens.weight": embedding[rows],
             "output_bias": w["final_logits_bias"].reshape(-1)[rows]}
    for ours, theirs in layer_names(cfg):
        state[ours] = torch.cat([w[name] for name in theirs])
    return state


def positions_layout(weights: dict[str, torch.Tensor], hf: dict, source: Path) -> str:
    """model.positions of the table the weights store (`mt export --format huggingface` writes it), else
    concatenated: the table MarianMTModel makes when the weights hold none (OPUS-MT's)."""
    table = weights.get("model.encoder.embed_positions.weight")
    if table is None:
        return "concatenated"
    for layout in ("concatenated", "interleaved"):
        if torch.allclose(table.float(), sinusoidal_positions(hf["max_position_embeddings"], hf["d_model"], layout),
                          atol=1e-5):
            return layout
    raise MtError(f"{source}: model.encoder.embed_positions.weight is neither sinusoidal table mt has "
                  "(model.positions: interleaved, concatenated)")


def load_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The state dict in model.safetensors (or the shards its index names), else in pytorch_model.bin."""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(read_json_object(index).get("weight_map", {}).values()))
    elif (directory / "model.safetensors").is_file():
        files = ["model.safetensors"]
    elif (directory / "pytorch_model.bin").is_file():
        return load_tensors(directory / "pytorch_model.bin")
    else:
        raise MtError(f"{directory}: no model.safetensors or pytorch_model.bin")
    from safetensors.torch import load_file

    weights = {}
    for name in files:
        try:
            weights.update(load_file(directory / name))
        except (OSError, ValueError, RuntimeError) as e:
            raise MtError(f"{directory / name}: not readable safetensors ({str(e).splitlines()[0]})") from None
    return weights


def _read_vocabulary(directory: Path, hf: dict) -> dict[str, int]:
    config = directory / "tokenizer_config.json"
    if config.is_file() and read_json_object(config).get("separate_vocabs"):
        raise MtError(f"{config}: separate_vocabs true: mt's shared embeddings need one vocabulary")
    vocab = read_json_object(directory / "vocab.json")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise MtError(f"{directory / 'vocab.json'}: its ids are not 0 to {len(vocab) - 1}, each once")
    if len(vocab) != hf["vocab_size"]:
        raise MtError(f"{directory / 'config.json'}: vocab_size {hf['vocab_size']!r}: vocab.json has "
                      f"{len(vocab)} pieces")
    return vocab


def sentencepiece_type(tok: Tokenizer) -> str:
    from sentencepiece import sentencepiece_model_pb2 as pb

    kind = pb.ModelProto.FromString(tok.model_proto).trainer_spec.model_type
    return "bpe" if kind == pb.TrainerSpec.ModelType.BPE else "unigram"
