"""`mt import`: a Hugging Face M2M100 directory (Fan et al. 2021; facebook/m2m100_418M's layout) as an mt
checkpoint that translates between any two of its languages, evaluates, serves and fine-tunes.

A directory holds config.json, model.safetensors or pytorch_model.bin, vocab.json, sentencepiece.bpe.model and
tokenizer_config.json. M2M100's Transformer is the paper's with four differences, each a key of mt/config.py:
layer norm before each sublayer and at the end of each stack (model.norm pre), fairseq's position table
(model.positions fairseq), a decoder that starts from EOS (model.decoder_start eos), and languages named by
tokens: `__de__` before the source, `__fr__` forced as the first output (languages.token m2m100). Its ids are
renumbered to mt's fixed ones (mt.symbols): PAD, UNK, BOS (<s>), EOS, then the rest in M2M100's order: vocab.json's
pieces, one token per language (the order of transformers' FAIRSEQ_LANGUAGE_CODES, which tokenizer_config.json
names), then M2M100's made-up words up to config.json's vocab_size.

NLLB-200's models (NLLB Team 2022; facebook/nllb-200-distilled-600M's layout) are M2M100ForConditionalGeneration
with another tokenizer, which tokenizer_config.json names (NllbTokenizer): no vocab.json, but tokenizer.json, whose
BPE vocabulary and added tokens give each id its piece (sentencepiece.bpe.model's pieces one place up, then the
language codes and <mask>), and the codes themselves as the language tokens (`deu_Latn` before the source,
`fra_Latn` forced first: languages.token nllb).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from mt.checkpoint import ModelPart, checkpoint_dict, save_checkpoint
from mt.config import Config, DecodeConfig, LanguagesConfig, ModelConfig, TokenizerConfig, config_to_dict
from mt.data.languages import language_piece, m2m100_token
from mt.data.tokenizer import renumbered
from mt.errors import MtError, needs
from mt.atomic_files import read_json_object
from mt.interop.marian import bart_sizes, layer_names, load_weights, sentencepiece_type
from mt.model.transformer import build_model

# M2M100Config's defaults (transformers' configuration_m2m_100.py): config.json leaves out fields at their default.
M2M100_DEFAULTS = {
    "vocab_size": 128112, "max_position_embeddings": 1024, "encoder_layers": 12, "encoder_ffn_dim": 4096,
    "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096, "decoder_attention_heads": 16,
    "is_encoder_decoder": True, "activation_function": "relu", "d_model": 1024, "dropout": 0.1,
    "attention_dropout": 0.1, "activation_dropout": 0.0, "decoder_start_token_id": 2, "scale_embedding": True,
    "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "tie_word_embeddings": True,
}
# Fields whose value must be the one mt's model of M2M100 has.
REQUIRED = {"scale_embedding": True, "tie_word_embeddings": True, "is_encoder_decoder": True, "pad_token_id": 1,
            "bos_token_id": 0, "eos_token_id": 2, "decoder_start_token_id": 2, "activation_function": "relu"}
FILES = ("config.json", "vocab.json", "sentencepiece.bpe.model")
NLLB_FILES = ("config.json", "tokenizer.json", "sentencepiece.bpe.model")
NLLB_CODE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}")  # an NLLB language code, e.g. deu_Latn
SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}  # M2M100's ids of its special pieces


def is_m2m100(directory: Path) -> bool:
    return read_json_object(directory / "config.json").get("model_type") == "m2m_100"


def import_m2m100(directory: Path, output: Path, log=print) -> Config:
    """Write the mt checkpoint `output` of the M2M100 model in `directory`; returns its config."""
    nllb = is_nllb(directory)
    files = NLLB_FILES if nllb else FILES
    missing = [name for name in files if not (directory / name).is_file()]
    if missing:
        raise MtError(f"{directory / missing[0]}: missing (an {'NLLB' if nllb else 'M2M100'} directory holds "
                      f"{', '.join(files)} and model.safetensors or pytorch_model.bin)")
    hf = {**M2M100_DEFAULTS, **read_json_object(directory / "config.json")}
    cfg_model = model_config(hf, directory / "config.json")
    if nllb:
        pieces, codes = nllb_pieces(directory, hf["vocab_size"])
    else:
        codes = language_codes(directory)
        pieces = m2m100_pieces(directory, codes, hf["vocab_size"])
    token = "nllb" if nllb else "m2m100"
    order = [SPECIALS[p] for p in ("<pad>", "<unk>", "<s>", "</s>")] + list(range(len(SPECIALS), len(pieces)))
    vocabulary = [pieces[i] for i in order]
    tok, lacking = renumbered((directory / "sentencepiece.bpe.model").read_bytes(), vocabulary,
                              [language_piece(token, code) for code in codes], hidden=["<mask>"] if nllb else [])
    if lacking:
        log(f"import: {lacking} pieces of sentencepiece.bpe.model are not in the model's vocabulary; text is cut "
            "around them")
    model = build_model(cfg_model, len(vocabulary), len(vocabulary), joint_vocab=True)
    model.load_state_dict(mt_state(load_weights(directory), order, cfg_model))  # every tensor, in its shape
    cfg = Config(tokenizer=TokenizerConfig(type=sentencepiece_type(tok), vocab_size=len(vocabulary), joint=True),
                 model=cfg_model, decode=DecodeConfig(beam_size=int(hf.get("num_beams") or DecodeConfig.beam_size)),
                 languages=LanguagesConfig(token=token, codes=tuple(codes)))
    part = ModelPart(config=config_to_dict(cfg), model=model.state_dict(), step=0, src_tokenizer=tok.to_tensor(),
                     tgt_tokenizer=tok.to_tensor())
    save_checkpoint(Path(output), checkpoint_dict(part))
    _warn_of_licence(directory, log)
    return cfg


def is_nllb(directory: Path) -> bool:
    """Whether tokenizer_config.json names NLLB's tokenizer (NllbTokenizer, NllbTokenizerFast)."""
    config = directory / "tokenizer_config.json"
    return config.is_file() and str(read_json_object(config).get("tokenizer_class", "")).startswith("Nllb")


def model_config(hf: dict, source: Path) -> ModelConfig:
    """The ModelConfig of an M2M100 config.json (defaults filled in); a field mt cannot represent is an error."""
    architectures = hf.get("architectures") or ["M2M100ForConditionalGeneration"]
    if architectures != ["M2M100ForConditionalGeneration"]:
        raise MtError(f"{source}: architectures {architectures!r}: mt imports M2M100ForConditionalGeneration only")
    for key, value in REQUIRED.items():
        if hf[key] != value:
            raise MtError(f"{source}: {key} {hf[key]!r}: mt's model of M2M100 has {value!r}")
    return ModelConfig(**bart_sizes(hf, source), norm="pre", activation="relu", positions="fairseq",
                       output_bias=False, decoder_start="eos")


def language_codes(directory: Path) -> list[str]:
    """The languages of the model, in the order of their tokens' ids: transformers' list that
    tokenizer_config.json's language_codes names (m2m100 by default)."""
    needs("transformers", "transformers", "hf")
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    config = directory / "tokenizer_config.json"
    name = read_json_object(config).get("language_codes", "m2m100") if config.is_file() else "m2m100"
    if name not in FAIRSEQ_LANGUAGE_CODES:
        raise MtError(f"{config}: language_codes {name!r}: transformers knows {', '.join(FAIRSEQ_LANGUAGE_CODES)}")
    return list(FAIRSEQ_LANGUAGE_CODES[name])


def m2m100_pieces(directory: Path, codes: list[str], vocab_size: int) -> list[str]:
    """M2M100's piece of each id: vocab.json's, then the language tokens, then made-up words to vocab_size."""
    pieces = _by_id(read_json_object(directory / "vocab.json"), directory / "vocab.json")
    pieces += [m2m100_token(code) for code in codes]
    return _filled(pieces, vocab_size, directory, f"vocab.json and the {len(codes)} language tokens")


def nllb_pieces(directory: Path, vocab_size: int) -> tuple[list[str], list[str]]:
    """NLLB's piece of each id, from tokenizer.json (its BPE vocabulary, then its added tokens: the language
    codes, <mask>), then made-up words to vocab_size; and the language codes among them, in id order."""
    path = directory / "tokenizer.json"
    data = read_json_object(path)
    vocab = (data.get("model") or {}).get("vocab")
    if not isinstance(vocab, dict):
        raise MtError(f"{path}: no model.vocab mapping each piece to its id, as NLLB's tokenizer.json has")
    added = {t.get("content"): t.get("id") for t in data.get("added_tokens") or [] if isinstance(t, dict)}
    pieces = _by_id({**vocab, **added}, path)
    codes = [p for p in pieces if NLLB_CODE.fullmatch(p)]
    if not codes:
        raise MtError(f"{path}: no language code among its tokens (NLLB's are such as deu_Latn)")
    return _filled(pieces, vocab_size, directory, "tokenizer.json's pieces"), codes


def _by_id(vocab: dict, path: Path) -> list[str]:
    """The pieces of a piece-to-id mapping in id order; its ids must be 0 to n - 1 and the special pieces at
    M2M100's ids."""
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise MtError(f"{path}: its ids are not 0 to {len(vocab) - 1}, each once")
    by_id = {i: piece for piece, i in vocab.items()}
    wrong = next((p for p, i in SPECIALS.items() if by_id.get(i) != p), None)
    if wrong is not None:
        raise MtError(f"{path}: {wrong} is not id {SPECIALS[wrong]}, as M2M100's tokenizer has it")
    return [by_id[i] for i in range(len(vocab))]


def _filled(pieces: list[str], vocab_size: int, directory: Path, what: str) -> list[str]:
    """`pieces` and made-up words up to config.json's vocab_size."""
    if len(pieces) > vocab_size:
        raise MtError(f"{directory / 'config.json'}: vocab_size {vocab_size}: {what} make {len(pieces)}")
    return pieces + [f"madeupword{i:04d}" for i in range(vocab_size - len(pieces))]


def mt_state(weights: dict, order: list[int], cfg: ModelConfig) -> dict:
    """mt's Transformer state from an M2M100ForConditionalGeneration state dict: q, k and v stacked into each
    attention's `in_proj`, the stacks' final norms, the vocabulary's rows in mt's order."""
    w = {k.removeprefix("model."): v.float() for k, v in weights.items()}
    embedding = next((w[k] for k in ("shared.weight", "encoder.embed_tokens.weight", "lm_head.weight") if k in w),
                     None)
    if embedding is None:
        raise MtError("the weights hold no shared.weight: not an M2M100ForConditionalGeneration's")
    rows = embedding[order]
    state = {"src_embed.tokens.weight": rows, "tgt_embed.tokens.weight": rows}
    for stack in ("encoder", "decoder"):
        for kind in ("weight", "bias"):
            state[f"{stack}_norm.{kind}"] = w[f"{stack}.layer_norm.{kind}"]
    for ours, theirs in layer_names(cfg):
        state[ours] = _joined(w, theirs)
    return state


def _joined(w: dict, names: tuple[str, ...]) -> torch.Tensor:
    missing = next((name for name in names if name not in w), None)
    if missing is not None:
        raise MtError(f"the weights hold no {missing}: not an M2M100ForConditionalGeneration's")
    return torch.cat([w[name] for name in names])


def _warn_of_licence(directory: Path, log) -> None:
    """NLLB's and some M2M100 derivatives' weights are licensed for non-commercial use only: say so."""
    card = directory / "README.md"
    text = card.read_text(encoding="utf-8", errors="replace").lower() if card.is_file() else ""
    if "cc-by-nc" in text or "non-commercial" in text or "noncommercial" in text:
        log(f"warning: {card} names a non-commercial licence (CC-BY-NC): the imported weights carry it")
