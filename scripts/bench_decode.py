"""Decoding speed: greedy and beam 4, with and without the KV cache, on the shipped dev set.

    python scripts/bench_decode.py [--checkpoint runs/demo/checkpoint_best.pt] [--limit N] [--device cpu]

Without a checkpoint it uses a randomly initialised model of configs/demo.yaml's shape (a random model rarely
stops early, so its outputs run to the length limit). Each setting runs in a fresh process so that its peak
memory is its own: peak RSS on the CPU, torch.cuda.max_memory_allocated on a GPU.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = [("greedy", 1, True), ("greedy", 1, False), ("beam 4", 4, True), ("beam 4", 4, False)]


def load(checkpoint: str | None, device: str):
    import torch

    from mt.config import load_config
    from mt.model import build_model
    from mt.tokenizer import train_tokenizer
    from mt.translate import Translator, load_translator

    if checkpoint:
        return load_translator(checkpoint, device)
    cfg = load_config(ROOT / "configs" / "demo.yaml")
    lines = (ROOT / "data/ddtp-de-en/train.de").read_text(encoding="utf-8").splitlines()[:20000]
    tok = train_tokenizer(lines, cfg.tokenizer)
    torch.manual_seed(0)
    model = build_model(cfg.model, len(tok), len(tok), True).to(device).eval()
    return Translator(model, tok, tok, cfg)


def run_one(args) -> dict:
    import torch

    from mt.decode import translate_ids

    tr = load(args.checkpoint, args.device)
    lines = (ROOT / "data/ddtp-de-en/dev.de").read_text(encoding="utf-8").splitlines()[: args.limit]
    ids = tr.src_tokenizer.encode(lines)
    if torch.cuda.is_available() and args.device != "cpu":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    with torch.inference_mode():
        hyps = translate_ids(tr.model, ids, beam_size=args.beam, alpha=0.6, max_len_a=1.0, max_len_b=50,
                             batch_tokens=args.batch_tokens, use_cache=args.cache)
    if torch.cuda.is_available() and args.device != "cpu":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    seconds = time.perf_counter() - start
    tokens = sum(len(h[0].tokens) + 1 for h in hyps)
    return {"sentences": len(ids), "seconds": seconds, "sent_per_s": len(ids) / seconds,
            "tok_per_s": tokens / seconds, "peak_mib": peak}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint")
    parser.add_argument("--limit", type=int, default=None, help="first N dev sentences (default: all 883)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--beam", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args)))
        return
    model = args.checkpoint or "random init, configs/demo.yaml shape"
    print(f"model: {model}; device {args.device}; batch_tokens {args.batch_tokens}")
    print("| search | cache | sentences | seconds | sentences/s | target tokens/s | peak memory (MiB) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    results = {}
    for name, beam, cache in SETTINGS:
        command = [sys.executable, __file__, "--one", "--beam", str(beam), "--cache", str(int(cache)),
                   "--device", args.device, "--batch-tokens", str(args.batch_tokens)]
        command += ["--checkpoint", args.checkpoint] if args.checkpoint else []
        command += ["--limit", str(args.limit)] if args.limit else []
        r = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        results[(name, cache)] = r
        print(f"| {name} | {'yes' if cache else 'no'} | {r['sentences']} | {r['seconds']:.1f} | "
              f"{r['sent_per_s']:.1f} | {r['tok_per_s']:.0f} | {r['peak_mib']:.0f} |", flush=True)
    for name in ("greedy", "beam 4"):
        speedup = results[(name, False)]["seconds"] / results[(name, True)]["seconds"]
        print(f"{name}: the cache is {speedup:.1f}x faster than recomputing the prefix")


if __name__ == "__main__":
    main()
