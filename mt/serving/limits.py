"""What `mt serve` allows a connection before its request reaches a handler: how long it may stay idle, how long
its request may take to arrive, how large its body may be, and which other origins may call it (CORS).

- A connection with no request in progress (new, or after a response) is closed after `keep_alive_timeout`
  seconds without a byte (uvicorn's keep-alive timer covers only the time after a response; a connection that
  never sent anything stayed open for good).
- A request must arrive whole, headers and body, within `read_timeout` seconds of its first byte: 408 and the
  connection closed (a client that sends a byte at a time cannot hold a connection, or shutdown, open).
- A body larger than `max_body_bytes` (`max_file_bytes` for an upload to /translate_file) is a 413, from
  `Content-Length` before any of it is read, or while it is read (chunked bodies); the rest is read and dropped,
  within the read timeout, so that the client sees the 413.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from mt.errors import HttpError

# JSON writes a character as at most 12 bytes (a surrogate pair of \uXXXX escapes); the rest of a body (field
# names, source, target, format) fits in 64 KiB.
BYTES_PER_CHAR, BODY_OVERHEAD = 12, 64 * 1024


@dataclass(frozen=True)
class HttpSettings:
    max_body_bytes: int = 0  # 0: BYTES_PER_CHAR per character of --max-chars, plus BODY_OVERHEAD
    max_file_bytes: int = 20 << 20  # the body of a file upload (POST /translate_file)
    max_file_jobs: int = 4  # background documents queued or running at once (mt/serving/file_jobs.py)
    read_timeout: float = 30.0  # seconds from a request's first byte to its last
    keep_alive_timeout: float = 5.0  # seconds a connection waits for its next request
    shutdown_grace: float = 30.0  # seconds SIGTERM waits for requests in progress; then they are closed
    cors_origins: str = "*"  # origins allowed to call the API from a browser: *, a comma-separated list, or none
    metrics_token: str | None = None  # /metrics needs `Authorization: Bearer TOKEN` when set

    def body_limit(self, max_chars: int) -> int:
        return self.max_body_bytes or BYTES_PER_CHAR * max_chars + BODY_OVERHEAD

    def allowed_origins(self) -> list[str]:
        if self.cors_origins.strip().lower() in ("", "none"):
            return []
        return [origin.strip() for origin in self.cors_origins.split(",") if origin.strip()]


def error_body(status: int, message: str, headers: dict | None = None) -> tuple[dict, list, bytes]:
    """An ASGI response start and body for `{"error": message}`."""
    body = json.dumps({"error": message}, separators=(",", ":")).encode()
    fields = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    fields += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return {"type": "http.response.start", "status": status, "headers": fields}, [], body


class BodyLimit:
    """ASGI middleware: the body size limit and the body's share of the read timeout. `rejected(path, status)`
    counts a request refused before it reached a handler."""

    def __init__(self, app, max_body_bytes: int, read_timeout: float, rejected: Callable[[str, int], None],
                 larger: dict[str, int] | None = None):
        self.app, self.max_body_bytes, self.read_timeout, self.rejected = app, max_body_bytes, read_timeout, rejected
        self.larger = larger or {}  # {path: its own limit}: file uploads

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.larger.get(scope["path"], self.max_body_bytes)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            status = 413 if length.isdigit() else 400
            message = (f"Request body too large: {int(length)} bytes, more than {limit}"
                       if status == 413 else "Invalid request: Content-Length is not a number")
            self.rejected(scope["path"], status)
            return await _send_error(send, status, message, {"Connection": "close"} if status == 400 else None)
        await self.app(scope, self._limited(receive, limit), send)

    def _limited(self, receive, limit: int):
        """`receive` that raises HttpError(413) past the size limit and HttpError(408) past the deadline."""
        deadline = asyncio.get_running_loop().time() + self.read_timeout
        state = {"bytes": 0, "done": False}

        async def limited_receive():
            if state["done"]:  # the body is in: waiting for a disconnect has no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - asyncio.get_running_loop().time(), 0))
            except asyncio.TimeoutError:
                raise HttpError(408, f"Request body not received within {self.read_timeout:g} s",
                                {"Connection": "close"}) from None
            if message["type"] == "http.request":
                state["bytes"] += len(message.get("body", b""))
                state["done"] = not message.get("more_body", False)
                if state["bytes"] > limit:
                    raise HttpError(413, f"Request body too large: more than {limit} bytes")
            return message
        return limited_receive


async def _send_error(send, status: int, message: str, headers: dict | None = None) -> None:
    start, _, body = error_body(status, message, headers)
    await send(start)
    await send({"type": "http.response.body", "body": body})


def guarded_protocol(read_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the idle timeout of a new connection and the read timeout of request
    headers (the body's share of it is BodyLimit's)."""

    class GuardedProtocol(H11Protocol):
        def connection_made(self, transport):
            super().connection_made(transport)
            self.read_timer = None
            self.idle_timer = self.loop.call_later(self.timeout_keep_alive, self._idle_timed_out)

        def data_received(self, data: bytes) -> None:
            if self.idle_timer is not None:
                self.idle_timer.cancel()
                self.idle_timer = None
            if self.read_timer is None and self._between_requests():
                self.read_timer = self.loop.call_later(read_timeout, self._read_timed_out)
            super().data_received(data)
            if self.read_timer is None:
                return
            if not self._between_requests():  # the headers are in
                self.read_timer.cancel()
                self.read_timer = None
            elif self.conn.their_state is h11.IDLE and not self.conn.trailing_data[0]:  # a dropped body ended
                self.read_timer.cancel()
                self.read_timer = None
                self.idle_timer = self.loop.call_later(self.timeout_keep_alive, self._idle_timed_out)

        def connection_lost(self, exc):
            for timer in (self.idle_timer, self.read_timer):
                if timer is not None:
                    timer.cancel()
            super().connection_lost(exc)

        def _between_requests(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _idle_timed_out(self) -> None:
            if not self.transport.is_closing() and self._between_requests():
                self.transport.close()

        def _read_timed_out(self) -> None:
            """Headers (or a body the client keeps sending after its answer) not in within the read timeout."""
            self.read_timer = None
            if self.transport.is_closing() or not self._between_requests():
                return
            if self.cycle is None or not self.cycle.more_body:  # nothing answered on this request yet
                start, _, body = error_body(408, f"Request not received within {read_timeout:g} s",
                                            {"Connection": "close"})
                head = b"HTTP/1.1 408 Request Timeout\r\n" + b"".join(k + b": " + v + b"\r\n"
                                                                      for k, v in start["headers"])
                self.transport.write(head + b"\r\n" + body)
            self.transport.close()

    return GuardedProtocol
