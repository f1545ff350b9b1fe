"""Errors as HTTP answers, in one place: each WorkbenchError kind has its status code."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from services.errors import (
    ConflictError,
    DatabaseRefusedError,
    DatabaseUnavailableError,
    InputError,
    LLMError,
    NotAuthenticatedError,
    NotFoundError,
    PermissionDeniedError,
    WorkbenchError,
)
from services.intake.quotas import QuotaExceededError

STATUS_BY_ERROR: dict[type[WorkbenchError], int] = {
    NotAuthenticatedError: 401,
    PermissionDeniedError: 403,
    NotFoundError: 404,
    ConflictError: 409,
    InputError: 422,
    QuotaExceededError: 429,
    LLMError: 502,
    DatabaseUnavailableError: 503,
    DatabaseRefusedError: 503,
}
_SHOWN_PROBLEMS = 5
# A batch of 500 bad records can hold half a million problems (a 50 MB answer); the first
# ones say what is wrong, and the count says how much.
MAX_LISTED_PROBLEMS = 100
_log = logging.getLogger("workbench.api")


def status_for(exc: WorkbenchError) -> int:
    """The status of the nearest mapped class; 500 for a kind nobody mapped yet."""
    return next((STATUS_BY_ERROR[cls] for cls in type(exc).__mro__ if cls in STATUS_BY_ERROR), 500)


# A server-side failure's own message can name the data directory, a file or the database
# URL; the client gets what it can act on and the log gets the rest.
_SERVER_SIDE = {503: "the database is not reachable; try again shortly"}


def public_message(exc: WorkbenchError, status: int) -> str:
    """What a client is told: the error's own message, or for a 5xx a fixed one (logged in full)."""
    if status < 500:
        return str(exc)
    _log.warning("answered %d: %s", status, exc)
    if isinstance(exc, LLMError):
        return f"the answer backend failed ({exc.kind}); try again shortly"
    return _SERVER_SIDE.get(status, "the server failed; its log says why")


async def workbench_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, WorkbenchError)
    status = status_for(exc)
    return JSONResponse({"detail": public_message(exc, status)}, status_code=status, headers=error_headers(exc))


def error_headers(exc: WorkbenchError) -> dict[str, str] | None:
    """What the answer to `exc` says in its headers: how to authenticate, when to retry."""
    if isinstance(exc, NotAuthenticatedError):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, QuotaExceededError):
        return {"Retry-After": str(exc.retry_after)}
    return None


async def validation_failed(request: Request, exc: Exception) -> Response:
    """FastAPI's 422 shape (`detail`: one entry per problem, `loc` naming the field; the first
    MAX_LISTED_PROBLEMS) plus `problems`, how many there are in all, and `message`, the first
    few as one line: 'body.contexts.0.text: Field required'. The offending input is not
    echoed back: it can be megabytes."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    total = exc.total if isinstance(exc, TooManyProblemsError) else len(errors)
    problems: list[dict[str, Any]] = [_problem(e) for e in errors[:MAX_LISTED_PROBLEMS]]
    message = "; ".join(f"{'.'.join(map(str, p['loc']))}: {p['msg']}" for p in problems[:_SHOWN_PROBLEMS])
    if total > _SHOWN_PROBLEMS:
        message += f"; and {total - _SHOWN_PROBLEMS} more"
    return JSONResponse({"detail": problems, "problems": total, "message": message}, status_code=422)


class TooManyProblemsError(RequestValidationError):
    """A 422 whose problems were counted but kept only up to MAX_LISTED_PROBLEMS."""

    def __init__(self, listed: list[dict[str, Any]], *, total: int) -> None:
        super().__init__(listed)
        self.total = total


def _problem(error: dict[str, Any]) -> dict[str, Any]:
    if error["type"] == "json_invalid":  # FastAPI puts the character offset where a field would be
        where = error["loc"][1] if len(error["loc"]) > 1 else "?"
        reason = error.get("ctx", {}).get("error", "")
        at = f" at character {where}" if not isinstance(where, int) or where >= 0 else ""  # -1: api/json_body.py's depth
        return {"loc": ["body"], "msg": f"invalid JSON{at}: {reason}".rstrip(": "), "type": "json_invalid"}
    return {"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]}


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors; the body-size limit's 413 says what the limit is."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 413:
        limit = request.app.state.settings.api_max_body_bytes
        return JSONResponse({"detail": f"the request body is over the {limit:,}-byte limit (API_MAX_BODY_BYTES); "
                                       "send fewer runs per request"}, status_code=413)
    return await http_exception_handler(request, exc)
