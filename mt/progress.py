"""Pairs per second while a command reads a corpus: a tqdm bar on a terminal, otherwise a line now and then."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm


class Progress:
    """Pairs per second: a tqdm bar on a terminal; otherwise a line every 30 s and one at the end."""

    EVERY_S = 30.0

    def __init__(self, command: str, what: str, total: int | None, log):
        self.command, self.what, self.log, self.done = command, what, log, 0
        self.start = self.last_line = time.perf_counter()
        self.bar = tqdm(total=total, desc=f"{command}: {what}", unit=" pairs", unit_scale=True, file=sys.stderr,
                        disable=not sys.stderr.isatty(), dynamic_ncols=True, leave=False)

    def update(self, n: int) -> None:
        self.done += n
        self.bar.update(n)
        now = time.perf_counter()
        if self.bar.disable and now - self.last_line >= self.EVERY_S:
            self.last_line = now
            rate = self.done / (now - self.start)
            self.log(f"{self.command}: {self.what} {self.done:,} pairs ({rate:,.0f} pairs/s)")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
        if exc[0] is None:
            seconds = time.perf_counter() - self.start
            self.log(f"{self.command}: {self.what} {self.done:,} pairs in {seconds:.1f} s "
                     f"({self.done / max(seconds, 1e-9):,.0f} pairs/s)")
