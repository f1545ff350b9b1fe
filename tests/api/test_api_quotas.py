"""Quotas per key (issue 28), on a real server: past its request rate a key gets 429 with
Retry-After before its body is read (another key is not slowed); past its backlog of records
waiting for assessment a push gets 429 with Retry-After and stores nothing, until the worker
has caught up."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from google.rpc import code_pb2, status_pb2
from sqlalchemy import text

from api.app import create_app
from services.intake.quotas import BACKLOG_RETRY_AFTER_SECONDS, Backlogs
from services.store import transaction
from tests._otlp import protobuf_body, rag_trace
from tests.api._server import bearer, new_key, serving

BURST, RATE, MAX_QUEUED = 3, 0.5, 4


@pytest.fixture(scope="module")
def app(engine, settings) -> FastAPI:  # type: ignore[no-untyped-def]
    app = create_app(settings.model_copy(update={"api_rate_per_key": RATE, "api_rate_burst": BURST,
                                                 "api_max_queued_per_key": MAX_QUEUED}), assess=False)
    app.state.backlogs = Backlogs(refresh_seconds=0)  # counted in the store on every push: no wait for a refresh
    return app


@pytest.fixture(scope="module")
def base_url(app: FastAPI) -> Iterator[str]:
    with serving(app) as url:
        yield url


def record(i: int) -> dict[str, object]:
    return {"question": f"Question {i}?", "answer": "An answer.", "trace_id": f"t-{i}"}


def queued(settings) -> int:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return int(session.execute(text("SELECT count(*) FROM run_intake WHERE status = 'queued'")).scalar_one())


def test_a_key_past_its_rate_gets_429_before_its_body_is_read(app, base_url, clean_db, settings):  # type: ignore[no-untyped-def]
    busy, calm = new_key(settings, name="busy"), new_key(settings, name="calm")
    for _ in range(BURST):
        assert httpx.get(f"{base_url}/runs/1", headers=bearer(busy)).status_code == 404
    reads = app.state.body_reads.count
    refused = httpx.post(f"{base_url}/runs", json=[record(i) for i in range(50)], headers=bearer(busy))
    assert refused.status_code == 429 and "API_RATE_PER_KEY" in refused.json()["detail"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 1 / RATE
    assert app.state.body_reads.count == reads and queued(settings) == 0  # turned away unread
    export = httpx.post(f"{base_url}/v1/traces", content=protobuf_body(rag_trace()),
                        headers={**bearer(busy), "Content-Type": "application/x-protobuf"})
    status = status_pb2.Status()
    status.ParseFromString(export.content)
    assert export.status_code == 429 and status.code == code_pb2.RESOURCE_EXHAUSTED and "Retry-After" in export.headers
    assert httpx.post(f"{base_url}/runs", json=record(1), headers=bearer(calm)).status_code == 202  # per key


def test_a_key_past_its_backlog_gets_429_and_stores_nothing_until_the_worker_catches_up(base_url, clean_db, settings):  # type: ignore[no-untyped-def]
    flooding, neighbour = new_key(settings, name="flooding", app="big"), new_key(settings, name="neighbour", app="big")
    assert httpx.post(f"{base_url}/runs", json=[record(i) for i in range(MAX_QUEUED)], headers=bearer(flooding)).status_code == 202
    refused = httpx.post(f"{base_url}/runs", json=record(99), headers=bearer(flooding))
    assert refused.status_code == 429 and refused.headers["Retry-After"] == str(BACKLOG_RETRY_AFTER_SECONDS)
    assert "4 records waiting" in refused.json()["detail"] and "API_MAX_QUEUED_PER_KEY" in refused.json()["detail"]
    assert queued(settings) == MAX_QUEUED  # nothing of the refused push stored
    assert httpx.post(f"{base_url}/runs", json=record(1), headers=bearer(neighbour)).status_code == 202  # a quota per key

    with transaction(settings) as session:  # the worker assesses two of them
        session.execute(text("UPDATE run_intake SET status = 'assessed' WHERE id IN (SELECT id FROM run_intake "
                             "WHERE trace_id IN ('t-0', 't-1') AND app = 'big' AND source = 'api' ORDER BY id LIMIT 2)"))
    assert httpx.post(f"{base_url}/runs", json=[record(97), record(98)], headers=bearer(flooding)).status_code == 202


def test_a_batch_larger_than_the_backlog_quota_is_refused_whole(base_url, clean_db, settings):  # type: ignore[no-untyped-def]
    key = new_key(settings, name="batcher")
    refused = httpx.post(f"{base_url}/runs", json=[record(i) for i in range(MAX_QUEUED + 1)], headers=bearer(key))
    assert refused.status_code == 429 and queued(settings) == 0


def test_an_export_past_the_backlog_gets_429_in_otlp_and_stores_nothing(base_url, clean_db, settings):  # type: ignore[no-untyped-def]
    key = new_key(settings, name="collector")
    assert httpx.post(f"{base_url}/runs", json=[record(i) for i in range(MAX_QUEUED)], headers=bearer(key)).status_code == 202
    export = httpx.post(f"{base_url}/v1/traces", content=protobuf_body(rag_trace()),
                        headers={**bearer(key), "Content-Type": "application/x-protobuf"})
    status = status_pb2.Status()
    status.ParseFromString(export.content)
    assert export.status_code == 429 and export.headers["Retry-After"] == str(BACKLOG_RETRY_AFTER_SECONDS)
    assert status.code == code_pb2.RESOURCE_EXHAUSTED and "API_MAX_QUEUED_PER_KEY" in status.message
    with transaction(settings) as session:
        assert session.execute(text("SELECT count(*) FROM otlp_traces")).scalar_one() == 0
