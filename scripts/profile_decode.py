"""Where one sentence's decoding time goes: the model, the search's bookkeeping and Python, the tokenizers.

    python scripts/profile_decode.py --model CKPT [--lines 50] [--beam-size 4] [--rounds 3]

Each of the first --lines single-sentence dev lines (data/ddtp-de-en/dev.de) is translated alone, in-process,
as a one-sentence request of `mt serve` is (mt.decoding.text_front_end.translate_lines on that line), --rounds times
after one warm-up pass. Timers wrap the model's encoder, its decoder step (`Transformer.decode_step`, the
projection to the vocabulary included) and the tokenizers' encode and decode; the rest of the time is the
search's bookkeeping (top-k, the cache's reordering, finished hypotheses) and Python around it. Prints, per
sentence and per decoder step, the median of each part in ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import torch

from mt.decoding.text_front_end import translate_lines
from mt.decoding.loading import load_translator
from mt.model.transformer import Transformer

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "data" / "ddtp-de-en" / "dev.de"
SPENT: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def timed(owner, name: str, part: str) -> None:
    """Wrap `owner.name` so that its time adds to SPENT[part] (and its calls to CALLS[part])."""
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            SPENT[part] += time.perf_counter() - start
            CALLS[part] += 1

    setattr(owner, name, wrapper)


@contextmanager
def counted():
    SPENT.clear()
    CALLS.clear()
    start = time.perf_counter()
    yield
    SPENT["total"] = time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="an mt checkpoint")
    ap.add_argument("--lines", type=int, default=50)
    ap.add_argument("--beam-size", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quantize", default=None)
    args = ap.parse_args()
    tr = load_translator(args.model, "cpu", args.quantize)
    opts = dataclasses.replace(tr.cfg.decode, beam_size=args.beam_size)
    lines = [line for line in DEV.read_text(encoding="utf-8").splitlines()
             if line.strip() and not re.search(r"[.!?…]\s", line)][:args.lines]
    timed(Transformer, "encode", "encoder")
    timed(Transformer, "decode_step", "decoder step")
    for tokenizer in {id(t): t for t in (tr.src_tokenizer, tr.tgt_tokenizer)}.values():
        timed(tokenizer, "encode", "tokenizers")
        timed(tokenizer, "decode", "tokenizers")
    with torch.inference_mode():
        for line in lines:  # warm-up: kernels and caches of every shape
            translate_lines(tr, [line], opts)
        per_sentence: dict[str, list[float]] = defaultdict(list)
        per_step: dict[str, list[float]] = defaultdict(list)
        for _ in range(args.rounds):
            for line in lines:
                with counted():
                    translate_lines(tr, [line], opts)
                parts = {name: SPENT[name] for name in ("encoder", "decoder step", "tokenizers")}
                parts["search and Python"] = SPENT["total"] - sum(parts.values())
                parts["total"] = SPENT["total"]
                steps = max(CALLS["decoder step"], 1)
                for name, seconds in parts.items():
                    per_sentence[name].append(seconds * 1e3)
                    per_step[name].append(seconds * 1e3 / steps)
                per_sentence["steps"].append(steps)
    print(f"{args.model}: {len(lines)} one-sentence lines x {args.rounds} rounds, beam {args.beam_size}, "
          f"{torch.get_num_threads()} threads")
    print("| part | ms per sentence (median) | ms per decoder step (median) |")
    print("|---|---:|---:|")
    for name in ("encoder", "decoder step", "search and Python", "tokenizers", "total"):
        print(f"| {name} | {statistics.median(per_sentence[name]):.2f} | {statistics.median(per_step[name]):.3f} |")
    print(f"| decoder steps | {statistics.median(per_sentence['steps']):.0f} | |")


if __name__ == "__main__":
    main()
