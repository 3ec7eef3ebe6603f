"""mt: the Transformer of "Attention Is All You Need" as a command-line machine-translation trainer."""

__version__ = "0.1.0"
