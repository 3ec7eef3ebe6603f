"""mt: the Transformer of "Attention Is All You Need" as a command-line machine-translation trainer."""

import os

__version__ = "0.1.0"

# torch's CPU threads wait at a barrier after each parallel operation; GNU OpenMP spins 300,000 rounds there
# before it sleeps. Decoding runs hundreds of small parallel operations per step, and with a core busy
# elsewhere a spinning thread keeps the CPU from the thread it waits for: 30,000 rounds made beam search
# 3.3x faster with one core busy and no slower on an idle machine (docs/benchmarks.md, "Threads that spin").
# It applies when mt is imported before torch (the `mt` command); a value the user set wins.
os.environ.setdefault("GOMP_SPINCOUNT", "30000")
