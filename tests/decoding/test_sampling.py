"""Sampling (decode.sampling): the distribution it draws from, top-k and top-p, and samples that depend on the
seed and the line number only."""

import json

import torch

from mt.decoding.model_backend import ModelBackend
from mt.config import DecodeConfig
from mt.decoding.lines import translate_ids
from mt.masks import padding_mask
from mt.decoding.sampling import Sampler
from mt.symbols import BOS, EOS
from tests.conftest import lines_of, one_error_line, run_mt

SOURCES = dict(n=16)  # the `sources` fixture (tests/conftest.py)
VOCAB = 20


def _sample(model, sources, nbest=1, first_line=0, **options):
    opts = DecodeConfig(**{"sampling": True, "max_len_b": 10, **options})
    found = translate_ids(ModelBackend(model), lines_of(sources, first_line), opts, nbest=nbest)
    return [[h.tokens for h in per] for per in found]


def _frequencies(probs: torch.Tensor, draws: int, **options) -> torch.Tensor:
    """How often each token is drawn from one distribution by `draws` rows with their own streams."""
    sampler = Sampler(DecodeConfig(sampling=True, **options))
    for row in range(draws):  # row i draws line i's first sample
        sampler.add(row, row, 0)
    tokens = sampler.draw(probs.log().expand(draws, -1), list(range(draws)))
    return torch.bincount(tokens, minlength=len(probs)).double() / draws


PROBS = torch.tensor([0.5, 0.25, 0.15, 0.1])


def test_draws_follow_the_distribution_and_its_cuts():
    n = 20_000  # a frequency's standard deviation is at most 0.0035
    assert torch.allclose(_frequencies(PROBS, n), PROBS.double(), atol=0.015)
    assert torch.allclose(_frequencies(PROBS, n, topk=2), torch.tensor([2 / 3, 1 / 3, 0, 0]).double(), atol=0.015)
    # top-p 0.7: 0.5 alone is short of it, 0.5 + 0.25 holds it: the nucleus is the first two tokens.
    assert torch.allclose(_frequencies(PROBS, n, topp=0.7), torch.tensor([2 / 3, 1 / 3, 0, 0]).double(), atol=0.015)
    hot = PROBS.log() / 2.0  # temperature 2: probabilities proportional to sqrt(p)
    assert torch.allclose(_frequencies(PROBS, n, temperature=2.0), hot.softmax(-1).double(), atol=0.015)


def test_top_k_one_and_a_tiny_nucleus_are_greedy_search(model, sources):
    greedy = [[h.tokens for h in per] for per in translate_ids(
        ModelBackend(model), lines_of(sources), DecodeConfig(beam_size=1, max_len_b=10))]
    assert _sample(model, sources, topk=1) == greedy
    assert _sample(model, sources, topp=1e-6) == greedy


def test_a_lines_samples_depend_on_the_seed_and_its_line_number_only(model, sources):
    whole = _sample(model, sources, nbest=3, batch_tokens=4096)
    assert _sample(model, sources, nbest=3, batch_tokens=8) == whole  # other batches, other neighbours
    assert _sample(model, sources[5:9], nbest=3, first_line=5) == whole[5:9]
    assert _sample(model, sources, nbest=3, seed=2) != whole
    assert _sample(model, sources, nbest=3, first_line=1) != whole
    assert any(len({tuple(s) for s in per}) > 1 for per in whole), "a line's samples differ from each other"


def test_translate_samples_to_json_lines(trained_tiny, tmp_path):
    text = "Ein kleines Programm.\n\nEs zeigt Dateien an.\n"
    args = ["translate", "-c", trained_tiny / "checkpoint_last.pt", "--sampling", "--nbest", "2", "--topk", "10",
            "--seed", "7", "--output-format", "json"]
    out = run_mt(*args, input=text).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["line"] for r in rows] == [0, 1, 2]
    assert all(len(r["hypotheses"]) == 2 and {"text", "score"} == set(r["hypotheses"][0]) for r in rows)
    assert rows[1]["hypotheses"][0]["text"] == ""
    assert run_mt(*args, "--batch-tokens", "4", input=text).stdout == out
    error = run_mt(*args[:3], "--sampling", "--temperature", "0", input=text, check=False)
    assert "decode.temperature must be positive" in one_error_line(error)
    error = run_mt(*args[:3], "--output-format", "xml", input=text, check=False)
    assert "--output-format" in one_error_line(error)


def test_the_first_token_is_drawn_with_the_models_probabilities(model):
    """One source on 4000 input lines (4000 streams): the first tokens drawn follow the model's first-step
    distribution (temperature 1, nothing cut); each frequency within 4.5 standard deviations."""
    source, lines = [5, 6, 7], 4000
    with torch.no_grad():
        src = torch.tensor([source + [EOS]])
        mask = padding_mask(src)
        probs = model.decode(model.encode(src, mask), mask, torch.tensor([[BOS]])).softmax(-1)[0, 0].double()
    first = [hyps[0][0] if hyps[0] else EOS for hyps in _sample(model, [source] * lines, max_len_b=1)]
    frequency = torch.bincount(torch.tensor(first), minlength=VOCAB).double() / lines
    allowed = 4.5 * (probs * (1 - probs) / lines).sqrt() + 1e-9
    assert bool(((frequency - probs).abs() <= allowed).all()), (frequency - probs).abs().max()
