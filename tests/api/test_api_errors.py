"""Errors as HTTP answers: one mapping, and a store that is down is a 503, not a crash."""

from __future__ import annotations

import socket

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.app import create_app
from api.errors import status_for
from services.errors import (
    ConflictError,
    DatabaseRefusedError,
    DatabaseUnavailableError,
    InputError,
    NotAuthenticatedError,
    NotFoundError,
    PermissionDeniedError,
    WorkbenchError,
)


class _NewKindOfInputError(InputError):
    pass


@pytest.mark.parametrize(("error", "status"), [
    (NotAuthenticatedError("x"), 401), (PermissionDeniedError("x"), 403), (NotFoundError("x"), 404),
    (ConflictError("x"), 409), (InputError("x"), 422), (_NewKindOfInputError("x"), 422),
    (DatabaseUnavailableError("x"), 503), (DatabaseRefusedError("x"), 503), (WorkbenchError("x"), 500),
])
def test_each_error_kind_has_its_status(error, status):
    assert status_for(error) == status


def test_a_store_that_cannot_be_reached_is_503_with_a_message(settings):  # type: ignore[no-untyped-def]
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = settings.model_copy(update={"database_url": SecretStr(f"postgresql://nobody@127.0.0.1:{port}/none")})
    with TestClient(create_app(down)) as client:
        health = client.get("/health")
        assert health.status_code == 503
        assert health.json() == {"status": "unavailable", "database": "unreachable", "queued": None}
        push = client.post("/runs", json={"question": "q", "answer": "a"}, headers={"X-API-Key": "wb_anything"})
        assert push.status_code == 503 and "Database unavailable" in push.json()["detail"]
