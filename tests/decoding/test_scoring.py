"""`mt score`: teacher-forced log-probabilities, equal to a forced decode written here in plain torch, and to the
scores `mt translate --scores` gives its own output."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from mt.decoding.model_backend import load_model_translator
from mt.decoding.lines import LineIds, translate_ids
from mt.decoding.protocol import length_penalty
from mt.decoding.scoring import pair_log_probs
from mt.symbols import BOS, EOS
from tests.conftest import DATA, TINY, one_error_line, run_mt, tiny_overrides

SOURCES = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:40] + [""]
TARGETS = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:40] + ["An empty source."]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    out = tmp_path_factory.mktemp("scored")
    run_mt("train", TINY, *tiny_overrides(out, **{"train.max_steps": 20, "data.dev_src": "null",
                                                  "data.dev_tgt": "null"}))
    return out / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pairs")
    (folder / "src").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    (folder / "tgt").write_text("\n".join(TARGETS) + "\n", encoding="utf-8")
    return folder / "src", folder / "tgt"


def _scores(*args) -> list[float]:
    return [float(line) for line in run_mt("score", *args, "--device", "cpu").stdout.splitlines()]


def _forced_decode(tr, source: str, target: str) -> float:
    """log p(target + EOS | source), one token at a time, the whole prefix re-read at each step."""
    model = tr.backend.model
    src = torch.tensor([tr.src_tokenizer.encode([source])[0] + [EOS]])
    mask = (src != 0)[:, None, None, :]
    target_ids = tr.tgt_tokenizer.encode([target])[0] + [EOS]
    total, prefix = 0.0, [BOS]
    with torch.no_grad():
        memory = model.encode(src, mask)
        for token in target_ids:
            logits = model.decode(memory, mask, torch.tensor([prefix]))[0, -1]
            total += logits.log_softmax(-1)[token].item()
            prefix.append(token)
    return total


def test_scores_equal_a_forced_decode_in_plain_torch(model, pairs):
    src, tgt = pairs
    scores = _scores("-c", model, "--src", src, "--tgt", tgt)
    assert len(scores) == len(SOURCES) and scores[-1] == 0.0  # an empty source is not scored, as in translate
    tr = load_model_translator(model, "cpu")
    expected = [_forced_decode(tr, s, t) for s, t in zip(SOURCES[:-1], TARGETS[:-1])]
    assert max(abs(a - b) for a, b in zip(scores, expected)) < 1e-3
    assert _scores("-c", model, "--src", src, "--tgt", tgt, "--batch-tokens", "8") == pytest.approx(scores, abs=2e-4)
    normalized = _scores("-c", model, "--src", src, "--tgt", tgt, "--normalize", "--alpha", "1.0")
    lengths = [len(ids) + 1 for ids in tr.tgt_tokenizer.encode(TARGETS[:-1])]
    assert max(abs(n - e / length_penalty(k, 1.0)) for n, e, k in zip(normalized, expected, lengths)) < 1e-3


def test_normalized_scores_of_translations_are_those_their_search_gave(model):
    """Token for token (text that decodes and encodes to other pieces would be another target)."""
    tr = load_model_translator(model, "cpu")
    opts = replace(tr.cfg.decode, max_len_b=12)
    lines = [LineIds(ids, i) for i, ids in enumerate(tr.src_tokenizer.encode(SOURCES[:-1]))]
    with torch.inference_mode():
        hyps = [h[0] for h in translate_ids(tr.backend, lines, opts)]
    forced = pair_log_probs(tr, [line.source for line in lines], [h.tokens for h in hyps])
    normalized = [lp / length_penalty(len(h.tokens) + 1, opts.alpha) for lp, h in zip(forced, hyps)]
    assert max(abs(a - h.score) for a, h in zip(normalized, hyps)) < 1e-4


def test_an_ensemble_and_an_export_score_as_the_model(model, pairs, tmp_path):
    src, tgt = pairs
    alone = _scores("-c", model, "--src", src, "--tgt", tgt)
    assert _scores("-c", model, "-c", model, "--src", src, "--tgt", tgt) == pytest.approx(alone, abs=2e-4)
    run_mt("export", "-c", model, "-o", tmp_path / "ct2")
    run_mt("score", "-c", tmp_path / "ct2", "--src", src, "--tgt", tgt, "-o", tmp_path / "scores")
    exported = [float(x) for x in (tmp_path / "scores").read_text().splitlines()]
    assert exported == pytest.approx(alone, abs=2e-3)


def test_files_of_different_lengths_are_one_line_and_nothing_is_written(model, pairs, tmp_path):
    src, _ = pairs
    (tmp_path / "short").write_text("one\ntwo\n", encoding="utf-8")
    proc = run_mt("score", "-c", model, "--src", src, "--tgt", tmp_path / "short", "-o", tmp_path / "out",
                  check=False)
    assert one_error_line(proc) == (f"error: --tgt {tmp_path / 'short'}: 2 lines, but --src {src} has "
                                    f"{len(SOURCES)}; the files must be line-aligned")
    assert proc.returncode == 1 and not (tmp_path / "out").exists()


def test_alpha_without_normalize_is_refused_rather_than_ignored(model, pairs):
    src, tgt = pairs
    proc = run_mt("score", "-c", model, "--src", src, "--tgt", tgt, "--alpha", "1.0", check=False)
    assert one_error_line(proc).startswith("error: --alpha: the length penalty applies only with --normalize")
