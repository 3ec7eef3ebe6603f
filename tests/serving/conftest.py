"""What the serving tests share: the dev lines they send, what `mt translate` gives for them, and a process's
resident memory."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import DATA, run_mt

DEV = DATA / "dev.de"


def translate_offline(checkpoint: Path, lines: list[str], *options: str) -> list[str]:
    proc = run_mt("translate", "-c", checkpoint, *options, input="".join(line + "\n" for line in lines))
    return proc.stdout.splitlines()


def dev_lines(side: Path = DEV) -> list[str]:
    """The dev set's non-empty lines (German, or `side`)."""
    return [line for line in side.read_text(encoding="utf-8").splitlines() if line.strip()]


def single_sentence_lines(count: int, side: Path = DEV) -> list[str]:
    """Dev lines the server keeps whole (no sentence end inside)."""
    return [line for line in dev_lines(side) if not re.search(r"[.!?…]\s", line)][:count]


def resident_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) / 1024
