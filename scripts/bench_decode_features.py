"""Measure the decoding features of `mt translate` on the shipped dev set, and print one table per feature.

    python scripts/bench_decode_features.py -c CKPT [--export DIR] [--member CKPT ...] [--limit N] [--repeat R]

- sampling: seconds for greedy search and for sampling one hypothesis (no top-k/top-p), in turns;
- constraints: 1-2 terms per sentence drawn from the reference (words of 4+ letters, seeded); the share of
  outputs that contain every term, BLEU without and with the terms, and the seconds of each (beam 4);
- prefixes (with --export, a directory from `mt export` of CKPT): the reference's first 1-3 words as prefix;
  the share of outputs that start with it, and of greedy outputs on which mt and CTranslate2 agree;
- ensembles (with --member, more checkpoints of the same vocabulary): each model's BLEU and the ensemble's
  (beam 4), and the ensemble's time against CKPT's alone.

Times are decoding only (models loaded once), 2 threads unless OMP_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's mt, whichever one is installed
DEV = ROOT / "data" / "ddtp-de-en"


def timed(run, repeat: int):
    """(best seconds of `repeat` runs, the last result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def texts(results) -> list[str]:
    return [per_line[0].text for per_line in results]


def draw_terms(refs: list[str], seed: int = 1) -> list[list[str]]:
    rng = random.Random(seed)
    terms = []
    for ref in refs:
        words = [w.strip(".,;:()\"'") for w in ref.split()]
        words = sorted({w for w in words if len(w) >= 4 and w.isalpha()})
        terms.append(rng.sample(words, min(len(words), rng.randint(1, 2))))
    return terms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--checkpoint", required=True)
    parser.add_argument("--export", help="an `mt export` directory of the checkpoint, for the prefix agreement")
    parser.add_argument("--member", action="append", default=[], help="another checkpoint for the ensemble")
    parser.add_argument("--limit", type=int, default=883)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from mt.tuning import tune_process

    tune_process(["translate"])  # as `mt translate` runs: before torch loads
    import torch

    from mt.decoding.text_front_end import translate_lines
    from mt.decoding.loading import load_translator
    from mt.training.corpus_scores import bleu_score

    torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", 2)))
    src = (DEV / "dev.de").read_text(encoding="utf-8").splitlines()[:args.limit]
    ref = (DEV / "dev.en").read_text(encoding="utf-8").splitlines()[:args.limit]
    tr = load_translator(args.checkpoint, "cpu")
    beam = replace(tr.cfg.decode, beam_size=4, batch_tokens=8192)
    greedy = replace(beam, beam_size=1)

    def translate(translator, options, **kw):
        with torch.inference_mode():
            return translate_lines(translator, src, options, **kw)

    print(f"{len(src)} dev sentences, {args.checkpoint}, {torch.get_num_threads()} threads, best of {args.repeat}\n")
    print("| sampling | seconds | ratio to greedy |\n|---|---:|---:|")
    greedy_s, _ = timed(lambda: translate(tr, greedy), args.repeat)
    sample_s, _ = timed(lambda: translate(tr, replace(greedy, sampling=True)), args.repeat)
    print(f"| greedy | {greedy_s:.2f} | 1.00 |\n| sampling, 1 per line | {sample_s:.2f} | {sample_s / greedy_s:.2f} |\n")

    terms = draw_terms(ref)
    plain_s, plain = timed(lambda: translate(tr, beam), args.repeat)
    cons_s, constrained = timed(lambda: translate(tr, beam, constraints=terms), args.repeat)
    met = sum(all(t in out for t in line_terms) for out, line_terms in zip(texts(constrained), terms))
    n_terms = sum(map(len, terms))
    print(f"| constraints ({n_terms} terms from the references) | BLEU | lines with every term | seconds |")
    print("|---|---:|---:|---:|")
    plain_met = sum(all(t in out for t in line_terms) for out, line_terms in zip(texts(plain), terms))
    print(f"| beam 4 | {bleu_score(texts(plain), ref):.2f} | {plain_met / len(src):.1%} | {plain_s:.2f} |")
    print(f"| beam 4 with the terms | {bleu_score(texts(constrained), ref):.2f} | {met / len(src):.1%} | "
          f"{cons_s:.2f} ({cons_s / plain_s:.2f}x) |\n")

    if args.export:
        rng = random.Random(2)
        prefixes = [" ".join(r.split()[:rng.randint(1, 3)]) for r in ref]
        ours = translate(tr, greedy, prefixes=prefixes)
        theirs = translate(load_translator(args.export, "cpu"), greedy, prefixes=prefixes)
        starts = sum(o.startswith(p) for o, p in zip(texts(ours), prefixes))
        agree = sum(a == b for a, b in zip(texts(ours), texts(theirs)))
        print("| prefixes (the reference's first 1-3 words) | share |\n|---|---:|")
        print(f"| mt outputs that start with the prefix | {starts / len(src):.1%} |")
        print(f"| greedy outputs equal in mt and CTranslate2 | {agree / len(src):.1%} |\n")

    if args.member:
        paths = [args.checkpoint, *args.member]
        print("| ensemble (beam 4) | BLEU | seconds |\n|---|---:|---:|")
        for path in paths:
            seconds, out = timed(lambda p=path: translate(load_translator(p, "cpu"), beam), 1)
            print(f"| {path} | {bleu_score(texts(out), ref):.2f} | {seconds:.2f} |")
        ensemble = load_translator(paths, "cpu")
        seconds, out = timed(lambda: translate(ensemble, beam), args.repeat)
        print(f"| ensemble of {len(paths)} | {bleu_score(texts(out), ref):.2f} | {seconds:.2f} "
              f"({seconds / plain_s:.2f}x one model) |")


if __name__ == "__main__":
    main()
