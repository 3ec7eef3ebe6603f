"""Ensembles (mt translate -c A -c B): the mean of the models' probabilities at every step, each model on its
own cache; greedy, beam and sampling on it; same vocabularies or a one-line error."""

import pytest
import torch

from mt.decoding.model_backend import ModelBackend
from mt.config import DecodeConfig
from mt.decoding.lines import translate_ids
from mt.model.ensemble import Ensemble
from mt.masks import padding_mask
from mt.symbols import BOS, EOS
from tests.conftest import DATA, TINY, lines_of, one_error_line, random_model, random_sources, run_mt, tiny_overrides

VOCAB = 20


@pytest.fixture(scope="module")
def sources():
    return random_sources(12, VOCAB)


def _decode(model, sources, use_cache=True, nbest=1, **options):
    opts = DecodeConfig(**{"beam_size": 4, "max_len_b": 10, **options})
    return translate_ids(ModelBackend(model, use_cache), lines_of(sources), opts, nbest=nbest)


def _tokens(found):
    return [[h.tokens for h in per] for per in found]


def test_the_ensemble_predicts_the_mean_of_its_models_probabilities():
    a, b = random_model(VOCAB), random_model(VOCAB, seed=1, d_model=16, n_layers=3)  # members may differ in size
    src = torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, 0]])
    tgt = torch.tensor([[BOS, 4, 5], [BOS, 6, 7]])
    mask = padding_mask(src)
    with torch.no_grad():
        ours = Ensemble([a, b]).decode(Ensemble([a, b]).encode(src, mask), mask, tgt)
        each = [m.decode(m.encode(src, mask), mask, tgt).softmax(-1) for m in (a, b)]
    assert torch.allclose(ours.exp(), (each[0] + each[1]) / 2, atol=1e-6)


@pytest.mark.parametrize("options", [{"beam_size": 1}, {"beam_size": 4}, {"sampling": True, "topk": 5}])
def test_an_ensemble_of_one_model_twice_decodes_as_the_model(sources, options):
    model = random_model(VOCAB)
    alone, twice = _decode(model, sources, **options), _decode(Ensemble([model, model]), sources, **options)
    assert _tokens(alone) == _tokens(twice)
    assert all(x[0].score == pytest.approx(y[0].score, abs=1e-4) for x, y in zip(alone, twice))


def test_each_model_keeps_its_own_cache(sources):
    ensemble = Ensemble([random_model(VOCAB), random_model(VOCAB, seed=1, d_model=16, n_layers=3)])
    for beam in (1, 4):
        cached = _decode(ensemble, sources, beam_size=beam)
        full = _decode(ensemble, sources, beam_size=beam, use_cache=False)
        assert _tokens(cached) == _tokens(full)
        assert all(x[0].score == pytest.approx(y[0].score, abs=1e-4) for x, y in zip(cached, full))
    assert _tokens(_decode(ensemble, sources)) != _tokens(_decode(ensemble.models[0], sources))


def test_translate_and_evaluate_take_several_checkpoints(trained_tiny, tmp_path):
    a, b = trained_tiny / "checkpoint_30.pt", trained_tiny / "checkpoint_60.pt"
    out = run_mt("translate", "-c", a, "-c", b, "--beam-size", "2", input="Ein kleines Programm.\n\nEs läuft.\n")
    assert len(out.stdout.splitlines()) == 3 and out.stdout.splitlines()[1] == ""
    src, ref = tmp_path / "src", tmp_path / "ref"
    src.write_text("Ein kleines Programm.\n", encoding="utf-8")
    ref.write_text("A small program.\n", encoding="utf-8")
    run_mt("evaluate", "-c", a, "-c", b, "--src", src, "--ref", ref)

    other = tmp_path / "other"  # another vocabulary: 300 pieces instead of 500
    run_mt("train", TINY, *tiny_overrides(other, **{"tokenizer.vocab_size": 300, "train.max_steps": 1,
                                                    "train.eval_every": 100}))
    error = run_mt("translate", "-c", a, "-c", other / "checkpoint_last.pt", input="Hallo\n", check=False)
    assert "its source vocabulary differs from" in one_error_line(error)
    error = run_mt("translate", "-c", a, "-c", DATA, input="Hallo\n", check=False)
    assert "cannot join an ensemble" in one_error_line(error)
