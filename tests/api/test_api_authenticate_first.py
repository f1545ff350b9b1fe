"""The key is checked before any work (issue 28): a request without a valid key is refused from
its headers, its body never read, let alone parsed; on a real server and the real store."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from services.intake.api_keys import create_api_key, list_api_keys, revoke_api_key
from services.store import transaction
from tests._otlp import protobuf_body, rag_trace
from tests.api._server import serving

CONTEXT = {"text": "SRVO-062 BZAL alarm: the pulsecoder battery is low. " * 40, "rank": 1, "score": 0.8}
RUN = {"question": "How do I clear SRVO-062?", "answer": "Replace the battery [1].", "contexts": [CONTEXT]}


def _four_megabytes_of_runs() -> bytes:
    """A 3.9 MB JSON array of valid-looking runs: under the default 4,000,000-byte limit, so
    only the key check stands between it and the parser."""
    body = json.dumps([RUN] * 1_750).encode()
    assert 3_800_000 < len(body) < 4_000_000
    return body


@pytest.fixture(scope="module")
def app(engine, settings) -> FastAPI:  # type: ignore[no-untyped-def]
    return create_app(settings.model_copy(update={"api_max_batch": 2_000}), assess=False)


@pytest.fixture(scope="module")
def base_url(app: FastAPI) -> Iterator[str]:
    with serving(app) as url:
        yield url


@pytest.fixture()
def key(clean_db, settings) -> str:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return create_api_key(name="pusher", session=session).key


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wb_not-a-key"}, {"X-API-Key": "wb_not-a-key"}],
                         ids=["no key", "unknown bearer key", "unknown header key"])
def test_an_unauthenticated_four_megabyte_body_is_refused_without_being_read(app, base_url, clean_db, headers):  # type: ignore[no-untyped-def]
    body = _four_megabytes_of_runs()
    before = app.state.body_reads.count
    with httpx.Client(base_url=base_url, timeout=60) as http:
        for path in ("/runs", "/assess"):
            refused = http.post(path, content=body, headers={"Content-Type": "application/json", **headers})
            assert refused.status_code == 401, (path, refused.text[:300])
            assert refused.headers["WWW-Authenticate"] == "Bearer" and "API key" in refused.json()["detail"]
        trace = http.post("/v1/traces", content=body, headers={"Content-Type": "application/json", **headers})
        assert trace.status_code == 401 and "API key" in trace.json()["message"]  # a google.rpc.Status, as OTLP has it
    assert app.state.body_reads.count == before


def test_the_body_read_counter_counts_an_authenticated_push(app, base_url, key):  # type: ignore[no-untyped-def]
    before = app.state.body_reads.count
    with httpx.Client(base_url=base_url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
        assert http.post("/runs", json=RUN).status_code == 202
        assert http.post("/v1/traces", content=protobuf_body(rag_trace()),
                         headers={"Content-Type": "application/x-protobuf"}).status_code == 200
    assert app.state.body_reads.count == before + 2


def test_a_keyed_body_over_the_limit_is_refused_before_it_is_read(app, base_url, key, settings):  # type: ignore[no-untyped-def]
    over = json.dumps([RUN] * 2_000).encode()
    assert len(over) > settings.api_max_body_bytes
    before = app.state.body_reads.count
    with httpx.Client(base_url=base_url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
        runs = http.post("/runs", content=over, headers={"Content-Type": "application/json"})
        assert runs.status_code == 413 and "API_MAX_BODY_BYTES" in runs.json()["detail"]
        traces = http.post("/v1/traces", content=over, headers={"Content-Type": "application/json"})
        assert traces.status_code == 413 and "API_MAX_BODY_BYTES" in traces.json()["message"]
    assert app.state.body_reads.count == before


def test_assess_without_a_key_is_401_not_the_bodys_field_errors(base_url, clean_db):  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=base_url, timeout=60) as http:
        response = http.post("/assess", json={"question": 3, "contexts": "none"})
    assert response.status_code == 401 and "API key" in response.json()["detail"]


def test_revocation_is_immediate_though_the_key_check_remembers_keys(base_url, key, settings):  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=base_url, timeout=60, headers={"X-API-Key": key}) as http:
        assert http.post("/runs", json=RUN).status_code == 202  # verified before the body: remembered for 30 s
        with transaction(settings) as session:
            (found,) = [k for k in list_api_keys(session=session) if k.name == "pusher"]
            revoke_api_key(found.key_id, session=session)
        for path, body in (("/runs", RUN), ("/assess", RUN)):
            refused = http.post(path, json=body)
            assert refused.status_code == 401 and "revoked" in refused.json()["detail"], path
        assert http.get("/runs/1").status_code == 401


def test_open_routes_need_no_key(base_url, clean_db):  # type: ignore[no-untyped-def]
    with httpx.Client(base_url=base_url, timeout=60) as http:
        assert http.get("/health").status_code == 200
        assert http.get("/openapi.json").status_code == 200 and http.get("/docs").status_code == 200


def test_a_refusal_waits_out_the_delay_on_a_timer_while_keyed_requests_go_through(engine, settings, clean_db):  # type: ignore[no-untyped-def]
    """API_REFUSAL_DELAY_MS: each 401 comes no sooner than the delay, for a missing key as for an
    unknown one, and eight at once wait side by side (a timer each, not a thread each) while a
    keyed push is answered meanwhile."""
    from concurrent.futures import ThreadPoolExecutor

    delay_ms = 400
    slowed = create_app(settings.model_copy(update={"api_refusal_delay_ms": delay_ms}), assess=False)
    with transaction(settings) as session:
        key = create_api_key(name="pusher", session=session).key
    refusals = [{}, {"Authorization": "Bearer wb_not-a-key"}] * 4

    def refused_after(headers: dict[str, str]) -> tuple[int, float]:
        with httpx.Client(base_url=url, timeout=60) as http:
            started = time.monotonic()
            status = http.post("/runs", json=RUN, headers=headers).status_code
            return status, time.monotonic() - started

    with serving(slowed) as url, ThreadPoolExecutor(len(refusals)) as pool:
        started = time.monotonic()
        pending = [pool.submit(refused_after, headers) for headers in refusals]
        with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
            assert http.post("/runs", json=RUN).status_code == 202
        answers = [future.result() for future in pending]
        together = time.monotonic() - started
    assert all(status == 401 and elapsed >= delay_ms / 1000 for status, elapsed in answers), answers
    assert together < len(refusals) * delay_ms / 1000, together  # not one after another
