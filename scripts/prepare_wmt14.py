"""Fetch WMT14 English-German with `datasets` (needs network) for configs/transformer-{base,big}.yaml.

Writes data/wmt14-de-en (a save_to_disk folder the configs read) and plain-text newstest2014 files
(data/wmt14-de-en/test.en, test.de) for `mt evaluate`. Usage: python scripts/prepare_wmt14.py [OUT_DIR]
"""

import sys
from pathlib import Path

import datasets


def main(out: Path) -> None:
    ds = datasets.load_dataset("wmt/wmt14", "de-en")  # train (Europarl, Common Crawl, News Commentary), 2013, 2014
    ds.save_to_disk(str(out))
    test = ds["test"]["translation"]
    for lang in ("en", "de"):
        (out / f"test.{lang}").write_text("".join(pair[lang].strip() + "\n" for pair in test), encoding="utf-8")
    print(f"wrote {out}: " + ", ".join(f"{name} {len(split)} pairs" for name, split in ds.items()))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "data/wmt14-de-en"))
