"""Errors as HTTP answers: one mapping, and a store that is down is a 503, not a crash."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.app import create_app
from api.errors import public_message, status_for
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
from tests._otlp import protobuf_body, rag_trace
from tests.api._server import serving


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
        assert health.json() == {"status": "unavailable", "database": "unreachable", "queued": None,
                                 "oldest_queued_at": None, "oldest_queued_age_s": None}
        push = client.post("/runs", json={"question": "q", "answer": "a"}, headers={"X-API-Key": "wb_anything"})
        assert push.status_code == 503 and push.json() == {"detail": "the database is not reachable; try again shortly"}
        assert str(port) not in push.text  # where the store is goes to the log, not to a client


def test_no_5xx_body_names_the_data_directory(settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    data_dir = tmp_path / "private-data-dir"
    data_dir.write_text("a file where the data directory should be: the embedded server cannot start")
    broken = settings.model_copy(update={"database_url": None, "workbench_data_dir": data_dir})
    with serving(create_app(broken, assess=False)) as url, httpx.Client(base_url=url, timeout=60,
                                                                       headers={"X-API-Key": "wb_anything"}) as http:
        answers = [http.get("/health"), http.post("/runs", json={"question": "q", "answer": "a"}), http.get("/runs/1"),
                   http.post("/v1/traces", content=protobuf_body(rag_trace()),
                             headers={"Content-Type": "application/x-protobuf"})]
    assert [a.status_code for a in answers] == [503] * 4
    for answer in answers:
        assert "private-data-dir" not in answer.text and str(tmp_path) not in answer.text, answer.text


def test_a_5xx_message_is_fixed_and_a_4xx_message_is_the_errors_own():
    assert public_message(DatabaseUnavailableError("could not start in /srv/data/pgdata"), 503) == (
        "the database is not reachable; try again shortly")
    assert public_message(LLMError("key file /etc/llm.key unreadable", kind="api"), 502) == (
        "the answer backend failed (api); try again shortly")
    assert public_message(InputError("contexts.0.text: required"), 422) == "contexts.0.text: required"
