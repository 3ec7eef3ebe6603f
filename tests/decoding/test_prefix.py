"""Target prefixes (mt translate --prefix): every hypothesis starts with its prefix, then decodes freely; a
sentence without one decodes exactly as without the flag."""

import pytest
import torch

from mt.decoding.model_backend import ModelBackend
from mt.config import DecodeConfig
from mt.decoding.lines import translate_ids
from mt.symbols import EOS
from tests.conftest import lines_of, requests_of, run_mt

SOURCES = dict(n=12)  # the `sources` fixture (tests/conftest.py)
VOCAB = 20


def _decode(model, sources, prefixes=None, nbest=1, **options):
    opts = DecodeConfig(**{"beam_size": 4, "max_len_b": 10, **options})
    return translate_ids(ModelBackend(model), lines_of(sources, prefixes=prefixes), opts, nbest=nbest)


def _random_prefixes(n, seed=3):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(EOS + 1, VOCAB, (int(torch.randint(0, 4, (1,), generator=g)),), generator=g).tolist()
            for _ in range(n)]


@pytest.mark.parametrize("options", [{"beam_size": 1}, {"beam_size": 4}, {"sampling": True, "topk": 5}])
def test_every_hypothesis_starts_with_its_prefix(model, sources, options):
    prefixes = _random_prefixes(len(sources))
    assert any(prefixes) and not all(prefixes)
    nbest = 1 if options.get("beam_size") == 1 else 2
    for per, prefix in zip(_decode(model, sources, prefixes, nbest=nbest, **options), prefixes):
        assert all(h.tokens[:len(prefix)] == prefix for h in per)


@pytest.mark.parametrize("beam", [1, 4])
def test_sentences_without_a_prefix_decode_as_without_the_option(model, sources, beam):
    plain = _decode(model, sources, beam_size=beam)
    prefixes = _random_prefixes(len(sources))
    mixed = _decode(model, sources, prefixes, beam_size=beam)
    for a, b, prefix in zip(plain, mixed, prefixes):
        if not prefix:
            assert a[0].tokens == b[0].tokens and a[0].score == pytest.approx(b[0].score, abs=1e-5)


def test_greedy_given_its_own_start_ends_the_same_with_the_same_score(model, sources):
    plain = _decode(model, sources, beam_size=1)
    own = [per[0].tokens[:2] for per in plain]
    forced = _decode(model, sources, own, beam_size=1)
    assert [p[0].tokens for p in plain] == [f[0].tokens for f in forced]
    assert all(p[0].score == pytest.approx(f[0].score, abs=1e-5) for p, f in zip(plain, forced))


def test_a_long_prefix_extends_the_length_limit(model, sources):
    prefix = [5] * 15  # longer than max_len_b 0 + a * source length allows
    out = _decode(model, sources[:2], [prefix, prefix], beam_size=1, max_len_a=0.0, max_len_b=0)
    assert all(per[0].tokens[:15] == prefix for per in out)


def test_translate_prefix_flag_reads_tab_separated_lines(trained_tiny):
    ckpt = trained_tiny / "checkpoint_last.pt"
    plain = run_mt("translate", "-c", ckpt, input="Ein kleines Programm.\nEs zeigt Dateien an.\n").stdout
    out = run_mt("translate", "-c", ckpt, "--prefix",
                 input="Ein kleines Programm.\nEs zeigt Dateien an.\tThe files\n").stdout.splitlines()
    assert out[0] == plain.splitlines()[0] and out[1].startswith("The files")
    json_out = run_mt("translate", "-c", ckpt, "--prefix", "--output-format", "json",
                      input="Es zeigt Dateien an.\tIt shows\n").stdout
    assert '"text": "It shows' in json_out


class _Pieces:
    """A sentencepiece model's id <-> piece mapping, as far as the CTranslate2 backend uses it."""

    def id_to_piece(self, i):
        return f"p{i}"

    def piece_to_id(self, piece):
        return int(piece[1:])


class _RecordingCt2:
    """CTranslate2's translate_batch, recording each call: a row's output is its prefix, then its first source
    piece, then the end token."""

    num_translators = 1  # as a Translator loaded with inter_threads=1

    def __init__(self):
        self.calls = []

    def translate_batch(self, pieces, target_prefix=None, **options):
        from types import SimpleNamespace

        from mt.decoding.ct2_backend import END

        self.calls.append((len(pieces), target_prefix))
        return [SimpleNamespace(hypotheses=[list(target_prefix[i] if target_prefix else []) + [src[0], END]],
                                scores=[-1.0]) for i, src in enumerate(pieces)]


def test_an_exported_directory_decodes_lines_without_a_prefix_in_a_call_of_their_own():
    """CTranslate2 decodes every row of a call that has target prefixes another way: rows without one go in a
    call with no prefixes, and the outputs come back in the lines' order."""
    from types import SimpleNamespace

    from mt.decoding.ct2_backend import Ct2Backend

    translator, sp = _RecordingCt2(), SimpleNamespace(sp=_Pieces())
    backend = Ct2Backend(translator, sp, sp, max_positions=64)
    opts = DecodeConfig(beam_size=2)
    sources, max_len = [[5, 6], [7], [8, 9]], torch.tensor([10, 10, 10])
    out = backend.search(requests_of(sources, opts, max_len, prefixes=[[1, 2], [], [3]]))
    assert [hyps[0].tokens for hyps in out] == [[1, 2, 5], [7], [3, 8]]
    assert sorted(translator.calls, key=lambda call: call[1] is None) == [(2, [["p1", "p2"], ["p3"]]), (1, None)]
    translator.calls.clear()
    backend.search(requests_of(sources, opts, max_len, prefixes=[[], [], []]))
    assert translator.calls == [(3, None)]
