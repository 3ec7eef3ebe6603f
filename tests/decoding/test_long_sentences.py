"""Over-long sentences (mt/decoding/long_sentences.py), in `mt translate` (lines and documents) and `mt serve`: cut
into pieces no longer than the model's training pairs (data.max_len, as the checkpoint or the CTranslate2 export's mt.yaml records it), not its positions
(a model trained on 128-token pairs, given pieces up to its positions, answered with half the words its
clauses sent alone gave)."""

from __future__ import annotations

import html

import pytest
import yaml

from mt.decoding.lines import LineText
from mt.decoding.loading import load_translator
from mt.decoding.long_sentences import fit_to_model, trained_length
from tests.conftest import DATA, run_mt

WORDS = [w for line in (DATA / "dev.de").read_text(encoding="utf-8").splitlines() for w in line.split()][:1500]


def _pieces_fit(tr, limit: int) -> None:
    """Every piece of a sentence of 1,500 words (some with clause punctuation) and of a spaceless run of letters
    has at most `limit` tokens, and the pieces hold every word of it, in order."""
    lines = [LineText(" ".join(WORDS), 0), LineText("kurz", 1), LineText("x" * 3 * limit, 2)]
    pieces, owners, encoded, _ = fit_to_model(tr, lines)
    assert max(len(e.source) for e in encoded) <= limit
    assert owners.count(1) == 1 and len(tr.src_tokenizer.encode([lines[0].source])[0]) > 10 * limit
    assert " ".join(p.source for p, o in zip(pieces, owners) if o == 0).split() == WORDS
    assert "".join(p.source for p, o in zip(pieces, owners) if o == 2) == lines[2].source


@pytest.fixture(scope="module")
def checkpoint(trained_tiny):
    return trained_tiny / "checkpoint_last.pt"


def test_pieces_of_a_checkpoints_sentence_never_exceed_its_data_max_len(checkpoint):
    tr = load_translator([str(checkpoint)], "cpu")
    assert (tr.cfg.data.max_len, tr.backend.max_positions) == (64, 256)  # configs/tiny.yaml: positions to spare
    assert trained_length(tr) == 64
    _pieces_fit(tr, 64)


def test_pieces_of_an_exported_models_sentence_never_exceed_the_max_len_its_mt_yaml_records(checkpoint, tmp_path):
    run_mt("export", "-c", checkpoint, "-o", tmp_path / "ct2")
    marker = tmp_path / "ct2" / "mt.yaml"
    saved = yaml.safe_load(marker.read_text())
    saved["data"]["max_len"] = 40  # as if trained on shorter pairs: the export's own record decides
    marker.write_text(yaml.safe_dump(saved))
    tr = load_translator(tmp_path / "ct2", "cpu")
    assert trained_length(tr) == 40
    _pieces_fit(tr, 40)


def _pieces_translated_alone(checkpoint, sentence: str) -> tuple[float, str, int]:
    """The sentence's pieces (as fit_to_model cuts it) each translated as a line of its own: the sum of their
    scores, their translations joined with spaces, and how many there are."""
    pieces, _, _, _ = fit_to_model(load_translator([str(checkpoint)], "cpu"), [LineText(sentence, 0)])
    alone = run_mt("translate", "-c", checkpoint, "--beam-size", "2", "--scores",
                   input="".join(p.source + "\n" for p in pieces)).stdout.splitlines()
    scored = [line.split("\t") for line in alone]
    return sum(float(score) for score, _ in scored), " ".join(text for _, text in scored if text), len(pieces)


def test_mt_translate_translates_a_line_longer_than_the_model_learned_whole(checkpoint, tmp_path):
    """One input line of 400 words (over 20 times the 64 tokens the model learned) gives one output line: every
    piece translated (the line's score is the sum of theirs) and their translations joined, as `mt serve` gives
    (nothing cut off), with a warning; a document's sentences too."""
    sentence = " ".join(WORDS[:400])
    score, expected, pieces = _pieces_translated_alone(checkpoint, sentence)
    proc = run_mt("translate", "-c", checkpoint, "--beam-size", "2", "--scores", input=f"kurz\n{sentence}\n")
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert len(rows) == 2 and rows[1][1] == expected and float(rows[1][0]) == pytest.approx(score, abs=1e-3 * pieces)
    assert pieces > 10 and "input line 2: " in proc.stderr and f"translated in {pieces} pieces, joined" in proc.stderr
    (tmp_path / "long.html").write_text(f"<p>{html.escape(sentence)}</p>\n", encoding="utf-8")
    document = run_mt("translate", "-c", checkpoint, "--beam-size", "2", "-i", tmp_path / "long.html", "-o",
                      tmp_path / "out.html")
    assert "long.html: sentence 1: " in document.stderr and "pieces, joined" in document.stderr
