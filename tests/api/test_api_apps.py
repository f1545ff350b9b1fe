"""Keys belong to an app (issue 28), on a real server and the real store: one app's key cannot
read another app's runs by intake id (guessing sequential ids finds nothing), by trace id, or
in the verdicts it pulls; it cannot shadow another app's trace ids (each app's push of a
trace id makes that app's own run); a read key cannot push; an admin key reads every app."""

from __future__ import annotations

import httpx
import pytest
from google.rpc import code_pb2, status_pb2
from sqlalchemy import text

from services.intake.intake import mark_assessed
from services.intake.traces import assemble_ready_traces
from services.review.queue import submit_review
from services.store import transaction
from tests._otlp import protobuf_body, rag_trace, trace_id_of
from tests.api._server import bearer, new_key, real_server

A, B = "app-a", "app-b"
base_url, client = real_server(api_verdict_settle_seconds=0)


@pytest.fixture()
def keys(clean_db, settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"a": new_key(settings, name="a-bot", app=A), "b": new_key(settings, name="b-bot", app=B),
            "b_read": new_key(settings, name="b-dashboard", app=B, scope="read"),
            "admin": new_key(settings, name="ops", app="ops", scope="admin")}


def record(trace_id: str, question: str = "How do I clear alarm SRVO-062?") -> dict[str, object]:
    return {"question": question, "answer": "Replace the battery.", "trace_id": trace_id,
            "contexts": [{"text": "SRVO-062: the pulsecoder battery is low.", "score": 0.8}]}


def push(base_url: str, key: str, *records: dict[str, object]) -> list[dict[str, object]]:
    response = httpx.post(f"{base_url}/runs", json=list(records), headers=bearer(key), params={"judges": "false"})
    assert response.status_code == 202, response.text
    return response.json()["runs"]  # type: ignore[no-any-return]


def get(base_url: str, key: str, path: str, **params: object) -> httpx.Response:
    return httpx.get(f"{base_url}{path}", headers=bearer(key), params=params)  # type: ignore[arg-type]


def assess_directly(settings, intake_id: int) -> int:  # type: ignore[no-untyped-def]
    """A run for the record, stored as the worker stores one (save_run, then mark_assessed)."""
    with transaction(settings) as session:
        trace_id = session.execute(text("SELECT trace_id FROM run_intake WHERE id = :id"), {"id": intake_id}).scalar_one()
        run_id = int(session.execute(text(
            "INSERT INTO runs (query, preset, source, backend, model, status, final_confidence, final_level, "
            "retrieval_confidence, components, weights_profile, config, trace_id) VALUES ('q', 'external', 'api', "
            "'external', 'm', 'pending', 0.42, 'LOW', 0.5, ARRAY[0.5], 'default v1', '{}', :trace) RETURNING id"),
            {"trace": trace_id}).scalar_one())
        mark_assessed(intake_id, run_id=run_id, session=session)
    return run_id


def test_a_push_key_stores_under_its_app_and_guessing_intake_ids_finds_only_its_own(base_url, keys):  # type: ignore[no-untyped-def]
    response = httpx.post(f"{base_url}/runs", json=record("a-1"), headers=bearer(keys["a"]))
    assert response.status_code == 202 and response.json()["app"] == A
    a_ids = [response.json()["runs"][0]["intake_id"]] + [r["intake_id"] for r in push(base_url, keys["a"], record("a-2"))]
    b_ids = [r["intake_id"] for r in push(base_url, keys["b"], record("b-1"), record("b-2"))]
    a_ids += [r["intake_id"] for r in push(base_url, keys["a"], record("a-3"))]

    # Ids are sequential, so B walks them all: only its own answer, and another app's id is
    # answered word for word as an id nobody has.
    for intake_id in range(1, max(a_ids + b_ids) + 4):
        answer = get(base_url, keys["b"], f"/runs/{intake_id}")
        if intake_id in b_ids:
            assert answer.status_code == 200 and answer.json()["app"] == B
        else:
            assert (answer.status_code, answer.json()) == (404, {"detail": f"no intake record {intake_id}"})
        assert get(base_url, keys["b_read"], f"/runs/{intake_id}").status_code == (200 if intake_id in b_ids else 404)
    assert get(base_url, keys["b"], "/runs/by-trace-id/a-1").status_code == 404
    assert get(base_url, keys["a"], "/runs/by-trace-id/a-1").json()["intake_id"] == a_ids[0]
    assert get(base_url, keys["b"], f"/runs/{a_ids[0]}", app=A).status_code == 403  # asking does not help
    admin = get(base_url, keys["admin"], f"/runs/{a_ids[0]}")
    assert admin.status_code == 200 and admin.json()["app"] == A


def test_another_apps_trace_id_sent_first_does_not_shadow_yours(base_url, keys, settings):  # type: ignore[no-untyped-def]
    [intruder] = push(base_url, keys["a"], record("support-000123", "What is the admin password?"))
    [mine] = push(base_url, keys["b"], record("support-000123"))
    assert intruder["created"] and mine["created"] and mine["intake_id"] != intruder["intake_id"]
    assert push(base_url, keys["b"], record("support-000123"))[0] == {**mine, "created": False}
    assert push(base_url, keys["a"], record("support-000123"))[0]["intake_id"] == intruder["intake_id"]

    followed = get(base_url, keys["b"], "/runs/by-trace-id/support-000123").json()
    assert (followed["intake_id"], followed["app"]) == (mine["intake_id"], B)
    with transaction(settings) as session:
        question = session.execute(text("SELECT payload ->> 'question' FROM run_intake WHERE id = :id"),
                                   {"id": mine["intake_id"]}).scalar_one()
    assert question == "How do I clear alarm SRVO-062?"  # B's own record, not the intruder's

    # Both become runs (one trace id per app), and each app pulls back only its own verdict.
    intruder_run, my_run = assess_directly(settings, intruder["intake_id"]), assess_directly(settings, mine["intake_id"])
    submit_review(intruder_run, expected_version=0, action="correct", reviewer="eve", corrected_answer="hunter2")
    submit_review(my_run, expected_version=0, action="approve", reviewer="ana")
    pulled = get(base_url, keys["b"], "/runs", reviewed_since="1970-01-01T00:00:00Z").json()["runs"]
    assert [(r["run_id"], r["verdict"], r["app"]) for r in pulled] == [(my_run, "approved", B)]

    ambiguous = get(base_url, keys["admin"], "/runs/by-trace-id/support-000123")
    assert ambiguous.status_code == 409 and "?app=" in ambiguous.json()["detail"]
    named = get(base_url, keys["admin"], "/runs/by-trace-id/support-000123", app=B)
    assert named.json()["intake_id"] == mine["intake_id"]


def test_verdicts_are_pulled_by_their_own_app_only_unless_the_key_is_admin(base_url, keys, settings):  # type: ignore[no-untyped-def]
    a_runs = [assess_directly(settings, r["intake_id"]) for r in push(base_url, keys["a"], record("a-1"), record("a-2"))]
    [b_run] = [assess_directly(settings, r["intake_id"]) for r in push(base_url, keys["b"], record("b-1"))]
    submit_review(a_runs[0], expected_version=0, action="correct", reviewer="ana", corrected_answer="Internal fix.",
                  comment="internal: the manual is wrong")
    submit_review(b_run, expected_version=0, action="flag", reviewer="ben", flag_reason="wrong answer")
    submit_review(a_runs[1], expected_version=0, action="approve", reviewer="ana")

    def pulled(key: str, **params: object) -> list[tuple[str, str]]:
        response = get(base_url, key, "/runs", reviewed_since="1970-01-01T00:00:00Z", **params)
        assert response.status_code == 200, response.text
        return [(r["app"], r["trace_id"]) for r in response.json()["runs"]]

    assert pulled(keys["a"]) == [(A, "a-1"), (A, "a-2")]
    assert pulled(keys["b"]) == pulled(keys["b_read"]) == [(B, "b-1")]
    assert pulled(keys["admin"]) == [(A, "a-1"), (B, "b-1"), (A, "a-2")]
    assert pulled(keys["admin"], app=B) == [(B, "b-1")]
    refused = get(base_url, keys["a"], "/runs", reviewed_since="1970-01-01T00:00:00Z", app=B)
    assert refused.status_code == 403 and f"reads the runs of app '{A}' only" in refused.json()["detail"]
    assert get(base_url, keys["a"], "/runs", reviewed_since="1970-01-01T00:00:00Z", app="no such").status_code == 422


def test_a_read_key_cannot_push_runs_or_traces(base_url, keys, settings):  # type: ignore[no-untyped-def]
    refused = httpx.post(f"{base_url}/runs", json=record("b-1"), headers=bearer(keys["b_read"]))
    assert refused.status_code == 403 and "read key" in refused.json()["detail"]
    export = httpx.post(f"{base_url}/v1/traces", content=protobuf_body(rag_trace()),
                        headers={**bearer(keys["b_read"]), "Content-Type": "application/x-protobuf"})
    status = status_pb2.Status()
    status.ParseFromString(export.content)
    assert export.status_code == 403 and status.code == code_pb2.PERMISSION_DENIED and "read key" in status.message
    with transaction(settings) as session:
        assert session.execute(text("SELECT (SELECT count(*) FROM run_intake) + (SELECT count(*) FROM otlp_traces)")
                               ).scalar_one() == 0


def test_two_apps_exporting_one_trace_id_make_a_trace_and_a_run_each(base_url, keys, settings):  # type: ignore[no-untyped-def]
    spans = rag_trace()
    for key in (keys["a"], keys["b"]):
        sent = httpx.post(f"{base_url}/v1/traces", content=protobuf_body(spans),
                          headers={**bearer(key), "Content-Type": "application/x-protobuf"})
        assert sent.status_code == 200, sent.content
    with transaction(settings) as session:
        done = assemble_ready_traces(settle_seconds=0, quiet_seconds=0, session=session)
        traces = session.execute(text("SELECT app, state FROM otlp_traces ORDER BY app")).all()
    assert done.assembled == 2 and [tuple(t) for t in traces] == [(A, "assembled"), (B, "assembled")]
    trace_id = trace_id_of(spans)
    a_run, b_run = (get(base_url, keys[k], f"/runs/by-trace-id/{trace_id}").json() for k in ("a", "b"))
    assert (a_run["app"], b_run["app"]) == (A, B) and a_run["intake_id"] != b_run["intake_id"]
