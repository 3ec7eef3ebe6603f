"""`make demo`: train configs/demo.yaml on the shipped DDTP de-en corpus, score the dev set, translate a few lines.

Run again and it resumes (or, when training is complete, goes straight to evaluation).
"""

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "demo.yaml"
OUT = ROOT / "runs" / "demo"
DEV_SRC, DEV_REF = ROOT / "data/ddtp-de-en/dev.de", ROOT / "data/ddtp-de-en/dev.en"
EXAMPLES = [
    "Dieses Paket enthält die Dokumentation.",
    "Ein einfacher Texteditor für die Kommandozeile.",
    "Python-3-Bibliothek zum Lesen und Schreiben von Bilddateien",
]


def mt(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "mt", *map(str, args)], cwd=ROOT, check=True, **kwargs)


def main():
    start = time.perf_counter()
    mt("train", CONFIG)
    trained = time.perf_counter()
    print("\n== dev set, beam 4 (sacrebleu) ==", flush=True)
    mt("evaluate", "-c", OUT / "checkpoint_best.pt", "--src", DEV_SRC, "--ref", DEV_REF,
       "-o", OUT / "dev.hyp.en")
    print("\n== a few translations ==", flush=True)
    result = mt("translate", "-c", OUT / "checkpoint_best.pt", input="\n".join(EXAMPLES) + "\n",
                capture_output=True, text=True)
    for src, hyp in zip(EXAMPLES, result.stdout.splitlines()):
        print(f"  de: {src}\n  en: {hyp}")
    end = time.perf_counter()
    print(f"\ntraining {trained - start:.0f}s, evaluation and examples {end - trained:.0f}s, "
          f"total {end - start:.0f}s; outputs in {OUT}")


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as e:  # mt said why on stderr (or was stopped by a signal, saving first)
        print(f"demo: `mt {e.cmd[3]}` ended with exit code {e.returncode}; `make demo` again resumes",
              file=sys.stderr)
        sys.exit(e.returncode if e.returncode > 0 else 128 - e.returncode)
    except KeyboardInterrupt:
        sys.exit(130)
