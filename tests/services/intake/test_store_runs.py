"""Storing a batch of assessed runs in one statement per table (services.intake.store_runs)
writes what storing them one by one writes, column for column, and a row the store refuses
sends the batch back to one by one, where only that record fails."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import text

from services.answering.llm.backends import backend_for
from services.intake.assess import _store, process_queue, store_batch
from services.intake.assessment import Assessment
from services.intake.batch import assess_batch
from services.intake.intake import accept_records, next_queued
from services.intake.schema import ExternalRun
from services.store import transaction
from tests._statements import iteration_inserts
from tests.services.intake.test_assess import DEFAULT, corpus  # noqa: F401  (a fixture)
from tests.services.intake.test_batch import JUDGES, RECORDS

# Every column but the ids (and when the row was written, which the two stores share only
# within one transaction): the run's own, its children's, its intake row's.
_RUNS = "SELECT * FROM runs WHERE id = ANY(:ids)"
_CHILDREN = {
    "run_iterations": "SELECT * FROM run_iterations WHERE run_id = ANY(:ids) ORDER BY run_id, ordinal",
    "run_events": "SELECT * FROM run_events WHERE run_id = ANY(:ids) ORDER BY run_id, seq",
    "llm_calls": "SELECT * FROM llm_calls WHERE run_id = ANY(:ids) ORDER BY run_id, id",
}
_INTAKE = "SELECT id, status, error, run_id, app, assessed_at IS NOT NULL AS marked FROM run_intake WHERE id = ANY(:ids)"


def _without(row: Any, *names: str) -> dict[str, Any]:
    return {k: v for k, v in row._mapping.items() if k not in names}


def _runs_by_intake(session: Any, intake_ids: list[int]) -> list[dict[str, Any]]:
    """Each intake record's run and children as stored, ids and intake ids left out, in intake order."""
    intake = {r.id: r for r in session.execute(text(_INTAKE), {"ids": intake_ids})}
    run_ids = [intake[i].run_id for i in intake_ids]
    runs = {r.id: r for r in session.execute(text(_RUNS), {"ids": run_ids})}
    children = {name: session.execute(text(sql), {"ids": run_ids}).all() for name, sql in _CHILDREN.items()}
    stored = []
    for intake_id, run_id in zip(intake_ids, run_ids):
        run = _without(runs[run_id], "id")
        assert run["config"]["assessment"].pop("intake_id") == intake_id
        stored.append({
            "run": run,
            "intake": _without(intake[intake_id], "id", "run_id"),
            **{name: [_without(r, "id", "run_id") for r in rows if r.run_id == run_id] for name, rows in children.items()},
        })
    return stored


def test_a_batch_stores_what_one_by_one_stores(corpus, settings):  # type: ignore[no-untyped-def]  # noqa: F811
    runs = [ExternalRun.model_validate(r) for r in RECORDS]
    with transaction() as session:  # each record twice: once to store alone, once in the batch
        accept_records(runs + runs, source="api", session=session)
    with transaction() as session:
        claimed = next_queued(2 * len(runs), session=session)
        alone, batched = claimed[:len(runs)], claimed[len(runs):]
        assert [r.run.question for r in alone] == [r.run.question for r in batched]
        outcomes = assess_batch([r.run for r in alone], judges=JUDGES, session=session, collection="default",
                                backend=backend_for(settings), profile=DEFAULT, settings=settings)
        assert all(isinstance(o, Assessment) for o in outcomes), outcomes
        for record, outcome in zip(alone, outcomes):  # the path every record took before batching
            assert _store(record, outcome, collection="default", session=session)
        # the same assessments, each stored for its twin record in one statement a table
        assert store_batch(batched, outcomes, collection="default", session=session) == [True] * len(runs)
        one_by_one = _runs_by_intake(session, [r.intake_id for r in alone])
        together = _runs_by_intake(session, [r.intake_id for r in batched])
    assert sum(len(s["llm_calls"]) for s in together) > 0  # the judges' calls are stored too
    assert all(s["run_iterations"] and s["run_events"] for s in together)
    assert all(s["run"]["app"] is not None and s["intake"]["status"] == "assessed" for s in together)
    # Each child row carries its run's created_at, its partition key (0021).
    assert all(row["run_created_at"] == s["run"]["created_at"] for s in together for name in _CHILDREN for row in s[name])
    for alone_stored, batch_stored in zip(one_by_one, together):
        assert batch_stored == alone_stored


def test_a_row_the_store_refuses_fails_its_record_alone(corpus, settings):  # type: ignore[no-untyped-def]  # noqa: F811
    runs = [ExternalRun.model_validate(r) for r in RECORDS[:4]]
    with transaction() as session:
        ids = [a.intake_id for a in accept_records(runs, source="api", session=session)]
        # a real refusal by the store for one record's run: its question is not allowed
        session.execute(text("ALTER TABLE runs ADD CONSTRAINT test_refuses_one CHECK (query <> :q)".replace(
            ":q", "'" + RECORDS[2]["question"].replace("'", "''") + "'")))
    try:
        summary = process_queue(backend=backend_for(settings), batch=4)
    finally:
        with transaction() as session:
            session.execute(text("ALTER TABLE runs DROP CONSTRAINT test_refuses_one"))
    assert (summary.assessed, summary.failed, summary.remaining) == (3, 1, 0)
    with transaction() as session:
        rows = session.execute(text("SELECT status, error, run_id FROM run_intake WHERE id = ANY(:ids) ORDER BY id"),
                               {"ids": ids}).all()
        stored = session.execute(text("SELECT count(*) FROM runs")).scalar_one()
    assert [r.status for r in rows] == ["assessed", "assessed", "failed", "assessed"]
    assert "test_refuses_one" in rows[2].error and rows[2].run_id is None
    assert stored == 3


def test_a_batch_inserts_its_iterations_in_one_statement(corpus, settings):  # type: ignore[no-untyped-def]  # noqa: F811
    """One INSERT, not one a row: the statement-level triggers then take the rollup's
    rows in their ORDER BY, the same order in every worker's transaction. A row at a time, two
    workers storing runs that cite the same documents deadlocked (services.intake.store_runs)."""
    runs = [ExternalRun.model_validate(r) for r in RECORDS]
    with transaction() as session:
        accept_records(runs, source="api", session=session)
    with transaction() as session:
        claimed = next_queued(len(runs), session=session)
        outcomes = assess_batch([r.run for r in claimed], judges=JUDGES, session=session, collection="default",
                                backend=backend_for(settings), profile=DEFAULT, settings=settings)
        with iteration_inserts(session) as inserts:
            assert store_batch(claimed, outcomes, collection="default", session=session) == [True] * len(runs)
        stored = session.execute(text("SELECT count(*) FROM run_iterations")).scalar_one()
    assert stored == len(runs) > 1
    assert inserts == [1]


def test_two_workers_storing_runs_that_cite_the_same_documents_both_finish(clean_db, settings):  # type: ignore[no-untyped-def]
    """Four drains at once over runs whose contexts name the same documents in different
    orders: every record is assessed once and no drain stops on a deadlock of the Document
    trends rollup (which a row-at-a-time store met: services.intake.store_runs)."""
    documents = [f"doc-{d}" for d in range(6)]
    records = [ExternalRun.model_validate({
        "question": f"Question {i}?", "answer": "An answer.",
        "contexts": [{"text": f"Passage {k} of record {i}.", "document_id": documents[(i * 5 + k) % 6],
                      "dense_similarity": 0.5} for k in range(3)]})
        for i in range(96)]
    with transaction(settings) as session:
        accept_records(records, source="api", judges=False, session=session)
    summaries, errors = [], []
    barrier = threading.Barrier(4)

    def drain() -> None:
        barrier.wait()
        try:
            summaries.append(process_queue(batch=2, backend=backend_for(settings), settings=settings))
        except Exception as exc:  # a deadlock surfaces here as DatabaseRefusedError
            errors.append(exc)

    threads = [threading.Thread(target=drain) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(s.assessed for s in summaries) == len(records) and sum(s.failed for s in summaries) == 0
    with transaction(settings) as session:
        appearances = session.execute(text("SELECT coalesce(sum(runs), 0) FROM document_day_rollup")).scalar_one()
    assert appearances == 3 * len(records)  # each run counted once under each document it names
