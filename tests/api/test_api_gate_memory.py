"""The key gate answers a key that passed lately on the event loop, from the key memory
(TraceKeys.remembered, read by api/gate.py), and sends any other key to the store. On a real server and the real
store."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from services.intake.api_keys import create_api_key, hash_key, revoke_api_key
from services.intake.trace_keys import TraceKeys
from services.store import transaction
from tests._otlp import protobuf_body, rag_trace
from tests.api._server import serving

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def app(engine, settings) -> FastAPI:  # type: ignore[no-untyped-def]
    return create_app(settings, assess=False)


@pytest.fixture(scope="module")
def base_url(app) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serving(app) as url:
        yield url


def _new_key(settings, name: str = "collector") -> tuple[str, int]:  # type: ignore[no-untyped-def]
    """A fresh key and its id."""
    with transaction(settings) as session:
        made = create_api_key(name=name, session=session)
    return made.key, made.info.key_id


def test_remembered_answers_only_a_key_that_passed_within_the_ttl(clean_db, settings):  # type: ignore[no-untyped-def]
    now = [0.0]
    keys = TraceKeys(ttl_seconds=30, clock=lambda: now[0])
    key, _ = _new_key(settings)
    assert keys.remembered(key) is None  # never verified: the gate asks the store
    assert keys.remembered(None) is None and keys.remembered("") is None
    with transaction(settings) as session:
        verified = keys.verify(key, session=session)
    hit = keys.remembered(key)
    assert hit is not None and hit.key == verified.key and hit.key_hash == hash_key(key)
    assert keys.remembered(key + "x") is None
    now[0] = 29.9
    assert keys.remembered(key) is not None
    now[0] = 30.0
    assert keys.remembered(key) is None  # as old as the ttl: verified in the store again
    with transaction(settings) as session:
        keys.verify(key, session=session)
    keys.forget(hash_key(key))  # what POST /v1/traces does with a key it found revoked
    assert keys.remembered(key) is None


def test_a_key_found_revoked_is_refused_before_its_next_body_is_read(app, base_url, clean_db, settings):  # type: ignore[no-untyped-def]
    key, key_id = _new_key(settings)
    with httpx.Client(base_url=base_url, timeout=60, headers={"Authorization": f"Bearer {key}", **PROTOBUF}) as http:
        assert http.post("/v1/traces", content=protobuf_body(rag_trace())).status_code == 200  # remembered now
        with transaction(settings) as session:
            revoke_api_key(key_id, session=session)
        assert http.post("/v1/traces", content=protobuf_body(rag_trace())).status_code == 401  # where it writes
        before = app.state.body_reads.count
        refused = http.post("/v1/traces", content=protobuf_body(rag_trace()))
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
    assert app.state.body_reads.count == before  # the gate asked the store, before the body
