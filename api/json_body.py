"""JSON bodies parsed with a bound on nesting, off the event loop.

FastAPI parses a JSON body with json.loads on the event loop: a 4 MB batch holds every other
request for the tens of milliseconds it takes, and an array nested 100,000 deep ends in a
RecursionError that FastAPI answers with a bare 400. Routes of this class parse in a worker
thread and refuse a body nested deeper than MAX_JSON_DEPTH as a 422 naming the limit (an
ExternalRun batch is five levels deep before `metadata.extra`, which keeps the rest).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

MAX_JSON_DEPTH = 32


def parse_json(body: bytes) -> Any:
    """The document, or json.JSONDecodeError (which FastAPI answers as a 422) when it is not
    JSON or is nested deeper than MAX_JSON_DEPTH."""
    try:
        document = json.loads(body)
    except RecursionError:
        raise _too_deep() from None
    if _deeper_than(document, MAX_JSON_DEPTH):
        raise _too_deep()
    return document


def _too_deep() -> json.JSONDecodeError:
    # No position (-1): the depth is found after the parse, not at a character.
    return json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects", "", -1)


def _deeper_than(document: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep; iterative, containers only."""
    stack = [(document, 1)] if isinstance(document, dict | list) else []
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class BoundedJsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = await run_in_threadpool(parse_json, await self.body())
        return self._json


class BoundedJsonRoute(APIRoute):
    """An APIRoute whose JSON bodies are parsed by parse_json (FastAPI's documented way to
    change how a route reads its request)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            return await handler(BoundedJsonRequest(request.scope, request.receive))

        return bounded
