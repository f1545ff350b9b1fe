"""The request-size limit, enforced before the body is parsed.

A declared Content-Length over the limit is refused before a byte of the body is read; a
chunked body (no Content-Length) is counted as it arrives and refused the moment it
passes the limit, so neither is ever held in memory whole. BodyReads counts the bodies the
routes were handed: one refused here or by api/gate.py adds nothing. FastAPI has a `max_body_size`
of its own, but it answers a declared-too-large body in plain text, and every other
error of this API is JSON.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLargeError(HTTPException):
    """Raised from `receive`; FastAPI re-raises HTTPExceptions from body reading, so the
    app's handler answers it (api/errors.py: a JSON 413 naming the limit)."""

    def __init__(self) -> None:
        super().__init__(status_code=413, detail="request body too large")


class BodyReads:
    """How many request bodies reached the routes, which parse them: a test's way to see that
    a refused body was never parsed."""

    def __init__(self) -> None:
        self.count = 0


class BodySizeLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int, body_reads: BodyReads) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.body_reads = body_reads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            receive = _refuse_at_once
        else:
            receive = _counted(receive, self.max_bytes, self.body_reads)
        await self.app(scope, receive, send)


async def _refuse_at_once() -> Message:
    raise BodyTooLargeError()


def _counted(receive: Receive, max_bytes: int, body_reads: BodyReads) -> Receive:
    received = 0
    started = False

    async def counted_receive() -> Message:
        nonlocal received, started
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > max_bytes:
                raise BodyTooLargeError()
            if not started:
                started = True
                body_reads.count += 1
        return message

    return counted_receive
