"""Word alignments (mt translate --alignment): pieces merged into words, the most-attended source word per
target piece, Moses format; from the batch or alone the same; within the words of the line and the output."""

import json

import torch

from mt.decoding.attention_alignment import _word_of, cross_attention, word_alignment
from mt.config import ModelConfig
from mt.model.transformer import build_model
from mt.symbols import EOS
from tests.conftest import DATA, run_mt


def test_pieces_are_merged_into_whitespace_words():
    assert _word_of(["\u2581Das", "\u2581Pa", "ket", "\u2581", "(", "x", ")"]) == [0, 1, 1, 2, 2, 2, 2]
    assert _word_of(["ab", "\u2581c"]) == [0, 1]  # a first piece without ▁ still starts word 0


def test_each_target_piece_aligns_to_the_source_word_it_attends_to_most():
    src = ["\u2581Das", "\u2581Pa", "ket"]  # words 0, 1, 1
    tgt = ["\u2581The", "\u2581pack", "age", "\u2581."]  # words 0, 1, 1, 2
    attention = torch.tensor([[0.7, 0.2, 0.1],  # The -> Das
                              [0.1, 0.3, 0.6],  # pack -> ket (word 1)
                              [0.1, 0.8, 0.1],  # age -> Pa (word 1 again: written once)
                              [0.5, 0.4, 0.1]])  # . -> Das
    assert word_alignment(attention, src, tgt) == "0-0 0-2 1-1"
    assert word_alignment(torch.zeros(0, 3), src, []) == ""


def test_a_pairs_attention_is_the_same_in_a_batch_or_alone():
    torch.manual_seed(0)
    model = build_model(ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0, max_positions=64),
                        20, 20, joint_vocab=True).eval()
    sources, targets = [[5, 6, 7, 8], [9, 10]], [[11, 12], [13, 14, 15, 16, 17]]
    together = cross_attention(model, sources, targets)
    for i in range(2):
        alone = cross_attention(model, [sources[i]], [targets[i]])[0]
        assert together[i].shape == (len(targets[i]), len(sources[i]))
        assert torch.allclose(together[i], alone, atol=1e-6)
        assert bool((together[i].sum(1) < 1).all()), "the EOS column is left out"
    assert EOS not in sources[0]


def _checked(line: str, output: str, alignment: str) -> None:
    pairs = [tuple(map(int, p.split("-"))) for p in alignment.split()]
    assert pairs == sorted(set(pairs))
    assert all(0 <= i < len(line.split()) and 0 <= j < len(output.split()) for i, j in pairs)
    assert {j for _, j in pairs} == set(range(len(output.split()))), "every output word is aligned"


def test_translate_writes_alignments_of_words_in_range(trained_tiny):
    lines = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:20] + [""]
    out = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--alignment", "--beam-size", "2",
                 input="\n".join(lines) + "\n").stdout.splitlines()
    assert len(out) == len(lines) and out[-1] == "\t"
    for line, row in zip(lines[:-1], out):
        text, alignment = row.split("\t")
        _checked(line, text, alignment)
    rows = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--alignment", "--beam-size", "2",
                  "--output-format", "json", input=lines[0] + "\n").stdout  # the same search as above
    hyp = json.loads(rows)["hypotheses"][0]
    assert hyp["alignment"] == out[0].split("\t")[1] and hyp["text"] == out[0].split("\t")[0]
