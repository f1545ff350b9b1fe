"""A request refused before its body was read closes its connection after the answer.

api/gate.py answers a stranger 401 from the headers, and api/quotas.py a key over its rate
429, without reading the body. On a kept-alive connection the server must still take in the
rest of that body before it can read the next request, so a stranger sending 4 MB still
costs 4 MB of parsing on the event loop. `Connection: close` on such an answer tells the
server (and the client) that the connection ends there: the body is never taken in.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

REFUSED_UNREAD = frozenset({401, 429})


class CloseAfterUnreadBody:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return

        async def closing_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in REFUSED_UNREAD:
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, closing_send)


def _has_body(scope: Scope) -> bool:
    headers = dict(scope["headers"])
    length = headers.get(b"content-length", b"0")
    return b"chunked" in headers.get(b"transfer-encoding", b"").lower() or (length.isdigit() and int(length) > 0)
