"""Background documents: `POST /translate_file` with `background=true` answers a job at once, polled to completion
through `GET /translate_file/jobs/ID`, cancelled with `DELETE`, bounded by --max-file-jobs (mt/serving/file_jobs.py).
A real `mt serve` process, real HTTP clients."""

from __future__ import annotations

import time
import urllib.request

import httpx
import pytest

from tests.conftest import RunningServer
from tests.serving.conftest import dev_lines

PAIR = {"source": "de", "target": "en"}


@pytest.fixture
def checkpoint(trained_tiny):
    return trained_tiny / "checkpoint_last.pt"


def _document(lines: int) -> bytes:
    found = dev_lines()
    return "".join(found[i % len(found)] + "\n" for i in range(lines)).encode()


def _started(server: RunningServer, data: bytes, name: str = "big.txt") -> httpx.Response:
    return server.post("/translate_file", data={**PAIR, "background": "true"}, files={"file": (name, data)})


def _polled(server: RunningServer, job: dict, until, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = httpx.get(job["statusUrl"], timeout=60).json()
        if until(status):
            return status
        time.sleep(0.05)
    raise AssertionError(f"job never got there: {status}")


def test_a_background_document_is_polled_to_the_synchronous_result(checkpoint):
    server = RunningServer(checkpoint)
    try:
        data = _document(300)
        answer = _started(server, data)
        assert answer.status_code == 202, answer.text
        job = answer.json()
        assert job["statusUrl"].endswith(f"/translate_file/jobs/{job['jobId']}")
        seen = []
        status = _polled(server, job, lambda s: seen.append(s["done"]) or s["status"] in ("done", "failed"))
        assert status["status"] == "done" and status["done"] == status["total"] > 0, status
        assert any(0 < done < status["total"] for done in seen), seen  # progress, a part at a time
        now = server.post("/translate_file", data=PAIR, files={"file": ("big.txt", data)})
        assert now.status_code == 200, now.text
        with urllib.request.urlopen(status["translatedFileUrl"], timeout=60) as response:
            assert response.read() == httpx.get(now.json()["translatedFileUrl"], timeout=60).content
        assert server.get("/translate_file/jobs/" + "0" * 32).status_code == 404
    finally:
        assert server.stop() == 0


def test_jobs_are_bounded_cancellable_and_a_shutdown_fails_the_running_ones(checkpoint):
    server = RunningServer(checkpoint, "--max-file-jobs", "1", "--max-file-bytes", "400000")
    try:
        first = _started(server, _document(3000)).json()
        running = _polled(server, first, lambda s: s["done"] > 0)
        refused = _started(server, _document(10))
        assert refused.status_code == 429 and "1 background files are being translated" in refused.json()["error"]
        too_big = _started(server, b"x" * 500_000)
        assert too_big.status_code == 413
        cancelled = httpx.delete(first["statusUrl"], timeout=60).json()
        assert cancelled["status"] == "cancelled" and running["done"] <= cancelled["done"] < cancelled["total"]
        time.sleep(1)
        assert httpx.get(first["statusUrl"], timeout=60).json()["status"] == "cancelled"  # stays so
        second = _started(server, _document(3000))
        assert second.status_code == 202, second.text  # room again
        _polled(server, second.json(), lambda s: s["done"] > 0)
        started = time.monotonic()
        assert server.stop() == 0  # SIGTERM: the running job is failed, not waited for
        assert time.monotonic() - started < 30
    finally:
        server.proc.kill()
