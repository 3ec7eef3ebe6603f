"""Decoding speed and quality on the shipped dev set: mt in float32 and int8, CTranslate2 in float32 and int8,
greedy and beam 4, each setting in a fresh process.

    python scripts/bench_decode.py --checkpoint runs/demo/checkpoint_best.pt [--limit N] [--threads 2] [--repeat R]

The checkpoint is exported once to CTranslate2 (float32, in a temporary directory); its int8 rows decode that
export with int8 weights (`mt translate -c DIR --quantize int8`). Every row decodes through `mt translate`'s
own code path (load_translator, then mt.decode.translate_lines in batches of `--batch-tokens`) with alpha 0.6 and
max length = source + 50. `seconds` times decoding only, `CPU s` is the CPU time the process spent in it (all
threads; time the virtual machine's host took away is not in it), `process s` the whole process (start,
imports and model loading included); target tokens are the output re-tokenized, EOS included; peak RSS is the process's.
With `--repeat R` the eight settings run R times in rounds (all eight, then all eight again), so that a slow
spell of the machine hits every engine; the table gives medians, one line per setting its tokens/s in each
round, and the ratio lines, per search, the median and range over rounds of mt's tokens/s over CTranslate2
float32's from the same round.
Every child imports mt before torch, as the `mt` command does, so its GOMP_SPINCOUNT default applies to the
CTranslate2 rows too (CTranslate2 bundles GNU OpenMP); idle, CTranslate2's time is the same either way.
The last lines compare CTranslate2 float32 greedy with mt's greedy line by line (the export's equivalence).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's mt, whichever one is installed
SETTINGS = [(engine, precision, beam) for beam in (1, 4)
            for engine, precision in (("mt", "fp32"), ("mt", "int8"), ("ct2", "float32"), ("ct2", "int8"))]


def run_one(args) -> dict:
    import mt  # noqa: F401  (before torch, as the `mt` command: its OpenMP setting must precede torch's loading)
    import torch

    torch.set_num_threads(args.threads)
    from mt.config import DecodeConfig
    from mt.decode import load_translator, translate_lines

    tr = load_translator(args.model, args.device, "int8" if "int8" in args.precision else None)
    lines = (ROOT / "data/ddtp-de-en/dev.de").read_text(encoding="utf-8").splitlines()[: args.limit]
    start, cpu_start = time.perf_counter(), time.process_time()
    with torch.inference_mode():
        opts = DecodeConfig(beam_size=args.beam, alpha=0.6, max_len_a=1.0, max_len_b=50,
                            batch_tokens=args.batch_tokens)
        hyps = translate_lines(tr, lines, opts)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    texts = [h[0][0] for h in hyps]
    tokens = [len(t) + 1 for t in tr.tgt_tokenizer.encode(texts)]
    return {"sentences": len(lines), "seconds": seconds, "cpu_seconds": cpu_seconds, "tokens": tokens, "texts": texts,
            "scores": [h[0][1] for h in hyps], "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(args, model: str, precision: str, beam: int) -> dict:
    command = [sys.executable, __file__, "--one", "--model", model, "--precision", precision, "--beam", str(beam),
               "--device", args.device, "--batch-tokens", str(args.batch_tokens), "--threads", str(args.threads)]
    command += ["--limit", str(args.limit)] if args.limit else []
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{out.stderr}")
    return {**json.loads(out.stdout), "process_s": time.perf_counter() - start}


def search_name(beam: int) -> str:
    return "greedy" if beam == 1 else f"beam {beam}"


def median(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def equivalence(mt: dict, ct2: dict) -> str:
    same = sum(a == b for a, b in zip(mt["texts"], ct2["texts"]))
    per_token = [abs(a - b) / n for a, b, n, x, y in zip(mt["scores"], ct2["scores"], mt["tokens"], mt["texts"],
                                                         ct2["texts"]) if x == y]
    return (f"CTranslate2 float32 greedy vs mt fp32 greedy: {same}/{len(mt['texts'])} identical lines "
            f"({100 * same / len(mt['texts']):.1f}%); score difference on identical lines at most "
            f"{max(per_token, default=0):.2g} per token (score / tokens)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint")
    parser.add_argument("--limit", type=int, default=None, help="first N dev sentences (default: all 883)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="rounds of all settings; the table gives medians")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--precision", help=argparse.SUPPRESS)
    parser.add_argument("--beam", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args)))
        return
    if not args.checkpoint:
        parser.error("--checkpoint is required")
    from mt.export import export_ctranslate2
    from mt.metrics import score_corpus

    refs = (ROOT / "data/ddtp-de-en/dev.en").read_text(encoding="utf-8").splitlines()[: args.limit]
    print(f"model: {args.checkpoint}; device {args.device}, {args.threads} threads; batch_tokens {args.batch_tokens}")
    print("| engine | weights | search | sentences | seconds | CPU s | process s | sentences/s | target tokens/s | "
          "peak RSS (MiB) | BLEU |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    runs = {setting: [] for setting in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        exported = export_ctranslate2(args.checkpoint, Path(tmp) / "ct2")
        for round_ in range(args.repeat):
            for engine, precision, beam in SETTINGS:
                print(f"round {round_ + 1}/{args.repeat}: {engine} {precision} {search_name(beam)}",
                      file=sys.stderr, flush=True)
                r = child(args, str(exported) if engine == "ct2" else args.checkpoint, precision, beam)
                runs[engine, precision, beam].append({**r, "tokens_per_s": sum(r["tokens"]) / r["seconds"]})
    for (engine, precision, beam), rs in runs.items():
        r = rs[0]  # the outputs are the same every round
        bleu = score_corpus(r["texts"], refs, ["bleu"])["bleu"]["score"]
        print(f"| {'mt' if engine == 'mt' else 'CTranslate2'} | {precision} | {search_name(beam)} | "
              f"{r['sentences']} | {median(rs, 'seconds'):.1f} | {median(rs, 'cpu_seconds'):.1f} | "
              f"{median(rs, 'process_s'):.1f} | "
              f"{r['sentences'] / median(rs, 'seconds'):.1f} | {median(rs, 'tokens_per_s'):.0f} | "
              f"{median(rs, 'peak_mib'):.0f} | {bleu:.2f} |")
    if args.repeat > 1:
        for (engine, precision, beam), rs in runs.items():
            print(f"{engine} {precision} {search_name(beam)} tokens/s per round: "
                  + ", ".join(f"{r['tokens_per_s']:.0f}" for r in rs))
    for beam in (1, 4):
        reference = runs["ct2", "float32", beam]
        for precision in ("fp32", "int8"):
            ratios = [m["tokens_per_s"] / c["tokens_per_s"] for m, c in zip(runs["mt", precision, beam], reference)]
            print(f"{search_name(beam)}: mt {precision} / CTranslate2 float32 tokens/s = "
                  f"{statistics.median(ratios):.2f} (median of {len(ratios)} rounds; "
                  f"{min(ratios):.2f}-{max(ratios):.2f})")
    print(equivalence(runs["mt", "fp32", 1][0], runs["ct2", "float32", 1][0]))


if __name__ == "__main__":
    main()
