"""`mt score` against `mt translate` of the same pairs: the cost of teacher-forced scoring as a share of the search.

    python scripts/bench_score.py --model CKPT [--src FILE --tgt FILE] [--lines N] [--rounds 2] [--beam-size 4]

The pairs are the first --lines of --src/--tgt (by default the shipped de-en training sample). Each round runs,
one after the other as fresh processes, `mt translate --beam-size B` of the sources and `mt score` of the
sources with that translation as targets (what `mt distill` and reranking score); the time of each is its wall
time less that of the same command on one line (start-up and model load). Prints the times per round and the
ratio score / translate of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MT = [sys.executable, "-m", "mt"]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(MT + argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="mt checkpoint or CTranslate2 export")
    ap.add_argument("--src", default=str(ROOT / "data" / "ddtp-de-en" / "sample-2k.de"))
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--beam-size", type=int, default=4)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-score-"))
    lines = Path(args.src).read_text(encoding="utf-8").splitlines()[:args.lines]
    src, one = work / "src", work / "one"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one.write_text(lines[0] + "\n", encoding="utf-8")
    hyp, one_hyp = work / "hyp", work / "one.hyp"
    beam = ["--beam-size", str(args.beam_size)]
    subprocess.run(MT + ["translate", "-c", args.model, *beam, "-i", str(one), "-o", str(one_hyp)], check=True)
    translate, score = [], []
    for round_ in range(args.rounds):
        base = timed(["translate", "-c", args.model, *beam, "-i", str(one), "-o", str(one_hyp)])
        translate.append(timed(["translate", "-c", args.model, *beam, "-i", str(src), "-o", str(hyp)]) - base)
        base = timed(["score", "-c", args.model, "--src", str(one), "--tgt", str(one_hyp), "-o", str(work / "s1")])
        score.append(timed(["score", "-c", args.model, "--src", str(src), "--tgt", str(hyp), "-o",
                            str(work / "scores")]) - base)
        print(f"round {round_ + 1}: translate (beam {args.beam_size}) {translate[-1]:.1f} s, score "
              f"{score[-1]:.1f} s for {len(lines)} pairs", flush=True)
    ratio = statistics.median(score) / statistics.median(translate)
    print(f"score / translate: {ratio:.3f} (medians of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
