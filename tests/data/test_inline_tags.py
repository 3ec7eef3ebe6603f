"""Inline tags put into training pairs (`data.inline_tags`, mt/data/inline_tags.py): the same under a seed, the
pairs' text untouched, every kind made, and the tags single pieces of the tokenizer `mt prepare` trains."""

from __future__ import annotations

import random
import re

import pytest

from mt.config import config_from_dict, config_to_dict, data_identity, load_config
from mt.data.inline_tags import TagInjection, anchors, tagged_pair
from mt.data.prepare import load_prepared, prepare_data
from mt.documents.model_tags import SYMBOLS, TAG
from mt.errors import ConfigError
from tests.conftest import DATA, TINY

SOURCES = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
TARGETS = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()


def injected(seed: int, share: float = 0.5) -> tuple[list[str], list[str]]:
    return TagInjection(share, seed, 0).chunk(SOURCES, TARGETS)


def test_the_same_seed_tags_the_same_pairs_the_same_way_and_another_seed_does_not():
    assert injected(1) == injected(1)
    assert injected(1) != injected(2)


def test_a_tagged_pair_without_its_tags_is_the_pair_as_it_was():
    src, tgt = injected(1, share=1.0)
    assert [TAG.sub("", s) for s in src] == SOURCES and [TAG.sub("", t) for t in tgt] == TARGETS
    tagged = sum(s != s0 for s, s0 in zip(src, SOURCES))
    assert tagged > 0.95 * len(SOURCES)  # every pair with a word (a few are empty of text)
    share = sum(s != s0 for s, s0 in zip(injected(1, share=0.3)[0], SOURCES)) / len(SOURCES)
    assert 0.25 < share < 0.35


def test_each_side_gets_the_same_tags_around_the_same_word():
    for src, tgt in zip(*injected(3, share=1.0)):
        assert sorted(TAG.findall(src)) == sorted(TAG.findall(tgt)), (src, tgt)
        if src.startswith("<g1>") and src.endswith("</g1>"):
            continue  # a pair without an anchor: the whole sentence
        for n in {m.group(2) for m in TAG.finditer(src) if m.group(2)}:
            inner = [re.search(rf"<g{n}>(.*?)</g{n}>", side).group(1) for side in (src, tgt)]
            if not TAG.search(inner[0]) and " " not in inner[0]:  # one anchor: the same word both sides
                assert inner[0] == inner[1], (src, tgt)


def test_every_kind_of_tag_is_made():
    text = "\n".join(s for s in injected(5, share=1.0)[0])
    assert re.search(r"\w<x1/>", text)  # a marker stuck to its word
    assert re.search(r"<x1/>\w", text)  # a lone tag before a word (an image)
    assert "<g2>" in text and re.search(r"<g1><g2>", text)  # two pairs, and a pair inside a pair
    assert re.search(r"<g1>[^<]* [^<]*</g1>", text)  # a span of several words


def test_anchors_are_words_in_both_sides_once_each_without_their_punctuation():
    found = anchors("Das Paket (Blobby) für x86, x86 und GTK+.", "The package (Blobby) for x86 x86 and GTK+!")
    words = [("Das Paket (Blobby) für x86, x86 und GTK+."[s:t]) for (s, t), _ in found]
    assert words == ["Blobby", "GTK+"]
    src, tgt = tagged_pair("Kein gemeinsames Wort.", "No word shared.", random.Random(0))
    assert (src, tgt) == ("<g1>Kein gemeinsames Wort.</g1>", "<g1>No word shared.</g1>")


def test_the_setting_is_checked_and_left_out_of_the_data_identity_when_off():
    base = config_to_dict(config_from_dict({}))
    assert "inline_tags" not in data_identity(config_from_dict(base))["data"]  # caches made before it still match
    assert data_identity(config_from_dict({"data": {"inline_tags": 0.2}}))["data"]["inline_tags"] == 0.2
    with pytest.raises(ConfigError, match="data.inline_tags"):
        config_from_dict({"data": {"inline_tags": 1.5}})


@pytest.mark.slow
def test_prepare_makes_each_tag_one_piece_and_tags_the_share_asked(tmp_path):
    overrides = {"output_dir": tmp_path / "run", "data.inline_tags": 0.3, "data.train_src": DATA / "sample-2k.de",
                 "data.train_tgt": DATA / "sample-2k.en", "data.dev_src": DATA / "dev.de",
                 "data.dev_tgt": DATA / "dev.en"}
    cfg = load_config(TINY, [f"{k}={v}" for k, v in overrides.items()])
    prepare_data(cfg, log=lambda *_: None)
    prepared = load_prepared(cfg)
    tok = prepared.src_tokenizer
    ids = [tok.piece_id(symbol) for symbol in SYMBOLS]
    assert None not in ids and len(set(ids)) == len(SYMBOLS)
    assert tok.encode(["Das <g1>Paket</g1> hier<x2/>."])[0].count(ids[0]) == 1
    train = prepared.train
    tagged = sum(any(int(i) in ids for i in train.pair(k)[0]) for k in range(len(train)))
    assert 0.2 < tagged / len(train) < 0.4
    prepare_data(cfg, log=lambda *_: None)  # the cache is this config's: found again, nothing to change
