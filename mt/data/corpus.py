"""Encoded sentence pairs, stored flat on disk and memory-mapped by the trainer.

On disk a corpus is four files named after a prefix, e.g. `train`:

    train.src.bin   token ids of every source sentence, back to back (uint16, or int32 for a vocabulary
                    over 65,536), no BOS/EOS
    train.src.idx   int64 offsets, n + 1 of them: sentence i is src[offsets[i]:offsets[i + 1]]
    train.tgt.bin, train.tgt.idx   the same for the target side

Mapped, not loaded: the pages a process reads come from the OS page cache, shared by every process on the
machine (all ranks of a torchrun), so a training process's memory does not grow with the corpus.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mt.errors import DataError
from mt.data.tokenizer import Tokenizer


@dataclass
class Corpus:
    """Encoded sentence pairs stored flat: sentence i is tokens[offsets[i]:offsets[i+1]] (no BOS/EOS)."""

    src: torch.Tensor  # uint16 or int32
    src_offsets: torch.Tensor  # int64, len(self) + 1
    tgt: torch.Tensor
    tgt_offsets: torch.Tensor

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    def src_lengths(self) -> torch.Tensor:
        return self.src_offsets.diff()

    def tgt_lengths(self) -> torch.Tensor:
        return self.tgt_offsets.diff()

    def costs(self) -> torch.Tensor:
        """Per pair, the length of its longer side including BOS/EOS: what it adds to a padded batch."""
        return torch.maximum(self.src_lengths(), self.tgt_lengths()) + 1

    def part(self, start: int, stop: int) -> Corpus:
        """Pairs start..stop-1 as a corpus of their own, sharing this one's token arrays (no copy)."""
        return Corpus(self.src, self.src_offsets[start:stop + 1], self.tgt, self.tgt_offsets[start:stop + 1])

    def pair(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.src[self.src_offsets[i]:self.src_offsets[i + 1]],
                self.tgt[self.tgt_offsets[i]:self.tgt_offsets[i + 1]])


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest dtype that holds every id: uint16 halves the file and the page cache it needs."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.int32)


def flatten(seqs: list[list[int]], dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """Sequences as (tokens back to back, lengths)."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    tokens = np.fromiter(itertools.chain.from_iterable(seqs), dtype=dtype, count=int(lengths.sum()))
    return tokens, lengths


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def encode_corpus(src_lines, tgt_lines, src_tok: Tokenizer, tgt_tok: Tokenizer, max_len: int | None):
    """Encode pairs in memory; drop pairs with an empty side or a side over `max_len` tokens.

    Returns (corpus, counts), tokens as int32. `mt prepare` streams the same steps to disk (`CorpusWriter.add`);
    this is the reference it is tested against.
    """
    return corpus_of_ids(src_tok.encode(src_lines), tgt_tok.encode(tgt_lines), max_len)


def corpus_of_ids(src_ids: list[list[int]], tgt_ids: list[list[int]], max_len: int | None):
    """`encode_corpus` of pairs already encoded (the dev sets, after their language tokens)."""
    src, src_lengths = flatten(src_ids)
    tgt, tgt_lengths = flatten(tgt_ids)
    keep, counts = keep_mask(src_lengths, tgt_lengths, max_len)
    corpus = Corpus(torch.from_numpy(src[np.repeat(keep, src_lengths)]),
                    torch.from_numpy(_offsets(src_lengths[keep])),
                    torch.from_numpy(tgt[np.repeat(keep, tgt_lengths)]),
                    torch.from_numpy(_offsets(tgt_lengths[keep])))
    return corpus, counts


def prefixed(prefix: list[int] | tuple[int, ...], encoded: list[list[int]]) -> list[list[int]]:
    """Each non-empty sequence after `prefix` (language tokens, a corpus tag); an empty one stays empty, so that
    it is dropped, or not decoded, as empty."""
    return [[*prefix, *ids] if ids else ids for ids in encoded] if prefix else encoded


def keep_mask(src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_len: int | None) -> tuple[np.ndarray, dict]:
    """Which pairs to keep: both sides non-empty and neither over `max_len`; and how many were dropped why."""
    empty = (src_lengths == 0) | (tgt_lengths == 0)
    too_long = np.zeros_like(empty) if max_len is None else ~empty & (np.maximum(src_lengths, tgt_lengths) > max_len)
    return ~(empty | too_long), {"empty": int(empty.sum()), "too_long": int(too_long.sum())}


class CorpusWriter:
    """Appends encoded pairs to `folder/prefix.{src,tgt}.{bin,idx}` as they come, holding none of them."""

    def __init__(self, folder: Path, prefix: str, src_dtype: np.dtype, tgt_dtype: np.dtype):
        self.dtypes = {"src": np.dtype(src_dtype), "tgt": np.dtype(tgt_dtype)}
        self.files = {f"{side}.{kind}": open(folder / f"{prefix}.{side}.{kind}", "wb")
                      for side in ("src", "tgt") for kind in ("bin", "idx")}
        self.ends = {"src": 0, "tgt": 0}
        self.pairs = 0
        for side in ("src", "tgt"):
            self.files[f"{side}.idx"].write(np.zeros(1, dtype=np.int64).tobytes())

    def add(self, src: list[list[int]], tgt: list[list[int]], max_len: int | None) -> dict:
        """Write the pairs that `keep_mask` keeps; returns the counts of those dropped."""
        src_tokens, src_lengths = flatten(src, self.dtypes["src"])
        tgt_tokens, tgt_lengths = flatten(tgt, self.dtypes["tgt"])
        keep, counts = keep_mask(src_lengths, tgt_lengths, max_len)
        for side, tokens, lengths in (("src", src_tokens, src_lengths), ("tgt", tgt_tokens, tgt_lengths)):
            self.files[f"{side}.bin"].write(tokens[np.repeat(keep, lengths)].tobytes())
            offsets = self.ends[side] + np.cumsum(lengths[keep])
            self.files[f"{side}.idx"].write(offsets.tobytes())
            if len(offsets):
                self.ends[side] = int(offsets[-1])
        self.pairs += int(keep.sum())
        return counts

    def close(self) -> dict:
        """Flush to disk; returns what `map_corpus` needs to read the files back."""
        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())
            f.close()
        return {"pairs": self.pairs, "src_dtype": self.dtypes["src"].name, "tgt_dtype": self.dtypes["tgt"].name}

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(self, *exc) -> None:
        for f in self.files.values():
            f.close()


def write_corpus(folder: Path, prefix: str, corpus: Corpus) -> dict:
    """Save an in-memory corpus in the mapped layout (used for the small dev set)."""
    folder = Path(folder)
    for side in ("src", "tgt"):
        getattr(corpus, side).numpy().tofile(folder / f"{prefix}.{side}.bin")
        getattr(corpus, f"{side}_offsets").numpy().tofile(folder / f"{prefix}.{side}.idx")
    return {"pairs": len(corpus), "src_dtype": str(corpus.src.numpy().dtype),
            "tgt_dtype": str(corpus.tgt.numpy().dtype)}


def _map(path: Path, dtype: str, count: int) -> torch.Tensor:
    if path.stat().st_size != count * np.dtype(dtype).itemsize:
        raise DataError(f"{path}: {path.stat().st_size} bytes, expected {count} {dtype} values; "
                        "the prepared data is damaged: run the same command with --restart to prepare it again")
    if count == 0:  # mmap cannot map an empty file
        return torch.from_numpy(np.zeros(0, dtype=dtype))
    # Copy-on-write ("c"): pages come from the shared page cache; a stray in-place write would change only this
    # process's copy of one page, never the file, and torch.from_numpy gets a writable array (no warning).
    return torch.from_numpy(np.memmap(path, dtype=dtype, mode="c", shape=(count,)))


def map_corpus(folder: Path, prefix: str, meta: dict) -> Corpus:
    """The corpus `CorpusWriter` or `write_corpus` left in `folder`, memory-mapped (the files are never written)."""
    folder, tensors = Path(folder), {}
    for side in ("src", "tgt"):
        offsets = _map(folder / f"{prefix}.{side}.idx", "int64", meta["pairs"] + 1)
        tensors[side] = _map(folder / f"{prefix}.{side}.bin", meta[f"{side}_dtype"], int(offsets[-1]))
        tensors[f"{side}_offsets"] = offsets
    return Corpus(**tensors)
