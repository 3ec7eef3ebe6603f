"""Sentencepiece training and use, with fixed ids for the special symbols."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import sentencepiece as spm
import torch

from mt.config import TokenizerConfig
from mt.errors import DataError
from mt.symbols import BOS, EOS, PAD, UNK

THREADED_ENCODE_LINES = 64  # fewer lines are encoded one by one (`Tokenizer.encode`)


class Tokenizer:
    """One sentencepiece model: text <-> ids. Ids exclude BOS/EOS; callers add them."""

    def __init__(self, model_proto: bytes):
        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        # PAD, BOS and EOS are left out of decoded text where they are control symbols: always, except in a
        # renumbered model (`renumbered`), whose id BOS is a piece of its vocabulary.
        self.dropped = {i for i in (PAD, BOS, EOS) if i < len(self) and self.sp.is_control(i)}

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        """Each line's ids. Sentencepiece encodes a list on threads it starts at every call (0.2 ms): 1.7x
        faster for a file's 20,000 lines on 2 cores, but for a server request's few sentences, beside a running
        decode, starting them took 1.8 ms a request; few lines are encoded one by one."""
        if len(lines) < THREADED_ENCODE_LINES:
            return [self.sp.encode(line, out_type=int) for line in lines]
        return self.sp.encode(list(lines), out_type=int)

    def unknown_characters(self, text: str) -> list[str]:
        """The characters of `text`, in order of first use, that this model encodes as UNK."""
        if UNK not in self.sp.encode(text):
            return []
        chars = list(dict.fromkeys(c for c in text if not c.isspace()))
        return [c for c, ids in zip(chars, self.sp.encode(chars)) if UNK in ids]

    def piece_id(self, piece: str) -> int | None:
        """The id of a piece of the vocabulary, None if it has none."""
        i = self.sp.piece_to_id(piece)
        return None if i == UNK and piece != self.sp.id_to_piece(UNK) else i

    def decode(self, ids: Sequence[int]) -> str:
        return self.sp.decode([i for i in ids if i not in self.dropped])

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


def renumbered(model_proto: bytes, vocabulary: Sequence[str], tags: Iterable[str] = (),
               hidden: Iterable[str] = ()) -> tuple[Tokenizer, int]:
    """A vocabulary file in front of a sentencepiece model (Marian's vocab.json), made one sentencepiece model
    whose ids are the positions in `vocabulary`, so that everything reading ids (`Tokenizer`, CTranslate2's
    vocabularies, exported source.spm and target.spm) needs nothing else. `vocabulary` holds PAD's, UNK's and
    EOS's pieces at those ids (mt.symbols); id BOS is an ordinary piece. Each piece the model has keeps its
    score and type, so text is cut into the same pieces; the vocabulary's other pieces are UNUSED (never made by
    encoding; the other side's pieces of a joint vocabulary), except `tags` (e.g. >>fra<<), made USER_DEFINED
    (one piece wherever they are written), and `hidden` (NLLB's <mask>), made CONTROL (written as nothing, as
    Hugging Face's decoding skips special tokens). Returns the tokenizer and how many of the model's pieces the
    vocabulary lacks: text is now cut around those (Hugging Face's MarianTokenizer makes them UNK)."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    kind = pb.ModelProto.SentencePiece.Type
    model = pb.ModelProto.FromString(model_proto)
    own = {p.piece: p for p in model.pieces}
    tags, hidden = set(tags), set(hidden)
    special = {PAD: kind.CONTROL, UNK: kind.UNKNOWN, EOS: kind.CONTROL}
    kept = []
    for i, piece in enumerate(vocabulary):
        mine = own.get(piece)
        if i in special:
            kept.append(pb.ModelProto.SentencePiece(piece=piece, score=0.0, type=special[i]))
        elif mine is not None and mine.type not in (kind.CONTROL, kind.UNKNOWN):
            kept.append(pb.ModelProto.SentencePiece(piece=piece, score=mine.score, type=mine.type))
        else:
            made = kind.USER_DEFINED if piece in tags else kind.CONTROL if piece in hidden else kind.UNUSED
            kept.append(pb.ModelProto.SentencePiece(piece=piece, score=0.0, type=made))
    known = set(vocabulary)
    lacking = sum(1 for p in model.pieces if p.type == kind.NORMAL and p.piece not in known)
    del model.pieces[:]
    model.pieces.extend(kept)
    spec = model.trainer_spec
    spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id = PAD, UNK, -1, EOS
    spec.pad_piece, spec.unk_piece, spec.eos_piece = vocabulary[PAD], vocabulary[UNK], vocabulary[EOS]
    spec.vocab_size = len(vocabulary)
    return Tokenizer(model.SerializeToString()), lacking
