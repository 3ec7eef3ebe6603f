"""Background documents for `mt serve`: `POST /translate_file` with `background=true` answers at once (202) with a
job, whose progress and result are fetched later; LibreTranslate's clients keep the synchronous form (the default).

    POST   /translate_file            file, source, target, api_key, background=true
                                      -> 202 {"jobId": ID, "statusUrl": ".../translate_file/jobs/ID"}
    GET    /translate_file/jobs/ID    -> {"status": "queued|running|done|failed|cancelled", "done": N,
                                          "total": M, "translatedFileUrl": ..., "notes": [...] (done),
                                          "error": ... (failed)}
    DELETE /translate_file/jobs/ID    -> the job cancelled: its sentences not yet decoding are released

`done`/`total` count the document's sentences. At most `max_jobs` jobs are queued or running at once (429 past
it); an ended job is kept, and its file, for KEEP_S seconds. A shutdown (SIGTERM) fails the jobs still running
with the server's 503 reason instead of leaving them "running". Job ids are random, as download names are.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

from mt.errors import HttpError
from mt.serving.translated_files import KEEP_S

SENTENCES_A_PART = 64  # a job's sentences go to the model's worker this many at a time: its progress

ENDED = ("done", "failed", "cancelled")


@dataclass(eq=False)
class FileJob:
    id: str
    total: int = 0
    done: int = 0
    status: str = "queued"
    url: str | None = None
    notes: list[str] = field(default_factory=list)  # what the document's format left for review (done)
    error: str | None = None
    ended_at: float | None = None
    task: asyncio.Task | None = field(default=None, repr=False)
    cancelled: bool = False

    def end(self, status: str, error: str | None = None) -> None:
        self.status, self.error, self.ended_at = status, error, time.monotonic()

    def answer(self) -> dict:
        shown = {"status": self.status, "done": self.done, "total": self.total}
        if self.url is not None:
            shown["translatedFileUrl"], shown["notes"] = self.url, self.notes
        if self.error is not None:
            shown["error"] = self.error
        return shown


class FileJobs:
    """The server's background documents: started, looked up, cancelled, dropped once long ended."""

    def __init__(self, max_jobs: int):
        self.max_jobs, self.jobs = max_jobs, {}

    def start(self, work) -> FileJob:
        """A job running `work(job)` (a coroutine function) as a task; 429 when `max_jobs` have not ended."""
        self._drop_expired()
        if sum(job.status not in ENDED for job in self.jobs.values()) >= self.max_jobs:
            raise HttpError(429, f"{self.max_jobs} background files are being translated; try again later",
                            {"Retry-After": "10"})
        job = FileJob(uuid.uuid4().hex)
        self.jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, work))
        return job

    async def _run(self, job: FileJob, work) -> None:
        job.status = "running"
        try:
            url = await work(job)
        except asyncio.CancelledError:
            url, error = None, None
        except HttpError as e:
            url, error = None, e.detail
        except Exception as e:  # a fault of the document or the model: the job fails, the server serves on
            url, error = None, f"{type(e).__name__}: {e}"
        if job.cancelled:  # cancelled, or failed at shutdown: already ended
            return
        if url is None:
            job.end("failed", error or "stopped")
        else:
            job.url = url
            job.end("done")

    def get(self, job_id: str) -> FileJob:
        self._drop_expired()
        job = self.jobs.get(job_id)
        if job is None:
            raise HttpError(404, f"no background file job {job_id!r} (ended jobs are kept {KEEP_S / 60:.0f} minutes)")
        return job

    def cancel(self, job_id: str) -> FileJob:
        job = self.get(job_id)
        if job.status not in ENDED:
            job.cancelled = True
            job.end("cancelled")
        return job

    def fail_running(self, reason: str) -> None:
        """At shutdown: every job not ended is failed with `reason`."""
        for job in self.jobs.values():
            if job.status not in ENDED:
                job.cancelled = True
                job.end("failed", reason)

    def _drop_expired(self) -> None:
        now = time.monotonic()
        for job_id in [i for i, j in self.jobs.items() if j.ended_at is not None and now - j.ended_at > KEEP_S]:
            del self.jobs[job_id]


class Detached:
    """What the decoding of a background job reads of its request once the request has been answered: the app,
    and whether the job was cancelled (as a client's disconnect cancels a request)."""

    def __init__(self, app, job: FileJob):
        self.app, self.job = app, job

    async def is_disconnected(self) -> bool:
        return self.job.cancelled
