"""Streaming `mt prepare`: the sample sentencepiece trains on, the cache on disk, and what survives a crash."""

import json
import warnings
from collections import Counter

import numpy as np
import pytest
import sentencepiece as spm
import torch

import mt.data.corpus
import mt.data.text_files
from mt.config import load_config
from mt.data.corpus import CorpusWriter, token_dtype
from mt.data.text_files import parallel_chunks, read_parallel
from mt.errors import DataError
from mt.data.prepare import Reservoir, load_prepared, prepare_data
from mt.data.tokenizer import train_tokenizer
from tests.conftest import DATA, TINY, one_error_line, run_mt, tiny_overrides


def _cfg(tmp_path, **values):
    return load_config(TINY, [s for s in tiny_overrides(tmp_path, **values) if s != "--set"])


def _quiet(message):
    pass


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_reservoir_keeps_a_small_stream_whole_and_in_key_order():
    r = Reservoir(10, seed=1)
    r.add(["s0", "s1", "s2"], first_key=0)
    r.add(["t0", "t1", "t2"], first_key=100)  # a joint sample offers target lines after the source lines
    r.add(["s3"], first_key=3)
    assert list(r.lines()) == ["s0", "s1", "s2", "s3", "t0", "t1", "t2"]


def test_reservoir_sample_has_its_size_is_seeded_and_uniform():
    def sample(seed, chunk=7):
        r = Reservoir(20, seed)
        lines = [str(i) for i in range(200)]
        for start in range(0, 200, chunk):
            r.add(lines[start:start + chunk], first_key=start)
        return list(r.lines())

    first = sample(seed=3)
    assert len(first) == len(set(first)) == 20 and first == sample(seed=3) and first != sample(seed=4)
    assert [int(x) for x in first] == sorted(int(x) for x in first)  # key order = stream order
    # each of 200 lines lands in a 20-line sample with probability 0.1: over 1000 seeds, ~100 times each
    counts = Counter(x for seed in range(1000) for x in sample(seed, chunk=64))
    assert len(counts) == 200 and 55 < min(counts.values()) and max(counts.values()) < 150
    early, late = sum(counts[str(i)] for i in range(100)), sum(counts[str(i)] for i in range(100, 200))
    assert abs(early - late) < 0.1 * (early + late)  # no bias towards the start or the end of the stream


def test_under_max_sentences_the_tokenizer_is_the_one_trained_on_every_line(tmp_path):
    src, tgt = read_parallel(DATA / "sample-2k.de", DATA / "sample-2k.en")
    joint = prepare_data(_cfg(tmp_path / "joint"), log=_quiet)
    cfg = _cfg(tmp_path / "joint")
    spm.set_random_generator_seed(cfg.train.seed)
    assert joint.src_tokenizer.model_proto == train_tokenizer(src + tgt, cfg.tokenizer).model_proto
    separate = prepare_data(_cfg(tmp_path / "sep", **{"tokenizer.joint": "false"}), log=_quiet)
    spm.set_random_generator_seed(cfg.train.seed)
    assert separate.src_tokenizer.model_proto == train_tokenizer(src, cfg.tokenizer).model_proto
    assert separate.tgt_tokenizer.model_proto == train_tokenizer(tgt, cfg.tokenizer).model_proto


def test_over_max_sentences_sentencepiece_sees_a_seeded_sample(tmp_path):
    messages = []
    a = prepare_data(_cfg(tmp_path / "a", **{"tokenizer.max_sentences": 600}), log=messages.append)
    assert any("(600 lines sampled)" in m for m in messages)
    b = prepare_data(_cfg(tmp_path / "b", **{"tokenizer.max_sentences": 600}), log=_quiet)
    c = prepare_data(_cfg(tmp_path / "c", **{"tokenizer.max_sentences": 600, "train.seed": 2}), log=_quiet)
    assert a.src_tokenizer.model_proto == b.src_tokenizer.model_proto != c.src_tokenizer.model_proto
    assert len(a.train) == len(b.train)


def test_chunked_reading_gives_the_whole_file_and_errors_name_the_right_line(tmp_path, monkeypatch):
    monkeypatch.setattr(mt.data.text_files, "CHUNK_LINES", 2)
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_bytes(b"eins\r\nzwei\n\ndrei\nvier\nf\xc3\xbcnf")  # CRLF, an empty line, no final newline
    tgt.write_text("one\ntwo\n\nthree\nfour\nfive\n")
    assert read_parallel(src, tgt) == (["eins", "zwei", "", "drei", "vier", "fünf"],
                                       ["one", "two", "", "three", "four", "five"])
    tgt.write_text("one\ntwo\nthree\n")
    with pytest.raises(DataError, match=f"^parallel files differ in length: {src} has 6 lines, {tgt} has 3$"):
        list(parallel_chunks(src, tgt))
    with pytest.raises(DataError, match=f"^parallel files differ in length: {tgt} has 3 lines, {src} has 6$"):
        list(parallel_chunks(tgt, src))
    src.write_bytes(b"a\nb\nc\nd\ne \xff\nf\n")
    tgt.write_text("1\n2\n3\n4\n5\n6\n")
    with pytest.raises(DataError, match=f"^{src}:5: not valid UTF-8 \\(byte 0xff\\)"):
        list(parallel_chunks(src, tgt))


def test_streamed_cache_equals_encoding_in_memory_whatever_the_chunk_size(tmp_path, monkeypatch):
    whole = prepare_data(_cfg(tmp_path / "whole"), log=_quiet)
    monkeypatch.setattr(mt.data.text_files, "CHUNK_LINES", 333)
    chunked = prepare_data(_cfg(tmp_path / "chunked"), log=_quiet)
    assert _files(tmp_path / "whole" / "data") == _files(tmp_path / "chunked" / "data")
    src, tgt = read_parallel(DATA / "sample-2k.de", DATA / "sample-2k.en")
    reference, counts = mt.data.corpus.encode_corpus(src, tgt, whole.src_tokenizer, whole.tgt_tokenizer, 64)
    for name in ("src", "src_offsets", "tgt", "tgt_offsets"):
        assert torch.equal(getattr(reference, name).long(), getattr(chunked.train, name).long())
    assert chunked.stats["skipped_too_long"] == counts["too_long"] > 0


def test_the_trainer_reads_the_token_files_through_a_memory_map(tmp_path):
    cfg = _cfg(tmp_path)
    prepare_data(cfg, log=_quiet)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's "non-writable NumPy array" warning
        data = load_prepared(cfg)
    maps = open("/proc/self/maps").read().splitlines()
    for side in ("src", "tgt"):
        tensor, path = getattr(data.train, side), tmp_path / "data" / f"train.{side}.bin"
        assert tensor.dtype == torch.uint16
        assert torch.equal(tensor, torch.from_numpy(np.fromfile(path, dtype=np.uint16)))
        ranges = [[int(x, 16) for x in line.split()[0].split("-")] for line in maps if line.endswith(str(path))]
        assert any(lo <= tensor.data_ptr() < hi for lo, hi in ranges), f"{path} is not mapped under the tensor"
    assert json.loads((tmp_path / "data" / "corpus.json").read_text())["train"]["pairs"] == len(data.train)


def test_token_dtype_fits_the_vocabulary():
    assert token_dtype(65536) == np.uint16 and token_dtype(65537) == np.int32


def test_an_interrupted_prepare_leaves_no_cache_and_the_next_run_rebuilds(tmp_path, monkeypatch):
    clean = prepare_data(_cfg(tmp_path / "clean"), log=_quiet)
    monkeypatch.setattr(mt.data.text_files, "CHUNK_LINES", 500)
    real_add, calls = CorpusWriter.add, []

    def add_then_crash(self, *args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as if Ctrl-C arrived half way through encoding
        return real_add(self, *args)

    monkeypatch.setattr(CorpusWriter, "add", add_then_crash)
    cfg = _cfg(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        prepare_data(cfg, log=_quiet)
    assert not (tmp_path / "run" / "data").exists() and not (tmp_path / "run" / "data.partial" / "prepared.json").exists()
    with pytest.raises(DataError, match="no prepared data"):
        load_prepared(cfg)
    monkeypatch.setattr(CorpusWriter, "add", real_add)
    again = prepare_data(cfg, log=_quiet)
    assert torch.equal(again.train.src, clean.train.src) and not (tmp_path / "run" / "data.partial").exists()
    # a forced rebuild that is interrupted leaves the complete cache it was replacing
    before = _files(tmp_path / "run" / "data")
    calls.clear()
    monkeypatch.setattr(CorpusWriter, "add", add_then_crash)
    with pytest.raises(KeyboardInterrupt):
        prepare_data(cfg, log=_quiet, force=True)
    assert _files(tmp_path / "run" / "data") == before


def test_a_complete_cache_is_reused_and_one_from_another_config_refused(tmp_path):
    cfg = _cfg(tmp_path)
    prepare_data(cfg, log=_quiet)
    stamp = (tmp_path / "data" / "prepared.json").stat().st_mtime_ns
    messages = []
    prepare_data(cfg, log=messages.append)
    assert messages == [] and (tmp_path / "data" / "prepared.json").stat().st_mtime_ns == stamp
    with pytest.raises(DataError, match=r"prepared with a different config \(tokenizer.vocab_size changed\)"):
        prepare_data(_cfg(tmp_path, **{"tokenizer.vocab_size": 300}), log=_quiet)


def test_a_cache_from_an_older_mt_is_rebuilt(tmp_path):
    cfg = _cfg(tmp_path)
    prepare_data(cfg, log=_quiet)
    folder = tmp_path / "data"
    for p in folder.iterdir():
        if p.name != "prepared.json":
            p.unlink()
    (folder / "corpus.pt").write_bytes(b"the one-file cache of mt-prepared-1")
    messages = []
    data = prepare_data(cfg, log=messages.append)
    assert "written by an older mt" in messages[0] and not (folder / "corpus.pt").exists() and len(data.train) == 1600


@pytest.mark.parametrize("name", ["prepared.json", "corpus.json"])
@pytest.mark.parametrize("damage", [b'{"data": {"train', b"\xff\xfe", b"[1, 2]"], ids=["cut", "not-utf8", "a-list"])
def test_a_damaged_record_of_the_prepared_data_is_one_line_naming_it(tmp_path, name, damage):
    args = ["prepare", TINY, *tiny_overrides(tmp_path)]
    run_mt(*args)
    path = tmp_path / "data" / name
    path.write_bytes(damage)
    line = one_error_line(run_mt(*args, check=False))
    assert line.startswith(f"error: {path}: damaged (") and line.endswith("run the same command with --restart to "
                                                                         "prepare the data again"), line
    assert path.read_bytes() == damage  # nothing rewritten: the user decides
