"""The decoding front end (mt/decoding/lines.py): line preparation written once, the same for every backend."""

from dataclasses import replace

from mt.config import DecodeConfig
from mt.decoding.lines import translate_ids
from mt.decoding.protocol import Hypothesis
from mt.decoding.scheduler import in_static_batches
from tests.conftest import lines_of


class RecordingBackend:
    """A backend that echoes each source reversed and records what the front end handed it."""

    max_positions = 8

    def __init__(self):
        self.calls = []  # the requests of each call

    def search(self, requests):
        self.calls.append(requests)
        return [[Hypothesis(list(r.source[::-1]), -float(i), -float(i)) for i in range(r.nbest)] for r in requests]

    @property
    def requests(self):
        return [r for requests in self.calls for r in requests]


OPTS = DecodeConfig(beam_size=2, alpha=0.6, max_len_a=1.0, max_len_b=2, batch_tokens=12)


def test_empty_lines_never_reach_the_backend_and_get_one_empty_hypothesis():
    backend = RecordingBackend()
    results = translate_ids(backend, lines_of([[5, 6], [], [7]]), OPTS)
    assert [[h.tokens for h in per] for per in results] == [[[6, 5]], [[]], [[7]]]
    assert all(r.source for r in backend.requests)


def test_the_backend_learns_each_sources_input_line_number():
    backend = RecordingBackend()
    translate_ids(backend, lines_of([[5, 6], [], [7, 8, 9], [4]], first_line=10), replace(OPTS, batch_tokens=3))
    assert sorted(r.line for r in backend.requests) == [10, 12, 13]  # the empty line 11 is not decoded


def test_long_sources_are_cut_to_the_positions_with_a_warning_per_line():
    backend, warned = RecordingBackend(), []
    translate_ids(backend, lines_of([[4] * 10, [5] * 3]), OPTS, on_truncate=lambda *args: warned.append(args))
    # 8 positions: at most 7 target tokens with EOS, so a source keeps 6 tokens and its EOS
    assert warned == [(0, 10, 6)]
    assert sorted(len(r.source) for r in backend.requests) == [3, 6]


def test_length_limits_are_the_front_ends():
    backend = RecordingBackend()
    sources = [[4] * n for n in (1, 2, 3, 4, 5, 6)]
    translate_ids(backend, lines_of(sources), OPTS)
    limits = {len(r.source): r.max_len for r in backend.requests}
    assert limits == {1: 3, 2: 4, 3: 5, 4: 6, 5: 7, 6: 7}  # a * |x| + b, capped by the model's 7 target positions


def test_backends_batch_by_source_tokens_and_give_results_back_in_input_order():
    sources = [[4] * n for n in (5, 1, 6, 2, 3, 4, 1)]
    batches = []

    def search(index):
        batches.append(index)
        return [f"result {i}" for i in index]
    assert in_static_batches([len(s) + 1 for s in sources], 12, search) == [f"result {i}" for i in range(len(sources))]
    for index in batches:  # at most batch_tokens = 12 source tokens (EOS and padding counted), whatever the beam
        assert len(index) * max(len(sources[i]) + 1 for i in index) <= 12 or len(index) == 1
    assert max(map(len, batches)) > 2  # 12 // 2 would have allowed only 2


def test_results_come_back_in_input_order_with_nbest_and_a_wide_enough_beam():
    backend = RecordingBackend()
    sources = [[9, 4], [5], [6, 7, 8], [4]]
    results = translate_ids(backend, lines_of(sources), replace(OPTS, batch_tokens=4096), nbest=3)
    assert [per[0].tokens for per in results] == [s[::-1] for s in sources]
    assert all(len(per) == 3 for per in results)
    assert {r.opts.beam_size for r in backend.requests} == {3}  # beam widened to nbest
