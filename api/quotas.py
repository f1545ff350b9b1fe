"""The per-key request rate, enforced before the body is read: right after api/gate.py has
let the key through, a key over API_RATE_PER_KEY (bursts of API_RATE_BURST) is answered 429
with Retry-After, and its body is neither read nor parsed. The backlog quota needs the
number of records, so POST /runs and POST /v1/traces check it once the body is decoded
(services.intake.quotas.Backlogs)."""

from __future__ import annotations

from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from api.gate import CALLER, Refusal
from services.intake.quotas import KeyRates, QuotaExceededError
from services.intake.trace_keys import VerifiedKey


class RateLimitPerKey:
    def __init__(self, app: ASGIApp, *, rates: KeyRates, refusals: dict[str, Refusal]) -> None:
        self.app = app
        self.rates = rates
        self.refusals = refusals

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller: VerifiedKey | None = scope.get("state", {}).get(CALLER) if scope["type"] == "http" else None
        if caller is not None:
            try:
                self.rates.check(caller.key_hash, key_prefix=caller.key.prefix)
            except QuotaExceededError as exc:
                await self._refuse(exc, scope)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refuse(self, exc: QuotaExceededError, scope: Scope) -> Response:
        refusal = self.refusals.get(scope["path"])
        response = refusal(429, str(exc), scope) if refusal else JSONResponse({"detail": str(exc)}, status_code=429)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
