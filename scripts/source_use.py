"""Whether a multilingual model uses its source: what a wrong source costs it (docs/multilingual.md).

    python scripts/source_use.py CHECKPOINT [--lines 100]

For each direction of the shipped DDTP dev sets (de->en, en->de, fr->en, en->fr), the first --lines references
are scored by `mt score` twice, under their own sources and under the next line's source (the last under the
first's). It prints the mean difference per sentence in nats: a model that translates pays several nats for a
wrong source; one that writes fluent sentences of the corpus whatever the source pays almost nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEV = {("de", "en"): "ddtp-de-en", ("en", "de"): "ddtp-de-en", ("fr", "en"): "ddtp-fr-en", ("en", "fr"): "ddtp-fr-en"}


def log_probabilities(checkpoint: str, sources: list[str], references: list[str], target: str,
                      folder: Path) -> list[float]:
    src, ref = folder / "src", folder / "ref"
    src.write_text("".join(line + "\n" for line in sources), encoding="utf-8")
    ref.write_text("".join(line + "\n" for line in references), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "mt", "score", "-c", checkpoint, "--src", str(src), "--tgt",
                           str(ref), "--target-lang", target, "-q"], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr.strip())
    return [float(x) for x in proc.stdout.split()]


def wrong_source_cost(checkpoint: str, source: str, target: str, lines: int, folder: Path) -> float:
    corpus = ROOT / "data" / DEV[source, target]
    sources = (corpus / f"dev.{source}").read_text(encoding="utf-8").splitlines()[:lines]
    references = (corpus / f"dev.{target}").read_text(encoding="utf-8").splitlines()[:lines]
    own = log_probabilities(checkpoint, sources, references, target, folder)
    shifted = log_probabilities(checkpoint, sources[1:] + sources[:1], references, target, folder)
    return sum(a - b for a, b in zip(own, shifted)) / len(own)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--lines", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        costs = {f"{s}-{t}": wrong_source_cost(args.checkpoint, s, t, args.lines, Path(folder)) for s, t in DEV}
    print("nats a wrong source costs per sentence: " + " / ".join(f"{d} {c:.2f}" for d, c in costs.items()))


if __name__ == "__main__":
    main()
