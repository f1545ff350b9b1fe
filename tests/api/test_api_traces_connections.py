"""POST /v1/traces stores a few exports at a time (api/traces.py), so twenty exporters at once
share the pool's connections instead of opening one each and closing it after. On a real
server and the real store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event, text

from api.app import create_app
from services.intake.api_keys import create_api_key
from services.store import transaction
from tests._otlp import protobuf_body, rag_trace
from tests.api._server import serving

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def base_url(engine, settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serving(create_app(settings, assess=False)) as url:
        yield url
    # No worker assembled the hundred traces: left open, the next module's worker would
    # assemble them while that module's clean_db truncates the same tables.
    with transaction(settings) as session:
        session.execute(text("DELETE FROM otlp_spans"))
        session.execute(text("DELETE FROM otlp_traces"))


def test_twenty_exporters_at_once_share_the_pools_connections(base_url, clean_db, engine, settings):  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        key = create_api_key(name="collector", session=session).key
    opened: list[Any] = []
    statuses: list[int] = []

    def count(*_: Any) -> None:
        opened.append(1)

    def exporter() -> None:
        with httpx.Client(base_url=base_url, timeout=120,
                          headers={"Authorization": f"Bearer {key}", **PROTOBUF}) as http:
            statuses.extend(http.post("/v1/traces", content=protobuf_body(rag_trace())).status_code for _ in range(5))

    # The key's first export verifies it in the store; twenty first exports at once would each
    # take a connection for that, before the limit on storing applies.
    with httpx.Client(base_url=base_url, timeout=120, headers={"Authorization": f"Bearer {key}", **PROTOBUF}) as http:
        assert http.post("/v1/traces", content=protobuf_body(rag_trace())).status_code == 200
    event.listen(engine, "connect", count)
    try:
        threads = [threading.Thread(target=exporter) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        event.remove(engine, "connect", count)
    assert statuses == [200] * 100
    # Past the pool's size, every export beyond it opened a connection and closed it after.
    assert len(opened) <= engine.pool.size()
