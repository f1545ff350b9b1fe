"""Migration 0018 on the real store: the Document trends drill-down read from document_run_index
(kept by triggers on runs and run_iterations) lists what the runs' own hits and citations give,
for every document, through every writer: the pipeline's inserts, imported runs outside the
corpus, many runs in a statement and COPY, verdicts and level changes, a changed best iteration
and its hits, a changed collection or citations, a run moved to another month, deletes, TRUNCATE,
retention's dropped and rebuilt months, and a write no trigger saw followed by a refresh."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from services.review.document_trends_check import document_runs_from_runs, document_trends_from_runs
from services.review.documents import DocumentRun, document_runs
from services.review.retention import prune
from services.store import transaction
from tests.db._bulk_writes import copy_runs_by_copy, copy_runs_by_statement
from tests.services.test_documents import _outside_run, at, store, store_six_runs

WINDOWS: tuple[dict[str, Any], ...] = (
    {}, {"since": at(12, 0)}, {"until": at(12, 0)}, {"since": at(7, 0), "until": at(14, 0)}, {"limit": 1},
    {"limit": 2, "until": at(15, 0)},
)


def _listed() -> list[tuple[str, str]]:
    """Every document the runs list, and every one the index holds (a row left behind shows)."""
    with transaction() as session:
        from_runs = [(t.collection, t.external_id) for t in document_trends_from_runs(session=session)]
        indexed = session.execute(text("SELECT DISTINCT collection, external_id FROM document_run_index")).tuples()
        return sorted({*from_runs, *indexed})


def assert_index_matches_runs(*, at_least: int = 1) -> dict[tuple[str, str], list[DocumentRun]]:
    """For every document the runs list, and each window: the same runs, in the same order, with
    the same ranks, citations and shown columns; a document never retrieved lists nothing."""
    found = {}
    with transaction() as session:
        for collection, external_id in [*_listed(), ("default", "never-retrieved")]:
            for window in WINDOWS:
                kept = document_runs(external_id, collection=collection, session=session, **window)
                assert kept == document_runs_from_runs(external_id, collection=collection, session=session,
                                                       **window), (collection, external_id, window)
                if not window:
                    found[(collection, external_id)] = kept
    assert sum(len(v) for v in found.values()) >= at_least  # not vacuously equal
    return found


def _update(sql: str, **params: Any) -> None:
    with transaction() as session:
        session.execute(text(sql), params)


@pytest.fixture()
def runs(clean_db: None) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return store_six_runs()


def test_runs_saved_by_the_pipeline_are_indexed(runs: dict[str, int]) -> None:
    found = assert_index_matches_runs(at_least=10)
    assert [r.run_id for r in found[("default", "b")]] == [runs["D"], runs["C"], runs["A"]]


def test_runs_outside_the_corpus_are_indexed_under_their_source(clean_db: None) -> None:
    outside = store(_outside_run("q1", "pending"), at(6))
    found = assert_index_matches_runs()
    assert [r.run_id for r in found[("outside the corpus (import)", "vendor-kb-7")]] == [outside]


def test_verdicts_and_level_changes_show_through(runs: dict[str, int]) -> None:
    _update("UPDATE runs SET status = 'approved', final_level = 'HIGH', final_confidence = 0.95 WHERE id = :d",
            d=runs["D"])
    found = assert_index_matches_runs()
    assert (found[("default", "b")][0].status, found[("default", "b")][0].final_level) == ("approved", "HIGH")


def test_a_changed_best_iteration_its_hits_collection_and_citations_are_followed(runs: dict[str, int]) -> None:
    _update("UPDATE runs SET best_iteration = 0 WHERE id = :e", e=runs["E"])  # its first iteration retrieved c
    _update("UPDATE run_iterations SET retrieval = jsonb_set(retrieval, '{hits}', '[]') "
            "WHERE run_id = :b AND ordinal = 1", b=runs["B"])
    _update("UPDATE run_iterations SET retrieval = jsonb_set(retrieval, '{hits}', '[]') "
            "WHERE run_id = :e AND ordinal = 1", e=runs["E"])  # no longer its best: changes nothing
    _update("DELETE FROM run_iterations WHERE run_id = :a", a=runs["A"])  # A still cites a
    _update("UPDATE runs SET collection = 'other' WHERE id = :c", c=runs["C"])
    _update("UPDATE runs SET citations = '[{\"external_id\": \"new-doc\"}]' WHERE id = :d", d=runs["D"])
    found = assert_index_matches_runs()
    assert runs["E"] in [r.run_id for r in found[("default", "c")]]
    assert [r.run_id for r in found[("default", "new-doc")]] == [runs["D"]]


def test_a_run_moved_to_another_month_and_deleted_runs(runs: dict[str, int]) -> None:
    _update("UPDATE runs SET created_at = created_at - interval '2 months' WHERE id = :a", a=runs["A"])
    _update("DELETE FROM runs WHERE id IN (:d, :f)", d=runs["D"], f=runs["F"])
    found = assert_index_matches_runs()
    assert [r.run_id for r in found[("default", "b")]] == [runs["C"], runs["A"]]
    assert ("other", "a") not in found


def test_runs_written_many_in_a_statement_and_by_copy(runs: dict[str, int]) -> None:
    with transaction() as session:
        copy_runs_by_statement(session, [runs["B"], runs["D"]])
        copy_runs_by_copy(session, [runs["C"]])
    found = assert_index_matches_runs()
    assert len(found[("default", "b")]) == 4  # A, C, D and D's copy (C's copy has no iterations: cites z only)


def test_a_write_no_trigger_saw_is_indexed_by_a_refresh(runs: dict[str, int]) -> None:
    with transaction() as session:  # as bench/_volume_build.py writes: session_replication_role = replica
        session.execute(text("SET LOCAL session_replication_role = replica"))
        session.execute(text("UPDATE runs SET citations = '[]' WHERE id = :c"), {"c": runs["C"]})
    with pytest.raises(AssertionError):
        assert_index_matches_runs()
    _update("SELECT refresh_document_run_index(CAST(:low AS timestamptz), CAST(:high AS timestamptz))",
            low=at(13, 0), high=at(14, 0))
    assert_index_matches_runs()
    _update("SELECT refresh_document_run_index(NULL, NULL)")
    assert_index_matches_runs(at_least=9)  # C no longer cites z


def test_truncate_empties_it(runs: dict[str, int]) -> None:
    _update("TRUNCATE runs")
    with transaction() as session:
        assert session.scalar(text("SELECT count(*) FROM document_run_index")) == 0


def test_retention_drops_and_rebuilds_months_and_the_index_follows(runs: dict[str, int]) -> None:
    # the six runs are in May 2025; A and C reviewed: pruning keeps them, the rest of the month goes
    _update("UPDATE runs SET reviewed_at = created_at + interval '1 hour' WHERE id IN (:a, :c)", a=runs["A"], c=runs["C"])
    _update("UPDATE runs SET created_at = created_at - interval '1 month' WHERE id = :f", f=runs["F"])  # April: all goes
    report = prune(older_than=timedelta(days=90), keep_reviewed=True, now=datetime.now(UTC))
    assert (report.runs_removed, report.runs_kept) == (3, 3)  # B, E, F go; A, C, D (flagged) stay
    found = assert_index_matches_runs()
    assert {r.run_id for runs_of in found.values() for r in runs_of} == {runs["A"], runs["C"], runs["D"]}
