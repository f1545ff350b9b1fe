"""The API key on a request: `Authorization: Bearer <key>`, or `X-API-Key: <key>`."""

from __future__ import annotations

from fastapi import Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

# auto_error=False: a missing key reaches verify_api_key, which says how to get one (401).
_BEARER = HTTPBearer(auto_error=False, description="Authorization: Bearer <key>; create keys with `workbench api-key create NAME`.")
_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False, description="The same key, for clients that cannot set Authorization.")


async def presented_key(bearer: HTTPAuthorizationCredentials | None = Security(_BEARER),
                        header: str | None = Security(_HEADER)) -> str | None:
    """The key the request carries, not yet checked, and the two schemes /docs offers.

    api/gate.py has already refused a request whose key is missing or unknown, before its
    body was read. Endpoints check it again (services.intake.api_keys.verify_api_key) first
    thing in their own transaction, so a key revoked since the gate remembered it is
    refused at once."""
    return bearer.credentials if bearer is not None else header

