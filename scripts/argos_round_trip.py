"""The round trip a LibreTranslate user makes, measured on the shipped de-en corpus (docs/pretrained.md):

1. train configs/demo.yaml on the first half of data/ddtp-de-en/train (--base-steps updates);
2. `mt export --format argos`, install the package with argostranslate (.venv-lt, offline:
   scripts/libretranslate_offline.py) and translate the dev set through it;
3. `mt import` the package, fine-tune it (train.init_from) on the second half (--tune-steps updates);
4. export the result as a package again, install it in a fresh Argos home, translate the dev set through it.

The dev set is never trained on, and every model is its run's last checkpoint, so its BLEU is held out. Each
stage's BLEU (sacrebleu, the dev set's 883 lines) is printed: the checkpoint translated by `mt translate` with
its own defaults, and the package translated by argostranslate (beam 4, length penalty 0.2, int8).

    .venv/bin/python scripts/argos_round_trip.py [--work runs/argos-round-trip] [--base-steps 1200] [--tune-steps 600]
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import sacrebleu
import yaml

from libretranslate_offline import call

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "ddtp-de-en"


def mt(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mt", *map(str, args)], cwd=ROOT, check=True, text=True,
                          capture_output=True, **kwargs)


def bleu(hypotheses: str, references: list[str]) -> float:
    return sacrebleu.corpus_bleu(hypotheses.splitlines(), [references]).score


def halves(work: Path) -> tuple[Path, Path]:
    """work/a.{de,en} and work/b.{de,en}: the first and second half of the shipped training corpus."""
    for lang in ("de", "en"):
        lines = (DATA / f"train.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)
        (work / f"a.{lang}").write_text("".join(lines[:len(lines) // 2]), encoding="utf-8")
        (work / f"b.{lang}").write_text("".join(lines[len(lines) // 2:]), encoding="utf-8")
    return work / "a", work / "b"


def train(out: Path, corpus: Path, steps: int, *sets: str) -> float:
    start = time.perf_counter()
    settings = [f"output_dir={out}", f"data.train_src={corpus}.de", f"data.train_tgt={corpus}.en",
                f"train.max_steps={steps}", f"train.eval_every={steps}", f"train.save_every={steps}", *sets]
    mt("train", ROOT / "configs" / "demo.yaml", *[a for s in settings for a in ("--set", s)])
    return time.perf_counter() - start


def stage(name: str, checkpoint: Path, package: Path, home: Path, dev: str, refs: list[str]) -> dict:
    """BLEU of the checkpoint (mt translate, its defaults) and of its package through argostranslate."""
    ours = mt("translate", "-c", checkpoint, input=dev).stdout
    mt("export", "-c", checkpoint, "--format", "argos", "-o", package, "--force")
    call(home, "install", package)
    theirs = call(home, "translate", "de", "en", input=dev)
    row = {"stage": name, "mt_bleu": round(bleu(ours, refs), 2), "argos_bleu": round(bleu(theirs, refs), 2)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=str(ROOT / "runs" / "argos-round-trip"))
    ap.add_argument("--base-steps", type=int, default=1200)
    ap.add_argument("--tune-steps", type=int, default=600)
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    a, b = halves(work)
    dev = (DATA / "dev.de").read_text(encoding="utf-8")
    refs = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()
    seconds = train(work / "base", a, args.base_steps)
    rows = [stage("trained on half A", work / "base" / "checkpoint_last.pt", work / "base.argosmodel",
                  work / "home-base", dev, refs)]
    printed = mt("import", work / "base.argosmodel", "-o", work / "imported.pt").stdout
    imported = mt("translate", "-c", work / "imported.pt", input=dev).stdout
    rows.append({"stage": "imported from the package", "mt_bleu": round(bleu(imported, refs), 2)})
    print(json.dumps(rows[-1]), flush=True)
    sections = yaml.safe_load(printed)
    sets = [f"{part}.{k}={json.dumps(v)}" for part in ("tokenizer", "model") for k, v in sections[part].items()]
    tune_seconds = train(work / "tuned", b, args.tune_steps, *sets, f"train.init_from={work / 'imported.pt'}")
    rows.append(stage("fine-tuned on half B", work / "tuned" / "checkpoint_last.pt", work / "tuned.argosmodel",
                      work / "home-tuned", dev, refs))
    print(f"training: {args.base_steps} updates in {seconds:.0f} s, fine-tuning: {args.tune_steps} updates in "
          f"{tune_seconds:.0f} s")
    print("| stage | mt translate (its defaults) | argostranslate (the package) |\n|---|---:|---:|")
    for row in rows:
        argos_bleu = f"{row['argos_bleu']:.2f}" if "argos_bleu" in row else "-"
        print(f"| {row['stage']} | {row['mt_bleu']:.2f} | {argos_bleu} |")


if __name__ == "__main__":
    main()
