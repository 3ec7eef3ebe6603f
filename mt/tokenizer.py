"""Sentencepiece training and use, with fixed ids for the special symbols."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import sentencepiece as spm
import torch

from mt.config import TokenizerConfig
from mt.errors import DataError
from mt.symbols import BOS, EOS, PAD, UNK


class Tokenizer:
    """One sentencepiece model: text <-> ids. Ids exclude BOS/EOS; callers add them."""

    def __init__(self, model_proto: bytes):
        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        return self.sp.encode(list(lines), out_type=int)

    def piece_id(self, piece: str) -> int | None:
        """The id of a piece of the vocabulary, None if it has none."""
        i = self.sp.piece_to_id(piece)
        return None if i == UNK and piece != self.sp.id_to_piece(UNK) else i

    def decode(self, ids: Sequence[int]) -> str:
        return self.sp.decode([i for i in ids if i not in (PAD, BOS, EOS)])

    def to_tensor(self) -> torch.Tensor:
        """The model as a uint8 tensor, so checkpoints hold only tensors (safe `weights_only` loading)."""
        return torch.frombuffer(bytearray(self.model_proto), dtype=torch.uint8)

    @classmethod
    def from_tensor(cls, data: torch.Tensor) -> Tokenizer:
        return cls(bytes(data.numpy().tobytes()))


def train_tokenizer(sentences: Iterable[str], cfg: TokenizerConfig, symbols: Sequence[str] = ()) -> Tokenizer:
    """Train a sentencepiece model on `sentences` (sampled down to `cfg.max_sentences`); each of `symbols` (the
    corpus tags of data.train) becomes one piece of its own."""
    model = io.BytesIO()
    try:
        _train_sentencepiece(sentences, cfg, symbols, model)
    except RuntimeError as e:  # e.g. "Vocabulary size is smaller than required_chars. 10 vs 17. ..."
        reason = str(e).split("] ", 1)[-1].split(". Increase")[0]
        raise DataError(f"tokenizer.vocab_size={cfg.vocab_size}: sentencepiece cannot train it: {reason}") from None
    return Tokenizer(model.getvalue())


def _train_sentencepiece(sentences: Iterable[str], cfg: TokenizerConfig, symbols: Sequence[str], model) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=model,
        model_type=cfg.type,
        vocab_size=cfg.vocab_size,
        hard_vocab_limit=False,  # a small corpus gets a smaller vocabulary instead of an error
        character_coverage=cfg.character_coverage,
        input_sentence_size=cfg.max_sentences,
        shuffle_input_sentence=True,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        user_defined_symbols=list(symbols),
        num_threads=2,
        minloglevel=2,
    )
