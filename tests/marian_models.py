"""Small Hugging Face Marian models with random weights, built with `transformers` (nothing is downloaded), for
the tests that import one (mt import, Argos packages, documents translated by a model that writes a few pieces);
the sentencepiece models they take are tests/conftest.py's `spm_models` fixture."""

from __future__ import annotations

import json

import sentencepiece as spm
import torch
from transformers import MarianConfig, MarianMTModel, MarianTokenizer

from mt.symbols import EOS
from tests.conftest import DATA, run_mt

LINES = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:40]


def make_marian(folder, source: bytes, target: bytes, activation: str, seed: int = 0,
                encoder_layers: int = 2, decoder_layers: int = 2, tags: tuple[str, ...] = (),
                source_lang: str | None = None) -> MarianMTModel:
    """A Marian directory as Hugging Face saves one: vocab.json is </s>, <unk>, the target-language `tags`
    (>>fra<<: a multi-target model), the pieces of both sentencepiece models, then <pad> (as Hugging Face's
    converter appends it); random weights, an output bias that ends sentences after some ten pieces."""
    pieces = ["</s>", "<unk>", *tags]
    for proto in (source, target):
        sp = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [p for p in (sp.id_to_piece(i) for i in range(len(sp)))
                   if not sp.is_control(sp.piece_to_id(p)) and p != "<unk>" and p not in pieces]
    pieces.append("<pad>")
    vocab, pad = {p: i for i, p in enumerate(pieces)}, len(pieces) - 1
    config = MarianConfig(vocab_size=len(pieces), decoder_vocab_size=len(pieces), d_model=32,
                          encoder_layers=encoder_layers, decoder_layers=decoder_layers, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=64,
                          decoder_ffn_dim=64, activation_function=activation, scale_embedding=True,
                          pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
                          max_position_embeddings=256)
    torch.manual_seed(seed)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" in name:
                continue
            if "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.3 if "shared" in name else 0.15)
        model.model.shared.weight[pad].zero_()
        model.final_logits_bias.normal_(0.0, 1.0)
        model.final_logits_bias[0, 0] += 5.0  # </s>
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    (folder / "source.spm").write_bytes(source)
    (folder / "target.spm").write_bytes(target)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"),
                    **({"source_lang": source_lang} if source_lang else {})).save_pretrained(folder)
    return model


def few_words_model(folder, spm: bytes):
    """A checkpoint of a small random Marian model (one sentencepiece model), imported, its end-of-sentence bias
    lowered so that beam search writes a few pieces before ending: outputs to place markup in, in a second."""
    make_marian(folder / "hf", spm, spm, "swish")
    run_mt("import", folder / "hf", "-o", folder / "model.pt")
    checkpoint = torch.load(folder / "model.pt", weights_only=True)
    checkpoint["model"]["output_bias"][EOS] -= 1.5
    torch.save(checkpoint, folder / "model.pt")
    return folder / "model.pt"
