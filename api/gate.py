"""The key check that runs before any work: a request to an authenticated route is answered
401 from its headers alone, before a byte of its body is read, parsed or validated.

FastAPI reads and validates a body before it solves an endpoint's dependencies, so a key
checked in a dependency or in the endpoint comes too late: a stranger's 4 MB array would be
parsed first. This middleware sits outside the routes. It takes a key that passed lately on
trust (services/intake/trace_keys.py, at most 30 s) and sends any other key to the store;
each endpoint still verifies the key in its own transaction, so a revoked key is refused
from its next request on, as before. The key that passed (its id, app and scope) goes on in
the request's state under CALLER, for what runs before the body too (api/quotas.py). A 401
is sent after a delay (Settings.api_refusal_delay_ms): strangers are slowed, not served.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from services.errors import NotAuthenticatedError, WorkbenchError
from services.intake.trace_keys import TraceKeys, VerifiedKey
from services.settings import Settings
from services.store import transaction

_log = logging.getLogger("workbench.api")
OPEN_PATHS = frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/openapi.json"})
OPEN_PREFIXES = ("/docs-assets/",)
CALLER = "caller"  # scope["state"][CALLER]: the VerifiedKey the gate let through
# A route that answers in its own format (OTLP's google.rpc.Status) says how to refuse.
Refusal = Callable[[int, str, Scope], Response]


class AuthenticateFirst:
    def __init__(self, app: ASGIApp, *, settings: Settings, keys: TraceKeys, refusals: dict[str, Refusal]) -> None:
        self.app = app
        self.settings = settings
        self.keys = keys
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            key = presented_key(scope)
            # A key that passed lately is let through here, on the event loop: handing each
            # request to a thread and back cost 0.3 ms of CPU, a seventh of an OTLP export's.
            caller = self.keys.remembered(key) or await run_in_threadpool(self._verify, key)
        except WorkbenchError as exc:
            if isinstance(exc, NotAuthenticatedError):  # see Settings.api_refusal_delay_ms
                await asyncio.sleep(self.settings.api_refusal_delay_ms / 1000)
            await self._refuse(exc, scope)(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER] = caller
        await self.app(scope, receive, send)

    def _verify(self, key: str | None) -> VerifiedKey:
        if not key:  # no round trip to the store for a request that carries no key at all
            raise NotAuthenticatedError("send an API key: Authorization: Bearer <key> (workbench api-key create NAME)")
        with transaction(self.settings) as session:
            return self.keys.verify(key, session=session)

    def _refuse(self, exc: WorkbenchError, scope: Scope) -> Response:
        if isinstance(exc, NotAuthenticatedError):
            status, message = 401, str(exc)
        else:  # the store is down: say so without saying where it is (the log does)
            _log.warning("key check: %s", exc)
            status, message = 503, "the database is not reachable; try again shortly"
        refusal = self.refusals.get(scope["path"])
        response = refusal(status, message, scope) if refusal else JSONResponse({"detail": message}, status_code=status)
        if status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response


def presented_key(scope: Scope) -> str | None:
    """The key in `Authorization: Bearer <key>` or `X-API-Key: <key>` (api/auth.py's two schemes)."""
    headers = dict(scope["headers"])
    authorization = headers.get(b"authorization", b"").decode("latin-1")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    header = headers.get(b"x-api-key", b"").decode("latin-1")
    return header or None


def _is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


__all__ = ["CALLER", "AuthenticateFirst", "presented_key"]
