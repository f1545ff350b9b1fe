"""The HTTP API through a real uvicorn server on a free port, against the real store."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text

from api.app import create_app
from services.intake.api_keys import create_api_key, revoke_api_key
from services.store import transaction
from tests.api._server import serving

MAX_BODY = 50_000
RUN = {"question": "How do I clear SRVO-062?", "answer": "Replace the pulsecoder battery, then remaster [1].",
       "trace_id": "prod-0001",
       "contexts": [{"text": "SRVO-062 BZAL alarm: the pulsecoder battery is low.", "document_id": "srvo-062.md",
                     "rank": 1, "score": 0.83, "bm25_score": 7.1, "dense_similarity": 0.64}],
       "metadata": {"app": "support-bot", "model": "gpt-x", "timestamp": "2026-05-01T12:00:00Z", "extra": {"latency_ms": 840}}}


@pytest.fixture(scope="module")
def base_url(engine, settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    api_settings = settings.model_copy(update={"api_max_body_bytes": MAX_BODY, "api_max_batch": 5})
    # No assessment worker: these tests see pushed records while they are still queued
    # (test_api_assessment.py runs the worker).
    with serving(create_app(api_settings, assess=False)) as url:
        yield url


@pytest.fixture()
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=30) as http:
        yield http


@pytest.fixture()
def key(clean_db, settings) -> str:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return create_api_key(name="test-client", session=session).key


def _intake_rows(settings) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    with transaction(settings) as session:
        return [tuple(r) for r in session.execute(text("SELECT id, trace_id, source, status, api_key_id FROM run_intake ORDER BY id"))]


def test_health_needs_no_key_and_reports_the_database(client: httpx.Client, clean_db):  # type: ignore[no-untyped-def]
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "queued": 0, "oldest_queued_at": None,
                               "oldest_queued_age_s": None}


def test_docs_and_openapi_are_served(client: httpx.Client):
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    spec = client.get("/openapi.json").json()
    assert {"/health", "/runs", "/runs/{intake_id}", "/runs/by-trace-id/{trace_id}"} <= set(spec["paths"])
    body = spec["paths"]["/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"$ref": "#/components/schemas/ExternalRun"} in body["oneOf"]
    assert spec["components"]["schemas"]["ExternalRun"]["required"] == ["question", "answer"]
    assert spec["paths"]["/runs"]["post"]["description"].startswith("Send what your RAG system answered")


def test_missing_wrong_and_revoked_keys_are_401_and_store_nothing(client: httpx.Client, key: str, settings):  # type: ignore[no-untyped-def]
    missing = client.post("/runs", json=RUN)
    assert missing.status_code == 401 and "send an API key" in missing.json()["detail"]
    assert missing.headers["www-authenticate"] == "Bearer"
    assert client.post("/runs", json=RUN, headers={"Authorization": "Bearer wb_wrong"}).status_code == 401
    assert client.post("/runs", json={"not": "a run"}).status_code == 401  # the key is checked before the records
    assert client.post("/runs", json=RUN, headers={"X-API-Key": key + "x"}).status_code == 401
    assert client.get("/runs/1", headers={"Authorization": "Basic abc"}).status_code == 401
    with transaction(settings) as session:
        doomed = create_api_key(name="doomed", session=session)
    assert client.get("/runs/by-trace-id/nothing", headers={"X-API-Key": doomed.key}).status_code == 404  # works...
    with transaction(settings) as session:
        revoke_api_key(doomed.info.key_id, session=session)
    revoked = client.post("/runs", json=RUN, headers={"X-API-Key": doomed.key})  # ...until revoked
    assert revoked.status_code == 401 and "revoked" in revoked.json()["detail"]
    assert _intake_rows(settings) == []


def test_a_pushed_run_lands_in_the_intake_and_its_status_can_be_followed(client: httpx.Client, key: str, settings):  # type: ignore[no-untyped-def]
    auth = {"Authorization": f"Bearer {key}"}
    pushed = client.post("/runs", json=RUN, headers=auth)
    assert pushed.status_code == 202, pushed.text
    body = pushed.json()
    assert (body["accepted"], body["duplicates"]) == (1, 0)
    intake_id = body["runs"][0]["intake_id"]
    assert body["runs"] == [{"intake_id": intake_id, "trace_id": "prod-0001", "created": True, "status": "queued"}]
    rows = _intake_rows(settings)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [(intake_id, "prod-0001", "api", "queued")]
    assert rows[0][4] is not None  # which key pushed it
    with transaction(settings) as session:
        payload = session.execute(text("SELECT payload FROM run_intake")).scalar_one()
    assert payload["contexts"][0]["bm25_score"] == 7.1 and payload["metadata"]["extra"] == {"latency_ms": 840}

    status = client.get(f"/runs/{intake_id}", headers={"X-API-Key": key})
    assert status.status_code == 200
    assert {k: status.json()[k] for k in ("intake_id", "trace_id", "source", "status", "run_id", "confidence", "verdict")} == {
        "intake_id": intake_id, "trace_id": "prod-0001", "source": "api", "status": "queued", "run_id": None,
        "confidence": None, "verdict": None}
    assert client.get("/runs/by-trace-id/prod-0001", headers=auth).json()["intake_id"] == intake_id
    assert client.get("/runs/999999", headers=auth).status_code == 404

    batch = [RUN, {**RUN, "trace_id": "prod-0002"}, {"question": "No trace id", "answer": ""}]
    again = client.post("/runs", json=batch, headers=auth)
    assert again.status_code == 202
    assert [(r["trace_id"], r["created"]) for r in again.json()["runs"]] == [("prod-0001", False), ("prod-0002", True), (None, True)]
    assert again.json()["runs"][0]["intake_id"] == intake_id
    assert len(_intake_rows(settings)) == 3
    assert client.get("/health").json()["queued"] == 3


def test_a_malformed_body_is_422_naming_the_field_and_stores_nothing(client: httpx.Client, key: str, settings):  # type: ignore[no-untyped-def]
    auth = {"Authorization": f"Bearer {key}"}
    bad = {**RUN, "contexts": [{"source": "no text here"}]}
    single = client.post("/runs", json=bad, headers=auth)
    assert single.status_code == 422
    assert single.json()["detail"][0]["loc"] == ["body", "contexts", 0, "text"]
    assert "body.contexts.0.text: Field required" in single.json()["message"]

    misspelt = {("answr" if k == "answer" else k): v for k, v in RUN.items()}
    in_batch = client.post("/runs", json=[RUN, misspelt], headers=auth)
    assert in_batch.status_code == 422
    assert "body.1.answer: Field required" in in_batch.json()["message"] and "body.1.answr" in in_batch.json()["message"]

    not_json = client.post("/runs", content=b'{"question": ', headers={**auth, "Content-Type": "application/json"})
    assert not_json.status_code == 422 and not_json.json()["message"].startswith("body: invalid JSON at character")
    assert client.post("/runs", json=[], headers=auth).status_code == 422
    too_many = client.post("/runs", json=[{**RUN, "trace_id": str(i)} for i in range(6)], headers=auth)
    assert too_many.status_code == 422 and "at most 5 runs per request" in too_many.json()["message"]
    assert client.get("/runs/0", headers=auth).json()["message"].startswith("path.intake_id")
    assert _intake_rows(settings) == []  # a batch is all or nothing


def test_an_oversized_body_is_413_with_or_without_a_content_length(client: httpx.Client, key: str, settings):  # type: ignore[no-untyped-def]
    auth = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    big = json.dumps({**RUN, "answer": "x" * MAX_BODY}).encode()
    declared = client.post("/runs", content=big, headers=auth)
    assert declared.status_code == 413 and "50,000-byte limit" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: sent chunked, counted as it arrives
        for start in range(0, len(big), 8_192):
            yield big[start:start + 8_192]

    chunked = client.post("/runs", content=chunks(), headers=auth)
    assert chunked.status_code == 413 and chunked.json()["detail"].startswith("the request body is over")
    assert _intake_rows(settings) == []
    small = client.post("/runs", content=json.dumps(RUN).encode(), headers=auth)
    assert small.status_code == 202  # the connection and the limit still serve the next request
