"""`mt serve`'s decoding side: one thread that runs every served model, and feeds every sentence of every request
into its model's running decode.

A request's sentences arrive as one `Job` for one model's `DecodeWorker`. With mt's own model the worker keeps
one scheduler per group of search settings (mt/scheduler.py, `join_running`): a sentence that arrives while
others decode joins at the next step boundary when the token budget has room, and gets the output it would get
alone. An exported CTranslate2 model has no step-level batch to join: the worker decodes what has arrived
together, in one call, from a caller thread of its own; CTranslate2 decodes `parallel` such calls at once (its
inter_threads), so that sentences arriving while one batch decodes start on a free thread instead of waiting.

The `DecodeThread` is the only thread that runs mt's models (torch): it loads the models and steps each
model's decode in turn. torch's CPU thread pool (GNU OpenMP) belongs to the thread that first uses it; a second
thread running torch starts a second pool, and with more pool threads than cores OpenMP's threads sleep at every
barrier instead of spinning. Decoding in a thread of its own after loading the model in the main thread made every
small operation cost about 60 us instead of 5, and a beam-4 sentence of the demo model 2x slower.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from mt.backend import ModelBackend
from mt.decoding import Hypothesis, SentenceRequest, Translator
from mt.scheduler import Scheduler, Waiting
from mt.search import GreedySearch, Row
from mt.tuning import return_freed_memory

# A running batch takes arriving sentences at most every 4 steps: fewer, larger joins. Demo model, 32 in-process
# clients, sentences/s joining every step -> every 4th: one-sentence requests 37 -> 45, 20-sentence ones 55 -> 59.
JOIN_EVERY = 4

# After decoding, once the models have been idle this long, malloc hands the memory it keeps free back to the
# system (`mt serve` keeps freed memory for reuse while it decodes: mt/tuning.py).
TRIM_AFTER_IDLE_S = 1.0


class Overloaded(Exception):
    """The queue of source tokens is full: the request is refused now (503), never dropped later."""


@dataclass
class Job:
    """One request's sentences for one model; `done` gets their hypotheses, in order."""

    requests: list[SentenceRequest]
    attention: bool = False  # also each hypothesis's cross-attention (word alignment)
    done: Future = field(default_factory=Future)
    tokens: int = 0  # source tokens it holds in the queue
    found: dict = field(default_factory=dict)  # request index -> {row: hypotheses}
    cancelled: bool = False


class StepStats:
    """What a worker reports after each step: rows in the step and tokens it produced (metrics hooks)."""

    def step(self, rows: int) -> None:
        pass

    def queued(self, tokens: int) -> None:
        pass


class DecodeThread:
    """The one thread that runs the models: `call` runs a function there (loading a model), `add_worker` gives a
    model its worker, and between calls the thread steps every busy worker's decode in turn."""

    def __init__(self):
        self.lock = threading.Condition()
        self.workers: list[DecodeWorker] = []
        self.calls: list[tuple[Callable, Future]] = []
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="mt-decode", daemon=True)
        self.thread.start()

    def call(self, function: Callable):
        """function() run on the decode thread; its result, or its exception raised here."""
        future: Future = Future()
        with self.lock:
            self.calls.append((function, future))
            self.lock.notify()
        return future.result()

    def add_worker(self, translator: Translator, max_queued_tokens: int, batching: bool = True,
                   stats: StepStats | None = None) -> DecodeWorker:
        worker = DecodeWorker(self, translator, max_queued_tokens, batching, stats)
        with self.lock:
            self.workers.append(worker)
        return worker

    def stop(self) -> None:
        """Refuse new requests, finish what was accepted, then end the thread."""
        with self.lock:
            self.stopping = True
            self.lock.notify()
        self.thread.join()
        for worker in self.workers:
            worker.close()

    def _run(self) -> None:
        decoded = False  # whether it decoded since malloc last handed freed memory back
        while True:
            with self.lock:
                working = self._wait_for_work(TRIM_AFTER_IDLE_S if decoded else None)
                if working:
                    if self.stopping and not self.calls and not self._pending():
                        return
                    calls, self.calls = self.calls, []
                    turns = [(worker, worker.take()) for worker in self.workers]
            decoded = working
            if not working:  # idle a while: outside the lock, so that requests are accepted meanwhile
                return_freed_memory()
                continue
            for function, future in calls:
                try:
                    future.set_result(function())
                except BaseException as error:  # raised again in the caller's thread
                    future.set_exception(error)
            for worker, (jobs, cancelled) in turns:
                worker.turn(jobs, cancelled)

    def _wait_for_work(self, idle_timeout: float | None) -> bool:
        """Under the lock: wait until there is work (True), or for `idle_timeout` seconds in which nothing was
        decoding either (False)."""
        while not self.lock.wait_for(self._has_work, timeout=idle_timeout):
            if not self._pending():
                return False
        return True

    def _has_work(self) -> bool:
        return bool(self.calls) or self._ready() or (self.stopping and not self._pending())

    def _ready(self) -> bool:
        return any(worker.ready for worker in self.workers)

    def _pending(self) -> bool:
        return any(worker.pending for worker in self.workers)


class DecodeWorker:
    """One model's queue and running decode; its `turn`s run on the decode thread."""

    def __init__(self, owner: DecodeThread, translator: Translator, max_queued_tokens: int, batching: bool = True,
                 stats: StepStats | None = None):
        self.owner, self.lock = owner, owner.lock
        self.translator, self.max_queued_tokens, self.batching = translator, max_queued_tokens, batching
        self.stats = stats or StepStats()
        self.stepped = isinstance(translator.backend, ModelBackend)  # mt's model: joins at steps; else whole calls
        self.parallel = 1 if self.stepped else translator.backend.parallel
        self.calls_running = 0  # CTranslate2 calls decoding now, each on a caller thread
        self.callers = None if self.stepped else ThreadPoolExecutor(self.parallel, thread_name_prefix="mt-ct2")
        self.inbox: list[Job] = []
        self.cancelled: list[Job] = []  # jobs whose waiting sentences the worker drops
        self.queued_tokens = 0
        self.schedulers: dict[tuple, tuple[Scheduler, int]] = {}  # group -> scheduler, rows per request
        self.owners: dict[tuple, dict[int, tuple[Job, int, int]]] = {}  # group -> row id -> (job, request, row)
        self.ids = itertools.count()

    # ------------------------------------------------------------ the server's side

    def submit(self, requests: list[SentenceRequest], attention: bool = False) -> Job:
        """Queue a request's sentences; Overloaded when they do not fit beside those queued."""
        job = Job(requests, attention, tokens=sum(len(r.source) + 1 for r in requests))
        with self.lock:
            if self.owner.stopping:
                raise Overloaded("the server is shutting down")
            if self.queued_tokens and self.queued_tokens + job.tokens > self.max_queued_tokens:
                raise Overloaded(f"{self.queued_tokens} source tokens are queued; try again shortly")
            self.queued_tokens += job.tokens
            self.stats.queued(self.queued_tokens)
            self.inbox.append(job)
            self.lock.notify()
        if not requests:
            self._finish(job)
        return job

    def cancel(self, job: Job) -> None:
        """The client went away: its sentences not yet decoding are released (by the worker, at its next step);
        those decoding finish unseen."""
        with self.lock:
            job.cancelled = True
            if job in self.inbox:
                self.inbox.remove(job)
                self._release(job)
            else:
                self.cancelled.append(job)
            self.lock.notify()

    # ------------------------------------------------------------ on the decode thread

    @property
    def ready(self) -> bool:
        """Whether a turn has work now (read under the lock)."""
        return bool(self.cancelled) or (bool(self.inbox) and self._can_take()) or self._stepping()

    @property
    def pending(self) -> bool:
        """Whether anything accepted is still to be answered (read under the lock)."""
        return bool(self.inbox) or self._stepping() or self.calls_running > 0

    def take(self) -> tuple[list[Job], list[Job]]:
        """Under the lock: the jobs that join now and the jobs cancelled since the last turn."""
        cancelled, self.cancelled = self.cancelled, []
        return self._take(), cancelled

    def turn(self, jobs: list[Job], cancelled: list[Job]) -> None:
        """Drop what was cancelled, admit what joins, one step of each running search; or hand the jobs to a
        CTranslate2 call."""
        if not self.stepped:
            self._drop(cancelled)
            if jobs:
                self.callers.submit(self._call, jobs)
            return
        try:
            self._drop(cancelled)
            self._admit(jobs)
            self._step()
        except Exception as error:  # a fault of the model or a bug: fail the jobs, keep serving
            self._fail_all(error, jobs)

    def close(self) -> None:
        if self.callers is not None:
            self.callers.shutdown()

    def _take(self) -> list[Job]:
        """What joins now: every waiting job (CTranslate2: its share, while a call can start), or with batching
        off the next one once the model is idle."""
        if not (self.inbox and self._can_take()):
            return []
        count = 1 if not self.batching else len(self.inbox) if self.stepped else self._call_share()
        jobs, self.inbox = self.inbox[:count], self.inbox[count:]
        if not self.stepped:
            self.calls_running += 1
        return jobs

    def _call_share(self) -> int:
        """How many of the waiting jobs a CTranslate2 call takes: the first that hold a 1/parallel share of the
        waiting tokens (at least one), the rest left for the other calls. A call decodes on threads/parallel
        threads: one that took every waiting 20-sentence request ran on one thread while the other had none
        (2 cores, 32 such clients: 133 sentences/s; taking shares, 161)."""
        share, taken = sum(job.tokens for job in self.inbox) / self.parallel, 0
        for count, job in enumerate(self.inbox, 1):
            taken += job.tokens
            if taken >= share:
                return count
        return len(self.inbox)

    def _can_take(self) -> bool:
        if self.batching:
            return self.calls_running < self.parallel
        return not self._stepping() and self.calls_running == 0

    def _stepping(self) -> bool:
        """Whether a search has rows or sentences waiting to join."""
        return not all(scheduler.idle for scheduler, _ in self.schedulers.values())

    def _call(self, jobs: list[Job]) -> None:
        """On a caller thread: one CTranslate2 search of every sentence of the jobs that arrived together."""
        live = [job for job in jobs if job.requests and not job.cancelled]
        try:
            found = self.translator.backend.search([r for job in live for r in job.requests]) if live else []
            self.stats.step(len(found))
            at = 0
            for job in live:
                self._deliver(job, found[at:at + len(job.requests)])
                at += len(job.requests)
        except Exception as error:  # a fault of the model or a bug: fail the jobs, keep serving
            for job in live:
                self._fail(job, error)
        finally:
            with self.lock:
                self.calls_running -= 1
                self.lock.notify()

    def _admit(self, jobs: list[Job]) -> None:
        for job in jobs:
            for k, request in enumerate(job.requests):
                self._submit(job, k, request)

    def _submit(self, job: Job, k: int, request: SentenceRequest) -> None:
        group = request.group
        if group not in self.schedulers:
            search, policy, rows = self.translator.backend.new_search(request, join_running=True)
            policy = replace(policy, join_every=JOIN_EVERY)
            self.schedulers[group], self.owners[group] = (Scheduler(search, policy), rows), {}
        scheduler, rows = self.schedulers[group]
        if isinstance(scheduler.search, GreedySearch):
            scheduler.search.capacity = max(scheduler.search.capacity, request.max_len + 1)
        items = []
        for j in range(rows):
            row_id = next(self.ids)
            self.owners[group][row_id] = (job, k, j)
            item = Row(request, j) if isinstance(scheduler.search, GreedySearch) else request
            items.append(Waiting(row_id, item, len(request.source) + 1))
        scheduler.submit(items)

    def _step(self) -> None:
        for group, (scheduler, rows) in list(self.schedulers.items()):
            if scheduler.idle:
                continue
            ended = scheduler.step()
            self.stats.step(scheduler.search.rows + len(ended))
            for row_id, hyps in ended:
                job, k, j = self.owners[group].pop(row_id)
                job.found.setdefault(k, {})[j] = hyps
                if len(job.found) == len(job.requests) and all(len(f) == rows for f in job.found.values()):
                    self._deliver(job, [[h for j in range(rows) for h in job.found[k][j]]
                                        for k in range(len(job.requests))])

    def _deliver(self, job: Job, hyps: list[list[Hypothesis]]) -> None:
        if job.attention and not job.cancelled:
            pairs = [(list(r.source), h) for r, per in zip(job.requests, hyps) for h in per]
            weights = self.translator.backend.attention([s for s, _ in pairs], [h.tokens for _, h in pairs]) \
                if pairs else []
            for (_, h), w in zip(pairs, weights):
                h.attention = w
        self._finish(job, hyps)

    def _finish(self, job: Job, hyps: list[list[Hypothesis]] | None = None) -> None:
        with self.lock:
            self._release(job)
        if not job.done.done():
            job.done.set_result(hyps or [])

    def _release(self, job: Job) -> None:
        self.queued_tokens -= job.tokens
        job.tokens = 0
        self.stats.queued(self.queued_tokens)

    def _drop(self, jobs: list[Job]) -> None:
        """Take the waiting sentences of cancelled jobs out of the schedulers, and the jobs out of the queue."""
        for job in jobs:
            for group, owners in self.owners.items():
                ids = {row_id for row_id, (owner, _, _) in owners.items() if owner is job}
                dropped = self.schedulers[group][0].cancel(ids)
                for row_id in dropped:
                    del owners[row_id]
            with self.lock:
                self._release(job)

    def _fail_all(self, error: Exception, joining: list[Job]) -> None:
        """Every job with sentences in a search, and those that were joining, gets `error`."""
        held = [job for owners in self.owners.values() for job, _, _ in owners.values()]
        jobs = list({id(job): job for job in held + joining}.values())
        self.schedulers.clear()
        self.owners.clear()
        for job in jobs:
            self._fail(job, error)

    def _fail(self, job: Job, error: Exception) -> None:
        with self.lock:
            self._release(job)
        if not job.done.done():
            job.done.set_exception(error)

