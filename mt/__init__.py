"""mt: the Transformer of "Attention Is All You Need" as a command-line machine-translation trainer."""

import os
import sys

__version__ = "0.1.0"


def openmp_spin_count(argv: list[str]) -> str | None:
    """GOMP_SPINCOUNT for the command in `argv`: 30,000 unless it trains (None: GNU OpenMP's 300,000).

    torch's CPU threads wait at a barrier after each parallel operation; GNU OpenMP spins 300,000 rounds there
    before it sleeps. Decoding runs hundreds of small parallel operations per step, and with a core busy
    elsewhere a spinning thread keeps the CPU from the thread it waits for: 30,000 rounds made beam search
    3.3x faster with one core busy and no slower on an idle machine. Training's operations are large, and
    there 30,000 rounds cost about 10% (docs/benchmarks.md, "Threads that spin")."""
    trains = argv[1:2] == ["train"] or argv[1:3] == ["bench", "train"]
    return None if trains else "30000"


# It applies when mt is imported before torch (the `mt` command); a value the user set wins.
_spin_count = openmp_spin_count(sys.argv)
if "GOMP_SPINCOUNT" not in os.environ and _spin_count is not None:
    os.environ["GOMP_SPINCOUNT"] = _spin_count
