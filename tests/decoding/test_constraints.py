"""Hard lexical constraints (mt translate --constraints): every term appears in every hypothesis; lines without
terms decode as without the option; batching, the cache and the bank allocation."""

import pytest
import torch

from mt.decoding.model_backend import ModelBackend
from mt.config import DecodeConfig
from mt.decoding.constraints import _after, _allocate, _Progress
from mt.decoding.lines import translate_ids
from mt.symbols import EOS
from tests.conftest import lines_of, one_error_line, run_mt

SOURCES = dict(n=14, shortest=2, longest=11)  # the `sources` fixture (tests/conftest.py)
VOCAB = 30


@pytest.fixture(scope="module")
def terms(sources):
    """0 to 3 terms of 1 to 3 tokens per sentence; some sentences have none."""
    g = torch.Generator().manual_seed(2)
    return [[torch.randint(EOS + 1, VOCAB, (int(torch.randint(1, 4, (1,), generator=g)),), generator=g).tolist()
             for _ in range(int(torch.randint(0, 4, (1,), generator=g)))] for _ in sources]


def _decode(model, sources, constraints=None, nbest=1, use_cache=True, **options):
    opts = DecodeConfig(**{"beam_size": 5, "max_len_b": 8, **options})
    return translate_ids(ModelBackend(model, use_cache), lines_of(sources, terms=constraints), opts, nbest=nbest)


def _contains(tokens: list[int], term: list[int]) -> bool:
    return any(tokens[i:i + len(term)] == term for i in range(len(tokens) - len(term) + 1))


def test_every_hypothesis_contains_every_term(model, sources, terms):
    assert any(terms) and not all(terms)
    for per, line_terms in zip(_decode(model, sources, terms, nbest=3), terms):
        assert per
        for h in per:
            assert all(_contains(h.tokens, term) for term in line_terms), (h.tokens, line_terms)


def test_lines_without_terms_decode_as_without_the_option(model, sources, terms):
    plain, constrained = _decode(model, sources), _decode(model, sources, terms)
    for a, b, line_terms in zip(plain, constrained, terms):
        if not line_terms:
            assert a[0].tokens == b[0].tokens and a[0].score == pytest.approx(b[0].score, abs=1e-5)


def test_constrained_search_does_not_depend_on_batching_or_the_cache(model, sources, terms):
    whole = _decode(model, sources, terms)
    assert [[h.tokens for h in p] for p in _decode(model, sources, terms, batch_tokens=12)] == \
        [[h.tokens for h in p] for p in whole]
    uncached = _decode(model, sources, terms, use_cache=False)
    assert [p[0].tokens for p in uncached] == [p[0].tokens for p in whole]


def test_progress_continues_restarts_and_completes_terms():
    terms = torch.tensor([[[7, 8, -1], [9, -1, -1]]])  # one row: terms "7 8" and "9"
    lengths = torch.tensor([[2, 1]])
    start = _Progress(torch.tensor([[False, False]]), torch.tensor([-1]), torch.tensor([0]))
    after = _after(start, torch.tensor([[7, 9, 5]]), terms, lengths)  # three candidates
    assert after.inside.tolist() == [[0, -1, -1]] and after.done_tokens.tolist() == [[1, 0, 0]]
    assert after.met.tolist() == [[[False, False], [False, True], [False, False]]]
    inside = _Progress(torch.tensor([[False, False]]), torch.tensor([0]), torch.tensor([1]))
    after = _after(inside, torch.tensor([[8, 7, 5]]), terms, lengths)
    assert after.met[0, 0].tolist() == [True, False] and after.inside.tolist() == [[-1, 0, -1]]
    assert after.done_tokens.tolist() == [[0, 1, 0]]  # "7" restarts the term; "5" gives its token back


def test_beams_are_taken_from_the_banks_in_turn():
    score = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]])
    bank = torch.tensor([[0, 0, 0, 1, 1, 2]])
    usable = torch.ones_like(score, dtype=torch.bool)
    assert _allocate(score, bank, usable, 4, 3).tolist() == [[5, 3, 0, 4]]  # best of banks 2, 1, 0; then bank 1's next
    usable[0, 5] = False
    assert _allocate(score, bank, usable, 3, 3).tolist() == [[3, 0, 4]]


def test_translate_constraints_from_tab_separated_input(trained_tiny, tmp_path):
    ckpt = trained_tiny / "checkpoint_last.pt"
    out = run_mt("translate", "-c", ckpt, "--constraints", "--beam-size", "4",
                 input="Ein kleines Programm.\tDebian\tlibrary\nEs zeigt Dateien an.\n").stdout.splitlines()
    plain = run_mt("translate", "-c", ckpt, "--beam-size", "4", input="Es zeigt Dateien an.\n").stdout.strip()
    assert "Debian" in out[0] and "library" in out[0] and out[1] == plain
    error = run_mt("translate", "-c", ckpt, "--constraints", "--sampling", input="a\tb\n", check=False)
    assert "do not combine with --sampling" in one_error_line(error)
    error = run_mt("translate", "-c", ckpt, "--constraints", "--prefix", input="a\tb\n", check=False)
    assert "use one" in one_error_line(error)
