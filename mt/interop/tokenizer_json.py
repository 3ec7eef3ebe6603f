"""tokenizer.json: a sentencepiece model in the `tokenizers` library's form, which transformers.js reads (it reads
no sentencepiece model and has no Marian tokenizer of its own). Built as transformers' SpmConverter builds it
(whose interface changes between transformers versions): the model's pieces with their ids and scores (Unigram),
or its pieces and the merges that make them (BPE); sentencepiece's normalisation table; "▁" for spaces; EOS
appended to every input, as mt and MarianTokenizer do. The tests check it cuts the dev set as sentencepiece does.
"""

from __future__ import annotations

from mt.errors import MtError
from mt.symbols import EOS, UNK
from mt.data.tokenizer import Tokenizer

SPACE = "\u2581"  # sentencepiece's "▁"


def tokenizer_json(tok: Tokenizer) -> bytes:
    try:
        from tokenizers import AddedToken, Regex
        from tokenizers import Tokenizer as FastTokenizer
        from tokenizers import decoders, normalizers, pre_tokenizers, processors
    except ImportError as e:
        raise MtError(f"--format huggingface needs the tokenizers library ({e}); pip install 'mt[hf]'") from None
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto.FromString(tok.model_proto)
    fast = FastTokenizer(_model(proto))
    kind = pb.ModelProto.SentencePiece.Type
    fast.add_tokens([AddedToken(p.piece, normalized=False, special=p.type == kind.CONTROL)
                     for p in proto.pieces if p.type in (kind.CONTROL, kind.USER_DEFINED)])
    rules = [normalizers.Strip(left=False, right=True), normalizers.Replace(Regex(" {2,}"), SPACE)]
    charsmap = proto.normalizer_spec.precompiled_charsmap
    fast.normalizer = normalizers.Sequence(([normalizers.Precompiled(charsmap)] if charsmap else []) + rules)
    fast.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always")
    fast.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="always")
    eos = proto.pieces[EOS].piece
    fast.post_processor = processors.TemplateProcessing(single=f"$A {eos}", special_tokens=[(eos, EOS)])
    return fast.to_str(pretty=True).encode("utf-8")


def _model(proto):
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import models

    scores = [(p.piece, p.score) for p in proto.pieces]
    if proto.trainer_spec.model_type == pb.TrainerSpec.ModelType.UNIGRAM:
        return models.Unigram(scores, unk_id=UNK, byte_fallback=False)
    if proto.trainer_spec.model_type != pb.TrainerSpec.ModelType.BPE:
        raise MtError(f"tokenizer.json: sentencepiece model type {proto.trainer_spec.model_type} is neither BPE nor "
                      "unigram")
    vocab = {piece: i for i, (piece, _) in enumerate(scores)}
    return models.BPE(vocab, bpe_merges(scores, vocab), unk_token=proto.pieces[UNK].piece, fuse_unk=True)


def bpe_merges(scores: list[tuple[str, float]], vocab: dict[str, int]) -> list[tuple[str, str]]:
    """The merges of a sentencepiece BPE model: every split of a piece into two pieces of the vocabulary, ranked
    by the piece's score (sentencepiece merges the best-scoring pair first), then by the parts' ids."""
    merges = []
    for piece, score in scores:
        local = [(piece[:i], piece[i:], score) for i in range(1, len(piece))
                 if piece[:i] in vocab and piece[i:] in vocab]
        merges += sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]]))
    merges.sort(key=lambda m: m[2], reverse=True)
    return [(left, right) for left, right, _ in merges]
