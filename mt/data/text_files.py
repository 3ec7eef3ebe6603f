"""Reading line-aligned UTF-8 text: one file's lines, or two files' aligned pairs, in chunks of `CHUNK_LINES`, so
a corpus of any size streams without being held in memory; errors name the file and line."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

from mt.errors import DataError

CHUNK_LINES = 100_000

Chunks = Iterator[tuple[list[str], list[str]]]  # (source lines, target lines) of equal length


def line_chunks(path: str | Path) -> Iterator[list[str]]:
    """Lines of a UTF-8 text file without their newlines, `CHUNK_LINES` at a time; errors name the file (and line)."""
    path = Path(path)
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}") from None
    with f:
        done = 0
        while raw := list(itertools.islice(f, CHUNK_LINES)):
            yield _decode(raw, path, done)
            done += len(raw)


def _decode(raw: list[bytes], path: Path, first_line: int) -> list[str]:
    data = b"".join(raw)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + data.count(b"\n", 0, e.start) + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 (byte {data[e.start]:#04x}); fix or remove that line") from None
    lines = text.split("\n")
    if raw[-1].endswith(b"\n"):
        lines.pop()
    return [line.rstrip("\r") for line in lines] if "\r" in text else lines


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (for small files: dev sets, references)."""
    return [line for chunk in line_chunks(path) for line in chunk]


def parallel_chunks(src_path: str | Path, tgt_path: str | Path) -> Chunks:
    """Aligned chunks of two line-parallel files; a length mismatch is found where the shorter file ends."""
    src_chunks, tgt_chunks = line_chunks(src_path), line_chunks(tgt_path)
    pairs = 0
    for src in src_chunks:
        tgt = next(tgt_chunks, [])
        if len(src) != len(tgt):
            n_src = pairs + len(src) + sum(map(len, src_chunks))
            n_tgt = pairs + len(tgt) + sum(map(len, tgt_chunks))
            raise DataError(f"parallel files differ in length: {src_path} has {n_src} lines, {tgt_path} has {n_tgt}")
        pairs += len(src)
        yield src, tgt
    n_tgt = pairs + sum(map(len, tgt_chunks))
    if n_tgt != pairs:
        raise DataError(f"parallel files differ in length: {src_path} has {pairs} lines, {tgt_path} has {n_tgt}")
    if pairs == 0:
        raise DataError(f"{src_path}: empty file")


def joined(chunks: Chunks) -> tuple[list[str], list[str]]:
    """All chunks of (source lines, target lines) as two lists in memory."""
    src, tgt = [], []
    for src_chunk, tgt_chunk in chunks:
        src += src_chunk
        tgt += tgt_chunk
    return src, tgt


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    return joined(parallel_chunks(src_path, tgt_path))
