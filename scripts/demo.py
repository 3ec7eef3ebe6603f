"""`make demo`: train configs/demo.yaml on the shipped DDTP de-en corpus, score the dev set, translate a few lines.

Run again and it resumes (or, when training is complete, goes straight to evaluation).

A smoke run of the same commands (tests/test_demo.py): DEMO_STEPS=N trains N updates, evaluating and saving
after the last; DEMO_DEV_LINES=K evaluates on the first K dev lines (copied beside the run's folder); DEMO_OUT=DIR
writes the run into DIR instead of runs/demo.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "demo.yaml"
OUT = Path(os.environ.get("DEMO_OUT") or ROOT / "runs" / "demo")
STEPS = os.environ.get("DEMO_STEPS")
DEV_LINES = os.environ.get("DEMO_DEV_LINES")
DEV_SRC, DEV_REF = ROOT / "data/ddtp-de-en/dev.de", ROOT / "data/ddtp-de-en/dev.en"
EXAMPLES = [
    "Dieses Paket enthält die Dokumentation.",
    "Ein einfacher Texteditor für die Kommandozeile.",
    "Python-3-Bibliothek zum Lesen und Schreiben von Bilddateien",
]


def mt(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "mt", *map(str, args)], cwd=ROOT, check=True, **kwargs)


def dev_set() -> tuple[Path, Path]:
    """The dev set's source and reference: the shipped files, or with DEMO_DEV_LINES their first lines."""
    if not DEV_LINES:
        return DEV_SRC, DEV_REF
    OUT.parent.mkdir(parents=True, exist_ok=True)  # beside the run: mt train wants its folder new or its own
    cut = []
    for path in (DEV_SRC, DEV_REF):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:int(DEV_LINES)]
        cut.append(OUT.parent / f"{OUT.name}.dev{DEV_LINES}{path.suffix}")
        cut[-1].write_text("".join(lines), encoding="utf-8")
    return cut[0], cut[1]


def smoke_settings(dev_src: Path, dev_ref: Path) -> list[str]:
    """`--set` arguments for what the DEMO_ variables change (none without them: `make demo` runs the config)."""
    values = [f"output_dir={OUT}"] if os.environ.get("DEMO_OUT") else []
    if DEV_LINES:
        values += [f"data.dev_src={dev_src}", f"data.dev_tgt={dev_ref}"]
    if STEPS:
        values += [f"train.{key}={STEPS}" for key in ("max_steps", "eval_every", "save_every")]
    return [arg for value in values for arg in ("--set", value)]


def main():
    start = time.perf_counter()
    dev_src, dev_ref = dev_set()
    mt("train", CONFIG, *smoke_settings(dev_src, dev_ref))
    trained = time.perf_counter()
    print("\n== dev set, beam 4 (sacrebleu) ==", flush=True)
    scored = mt("evaluate", "-c", OUT / "checkpoint_best.pt", "--src", dev_src, "--ref", dev_ref, "-o",
                OUT / "dev.hyp.en", capture_output=True, text=True)
    print(scored.stdout, end="", flush=True)
    print("\n== a few translations ==", flush=True)
    result = mt("translate", "-c", OUT / "checkpoint_best.pt", input="\n".join(EXAMPLES) + "\n",
                capture_output=True, text=True)
    for src, hyp in zip(EXAMPLES, result.stdout.splitlines()):
        print(f"  de: {src}\n  en: {hyp}")
    end = time.perf_counter()
    figures = summary(scored.stdout)
    (OUT / "demo.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    print(f"\ndev BLEU {figures['greedy_bleu']:.2f} greedy, {figures['beam4_bleu']:.2f} beam 4 "
          f"(chrF {figures['beam4_chrf']:.1f}); written to {OUT / 'demo.json'}")
    print(f"training {trained - start:.0f}s, evaluation and examples {end - trained:.0f}s, "
          f"total {end - start:.0f}s; outputs in {OUT}")


def summary(evaluated: str) -> dict:
    """The figures README.md quotes: the last dev evaluation's greedy BLEU (metrics.jsonl) and `mt evaluate`'s beam 4
    BLEU and chrF of checkpoint_best.pt. docs/demo-run.json is a copy of a `make demo`'s (tests/test_docs.py
    checks the README against it)."""
    rows = [json.loads(line) for line in (OUT / "metrics.jsonl").read_text().splitlines()]
    greedy = [(row["step"], round(row["bleu"], 2)) for row in rows if row.get("split") == "dev"]
    scores = dict(line.split("\t")[:2] for line in evaluated.splitlines() if "\t" in line)
    return {"greedy_bleu": greedy[-1][1], "beam4_bleu": round(float(scores["bleu"]), 2),
            "beam4_chrf": round(float(scores["chrf"]), 1), "greedy_bleu_per_evaluation": greedy}


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as e:  # mt said why on stderr (or was stopped by a signal, saving first)
        print(f"demo: `mt {e.cmd[3]}` ended with exit code {e.returncode}; `make demo` again resumes",
              file=sys.stderr)
        sys.exit(e.returncode if e.returncode > 0 else 128 - e.returncode)
    except KeyboardInterrupt:
        sys.exit(130)
