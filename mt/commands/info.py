"""`mt info`: architecture summary and exact parameter count of a config or a checkpoint."""

from __future__ import annotations

from pathlib import Path

from mt.checkpoint import load_checkpoint
from mt.decoding.ct2_backend import MARKER, is_exported, read_marker
from mt.errors import MtError
from mt.config import Config, config_from_dict, load_config
from mt.model.transformer import build_model, count_parameters
from mt.data.languages import described, directions
from mt.data.prepare import STAMP, data_dir, load_prepared
from mt.data.tokenizer import Tokenizer


def _vocab_sizes(path: Path, overrides: list[str]) -> tuple[Config, int, int, str]:
    if path.is_dir():
        return _exported_vocab_sizes(path)
    if path.suffix == ".pt":
        ckpt = load_checkpoint(path)
        cfg = config_from_dict(ckpt["config"], source=str(path))
        src, tgt = (len(Tokenizer.from_tensor(ckpt[k])) for k in ("src_tokenizer", "tgt_tokenizer"))
        return cfg, src, tgt, "trained tokenizer"
    cfg = load_config(path, overrides)
    prepared = data_dir(cfg) / STAMP
    if prepared.exists():
        data = load_prepared(cfg)
        return cfg, len(data.src_tokenizer), len(data.tgt_tokenizer), f"trained tokenizer in {prepared.parent}"
    size = cfg.tokenizer.vocab_size
    return cfg, size, size, "tokenizer.vocab_size (no trained tokenizer yet)"


def _exported_vocab_sizes(directory: Path) -> tuple[Config, int, int, str]:
    """A directory written by `mt export`: its config (mt.yaml) and its sentencepiece models."""
    if not is_exported(directory):
        raise MtError(f"{directory}: not a CTranslate2 export (no {MARKER}); give a config, a checkpoint or a "
                      "CTranslate2 export (`mt export --format ctranslate2`)")
    cfg = config_from_dict(read_marker(directory / MARKER), source=str(directory / MARKER))
    try:
        src, tgt = (len(Tokenizer((directory / name).read_bytes())) for name in ("source.spm", "target.spm"))
    except (OSError, RuntimeError) as e:
        raise MtError(f"{directory}: its sentencepiece models cannot be read ({e}); export the model again") from None
    return cfg, src, tgt, f"the sentencepiece models in {directory}"


def describe(path: Path, overrides: list[str]) -> str:
    cfg, src_vocab, tgt_vocab, vocab_from = _vocab_sizes(Path(path), overrides)
    model = build_model(cfg.model, src_vocab, tgt_vocab, cfg.tokenizer.joint)
    m = cfg.model
    shared = "all three" if model.src_embed.tokens is model.tgt_embed.tokens and model.output is None else (
        "target and output" if model.output is None else "none")
    lines = [
        f"Transformer encoder-decoder ({m.norm}-LN)",
        f"layers: {m.encoder_layers} encoder + {m.decoder_layers} decoder",
        f"d_model: {m.d_model}  d_ff: {m.d_ff}  heads: {m.n_heads} (d_k = {m.d_model // m.n_heads})",
        f"dropout: {m.dropout}  attention dropout: {m.attention_dropout}  activation dropout: {m.activation_dropout}",
        f"vocabulary: source {src_vocab}, target {tgt_vocab} (from {vocab_from})",
        f"tied embeddings: {shared}",
        f"parameters: {count_parameters(model)}",
    ]
    known = directions(cfg)
    if known:
        how = {"target": "; a >>xx<< token before the source names the target",
               "both": "; a >>xx<< token before the source and first in the output names the target"}
        how = how.get(cfg.languages.token, "")
        lines.append(f"directions: {described(known)}{how}")
    return "\n".join(lines)
