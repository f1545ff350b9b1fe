"""API keys on POST /v1/traces: a key verified lately is not looked up again, yet a revoked
key stores nothing from its next export on (checked where the spans are written), whether
the export's traces are kept or all refused; on a real server and on the real store."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import text

from api.app import create_app
from services.errors import NotAuthenticatedError
from services.intake.api_keys import create_api_key, hash_key, revoke_api_key
from services.intake.otlp import decode_export
from services.intake.trace_keys import TraceKeys
from services.intake.traces import store_spans
from services.store import transaction
from tests._otlp import protobuf_body, rag_trace
from tests.api._server import serving

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def base_url(engine, settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serving(create_app(settings, assess=False)) as url:
        yield url


def _traces(settings) -> int:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return int(session.execute(text("SELECT count(*) FROM otlp_traces")).scalar_one())


def test_a_revoked_key_stores_nothing_from_its_next_export_on(base_url, clean_db, settings):  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        made = create_api_key(name="collector", session=session)
    with httpx.Client(base_url=base_url, timeout=60, headers={"Authorization": f"Bearer {made.key}", **PROTOBUF}) as http:
        assert http.post("/v1/traces", content=protobuf_body(rag_trace())).status_code == 200  # verified: remembered
        with transaction(settings) as session:
            revoke_api_key(made.info.key_id, session=session)
        revoked = http.post("/v1/traces", content=protobuf_body(rag_trace()))
        assert revoked.status_code == 401 and revoked.headers["WWW-Authenticate"] == "Bearer"
        oversized = rag_trace(documents=[f"passage {i}" for i in range(1_000)])  # refused whole, were the key good
        assert http.post("/v1/traces", content=protobuf_body(oversized)).status_code == 401
        again = http.post("/v1/traces", content=protobuf_body(rag_trace()))  # forgotten: looked up, and said why
        assert again.status_code == 401
    assert _traces(settings) == 1


def test_trace_keys_remember_a_key_for_the_ttl_and_store_spans_checks_it(clean_db, settings):  # type: ignore[no-untyped-def]
    now = [0.0]
    keys = TraceKeys(ttl_seconds=30, clock=lambda: now[0])
    with transaction(settings) as session:
        made = create_api_key(name="collector", session=session)
    with transaction(settings) as session:
        assert keys.verify(made.key, session=session).key.key_id == made.info.key_id
        revoke_api_key(made.info.key_id, session=session)
    spans = decode_export(protobuf_body(rag_trace()), content_type="application/x-protobuf", content_encoding=None,
                          max_bytes=10_000_000)
    with transaction(settings) as session:
        remembered = keys.verify(made.key, session=session)  # within the ttl: not looked up, so not seen revoked
        assert remembered.key_hash == hash_key(made.key)
        with pytest.raises(NotAuthenticatedError, match="revoked"):
            store_spans(spans, api_key_id=remembered.key.key_id, key_hash=remembered.key_hash, session=session)
    now[0] = 31.0
    with transaction(settings) as session, pytest.raises(NotAuthenticatedError, match="revoked"):
        keys.verify(made.key, session=session)  # past the ttl: looked up again
    with transaction(settings) as session:
        stored = store_spans(spans, api_key_id=made.info.key_id, session=session)  # no hash: the caller vouched for it
    assert stored.accepted == 3 and _traces(settings) == 1
