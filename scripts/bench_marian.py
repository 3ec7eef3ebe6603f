"""An OPUS-MT base model's shape (d 512, 6+6 layers, 8 heads, FFN 2048, vocabulary 58,101, swish) with random
weights, saved as Hugging Face saves one; then, on this CPU: `mt import` time; `mt translate` speed on the dev
set against CTranslate2 converted by its own converter (ct2-transformers-converter), run in turns, both in
batches of --batch-tokens source tokens and to at most --max-len output tokens (random weights seldom end a
sentence, so most lines run to it); one fine-tuning step (forward, backward, Adam) of mt against a plain
Hugging Face loop on the same batch.

    python scripts/bench_marian.py [--rounds 2] [--lines 100] [--max-len 64] [--batch-tokens 2048]
        [--measure import,decode,train] [--work /tmp/bench-marian] [--ct2-mkl library|0|1]

Needs the dev extra (transformers) and the ct2 extra. Prints one JSON object per measurement.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import sentencepiece as spm
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "data" / "ddtp-de-en"
VOCAB = 58101


def build(folder: Path) -> None:
    """Two sentencepiece models (8k each) on the shipped corpus; vocab.json: their pieces, filled up with
    made-up pieces to OPUS-MT's 58,101; a MarianMTModel with random weights and an output bias that ends
    sentences after some 20 pieces."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    protos = []
    for side in ("de", "en"):
        model = io.BytesIO()
        lines = (DATA / f"train.{side}").read_text(encoding="utf-8").splitlines()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=8000,
                                       model_type="unigram", num_threads=2, minloglevel=2)
        protos.append(model.getvalue())
    pieces = ["</s>", "<unk>"]
    for proto in protos:
        sp = spm.SentencePieceProcessor(model_proto=proto)
        pieces += [p for p in (sp.id_to_piece(i) for i in range(len(sp))) if not sp.is_control(sp.piece_to_id(p))
                   and p != "<unk>" and p not in pieces]
    pieces += [f"\u2581made{i}" for i in range(VOCAB - 1 - len(pieces))] + ["<pad>"]
    config = MarianConfig(vocab_size=VOCAB, decoder_vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
                          encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                          decoder_ffn_dim=2048, activation_function="swish", scale_embedding=True,
                          pad_token_id=VOCAB - 1, decoder_start_token_id=VOCAB - 1, eos_token_id=0,
                          max_position_embeddings=512, num_beams=4, bad_words_ids=[[VOCAB - 1]])
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" not in name and "embed_positions" not in name:
                p.normal_(0.0, 0.1 if "shared" in name else 0.05)
        model.model.shared.weight[VOCAB - 1].zero_()
        model.final_logits_bias.normal_(0.0, 1.0)
        model.final_logits_bias[0, 0] += 4.0
    model.save_pretrained(folder)
    (folder / "source.spm").write_bytes(protos[0])
    (folder / "target.spm").write_bytes(protos[1])
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}, ensure_ascii=False))
    MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json")) \
        .save_pretrained(folder)


def mt_command(*args, stdin=None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mt", *map(str, args)], check=True, stdin=stdin,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def ct2_translate(ct2_dir: Path, hf_dir: Path, lines: list[str], beam: int, batch_tokens: int,
                  max_len: int, ct2_mkl: str = "library") -> tuple[float, int]:
    """CTranslate2 as its documentation shows: its Translator, sentencepiece pieces in and out, its own batching
    (`batch_tokens` source tokens a batch, as mt's), 2 threads; the time includes loading the model and
    tokenizing, as `mt translate`'s. `ct2_mkl`: its CT2_USE_MKL (library: its own choice, MKL on Intel)."""
    code = f"""
import sys, time; start = time.perf_counter()
import ctranslate2, sentencepiece as spm
src = spm.SentencePieceProcessor(model_file={str(hf_dir / 'source.spm')!r})
tgt = spm.SentencePieceProcessor(model_file={str(hf_dir / 'target.spm')!r})
tr = ctranslate2.Translator({str(ct2_dir)!r}, device="cpu", intra_threads=2)
lines = open({str(DATA / 'dev.de')!r}, encoding="utf-8").read().splitlines()[:{len(lines)}]
out = tr.translate_batch([p + ["</s>"] for p in src.encode(lines, out_type=str)], beam_size={beam},
                         max_batch_size={batch_tokens}, batch_type="tokens", max_decoding_length={max_len})
text = [tgt.decode(r.hypotheses[0]) for r in out]
print(time.perf_counter() - start, sum(len(r.hypotheses[0]) for r in out))
"""
    start = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "CT2_USE_MKL"}
    if ct2_mkl != "library":
        env["CT2_USE_MKL"] = ct2_mkl
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=env).stdout.split()
    return time.perf_counter() - start, int(out[1])


def decoding(work: Path, rounds: int, n_lines: int, batch_tokens: int, max_len: int, ct2_mkl: str) -> None:
    lines = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:n_lines]
    (work / "dev.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for beam in (4, 1):
        times = {"mt": [], "ctranslate2": []}
        for _ in range(rounds):  # in turns: a noisy spell of the machine hits both
            with open(work / "dev.de", "rb") as stdin:
                times["mt"].append(mt_command("translate", "-c", work / "model.pt", "--beam-size", beam, "--alpha",
                                              "0", "--max-len-a", "0", "--max-len-b", max_len - 1, "--batch-tokens",
                                              batch_tokens, "--device", "cpu", stdin=stdin))
            times["ctranslate2"].append(ct2_translate(work / "ct2", work / "hf", lines, beam, batch_tokens,
                                                      max_len, ct2_mkl)[0])
        report(f"translate dev ({n_lines} lines), beam {beam}", times, lines=n_lines, batch_tokens=batch_tokens,
               max_len=max_len, ct2_use_mkl=ct2_mkl)


def training_step(work: Path, rounds: int) -> None:
    """mt's step (its model, label-smoothed loss, fused Adam) against Hugging Face's MarianMTModel in a plain
    loop (its loss with the same label smoothing, torch Adam), on the same 64 dev pairs."""
    from transformers import MarianMTModel, MarianTokenizer

    from mt.decoding.model_backend import load_model_translator
    from mt.data.batching import pad_sequences
    from mt.config import TrainConfig
    from mt.masks import padding_mask
    from mt.training.recipe import label_smoothed_loss, make_optimizer
    from mt.symbols import BOS, EOS, PAD

    src_lines = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:64]
    tgt_lines = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:64]
    tr = load_model_translator(work / "model.pt", "cpu")
    model = tr.backend.model.train()
    src = pad_sequences([torch.tensor(s + [EOS]) for s in tr.src_tokenizer.encode(src_lines)])
    tgt = tr.tgt_tokenizer.encode(tgt_lines)
    tgt_in = pad_sequences([torch.tensor([BOS, *t]) for t in tgt])
    tgt_out = pad_sequences([torch.tensor([*t, EOS]) for t in tgt])
    at = (tgt_out != PAD).flatten().nonzero().squeeze(1)
    optimizer = make_optimizer(model, TrainConfig())

    def mt_step():
        loss, _ = label_smoothed_loss(model(src, padding_mask(src), tgt_in, at=at), tgt_out.flatten()[at], 0.1)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    hf = MarianMTModel.from_pretrained(work / "hf").train()
    tok = MarianTokenizer.from_pretrained(work / "hf")
    batch = tok(src_lines, text_target=tgt_lines, return_tensors="pt", padding=True)
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == tok.pad_token_id, -100)
    hf_optimizer = torch.optim.Adam(hf.parameters(), lr=1e-5, betas=(0.9, 0.98), eps=1e-9)
    smoothed = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1, reduction="sum")

    def hf_step():
        logits = hf(**batch).logits
        smoothed(logits.flatten(0, 1), batch["labels"].flatten()).backward()
        hf_optimizer.step()
        hf_optimizer.zero_grad(set_to_none=True)

    for step in (mt_step, hf_step):  # warm up
        step()
    times = {"mt": [], "hugging face": []}
    for _ in range(rounds * 3):
        for name, step in (("mt", mt_step), ("hugging face", hf_step)):
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    report("one fine-tuning step, 64 dev pairs", times, target_tokens=int(at.numel()))


def report(what: str, times: dict[str, list[float]], **extra) -> None:
    row = {"measure": what, **{f"{k}_s": [round(t, 3) for t in v] for k, v in times.items()}, **extra}
    names = list(times)
    row[f"{names[0]}_vs_{names[1]}_speed"] = round(statistics.median(times[names[1]]) /
                                                   statistics.median(times[names[0]]), 2)
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--lines", type=int, default=100)
    parser.add_argument("--max-len", type=int, default=64, help="output tokens at most, EOS included")
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--measure", default="import,decode,train", help="which measurements, comma-separated")
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-marian"))
    parser.add_argument("--ct2-mkl", default="library", choices=["library", "0", "1"],
                        help="CTranslate2's CT2_USE_MKL: its own choice (MKL on Intel CPUs), or 0 (oneDNN) or 1")
    args = parser.parse_args()
    torch.set_num_threads(2)
    if not (args.work / "hf" / "config.json").exists():
        build(args.work / "hf")
    measure = args.measure.split(",")
    if "import" in measure or not (args.work / "model.pt").exists():
        imports = [mt_command("import", args.work / "hf", "-o", args.work / "model.pt") for _ in range(args.rounds)]
        print(json.dumps({"measure": "mt import (a process, start to end)", "s": [round(t, 2) for t in imports]}))
    if not (args.work / "ct2" / "model.bin").exists():
        from ctranslate2.converters import TransformersConverter
        TransformersConverter(str(args.work / "hf")).convert(str(args.work / "ct2"), force=True)
    if "decode" in measure:
        decoding(args.work, args.rounds, args.lines, args.batch_tokens, args.max_len, args.ct2_mkl)
    if "train" in measure:
        training_step(args.work, args.rounds)


if __name__ == "__main__":
    main()
