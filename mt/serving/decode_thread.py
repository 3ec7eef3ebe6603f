"""`mt serve`'s decoding side: one thread that runs every served model, and a queue per model in front of its
backend's engine.

A request's sentences arrive as one `Job` in one model's `DecodeWorker`, a queue and nothing else (submit,
cancel, take, deliver, fail): the backend's engine (mt/decoding/protocol.py `Engine`) decides how they join the decoding.
mt's own model steps one running batch per group of search settings, which a sentence arriving while others
decode joins at a step boundary (at most every `JOIN_EVERY` steps) and gets the output it would get alone;
CTranslate2 decodes what it took together in one call per caller thread (mt/decoding/ct2_backend.py). Offline decoding
(`ModelBackend.search`) drives the same engines.

The `DecodeThread` is the only thread that runs mt's models (torch): it loads the models, steps each model's
engine in turn and runs what `submit` hands it (the word alignment pass). torch's CPU thread pool (GNU OpenMP)
belongs to the thread that first uses it; a second thread running torch starts a second pool, and with more pool
threads than cores OpenMP's threads sleep at every barrier instead of spinning. Decoding in a thread of its own
after loading the model in the main thread made every small operation cost about 60 us instead of 5, and a
beam-4 sentence of the demo model 2x slower.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from mt.decoding.protocol import Backend, DecodeHooks, Hypothesis, SentenceRequest, Work
from mt.tuning import return_freed_memory

# A running batch takes arriving sentences at most every 4 steps: fewer, larger joins. Demo model, 32 in-process
# clients, sentences/s joining every step -> every 4th: one-sentence requests 37 -> 45, 20-sentence ones 55 -> 59.
JOIN_EVERY = 4

# After decoding, once the models have been idle this long, malloc hands the memory it keeps free back to the
# system (`mt serve` keeps freed memory for reuse while it decodes: mt/tuning.py).
TRIM_AFTER_IDLE_S = 1.0


class Overloaded(Exception):
    """The server is shutting down: the request is refused now (503), never dropped later."""


class QueueFull(Overloaded):
    """The queue of source tokens is full: the request may wait for room (mt/serving/app.py), or is refused."""


class Retired(Exception):
    """The worker's model was replaced by a reload (SIGHUP) after the request chose it: it goes to the new one."""


@dataclass(eq=False)
class Job(Work):
    """One request's sentences for one model's queue; `done` gets their hypotheses, in order."""

    queue: DecodeWorker | None = None
    done: Future = field(default_factory=Future)
    tokens: int = 0  # source tokens it holds in the queue

    def deliver(self, hypotheses: list[list[Hypothesis]]) -> None:
        self.queue.release(self)
        if not self.done.done():
            self.done.set_result(hypotheses)

    def fail(self, error: Exception) -> None:
        self.queue.release(self)
        if not self.done.done():
            self.done.set_exception(error)


class DecodeThread:
    """The one thread that runs the models: `call` runs a function there (loading a model), `add_worker` gives a
    model its worker, and between calls the thread steps every busy worker's decode in turn."""

    def __init__(self):
        self.lock = threading.Condition()
        self.workers: list[DecodeWorker] = []
        self.calls: list[tuple[Callable, Future]] = []
        self.stopping = self.ended = False
        self.thread = threading.Thread(target=self._run, name="mt-decode", daemon=True)
        self.thread.start()

    def call(self, function: Callable):
        """function() run on the decode thread; its result, or its exception raised here."""
        return self.submit(function).result()

    def submit(self, function: Callable) -> Future:
        """function() to run on the decode thread: the future of its result."""
        future: Future = Future()
        with self.lock:
            if self.ended:
                raise Overloaded("the server is shutting down")
            self.calls.append((function, future))
            self.lock.notify()
        return future

    def add_worker(self, backend: Backend, max_queued_tokens: int, batching: bool = True,
                   hooks: DecodeHooks | None = None) -> DecodeWorker:
        worker = DecodeWorker(self, backend, max_queued_tokens, batching, hooks)
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
                        self.ended = True
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
    """One model's queue in front of its backend's engine (mt/decoding/protocol.py `Engine`): requests wait here until the
    engine takes them; its `turn`s run on the decode thread."""

    def __init__(self, owner: DecodeThread, backend: Backend, max_queued_tokens: int, batching: bool = True,
                 hooks: DecodeHooks | None = None):
        self.owner, self.lock = owner, owner.lock
        self.max_queued_tokens, self.batching = max_queued_tokens, batching
        self.hooks = hooks or DecodeHooks()
        self.engine = backend.engine(_Woken(self.hooks, self.lock), JOIN_EVERY)
        self.inbox: list[Job] = []
        self.cancelled: list[Job] = []  # jobs whose waiting sentences the engine drops
        self.queued_tokens = 0
        self.retired = False  # removed from the decode thread (`retire`): it takes nothing more
        self.turning = False  # from `take` to the end of its `turn`: the engine changes, off the lock

    # ------------------------------------------------------------ the server's side

    def submit(self, requests: list[SentenceRequest]) -> Job:
        """Queue a request's sentences; Overloaded when they do not fit beside those queued."""
        job = Job(requests, queue=self, tokens=sum(len(r.source) + 1 for r in requests))
        with self.lock:
            if self.owner.stopping:
                raise Overloaded("the server is shutting down")
            if self.retired:
                raise Retired()
            if self.queued_tokens and self.queued_tokens + job.tokens > self.max_queued_tokens:
                raise QueueFull(f"{self.queued_tokens} source tokens are queued; try again shortly")
            self.queued_tokens += job.tokens
            self.hooks.queued(self.queued_tokens)
            self.inbox.append(job)
            self.lock.notify()
        if not requests:
            job.deliver([])
        return job

    def cancel(self, job: Job) -> None:
        """The client went away: its sentences not yet decoding are released (by the engine, at the decode
        thread's next turn); those decoding finish unseen."""
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
        return bool(self.cancelled) or bool(self._count()) or self.engine.stepping

    @property
    def pending(self) -> bool:
        """Whether anything accepted is still to be answered (read under the lock)."""
        return bool(self.inbox) or self.turning or not self.engine.idle

    def take(self) -> tuple[list[Job], list[Job]]:
        """Under the lock: the jobs that join now (all waiting, or the engine's share; with batching off, the
        next one once the engine is idle) and the jobs cancelled since the last turn."""
        cancelled, self.cancelled = self.cancelled, []
        count = self._count()
        jobs, self.inbox = self.inbox[:count], self.inbox[count:]
        self.turning = True  # until the turn ends, the engine's state is not to be read (a part it admits is
        # neither waiting nor running while its batch is encoded): `retire` waits
        return jobs, cancelled

    def _count(self) -> int:
        if not self.inbox:
            return 0
        if not self.batching:
            return 1 if self.engine.idle else 0
        return self.engine.share([job.tokens for job in self.inbox])

    def turn(self, jobs: list[Job], cancelled: list[Job]) -> None:
        """Drop what was cancelled, hand the engine what joins, one step."""
        try:
            for job in cancelled:
                self.engine.cancel(job)
                self.release(job)
            self.engine.add(jobs)
            self.engine.step()
        except Exception as error:  # a fault of the model or a bug: fail the jobs, keep serving
            for job in {id(job): job for job in self.engine.held() + jobs}.values():
                job.fail(error)
        finally:
            self.turning = False

    def retire(self) -> bool:
        """Under the lock: taken off the decode thread once it has answered all it accepted (True); until then
        (False) it keeps answering. A request that chose it before a reload but submits after gets `Retired`."""
        if self.pending:
            return False
        self.retired = True
        self.owner.workers.remove(self)
        return True

    def close(self) -> None:
        self.engine.close()

    def release(self, job: Job) -> None:
        with self.lock:
            self._release(job)

    def _release(self, job: Job) -> None:
        self.queued_tokens -= job.tokens
        job.tokens = 0
        self.hooks.queued(self.queued_tokens)


class _Woken(DecodeHooks):
    """The queue's hooks for its engine: a CTranslate2 call that ends wakes the decode thread, which may start
    another."""

    def __init__(self, hooks: DecodeHooks, lock: threading.Condition):
        self.hooks, self.lock = hooks, lock

    def step(self, rows: int) -> None:
        self.hooks.step(rows)

    def call_ended(self) -> None:
        with self.lock:
            self.lock.notify()
