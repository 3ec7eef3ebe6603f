"""How much noise `mt clean` removes, how much good data it loses, how fast, and what that does to BLEU.

    python scripts/bench_clean.py [--french FILE] [--steps N | --no-train] [--out runs/bench_clean]
    python scripts/bench_clean.py --speed 1000000 [--out runs/bench_clean]

1. A noisy copy of the shipped DDTP de-en training corpus: every original pair, plus about as many noisy pairs
   of ten kinds (`KINDS`), put among the originals at random places (a duplicate after its original).
2. `mt clean` on it (the default clean section): the share of each kind of noise removed, the share of the
   original pairs removed and by which filter, and pairs/s (wall clock, and per CPU second: the command runs
   on one core).
3. Unless --no-train: the demo model (configs/demo.yaml; --steps changes train.max_steps) trained on the clean
   corpus, the noisy one and the cleaned noisy one, each scored on the dev set (`mt evaluate`, sacrebleu).

--speed N instead times `mt clean` with the defaults on N distinct pairs (each two pairs of the shipped corpus
drawn at random and joined, source to source and target to target) and prints pairs/s and the peak RSS.

French lines (for French on the German side) come from --french, a file of French sentences; without one that
kind is left out. Results: a table on stdout and OUT/summary.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "ddtp-de-en"

BOILERPLATE = [  # navigation, cookie banners and footers as crawls carry them, some with markup
    ("Startseite", "Home"), ("Impressum | Datenschutz | Kontakt", "Imprint | Privacy | Contact"),
    ("Diese Website verwendet Cookies.", "This website uses cookies."), ("Weiterlesen »", "Read more »"),
    ("Alle Rechte vorbehalten.", "All rights reserved."), ("<a href=\"/login\">Anmelden</a>", "<a href=\"/login\">Log in</a>"),
    ("Zurück nach oben", "Back to top"), ("Seite 1 von 3", "Page 1 of 3"), ("Jetzt kaufen!", "Buy now!"),
    ("Newsletter abonnieren", "Subscribe to our newsletter"), ("&copy; 2024 Beispiel GmbH", "&copy; 2024 Example Inc."),
    ("Kommentare (0)", "Comments (0)"),
]


def noisy_pair(kind: str, i: int, de: list[str], en: list[str], fr: list[str], rng: random.Random):
    """A noisy version of pair i, of `kind`; None when pair i cannot carry that kind (no digit, no umlaut)."""
    other = (i + rng.randrange(1, len(de))) % len(de)
    if kind == "misaligned":  # a shuffled target
        return de[i], en[other]
    if kind == "copied_source":
        return de[i], de[i]
    if kind == "english_source":
        return en[other], en[i]
    if kind == "french_source":
        return rng.choice(fr), en[i]
    if kind == "duplicate":
        return de[i], en[i]
    if kind == "numbers_changed":
        if not re.search(r"\d", de[i]) or not re.search(r"\d", en[i]):
            return None
        return re.sub(r"\d+", lambda m: str(int(m.group()) + rng.randrange(1, 9)), de[i], count=1), en[i]
    if kind == "boilerplate":
        return rng.choice(BOILERPLATE)
    if kind == "mojibake":  # UTF-8 read as cp1252
        broken = de[i].encode("utf-8").decode("cp1252", errors="ignore")
        return (broken, en[i]) if broken != de[i] else None
    if kind == "html":
        return f"<p>{de[i]}<br/></p>", f"<p>{en[i]}<br/></p>"
    if kind == "empty":
        return ("", en[i]) if rng.random() < 0.5 else (de[i], " ")
    raise ValueError(kind)


KINDS = ["misaligned", "copied_source", "english_source", "french_source", "duplicate", "numbers_changed",
         "boilerplate", "mojibake", "html", "empty"]


def make_noisy(out: Path, fr: list[str], seed: int) -> list[str]:
    """Write OUT/noisy.{de,en}; return each line's kind ("original" or a noise kind)."""
    de = (DATA / "train.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "train.en").read_text(encoding="utf-8").splitlines()
    rng, kinds = random.Random(seed), [k for k in KINDS if fr or k != "french_source"]
    rows = [(float(i), "original", de[i], en[i]) for i in range(len(de))]
    per_kind = len(de) // len(kinds)
    for kind in kinds:
        made = 0
        while made < per_kind:
            i = rng.randrange(len(de))
            pair = noisy_pair(kind, i, de, en, fr, rng)
            if pair is not None:
                place = rng.uniform(i + 0.5, len(de)) if kind == "duplicate" else rng.uniform(0, len(de))
                rows.append((place, kind, *pair))
                made += 1
    rows.sort(key=lambda row: row[0])
    (out / "noisy.de").write_text("".join(r[2] + "\n" for r in rows), encoding="utf-8")
    (out / "noisy.en").write_text("".join(r[3] + "\n" for r in rows), encoding="utf-8")
    return [r[1] for r in rows]


def mt(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "mt", *map(str, args)], cwd=ROOT, check=True, **kwargs)


def run_clean(out: Path, sets: list[str]) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    mt("clean", "--src", out / "noisy.de", "--tgt", out / "noisy.en", "-o", out / "cleaned",
       "--report", out / "clean.json", "--rejected", out / "rejected.tsv", *[a for s in sets for a in ("--set", s)])
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads((out / "clean.json").read_text())
    return {"report": report, "wall_s": wall, "cpu_s": cpu, "pairs_per_s_wall": report["pairs"] / wall,
            "pairs_per_s_cpu": report["pairs"] / cpu, "pairs_per_s_filtering": report["pairs"] / report["seconds"]}


def score_removal(out: Path, kinds: list[str]) -> dict:
    """Per kind: pairs, removed, and (for the originals) which filters removed them."""
    removed = {}
    for line in (out / "rejected.tsv").read_text(encoding="utf-8").splitlines():
        number, why = line.split("\t", 2)[:2]
        removed[int(number) - 1] = why
    table = {}
    for i, kind in enumerate(kinds):
        row = table.setdefault(kind, {"pairs": 0, "removed": 0, "by": {}})
        row["pairs"] += 1
        if i in removed:
            row["removed"] += 1
            row["by"][removed[i]] = row["by"].get(removed[i], 0) + 1
    noise = [row for kind, row in table.items() if kind != "original"]
    table["all noise"] = {"pairs": sum(r["pairs"] for r in noise), "removed": sum(r["removed"] for r in noise)}
    return table


def train_and_score(out: Path, name: str, src: Path, tgt: Path, steps: int | None, beam_size: int | None) -> dict:
    run = out / f"train-{name}"
    sets = {"output_dir": run, "data.train_src": src, "data.train_tgt": tgt,
            "data.dev_src": "null", "data.dev_tgt": "null"}  # no dev evaluation in training: mt evaluate, after
    if steps:
        sets.update({"train.max_steps": steps, "train.warmup_steps": min(400, max(steps // 3, 1)),
                     "train.save_every": steps})
    args = [a for key, value in sets.items() for a in ("--set", f"{key}={value}")]
    start = time.perf_counter()
    mt("train", ROOT / "configs" / "demo.yaml", *args)
    trained = time.perf_counter() - start
    beam = ["--beam-size", beam_size] if beam_size else []
    result = mt("evaluate", "-c", run / "checkpoint_last.pt", "--src", DATA / "dev.de", "--ref", DATA / "dev.en",
                "-o", run / "dev.hyp.en", *beam, capture_output=True, text=True)
    bleu = re.search(r"^bleu\t([0-9.]+)", result.stdout, re.MULTILINE | re.IGNORECASE)
    return {"bleu": float(bleu.group(1)) if bleu else None, "train_s": trained,
            "evaluate_output": (result.stdout + result.stderr).strip().splitlines()[-3:]}


def speed(out: Path, n: int, seed: int) -> dict:
    de = (DATA / "train.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "train.en").read_text(encoding="utf-8").splitlines()
    rng, seen = random.Random(seed), set()
    with open(out / "big.de", "w", encoding="utf-8") as src, open(out / "big.en", "w", encoding="utf-8") as tgt:
        while len(seen) < n:
            i, j = rng.randrange(len(de)), rng.randrange(len(de))
            if (i, j) not in seen:
                seen.add((i, j))
                src.write(f"{de[i]} {de[j]}\n")
                tgt.write(f"{en[i]} {en[j]}\n")
    start = time.perf_counter()
    mt("clean", "--src", out / "big.de", "--tgt", out / "big.en", "-o", out / "big-cleaned", "--report",
       out / "big.json")
    wall = time.perf_counter() - start
    report = json.loads((out / "big.json").read_text())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result = {"pairs": n, "kept": report["kept"], "removed": {k: v for k, v in report["removed"].items() if v},
              "wall_s": wall, "pairs_per_s": n / wall, "peak_rss_mib": peak}
    print(json.dumps(result, indent=1), flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_clean")
    parser.add_argument("--french", type=Path, help="French sentences, one a line (DDTP's fr-en train.fr)")
    parser.add_argument("--steps", type=int, default=None, help="train.max_steps (default: the demo's)")
    parser.add_argument("--no-train", action="store_true", help="measure the cleaning only")
    parser.add_argument("--train", default="clean,noisy,cleaned",
                        help="the corpora to train on, some of clean,noisy,cleaned (the first two do not depend on "
                             "mt clean's settings)")
    parser.add_argument("--beam-size", type=int, help="for the dev BLEU (default: the demo's, 4); 1: greedy")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="clean.key=value for mt clean")
    parser.add_argument("--speed", type=int, metavar="N", help="time the defaults on N distinct pairs instead")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.speed:
        (args.out / "speed.json").write_text(json.dumps(speed(args.out, args.speed, args.seed), indent=1))
        return
    fr = args.french.read_text(encoding="utf-8").splitlines() if args.french else []
    kinds = make_noisy(args.out, fr, args.seed)
    summary = {"clean": run_clean(args.out, args.sets), "sets": args.sets, "removal": score_removal(args.out, kinds), "french": str(args.french)}
    _print_removal(summary)
    if not args.no_train:
        corpora = {"clean": (DATA / "train.de", DATA / "train.en"),
                   "noisy": (args.out / "noisy.de", args.out / "noisy.en"),
                   "cleaned": (args.out / "cleaned.de", args.out / "cleaned.en")}
        summary["steps"], summary["beam_size"] = args.steps, args.beam_size
        summary["bleu"] = {}
        for name, (src, tgt) in corpora.items():
            if name not in args.train.split(","):
                continue
            summary["bleu"][name] = train_and_score(args.out, name, src, tgt, args.steps, args.beam_size)
            (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
            print(f"{name}: dev BLEU {summary['bleu'][name]['bleu']} ({summary['bleu'][name]['train_s']:.0f} s "
                  "training)", flush=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))


def _print_removal(summary: dict) -> None:
    c = summary["clean"]
    print(f"\n{c['report']['pairs']:,} pairs: {c['pairs_per_s_wall']:,.0f} pairs/s wall clock, "
          f"{c['pairs_per_s_cpu']:,.0f} per CPU second (one process; eflomal samples on three threads)\n")
    print("| pairs | count | removed | share removed | by |\n|---|---|---|---|---|")
    for kind, row in summary["removal"].items():
        by = ", ".join(f"{k} {v}" for k, v in sorted(row.get("by", {}).items(), key=lambda kv: -kv[1]))
        print(f"| {kind} | {row['pairs']:,} | {row['removed']:,} | {100 * row['removed'] / row['pairs']:.1f}% | {by} |")
    print(flush=True)


if __name__ == "__main__":
    main()
