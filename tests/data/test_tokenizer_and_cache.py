import torch

from mt.config import TokenizerConfig, load_config
from mt.data.corpus import encode_corpus
from mt.data.text_files import read_parallel
from mt.data.prepare import load_prepared, prepare_data
from mt.symbols import BOS, EOS, PAD, UNK
from mt.data.tokenizer import train_tokenizer
from tests.conftest import DATA, TINY, tiny_overrides

SENTENCES = [f"the {w} number {i} is here" for i, w in enumerate(["cat", "dog", "bird", "fish"] * 30)]


def test_sentencepiece_has_fixed_special_ids_and_round_trips():
    tok = train_tokenizer(SENTENCES, TokenizerConfig(vocab_size=60))
    assert [tok.sp.id_to_piece(i) for i in (PAD, UNK, BOS, EOS)] == ["<pad>", "<unk>", "<s>", "</s>"]
    ids = tok.encode(["the dog number 7 is here"])[0]
    assert all(i > EOS for i in ids)
    assert tok.decode(ids) == "the dog number 7 is here"


def test_prepare_writes_a_cache_that_loads_back_identically(tmp_path):
    cfg = load_config(TINY, [s for s in tiny_overrides(tmp_path) if s != "--set"])
    first = prepare_data(cfg, log=lambda m: None)
    again = prepare_data(cfg, log=lambda m: None)  # second call reads the cache
    assert (tmp_path / "data" / "train.src.bin").exists() and first.train.src.dtype == torch.uint16
    for name in ("src", "src_offsets", "tgt", "tgt_offsets"):
        assert torch.equal(getattr(first.train, name), getattr(again.train, name))
    assert first.src_tokenizer.model_proto == again.src_tokenizer.model_proto
    # the cache holds what encoding the raw text gives, minus the pairs over max_len
    src, tgt = read_parallel(DATA / "sample-2k.de", DATA / "sample-2k.en")
    corpus, counts = encode_corpus(src, tgt, first.src_tokenizer, first.tgt_tokenizer, cfg.data.max_len)
    assert torch.equal(corpus.src.long(), again.train.src.long()) and len(corpus) + counts["too_long"] == len(src)
    assert first.stats["skipped_too_long"] == counts["too_long"] > 0
    assert len(load_prepared(cfg).dev_ref) == len(first.dev_ref) == 100  # tiny_overrides: the first 100 dev pairs


