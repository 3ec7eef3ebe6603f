"""The decode options are declared once, in DecodeConfig: which requests share a batch (SentenceRequest.group) and
what the server's native endpoint takes both come from that declaration, so a new field cannot be forgotten by
either. Requests that differ only in a field their search does not take once per batch share a batch, and each
still gets the output it gets alone."""

import dataclasses

import pytest

from mt.config import DecodeConfig, batch_settings
from mt.decoding.model_backend import ModelBackend
from mt.serving.app import request_decode_options
from tests.conftest import random_model, random_sources, requests_of

VOCAB = 40
SEARCHES = ("greedy", "sampling", "beam", "constrained")


def _changed(name: str):
    """A valid value of the field other than its default."""
    default = getattr(DecodeConfig(), name)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    return default / 2 if default else 0.5


def _opts(search: str, **changes) -> DecodeConfig:
    base = {"greedy": dict(beam_size=1), "sampling": dict(sampling=True)}.get(search, {})
    return DecodeConfig(**{**base, **changes})


def _requests(search: str, opts: DecodeConfig, sources):
    nbest = 2 if search in ("sampling", "beam") else 1
    terms = [[s[:2]] for s in sources] if search == "constrained" else None
    requests = requests_of(sources, opts, max_len=20, nbest=nbest, terms=terms)
    assert {r.search for r in requests} == {search}
    return requests


def _decoded(backend, requests) -> tuple[list, list]:
    """Each request's hypotheses: their tokens, and their scores (a batch changes these in float rounding only)."""
    found = backend.search(requests)
    return [[h.tokens for h in per] for per in found], [h.score for per in found for h in per]


@pytest.mark.parametrize("search", SEARCHES)
def test_requests_differing_in_a_field_read_per_request_share_a_batch_and_each_gets_its_own_output(search):
    """If a search took such a field from the batch's first request, the changed requests would get the
    unchanged ones' output (or the reverse), and this would fail."""
    backend, sources = ModelBackend(random_model(VOCAB, seed=2)), random_sources(6, VOCAB, shortest=3, seed=4)
    per_request = [f.name for f in dataclasses.fields(DecodeConfig) if f.name not in batch_settings(search)
                   and f.name not in ("beam_size", "sampling")]  # these two choose the search itself
    assert per_request
    for name in per_request:
        plain = _requests(search, _opts(search), sources)
        changed = _requests(search, _opts(search, **{name: _changed(name)}), sources)
        mixed = [plain[i] if i % 2 else changed[i] for i in range(len(sources))]
        assert len({r.group for r in mixed}) == 1
        alone = [_decoded(backend, [request]) for request in mixed]
        tokens, scores = _decoded(backend, mixed)
        assert tokens == [a[0][0] for a in alone], name
        assert scores == pytest.approx([s for a in alone for s in a[1]], abs=1e-4), name


@pytest.mark.parametrize("search", SEARCHES)
def test_requests_differing_in_a_batch_setting_of_their_search_never_share_a_group(search):
    for name in batch_settings(search):
        if name in ("beam_size", "sampling"):  # a different value makes a different search
            continue
        first = _requests(search, _opts(search), [[5, 6, 7]])[0]
        second = _requests(search, _opts(search, **{name: _changed(name)}), [[5, 6, 7]])[0]
        assert first.group != second.group, name


def test_a_field_declared_without_a_search_list_is_a_batch_setting_of_every_search():
    """The safe default: a new field that says nothing splits every search's groups."""
    for search in SEARCHES:
        assert "batch_tokens" in batch_settings(search)


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(DecodeConfig)])
def test_the_native_endpoint_takes_every_decode_field(name):
    value = _changed(name)
    opts = request_decode_options({name: value}, DecodeConfig())
    assert getattr(opts, name) == value
    assert dataclasses.replace(opts, **{name: getattr(DecodeConfig(), name)}) == DecodeConfig()
