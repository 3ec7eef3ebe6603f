"""mt: the Transformer of "Attention Is All You Need" as a command-line machine-translation trainer.

Importing mt changes nothing in the process; the `mt` command tunes it first (mt/tuning.py).
"""

__version__ = "0.1.0"
