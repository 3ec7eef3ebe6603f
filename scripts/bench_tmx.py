"""Reading a large TMX file in bounded memory, and what a translation memory costs a request that misses.

    python scripts/bench_tmx.py [--mb 200] [--max-rss-mb 400] [--memory-segments 100000]

Writes a TMX of about --mb megabytes (de and en units, every tenth with inline codes, every hundredth lacking its
German side) into a temporary folder, reads it with mt's reader (mt/data/tmx.py) and prints pairs/s and the
process's peak resident memory (ru_maxrss), failing if it passes --max-rss-mb. Then builds a memory of
--memory-segments units and times a look-up that finds nothing, the cost `mt translate --memory` and `mt serve
--memory` add to each text the memory does not hold.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mt.data.translation_memories import Memory, PairFile  # noqa: E402

UNIT = ('<tu tuid="{i}"><tuv xml:lang="en-US"><seg>Package number {i} contains the {code}documentation{end} of '
        'the program.</seg></tuv>{de}</tu>\n')
GERMAN = '<tuv xml:lang="de-DE"><seg>Paket Nummer {i} enthält die {code}Dokumentation{end} des Programms.</seg></tuv>'


def write_tmx(path: Path, megabytes: int) -> int:
    units = 0
    with open(path, "w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4"><header srclang="en-US" '
                'datatype="plaintext" segtype="sentence" adminlang="en" creationtool="bench" o-tmf="x"/><body>\n')
        while f.tell() < megabytes << 20:
            code, end = ('<bpt i="1">&lt;b&gt;</bpt>', '<ept i="1">&lt;/b&gt;</ept>') if units % 10 == 0 else ("", "")
            de = "" if units % 100 == 99 else GERMAN.format(i=units, code=code, end=end)
            f.write(UNIT.format(i=units, code=code, end=end, de=de))
            units += 1
        f.write("</body></tmx>\n")
    return units


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--max-rss-mb", type=float, default=400)
    parser.add_argument("--memory-segments", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.tmx"
        units = write_tmx(path, args.mb)
        before = peak_mb()
        start = time.perf_counter()
        reader = PairFile(str(path), None, "tmx", "de", "en")
        pairs = sum(1 for _ in reader.pairs())
        seconds = time.perf_counter() - start
        print(f"read {path.stat().st_size / 2**20:.0f} MB, {units:,} units: {pairs:,} pairs, skipped "
              f"{dict(reader.skipped)}, {pairs / seconds:,.0f} pairs/s; peak RSS {peak_mb():.0f} MB "
              f"({before:.0f} MB before reading)")
        small = Path(folder) / "memory.tmx"
        write_tmx(small, 1)
        lines = small.read_text(encoding="utf-8").splitlines()
        body = [line for line in lines if line.startswith("<tu ")]
        with open(small, "w", encoding="utf-8") as f:
            f.write("\n".join(lines[:2]) + "\n")
            for i in range(args.memory_segments):
                f.write(body[i % len(body)].replace(f"number {i % len(body)} ", f"number {i} ")
                        .replace(f"Nummer {i % len(body)} ", f"Nummer {i} ") + "\n")
            f.write("</body></tmx>\n")
        start = time.perf_counter()
        memory = Memory([PairFile(str(small), None, "tmx", "de", "en")])
        built = time.perf_counter() - start
        misses = [f"Ein Satz, den das Gedächtnis nicht kennt, Nummer {i}." for i in range(100_000)]
        start = time.perf_counter()
        found = sum(memory.get(line) is not None for line in misses)
        per_miss = (time.perf_counter() - start) / len(misses)
        print(f"memory of {len(memory):,} segments built in {built:.2f} s; a miss costs {per_miss * 1e6:.2f} us "
              f"({found} of {len(misses):,} misses found)")
    if peak_mb() > args.max_rss_mb:
        print(f"FAIL: peak RSS {peak_mb():.0f} MB over --max-rss-mb {args.max_rss_mb:.0f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
