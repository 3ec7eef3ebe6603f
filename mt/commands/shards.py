"""One input file shared among processes by `mt translate`: `--shard I/N`, or the ranks of `torchrun`.

The input is cut into the chunks a one-process run translates (`--chunk-lines` lines each, from line 1), and shard
I of N takes a contiguous run of them: chunks [I*C/N, (I+1)*C/N) of C. Its batches are those of the one-process
run, so its lines are translated alike, and the shards' outputs in order (`cat`) are the one-process output.
Under torchrun every rank writes its part beside -o, resumable as any output (mt/commands/resumable_output.py),
and rank 0 joins the parts into -o once all are done.
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path

from mt.atomic_files import atomic_write
from mt.errors import MtError


@dataclass(frozen=True)
class Shard:
    index: int  # 0 .. count-1, as torchrun's RANK
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class Span:
    """A shard's lines: from line `first_line` (0-based), at byte `start_byte`, `lines` of them."""

    first_line: int
    start_byte: int
    lines: int


def parse_shard(text: str) -> Shard:
    found = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not found or not 0 <= int(found[1]) < int(found[2]):
        raise MtError(f"--shard {text}: give I/N, the I-th of N shards counted from 0 (0/4 .. 3/4)")
    return Shard(int(found[1]), int(found[2]))


def torchrun_shard() -> Shard | None:
    """This process's shard when torchrun started more than one (WORLD_SIZE, RANK)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return Shard(int(os.environ.get("RANK", "0")), world) if world > 1 else None


def use_rank_gpu(device: str) -> None:
    """Under torchrun on a machine with GPUs, each rank decodes on its own one (LOCAL_RANK), as training does."""
    import torch

    if torchrun_shard() is not None and device in ("auto", "cuda") and torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())


def shard_span(path: str | Path, shard: Shard, chunk_lines: int) -> Span:
    """Where `shard`'s chunks start in the file, and how many lines they hold (0 when there are fewer chunks
    than shards)."""
    starts, lines = _chunk_starts(path, chunk_lines)
    chunks = len(starts)
    first, end = shard.index * chunks // shard.count, (shard.index + 1) * chunks // shard.count
    first_line = first * chunk_lines
    start_byte = starts[first] if first < chunks else (starts[-1] if starts else 0)
    return Span(first_line, start_byte, max(min(end * chunk_lines, lines) - first_line, 0))


def _chunk_starts(path: str | Path, chunk_lines: int) -> tuple[list[int], int]:
    """The byte offset of every chunk's first line, and the number of lines (a last one without a newline
    counted, as `mt translate` reads it)."""
    starts, offset, lines = [], 0, 0
    with open(path, "rb") as f:
        for raw in f:
            if lines % chunk_lines == 0:
                starts.append(offset)
            offset, lines = offset + len(raw), lines + 1
    return starts, lines


def part_name(output: str | Path, shard: Shard) -> Path:
    """Where a torchrun rank writes its part of -o."""
    return Path(f"{output}.part-{shard.index}-of-{shard.count}")


def wait_for_all_ranks() -> None:
    """A barrier over torchrun's ranks (gloo: it needs no GPU); a rank ahead waits for the slowest."""
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=datetime.timedelta(hours=12))
    dist.barrier()


def join_parts(output: str | Path, parts: list[Path]) -> None:
    """The ranks' parts, in order, written atomically as -o."""
    def write(f):
        for part in parts:
            with open(part, "rb") as p:
                while data := p.read(1 << 22):
                    f.write(data)

    atomic_write(Path(output), write)
