"""Greedy decoding speed of one model in three engines: mt, CTranslate2 (`mt export`), and onnxruntime through
Optimum (`mt export --format huggingface`, then Optimum's ONNX exporter), on the shipped dev set.

    python scripts/bench_hf.py --model CKPT [--limit N] [--repeat R] [--threads 2] [--max-len 50]

The model is exported once into a temporary folder. Each row runs in a fresh process with `--threads` threads;
with `--repeat R` the rows run in turns (mt, CTranslate2, onnxruntime, then again), so a slow spell of a shared
machine hits each engine alike, and the table gives medians. Every engine decodes greedily to the same limit:
`--max-len` target tokens before EOS (mt: max_len_a 0, max_len_b N; CTranslate2: max_decoding_length N, which
stops there without EOS; Optimum: max_new_tokens N + 1, as EOS counts there). `seconds` times tokenize-decode-detokenize only; the
`same` column is the share of lines whose text equals mt's. Batches: mt and CTranslate2 `--batch-tokens` source
tokens per batch (padding counted); onnxruntime `--ort-batch` sentences per generate() call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SOURCE = ROOT / "data/ddtp-de-en/dev.de"
ENGINES = ("mt", "ctranslate2", "onnxruntime")


def run_mt(args, lines):
    from mt.config import DecodeConfig
    from mt.decoding.text_front_end import translate_lines
    from mt.decoding.loading import load_translator

    tr = load_translator(args.model, "cpu")
    opts = DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=args.max_len, batch_tokens=args.batch_tokens)
    start = time.perf_counter()
    out = [t[0][0] for t in translate_lines(tr, lines, opts)]
    return time.perf_counter() - start, out


def run_ctranslate2(args, lines):
    import ctranslate2
    import sentencepiece as spm

    folder = Path(args.work) / "ct2"
    translator = ctranslate2.Translator(str(folder), device="cpu", intra_threads=args.threads)
    src, tgt = (spm.SentencePieceProcessor(model_file=str(folder / f"{s}.spm")) for s in ("source", "target"))
    start = time.perf_counter()
    results = translator.translate_batch(src.encode(lines, out_type=str), beam_size=1,
                                         max_batch_size=args.batch_tokens, batch_type="tokens",
                                         max_decoding_length=args.max_len)
    out = [tgt.decode(r.hypotheses[0]) for r in results]
    return time.perf_counter() - start, out


def run_onnxruntime(args, lines):
    from optimum.onnxruntime import ORTModelForSeq2SeqLM
    from transformers import MarianTokenizer

    model = ORTModelForSeq2SeqLM.from_pretrained(Path(args.work) / "onnx")
    tokenizer = MarianTokenizer.from_pretrained(Path(args.work) / "hf")
    start = time.perf_counter()
    out = []
    for i in range(0, len(lines), args.ort_batch):
        batch = tokenizer(lines[i:i + args.ort_batch], return_tensors="pt", padding=True)
        ids = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=args.max_len + 1)
        out += tokenizer.batch_decode(ids, skip_special_tokens=True)
    return time.perf_counter() - start, out


def one_row(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    lines = SOURCE.read_text(encoding="utf-8").splitlines()[:args.limit]
    seconds, out = {"mt": run_mt, "ctranslate2": run_ctranslate2, "onnxruntime": run_onnxruntime}[args.run](
        args, lines)
    print(json.dumps({"seconds": seconds, "out": out}))


def export(args) -> None:
    work = Path(args.work)
    for command in (["export", "-c", args.model, "-o", work / "ct2"],
                    ["export", "-c", args.model, "--format", "huggingface", "-o", work / "hf"]):
        subprocess.run([sys.executable, "-m", "mt", *map(str, command)], check=True, cwd=ROOT)
    subprocess.run([sys.executable, "-m", "optimum.exporters.onnx", "--model", str(work / "hf"), "--task",
                    "text2text-generation-with-past", str(work / "onnx")], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=50)
    parser.add_argument("--batch-tokens", type=int, default=16384)
    parser.add_argument("--ort-batch", type=int, default=64)
    parser.add_argument("--run", choices=ENGINES)  # internal: one row in this process
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.run:
        return one_row(args)
    with tempfile.TemporaryDirectory() as work:
        args.work = work
        export(args)
        times, outputs = {e: [] for e in ENGINES}, {}
        for _ in range(args.repeat):
            for engine in ENGINES:
                row = [a for a in sys.argv[1:] if a != "--run"] + ["--run", engine, "--work", work]
                done = subprocess.run([sys.executable, __file__, *row], check=True, capture_output=True, text=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                times[engine].append(result["seconds"])
                outputs[engine] = result["out"]
    print("| engine | seconds (median) | runs | same text as mt |\n|---|---:|---|---:|")
    for engine in ENGINES:
        same = sum(a == b for a, b in zip(outputs[engine], outputs["mt"])) / len(outputs["mt"])
        print(f"| {engine} | {statistics.median(times[engine]):.2f} | "
              f"{', '.join(f'{t:.2f}' for t in times[engine])} | {same:.1%} |")
    for engine in ENGINES[1:]:
        print(f"mt / {engine} speed: {statistics.median(times[engine]) / statistics.median(times['mt']):.2f}x")


if __name__ == "__main__":
    main()
