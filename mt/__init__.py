"""mt: the Transformer of "Attention Is All You Need" as a command-line machine-translation trainer."""

import os
import sys

__version__ = "0.1.0"


def trains(argv: list[str]) -> bool:
    """Whether the command in `argv` trains (`mt train`, `mt bench train`)."""
    return argv[1:2] == ["train"] or argv[1:3] == ["bench", "train"]


def openmp_spin_count(argv: list[str]) -> str | None:
    """GOMP_SPINCOUNT for the command in `argv`: 30,000 unless it trains (None: GNU OpenMP's 300,000).

    torch's CPU threads wait at a barrier after each parallel operation; GNU OpenMP spins 300,000 rounds there
    before it sleeps. Decoding runs hundreds of small parallel operations per step, and with a core busy
    elsewhere a spinning thread keeps the CPU from the thread it waits for: 30,000 rounds made beam search
    3.3x faster with one core busy and no slower on an idle machine. Training's operations are large, and
    there 30,000 rounds cost about 10% (docs/benchmarks.md, "Threads that spin")."""
    return None if trains(argv) else "30000"


def huge_pages(argv: list[str]) -> str | None:
    """THP_MEM_ALLOC_ENABLE for the command in `argv`: "1" when it trains, else None (torch's default: off).

    With it torch asks the kernel for transparent huge pages (2 MB) for each CPU buffer of 2 MB or more, where
    the kernel's THP mode is `madvise` or `always`. A CPU training step multiplies tens of MB of activations:
    with 2 MB pages the protocol model's updates took 2-3% less time, in five paired runs of 40 and 100 updates
    (docs/benchmarks.md, "Training against fairseq"). Decoding preallocates key and value caches that it fills in part,
    and 2 MB pages would back all of it: beam search of the dev set was slower, so decoding leaves it off."""
    return "1" if trains(argv) else None


# They apply when mt is imported before torch (the `mt` command); a value the user set wins.
for _name, _value in (("GOMP_SPINCOUNT", openmp_spin_count(sys.argv)),
                      ("THP_MEM_ALLOC_ENABLE", huge_pages(sys.argv))):
    if _name not in os.environ and _value is not None:
        os.environ[_name] = _value
