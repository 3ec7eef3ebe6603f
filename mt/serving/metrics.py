"""`mt serve`'s Prometheus metrics (GET /metrics): requests (answered and in progress), latency, the queue, rows
per step, output."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from mt.decoding.protocol import DecodeHooks


class Metrics(DecodeHooks):
    """The server's counters, and the hooks its decode workers report each step and queue size to."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("mt_requests", "HTTP requests", ["endpoint", "status"], registry=self.registry)
        self.in_progress = Gauge("mt_requests_in_progress", "HTTP requests being answered", ["endpoint"],
                                 registry=self.registry)
        self.latency = Histogram("mt_request_seconds", "Request latency", ["endpoint"], registry=self.registry,
                                 buckets=(.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.queue = Gauge("mt_queued_source_tokens", "Source tokens waiting or decoding", registry=self.registry)
        self.rows = Histogram("mt_decode_step_rows", "Rows per decoding step", registry=self.registry,
                              buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
        self.sentences = Counter("mt_sentences", "Sentences translated", registry=self.registry)
        self.tokens = Counter("mt_output_tokens", "Target tokens produced", registry=self.registry)

    def step(self, rows: int) -> None:
        self.rows.observe(rows)

    def queued(self, tokens: int) -> None:
        self.queue.set(tokens)
