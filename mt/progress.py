"""How far a command is through its inputs (pairs of a corpus, lines to translate): a tqdm bar on a terminal,
otherwise a line now and then and one at the end; never on stdout."""

from __future__ import annotations

import os
import sys
import time

from tqdm import tqdm


class Progress:
    """Items per second (and an ETA with a `total`): a tqdm bar on a terminal; otherwise a line every
    `MT_PROGRESS_EVERY_S` seconds (30) and one at the end; nothing with `quiet`."""

    def __init__(self, command: str, what: str, total: int | None, log, unit: str = "pairs", initial: int = 0,
                 quiet: bool = False):
        self.command, self.what, self.log, self.unit, self.quiet = command, what, log, unit, quiet
        self.done, self.initial = initial, initial
        self.every_s = float(os.environ.get("MT_PROGRESS_EVERY_S", 30))
        self.start = self.last_line = time.perf_counter()
        self.bar = tqdm(total=total, initial=initial, desc=f"{command}: {what}", unit=f" {unit}", unit_scale=True,
                        file=sys.stderr, disable=quiet or not sys.stderr.isatty(), dynamic_ncols=True, leave=False)

    def update(self, n: int) -> None:
        self.done += n
        self.bar.update(n)
        now = time.perf_counter()
        if self.bar.disable and not self.quiet and now - self.last_line >= self.every_s:
            self.last_line = now
            total = f" of {self.bar.total:,}" if self.bar.total else ""
            self.log(f"{self.command}: {self.what} {self.done:,}{total} {self.unit} ({self._rate(now):,.0f} "
                     f"{self.unit}/s)")

    def _rate(self, now: float) -> float:
        return (self.done - self.initial) / max(now - self.start, 1e-9)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()
        if exc[0] is None and not self.quiet:
            now = time.perf_counter()
            earlier = f", {self.initial:,} of them by an earlier run" if self.initial else ""
            self.log(f"{self.command}: {self.what} {self.done:,} {self.unit} in {now - self.start:.1f} s "
                     f"({self._rate(now):,.0f} {self.unit}/s{earlier})")
