"""`mt export --format huggingface`: a checkpoint as a Hugging Face Marian directory, which
`MarianMTModel.from_pretrained(DIR)` and `MarianTokenizer.from_pretrained(DIR)` load as they load an OPUS-MT
model, and from there Optimum's ONNX export and transformers.js (docs/exporting.md).

The mapping is `mt import`'s (mt/interop/marian.py) the other way: the same table of layer names. Marian's layers are
post-norm with biases everywhere (as mt's), its embeddings scaled by sqrt(d_model); its positions are a stored
table, so the paper's interleaved one is written as it is; its decoder starts from `decoder_start_token_id`
(mt's BOS, or PAD's zero row). mt's ids are kept: vocab.json maps each sentencepiece piece to its own id.
A pre-norm model is written as Pegasus (PegasusForConditionalGeneration, loaded with AutoModelForSeq2SeqLM),
whose layers are Marian's made pre-norm, with MarianTokenizer's files.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from mt.decoding.model_backend import load_model_translator
from mt.config import Config, config_to_dict
from mt.data.languages import NAMED_BOTH, TARGET_TOKENS, described, directions
from mt.errors import MtError
from mt.interop.export_folders import CARD_SIGN, check_replaceable
from mt.atomic_files import atomic_write_dir
from mt.interop.marian import depths, layer_names
from mt.model.transformer import Transformer
from mt.training.run_log import read_metrics
from mt.symbols import BOS, EOS, PAD, UNK
from mt.data.tokenizer import Tokenizer
from mt.interop.tokenizer_json import tokenizer_json

NEVER = -1e9  # final_logits_bias of a row that is no target piece: exp() of it is 0, in float32 too
# mt's norm -> the transformers model that has its layers: Marian's are post-norm; Pegasus's, the same layers and
# names, pre-norm with a final norm on each stack (mt's pre-norm), a stored position table too, but one embedding
# matrix for both sides.
ARCHITECTURES = {"post": ("marian", "MarianMTModel"), "pre": ("pegasus", "PegasusForConditionalGeneration")}


def export_huggingface(checkpoint: str | Path, output_dir: str | Path, force: bool = False,
                       raw_weights: bool = False) -> Path:
    """Write the Hugging Face Marian directory `output_dir`, complete or not at all (built beside it, then
    renamed). The weights are the checkpoint's averaged ones when it has them, unless `raw_weights`."""
    from safetensors.torch import save

    output_dir = Path(output_dir)
    check_replaceable(output_dir, force)
    tr = load_model_translator(checkpoint, "cpu", raw_weights=raw_weights)
    model = tr.backend.model
    if tr.cfg.languages.token in NAMED_BOTH:
        raise MtError(f"{checkpoint}: an M2M100 model (languages.token {tr.cfg.languages.token}): its Hugging Face "
                      "form is the M2M100 directory it was imported from; export it with --format ctranslate2")
    if model.cfg.norm == "pre" and model.src_embed.tokens is not model.tgt_embed.tokens:
        raise MtError(f"{checkpoint}: model.norm pre with separate source and target embeddings (tokenizer.joint "
                      f"{tr.cfg.tokenizer.joint}, model.share_embeddings {model.cfg.share_embeddings}): cannot be "
                      "exported to Hugging Face (its pre-norm model, Pegasus, has one embedding for both sides)")
    files = tokenizer_files(tr.src_tokenizer, tr.tgt_tokenizer, model.cfg.max_positions)
    files["config.json"] = _json(hf_config(model))
    files["generation_config.json"] = _json(generation_config(tr.cfg))
    files["model.safetensors"] = save(hf_state(model), metadata={"format": "pt"})
    files["README.md"] = model_card(tr.cfg, Path(checkpoint)).encode("utf-8")

    if tr.src_tokenizer.model_proto == tr.tgt_tokenizer.model_proto:  # one vocabulary: transformers.js's
        files["tokenizer.json"] = tokenizer_json(tr.src_tokenizer)

    def write(folder: Path) -> None:
        for name, data in files.items():
            try:
                (folder / name).write_bytes(data)
            except OSError as e:  # a full disk: the file it would have been
                raise OSError(e.errno, e.strerror, str(output_dir / name)) from None

    atomic_write_dir(output_dir, write)
    return output_dir


def hf_state(model: Transformer) -> dict[str, torch.Tensor]:
    """MarianMTModel's state dict of mt's model; a tied matrix is written once, under the name transformers ties
    the others to (model.shared, else model.decoder.embed_tokens for lm_head)."""
    mine = {name: tensor.detach().float() for name, tensor in model.state_dict().items()}
    state = {}
    for ours, theirs in layer_names(model.cfg):
        for name, part in zip(theirs, mine[ours].chunk(len(theirs))):
            state[f"model.{name}"] = part.clone()
    rows = vocabulary_rows(model)
    if model.src_embed.tokens is model.tgt_embed.tokens:
        state["model.shared.weight"] = mine["tgt_embed.tokens.weight"].clone()
    else:
        state["model.encoder.embed_tokens.weight"] = _rows(mine["src_embed.tokens.weight"], rows)
        state["model.decoder.embed_tokens.weight"] = _rows(mine["tgt_embed.tokens.weight"], rows)
    if model.output is not None:
        state["lm_head.weight"] = _rows(mine["output.weight"], rows)
    target_vocab = model.tgt_embed.tokens.num_embeddings
    bias = mine.get("output_bias", torch.zeros(target_vocab))
    state["final_logits_bias"] = _rows(bias[:, None], rows, fill=NEVER)[:, 0].reshape(1, -1)
    for stack in ("encoder", "decoder"):  # mt's own table, either layout (model.positions)
        state[f"model.{stack}.embed_positions.weight"] = model.src_embed.positions.float().clone()
        if model.cfg.norm == "pre":  # Pegasus's final norm of each stack
            for kind in ("weight", "bias"):
                state[f"model.{stack}.layer_norm.{kind}"] = mine[f"{stack}_norm.{kind}"].clone()
    return state


def vocabulary_rows(model: Transformer) -> int:
    """The rows of each embedding matrix written: the larger vocabulary's. transformers 4 gives MarianMTModel's
    decoder embedding `vocab_size` rows whatever `decoder_vocab_size` says, so both are the larger size; the
    smaller side's extra rows are zeros, never an input, and never an output (final_logits_bias NEVER)."""
    return max(model.src_embed.tokens.num_embeddings, model.tgt_embed.tokens.num_embeddings)


def _rows(matrix: torch.Tensor, rows: int, fill: float = 0.0) -> torch.Tensor:
    extra = torch.full((rows - matrix.size(0), matrix.size(1)), fill)
    return torch.cat([matrix, extra]).contiguous()


def hf_config(model: Transformer) -> dict:
    """config.json: MarianConfig's (or PegasusConfig's) fields for mt's model, every one written (none left to a
    default)."""
    cfg = model.cfg
    encoder_layers, decoder_layers = depths(cfg)
    model_type, architecture = ARCHITECTURES[cfg.norm]
    marian_only = {"decoder_vocab_size": vocabulary_rows(model),
                   "share_encoder_decoder_embeddings": model.src_embed.tokens is model.tgt_embed.tokens}
    return {
        "architectures": [architecture], "model_type": model_type, "is_encoder_decoder": True,
        "vocab_size": vocabulary_rows(model), **(marian_only if model_type == "marian" else {}),
        "d_model": cfg.d_model,
        "encoder_layers": encoder_layers, "decoder_layers": decoder_layers,
        "encoder_attention_heads": cfg.n_heads, "decoder_attention_heads": cfg.n_heads,
        "encoder_ffn_dim": cfg.d_ff, "decoder_ffn_dim": cfg.d_ff, "activation_function": cfg.activation,
        "dropout": cfg.dropout, "attention_dropout": cfg.attention_dropout,
        "activation_dropout": cfg.activation_dropout, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0,
        "max_position_embeddings": cfg.max_positions, "scale_embedding": True, "init_std": 0.02,
        "tie_word_embeddings": model.output is None, "pad_token_id": PAD, "eos_token_id": EOS,
        "decoder_start_token_id": _decoder_start(model.cfg.decoder_start), "forced_eos_token_id": EOS,
        "use_cache": True, "torch_dtype": "float32",
    }


def _decoder_start(decoder_start: str) -> int:
    return PAD if decoder_start == "pad" else BOS


def generation_config(cfg: Config) -> dict:
    """generation_config.json: mt's decode defaults. HF divides a beam's log-probability by length ** alpha
    where mt divides by GNMT's ((5 + length) / 6) ** alpha: the same only for alpha 0, so alpha is written as HF's
    exponent (the README says so). mt's length limit, a * source length + b, has no HF counterpart: max_length
    is the model's positions, and EOS is forced there, as mt forces it at its limit."""
    start = _decoder_start(cfg.model.decoder_start)
    generation = {"decoder_start_token_id": start, "pad_token_id": PAD, "eos_token_id": EOS,
                  "forced_eos_token_id": EOS, "num_beams": cfg.decode.beam_size,
                  "length_penalty": cfg.decode.alpha, "early_stopping": True,  # mt's beam: stop at k finished
                  "max_length": cfg.model.max_positions}
    if cfg.model.decoder_start == "pad":  # mt's search never outputs PAD then (mt/model/transformer.py)
        generation["bad_words_ids"] = [[PAD]]
    return generation


def tokenizer_files(src: Tokenizer, tgt: Tokenizer, max_positions: int) -> dict[str, bytes]:
    """MarianTokenizer's files: the sentencepiece models, and vocab.json (with target_vocab.json when the
    vocabularies differ) giving each piece its own id, so the ids are mt's."""
    separate = _pieces(src) != _pieces(tgt)
    files = {"source.spm": src.model_proto, "target.spm": tgt.model_proto,
             "vocab.json": _json({piece: i for i, piece in enumerate(_pieces(src))})}
    if separate:
        files["target_vocab.json"] = _json({piece: i for i, piece in enumerate(_pieces(tgt))})
    # BOS, where it is sentencepiece's control piece (a model mt trained), is special too: decoding generate()'s
    # output, which starts with it (model.decoder_start: bos), with skip_special_tokens leaves it out.
    bos = {"bos_token": tgt.sp.id_to_piece(BOS)} if tgt.sp.is_control(BOS) else {}
    files["tokenizer_config.json"] = _json({
        "tokenizer_class": "MarianTokenizer", "separate_vocabs": separate, "model_max_length": max_positions,
        "unk_token": tgt.sp.id_to_piece(UNK), "eos_token": tgt.sp.id_to_piece(EOS),
        "pad_token": tgt.sp.id_to_piece(PAD), **bos})
    return files


def _pieces(tok: Tokenizer) -> list[str]:
    return [tok.sp.id_to_piece(i) for i in range(len(tok))]


def model_card(cfg: Config, checkpoint: Path) -> str:
    """README.md: the training data, the dev scores of the run (metrics.jsonl beside the checkpoint), how mt
    made the directory, and the config."""
    lines = ["---", "library_name: transformers", "pipeline_tag: translation", "tags: [marian, mt]", "---", "",
             f"# {checkpoint.parent.name}/{checkpoint.name}", "",
             f"A Transformer trained with mt and {CARD_SIGN} "
             f"as a {ARCHITECTURES[cfg.model.norm][1]}: `AutoModelForSeq2SeqLM.from_pretrained` and "
             "`MarianTokenizer.from_pretrained` load it.", "",
             f"Training data: {_training_data(cfg)}.", "", *_directions(cfg), *_dev_scores(checkpoint.parent), "",
             "Decoding: generation_config.json holds mt's beam size; mt's length penalty is GNMT's "
             f"((5 + length) / 6) ** {cfg.decode.alpha}, Hugging Face's length ** length_penalty, the same only "
             "for 0; mt's length limit (a * source length + b) is not expressible, max_length is the model's "
             "positions.", "", "## The mt config", "", "```yaml",
             yaml.safe_dump(config_to_dict(cfg), sort_keys=False).rstrip(), "```", ""]
    return "\n".join(lines)


def _directions(cfg: Config) -> list[str]:
    """A multilingual model's directions, and how MarianTokenizer is asked for a target (OPUS-MT's >>xx<<)."""
    known = directions(cfg)
    if not known:
        return []
    token, ask = ">>" + known[0][1] + "<<", ""
    if cfg.languages.token in TARGET_TOKENS:
        ask = f" Start each source with its target's token, e.g. `{token} text`: MarianTokenizer keeps it as one token"
        ask += (f"; the output starts with it too: pass `generate(..., forced_bos_token_id=tokenizer."
                f"convert_tokens_to_ids(\"{token}\"))` and drop it from the text." if cfg.languages.token == "both"
                else ".")
    return [f"Directions: {described(known)}.{ask}", ""]


def _training_data(cfg: Config) -> str:
    data = cfg.data
    if data.dataset:
        return f"{data.dataset} ({data.dataset_config or 'default'}, {data.src_lang}-{data.tgt_lang})"
    if data.train_src:
        return f"{data.train_src} / {data.train_tgt}"
    return ", ".join(f"{c.src} / {c.tgt}" for c in data.train) or "not recorded (an imported model)"


def _dev_scores(run_dir: Path) -> list[str]:
    try:
        rows = [row for row in read_metrics(run_dir) if row["split"] == "dev"]
    except MtError:
        rows = []
    if not rows:
        return ["Dev scores: none recorded beside the checkpoint."]
    keys = [k for k in ("loss", "bleu", "chrf") if k in rows[-1]]
    table = ["| step | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    table += [f"| {row['step']} | " + " | ".join(f"{row[k]:.4g}" for k in keys) + " |" for row in rows[-5:]]
    return ["Dev scores (metrics.jsonl, the last evaluations):", "", *table]


def _json(value) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
