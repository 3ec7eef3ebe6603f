"""CTranslate2: export a checkpoint to a CTranslate2 model directory, and translate with one.

`export_ctranslate2` fills CTranslate2's own TransformerSpec (as its fairseq and OpenNMT-py converters do) and
writes, atomically, CTranslate2's model.bin, config.json and vocabularies, the sentencepiece model(s)
(source.spm, target.spm) and mt.yaml (the checkpoint's config, for the decode defaults), so `mt translate -c
DIR` needs nothing else. `ctranslate2` is the optional extra `mt[ct2]`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch
import yaml

from mt.config import config_from_dict, config_to_dict
from mt.decode import length_penalty, max_output_lengths
from mt.errors import MtError
from mt.model import Transformer
from mt.tokenizer import Tokenizer

MARKER = "mt.yaml"  # the file that tells an exported directory from any other
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which mt's model uses
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16",
                 "float32")


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise MtError("CTranslate2 is not installed; install the extra: pip install 'mt[ct2]'") from None
    return ctranslate2


def is_exported(path: str | Path) -> bool:
    return (Path(path) / MARKER).is_file()


# ---- export ---------------------------------------------------------------------------------------------------

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


def _embeddings(spec, embed, embeddings_spec) -> None:
    embeddings_spec.weight = embed.tokens.weight.detach().numpy()
    spec.scale_embeddings = True  # times sqrt(d_model) (3.4)
    # CTranslate2's own sinusoids put sin and cos in two halves; mt interleaves them (3.5): give the table.
    spec.position_encodings.encodings = embed.positions.numpy()


def transformer_spec(model: Transformer):
    """mt's Transformer as a CTranslate2 TransformerSpec (post-LN or pre-LN, ReLU, tied or separate output)."""
    from ctranslate2.specs import transformer_spec as ts

    cfg = model.cfg
    pre = cfg.norm == "pre"
    spec = ts.TransformerSpec.from_config(cfg.n_layers, cfg.n_heads, pre_norm=pre)
    _embeddings(spec.encoder, model.src_embed, spec.encoder.embeddings[0])
    _embeddings(spec.decoder, model.tgt_embed, spec.decoder.embeddings)
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
    output = model.tgt_embed.tokens.weight if model.output is None else model.output.weight
    _linear(spec.decoder.projection, output)  # the same array as the embedding when tied: saved once
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    spec.config.add_source_eos = True  # mt appends EOS to every source
    return spec


def export_ctranslate2(checkpoint: str | Path, output_dir: str | Path, quantization: str | None = None,
                       force: bool = False) -> Path:
    """Write the CTranslate2 model directory `output_dir`: built in a temporary directory beside it, then
    renamed, so it is complete or absent. `quantization` is one of QUANTIZATIONS (None keeps float32)."""
    import_ctranslate2()
    from mt.translate import load_translator

    output_dir = Path(output_dir)
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise MtError(f"--quantization must be one of {', '.join(QUANTIZATIONS)}, got '{quantization}'")
    if output_dir.exists() and not force:
        raise MtError(f"{output_dir} exists; remove it or pass --force")
    tr = load_translator(checkpoint, "cpu")
    spec = transformer_spec(tr.model)
    spec.register_source_vocabulary(_pieces(tr.src_tokenizer))
    spec.register_target_vocabulary(_pieces(tr.tgt_tokenizer))
    spec.validate()
    spec.optimize(quantization=quantization)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=output_dir.parent, prefix=f".{output_dir.name}."))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the model directory is an ordinary one
        spec.save(str(tmp))
        (tmp / "source.spm").write_bytes(tr.src_tokenizer.model_proto)
        (tmp / "target.spm").write_bytes(tr.tgt_tokenizer.model_proto)
        (tmp / MARKER).write_text(yaml.safe_dump(config_to_dict(tr.cfg), sort_keys=False), encoding="utf-8")
        _replace_dir(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return output_dir


def _pieces(tok: Tokenizer) -> list[str]:
    return [tok.sp.id_to_piece(i) for i in range(len(tok))]


def _replace_dir(new: Path, target: Path) -> None:
    """Rename `new` to `target`; an existing `target` is moved aside first and removed after."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
        os.replace(target, old / "dir")
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


# ---- translate ------------------------------------------------------------------------------------------------

class Ct2Translator:
    """An exported directory behind the interface of mt.translate.Translator (`cfg`, `translate_lines`)."""

    def __init__(self, directory: str | Path, device: str = "auto", quantize: str | None = None):
        ct2 = import_ctranslate2()
        directory = Path(directory)
        self.cfg = config_from_dict(yaml.safe_load((directory / MARKER).read_text(encoding="utf-8")),
                                    source=str(directory / MARKER))
        self.src_tokenizer = Tokenizer((directory / "source.spm").read_bytes())
        self.tgt_tokenizer = Tokenizer((directory / "target.spm").read_bytes())
        self.translator = ct2.Translator(str(directory), device=device, compute_type=quantize or "default",
                                         intra_threads=torch.get_num_threads())

    def translate_lines(self, lines: list[str], *, beam_size: int, alpha: float, max_len_a: float, max_len_b: int,
                        batch_tokens: int, nbest: int = 1, on_truncate=None) -> list[list[tuple[str, float]]]:
        """Detokenized (text, score) hypotheses per line, scored like mt's search (GNMT length penalty)."""
        limit = self.cfg.model.max_positions - 1
        keep = limit - 1  # room for EOS, as mt.decode.translate_ids
        sources = self.src_tokenizer.encode(lines)
        results: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in lines]
        todo = [i for i, s in enumerate(sources) if s]
        for i in todo:
            if len(sources[i]) > keep and on_truncate is not None:
                on_truncate(i, len(sources[i]), keep)
        pieces = [[self.src_tokenizer.sp.id_to_piece(t) for t in sources[i][:keep]] for i in todo]
        max_len = max_output_lengths(torch.tensor([len(p) for p in pieces]), max_len_a, max_len_b, limit).tolist()
        sp = self.tgt_tokenizer.sp
        hyps = self._search(pieces, max_len, beam_size=beam_size, alpha=alpha, batch_tokens=batch_tokens,
                            nbest=nbest)
        for i, per_line in zip(todo, hyps):
            results[i] = [(self.tgt_tokenizer.decode([sp.piece_to_id(p) for p in tokens]), score)
                          for tokens, score in per_line]
        return results

    def _search(self, pieces, max_len, *, beam_size, alpha, batch_tokens, nbest):
        """(pieces, score) hypotheses per source, best first. CTranslate2 takes one length limit per call, so
        sources are searched with the largest limit, and those that ran past their own again with it."""
        # min_decoding_length 0: CTranslate2 would otherwise forbid EOS at the first step, which mt allows.
        # Greedy search asks for plain log-probs; beam search ranks with CTranslate2's length ** alpha.
        options = dict(beam_size=beam_size, num_hypotheses=nbest, length_penalty=alpha if beam_size > 1 else 0.0,
                       min_decoding_length=0, return_scores=True, return_end_token=True,
                       max_batch_size=max(1, batch_tokens // beam_size), batch_type="tokens")
        out = self.translator.translate_batch(pieces, max_decoding_length=max(max_len, default=1), **options)
        for limit in sorted(set(max_len)):
            over = [i for i, r in enumerate(out) if max_len[i] == limit and any(
                len(_without_eos(h)) > limit for h in r.hypotheses)]
            if over:
                again = self.translator.translate_batch([pieces[i] for i in over], max_decoding_length=limit, **options)
                for i, r in zip(over, again):
                    out[i] = r
        return [self._rescored(source, r, options["length_penalty"], alpha) for source, r in zip(pieces, out)]

    def _rescored(self, source, result, ct2_alpha, alpha):
        """CTranslate2 scores are log-probs over length ** alpha (EOS counted); mt's are over the GNMT penalty
        ((5 + |Y|) / 6) ** alpha: re-score and re-rank. A hypothesis stopped at the length limit gets the
        log-prob of EOS after it (mt's search ends it with EOS there), from CTranslate2's scoring."""
        log_probs = [score * len(tokens) ** ct2_alpha for tokens, score in zip(result.hypotheses, result.scores)]
        unended = [j for j, tokens in enumerate(result.hypotheses) if tokens[-1:] != ["</s>"]]
        if unended:
            scored = self.translator.score_batch([source] * len(unended), [result.hypotheses[j] for j in unended])
            for j, s in zip(unended, scored):
                log_probs[j] = sum(s.log_probs)
        hyps = [(_without_eos(tokens), lp) for tokens, lp in zip(result.hypotheses, log_probs)]
        return sorted(((t, lp / length_penalty(len(t) + 1, alpha)) for t, lp in hyps), key=lambda h: -h[1])


def _without_eos(tokens: list[str]) -> list[str]:
    return tokens[:-1] if tokens[-1:] == ["</s>"] else tokens
