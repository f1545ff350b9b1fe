"""The intake table on the real store: idempotent accepts, status, claiming without doubles."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from services.errors import InputError, NotFoundError
from services.intake.intake import (
    accept_records,
    count_queued,
    intake_status,
    intake_status_by_trace_id,
    intake_statuses,
    mark_assessed,
    mark_failed,
    next_queued,
)
from services.intake.schema import ExternalRun
from services.store import transaction


def record(question: str, trace_id: str | None = None) -> ExternalRun:
    return ExternalRun.model_validate({"question": question, "answer": f"answer to {question}", "trace_id": trace_id,
                                       "contexts": [{"text": "a passage", "score": 0.5, "rank": 1}]})


def _rows(settings) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    with transaction(settings) as session:
        return [tuple(r) for r in session.execute(text("SELECT id, trace_id, source, status FROM run_intake ORDER BY id"))]


def test_a_batch_lands_in_order_and_repeated_trace_ids_return_the_row_already_there(clean_db, settings):
    with transaction(settings) as session:
        first = accept_records([record("q1", "t-1"), record("q2"), record("q3", "t-3"), record("q1 again", "t-1")],
                               source="api", session=session)
    assert [(a.trace_id, a.created, a.status) for a in first] == [
        ("t-1", True, "queued"), (None, True, "queued"), ("t-3", True, "queued"), ("t-1", False, "queued")]
    assert first[3].intake_id == first[0].intake_id  # the twin inside one batch
    assert _rows(settings) == [(first[0].intake_id, "t-1", "api", "queued"), (first[1].intake_id, None, "api", "queued"),
                               (first[2].intake_id, "t-3", "api", "queued")]

    with transaction(settings) as session:
        again = accept_records([record("q3 again", "t-3"), record("q2")], source="import", session=session)
    assert (again[0].intake_id, again[0].created) == (first[2].intake_id, False)  # stored earlier
    assert again[1].created  # no trace id: nothing to recognise it by, so a new row
    assert len(_rows(settings)) == 4
    with transaction(settings) as session:
        payload = session.execute(text("SELECT payload FROM run_intake WHERE trace_id = 't-3'")).scalar_one()
    assert payload["question"] == "q3"  # the first push wins; the repeat changed nothing


def test_concurrent_pushes_of_one_trace_id_store_one_row_and_agree_on_it(clean_db, settings):
    barrier = threading.Barrier(6)
    outcomes: list = []  # type: ignore[type-arg]

    def push(i: int) -> None:
        barrier.wait()
        with transaction(settings) as session:
            outcomes.append(accept_records([record(f"racer {i}", "same")], source="api", session=session)[0])

    threads = [threading.Thread(target=push, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(_rows(settings)) == 1
    assert len({o.intake_id for o in outcomes}) == 1 and [o.created for o in outcomes].count(True) == 1


def test_status_follows_the_row_and_its_run(clean_db, settings):
    with transaction(settings) as session:
        queued, failing = accept_records([record("q1", "s-1"), record("q2", "s-2")], source="api", session=session)
        run_id = session.execute(text(
            "INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, retrieval_confidence, "
            "components, weights_profile, config, trace_id) VALUES ('q1', 'external', 'external', 'm', 'flagged', 0.42, "
            "'LOW', 0.5, ARRAY[0.5], 'default v1', '{}', 's-1') RETURNING id")).scalar_one()
    with transaction(settings) as session:
        before = intake_status(queued.intake_id, app=None, session=session)
        assert (before.status, before.run_id, before.confidence, before.verdict) == ("queued", None, None, None)
        mark_assessed(queued.intake_id, run_id=run_id, session=session)
        mark_failed(failing.intake_id, "no contexts and no corpus to score against", session=session)
    with transaction(settings) as session:
        done = intake_status_by_trace_id("s-1", app=None, session=session)
        failed = intake_status(failing.intake_id, app=None, session=session)
        assert count_queued(session=session) == 0
        assert [s.intake_id for s in intake_statuses([failing.intake_id, 999_999, queued.intake_id, 2**70], app=None, session=session)] \
            == [queued.intake_id, failing.intake_id]
        with pytest.raises(NotFoundError):
            intake_status(999_999, app=None, session=session)
        with pytest.raises(NotFoundError):
            intake_status_by_trace_id("nope", app=None, session=session)
        with pytest.raises(NotFoundError):
            mark_failed(999_999, "x", session=session)
    assert (done.status, done.run_id, done.confidence, done.level) == ("assessed", run_id, 0.42, "LOW")
    assert (done.review_status, done.verdict) == ("flagged", "flagged") and done.assessed_at is not None
    assert (failed.status, failed.error, failed.run_id) == ("failed", "no contexts and no corpus to score against", None)


def test_two_sessions_never_claim_the_same_record(clean_db, settings):
    with transaction(settings) as session:
        ids = [a.intake_id for a in accept_records([record(f"q{i}") for i in range(5)], source="import", session=session)]
    with transaction(settings) as first, transaction(settings) as second:
        mine = next_queued(3, session=first)
        theirs = next_queued(3, session=second)  # does not wait for the first: skips its locked rows
        assert [r.intake_id for r in mine] == ids[:3]
        assert [r.intake_id for r in theirs] == ids[3:]
        assert mine[0].run.question == "q0" and mine[0].source == "import"
        for claimed in mine:
            mark_failed(claimed.intake_id, "boom", session=first)
        second.rollback()  # hands its claims back
    with transaction(settings) as session:
        assert [r.intake_id for r in next_queued(10, session=session)] == ids[3:]


def test_a_stored_payload_that_no_longer_validates_is_marked_failed_not_returned(clean_db, settings):
    with transaction(settings) as session:
        good, bad = accept_records([record("fine"), record("spoilt")], source="api", session=session)
        session.execute(text("UPDATE run_intake SET payload = payload || '{\"unknown\": 1}' WHERE id = :id"), {"id": bad.intake_id})
    with transaction(settings) as session:
        assert [r.intake_id for r in next_queued(10, session=session)] == [good.intake_id]
    with transaction(settings) as session:
        spoilt = intake_status(bad.intake_id, app=None, session=session)
    assert spoilt.status == "failed" and "unknown: unknown field" in (spoilt.error or "")


def test_bad_arguments_are_input_errors(clean_db, settings):
    with transaction(settings) as session:
        assert accept_records([], source="api", session=session) == []
        with pytest.raises(InputError, match="unknown intake source"):
            accept_records([record("q")], source="web", session=session)
        with pytest.raises(InputError):
            next_queued(0, session=session)
