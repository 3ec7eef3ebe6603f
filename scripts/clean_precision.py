"""Samples of the pairs each filter of `mt clean` removes, for judging its precision by hand: of a filter's
rejections, how many are real noise (not a translation, the wrong language, broken encoding, misaligned) and
how many are good translations removed wrongly. docs/cleaning.md holds the judged table.

    python scripts/clean_precision.py --src data/ddtp-de-en/train.de --tgt data/ddtp-de-en/train.en
        [--per-filter 25] [--seed 0] [--set clean.key=value ...] [--filter language ...] [--all 30]

Runs the filters as `mt clean` does (the `clean` section's defaults, changed by --set), writes nothing, and
prints per filter its count of removed pairs and a sample of them (the same with the same seed), each with its
line number, source and target. With --all N: N pairs drawn from all the filters' rejections together (what
reading `mt clean --rejected` shows), each with its filter, instead.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mt.config import load_config  # noqa: E402
from mt.data.clean import Cleaner, corpus_languages, file_chunks  # noqa: E402
from mt.data.clean_filters import FILTER_NAMES  # noqa: E402


def rejections(src: Path, tgt: Path, sets: list[str]) -> dict[str, list[tuple[int, str, str]]]:
    """Per filter, the (line number, source, target) of the pairs it removed, in order."""
    cfg = load_config(None, sets).clean
    cleaner = Cleaner(cfg, *corpus_languages(src, tgt, None, None, cfg))
    removed, line = defaultdict(list), 0
    for src_raw, tgt_raw, why in cleaner.judged(file_chunks(src, tgt)):
        for s, t, w in zip(src_raw, tgt_raw, why):
            line += 1
            if w is not None:
                removed[w].append((line, s.decode("utf-8", "replace"), t.decode("utf-8", "replace")))
    return {name: removed[name] for name in FILTER_NAMES if removed[name]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, required=True, help="the source side (its extension: its language)")
    parser.add_argument("--tgt", type=Path, required=True, help="the target side")
    parser.add_argument("--per-filter", type=int, default=25, help="pairs sampled per filter (at most)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="clean.key=value")
    parser.add_argument("--filter", dest="filters", action="append", help="only these filters (default: all)")
    parser.add_argument("--all", type=int, help="sample this many of all the rejections together")
    args = parser.parse_args()
    removed = rejections(args.src, args.tgt, args.sets)
    print(f"{args.src}, {args.tgt}: " + ", ".join(f"{name} {len(rows):,}" for name, rows in removed.items()))
    if args.all:
        every = [(line, name, src, tgt) for name, rows in removed.items() for line, src, tgt in rows]
        sample = sorted(random.Random(args.seed).sample(every, min(args.all, len(every))))
        print(f"\n## all filters: {len(every):,} removed, {len(sample)} sampled")
        for i, (line, name, src, tgt) in enumerate(sample, 1):
            print(f"{i:3}. line {line}, {name}\n     src: {src}\n     tgt: {tgt}")
        return
    for name, rows in removed.items():
        if args.filters and name not in args.filters:
            continue
        sample = sorted(random.Random(args.seed).sample(rows, min(args.per_filter, len(rows))))
        print(f"\n## {name}: {len(rows):,} removed, {len(sample)} sampled")
        for i, (line, src, tgt) in enumerate(sample, 1):
            print(f"{i:3}. line {line}\n     src: {src}\n     tgt: {tgt}")


if __name__ == "__main__":
    main()
