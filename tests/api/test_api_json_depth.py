"""JSON bodies are depth-bounded (issue 28), on a real server: a record whose metadata nests
past MAX_JSON_DEPTH, and an array nested 100,000 deep (a RecursionError in json.loads, which
FastAPI answered with a bare 400), are 422s naming the limit, nothing stored; a record nesting
within it is accepted as before."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from api.json_body import MAX_JSON_DEPTH
from services.store import transaction
from tests.api._server import real_server

base_url, client = real_server(key_name="nester")


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"down": value}
    return value


def record(extra: dict[str, Any]) -> dict[str, Any]:
    return {"question": "Q?", "answer": "A.", "metadata": {"extra": extra}}


def stored(settings) -> int:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return int(session.execute(text("SELECT count(*) FROM run_intake")).scalar_one())


def test_a_body_nested_past_the_limit_is_422_and_stores_nothing(client, settings):  # type: ignore[no-untyped-def]
    # [record] > record > metadata: 3 levels, then `extra`, the nested value itself
    too_deep = client.post("/runs", json=[record(nested(MAX_JSON_DEPTH - 2))])
    assert too_deep.status_code == 422, too_deep.text
    assert too_deep.json()["message"] == f"body: invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects"
    bomb = client.post("/runs", content=b"[" * 100_000 + b"]" * 100_000, headers={"Content-Type": "application/json"})
    assert bomb.status_code == 422 and "nested deeper" in bomb.json()["message"]
    assess = client.post("/assess", content=b'{"question": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
                         headers={"Content-Type": "application/json"})
    assert assess.status_code == 422 and "nested deeper" in assess.json()["message"]
    assert stored(settings) == 0


def test_a_body_within_the_limit_is_accepted(client, settings):  # type: ignore[no-untyped-def]
    assert client.post("/runs", json=[record(nested(MAX_JSON_DEPTH - 3))]).status_code == 202  # exactly the limit
    assert client.post("/runs", content=b'{"question": "Q?", "answer": ').status_code == 422  # still plain bad JSON
    assert stored(settings) == 1
