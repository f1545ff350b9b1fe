"""Migration 0015 on the real store: the Document trends rollup the triggers keep gives the page the
same numbers as counting the runs themselves, through inserts (one by one, many in a statement,
COPY), verdicts, a changed best iteration, deletes, a refresh and retention (whose deletes of
iterations the triggers leave to its recount, 0020); and runs.reflection_min_score follows each
run's config whoever writes the run."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from services.review.document_trends_check import document_trends_from_runs
from services.review.documents import DocumentTrend, document_trends
from services.review.retention import PRUNING_SETTING, prune
from services.store import transaction
from tests.db._bulk_writes import copy_runs_by_copy, copy_runs_by_statement
from tests.services.test_documents import at, make_run, store, store_six_runs

FILTERS: tuple[dict[str, object], ...] = (
    {}, {"collection": "default"}, {"collection": "other"}, {"since": at(12, 0)}, {"until": at(12, 0)},
    {"since": at(7, 0), "until": at(14, 0)}, {"min_runs": 2},
)


def _both(**filters: object) -> tuple[list[DocumentTrend], list[DocumentTrend]]:
    with transaction() as session:
        return (document_trends(session=session, **filters),  # type: ignore[arg-type]
                document_trends_from_runs(session=session, **filters))  # type: ignore[arg-type]


def _aligned(counted: DocumentTrend, kept: DocumentTrend) -> DocumentTrend:
    """`counted` with `kept`'s means where they agree to 1e-12 (the rollup divides an exact sum, the
    runs' avg() adds floats in any order), so the comparison below holds every other field exactly."""
    def mean(mine: float, theirs: float) -> float:
        return theirs if math.isclose(mine, theirs, rel_tol=1e-12) else mine

    weeks = tuple(dataclasses.replace(w, mean_confidence=mean(w.mean_confidence, k.mean_confidence))
                  for w, k in zip(counted.weeks, kept.weeks, strict=False)) + counted.weeks[len(kept.weeks):]
    return dataclasses.replace(counted, mean_confidence=mean(counted.mean_confidence, kept.mean_confidence),
                               weeks=weeks)


def assert_rollup_matches_runs(*, titles_seen_before: bool = False) -> None:
    """Every number equal; titles too, except that a rollup row keeps the title a run once gave it
    after that run stops retrieving the document (`titles_seen_before`): a name, not a count."""
    for filters in FILTERS:
        from_rollup, from_runs = _both(**filters)
        if titles_seen_before:
            from_runs = [dataclasses.replace(t, title=kept.title) if not t.title else t
                         for t, kept in zip(from_runs, from_rollup, strict=False)]
        assert from_rollup == [_aligned(t, kept) for t, kept in zip(from_runs, from_rollup, strict=False)] \
            + from_runs[len(from_rollup):], filters


@pytest.fixture()
def runs(clean_db) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return store_six_runs()


def test_the_rollup_counts_stored_runs_as_the_runs_do(runs):  # type: ignore[no-untyped-def]
    assert_rollup_matches_runs()
    with transaction() as session:
        assert len(document_trends(session=session)) == 6  # not vacuously equal


def test_verdicts_and_level_changes_move_runs_between_rollup_rows(runs):  # type: ignore[no-untyped-def]
    with transaction() as session:  # B approved, C back to pending, one statement for several runs
        session.execute(text("UPDATE runs SET status = CASE id WHEN :b THEN 'approved' ELSE 'pending' END "
                             "WHERE id IN (:b, :c)"), {"b": runs["B"], "c": runs["C"]})
        session.execute(text("UPDATE runs SET final_level = 'LOW', final_confidence = 0.35 WHERE id = :a"),
                        {"a": runs["A"]})
    assert_rollup_matches_runs()
    with transaction() as session:
        c = {t.external_id: t for t in document_trends(collection="default", session=session)}["c"]
    assert (c.pending, c.approved, c.flagged) == (0, 1, 1)


def test_a_deleted_run_leaves_the_trends(runs):  # type: ignore[no-untyped-def]
    with transaction() as session:
        session.execute(text("DELETE FROM runs WHERE id IN (:d, :f)"), {"d": runs["D"], "f": runs["F"]})
    assert_rollup_matches_runs()
    with transaction() as session:
        assert "other" not in {t.collection for t in document_trends(session=session)}


def test_a_changed_best_iteration_and_its_hits_are_followed(runs):  # type: ignore[no-untyped-def]
    with transaction() as session:  # E's first iteration (which retrieved c) becomes its best
        session.execute(text("UPDATE runs SET best_iteration = 0 WHERE id = :e"), {"e": runs["E"]})
        session.execute(text("UPDATE run_iterations SET retrieval = jsonb_set(retrieval, '{hits}', '[]') "
                             "WHERE run_id = :b AND ordinal = 1"), {"b": runs["B"]})
        session.execute(text("DELETE FROM run_iterations WHERE run_id = :a"), {"a": runs["A"]})
    assert_rollup_matches_runs(titles_seen_before=True)  # A still cites a, whose title came from A's hits


def test_runs_written_many_in_one_statement_and_by_copy_are_counted(runs):  # type: ignore[no-untyped-def]
    with transaction() as session:
        copy_runs_by_statement(session, [runs["B"], runs["D"]])
        copy_runs_by_copy(session, [runs["C"]])
    assert_rollup_matches_runs()
    with transaction() as session:
        b = {t.external_id: t for t in document_trends(collection="default", session=session)}["b"]
    assert b.runs == 3 + 1  # A, C, D and D's copy; C's copy by COPY has no iteration and cites only z


def test_refresh_recomputes_days_no_trigger_saw(runs):  # type: ignore[no-untyped-def]
    with transaction() as session:  # what dropping a partition does: runs gone, no trigger fired
        session.execute(text("ALTER TABLE runs DISABLE TRIGGER document_day_rollup_runs_delete"))
        session.execute(text("DELETE FROM runs WHERE created_at < :t"), {"t": at(12, 0)})
        session.execute(text("ALTER TABLE runs ENABLE TRIGGER document_day_rollup_runs_delete"))
        session.execute(text("SELECT refresh_document_day_rollup(CAST(:first AS date), CAST(:last AS date))"),
                        {"first": at(1).date(), "last": at(11).date()})
    assert_rollup_matches_runs()
    with transaction() as session:
        assert session.scalar(text("SELECT count(*) FROM document_day_rollup WHERE day < :d AND runs <> 0"),
                              {"d": at(12).date()}) == 0


def test_trends_take_whole_utc_days(runs):  # type: ignore[no-untyped-def]
    from services.errors import InputError

    with transaction() as session, pytest.raises(InputError, match="midnight UTC"):
        document_trends(since=datetime(2025, 5, 12, 6, tzinfo=UTC), session=session)


def test_the_reflection_minimum_column_follows_the_config_whoever_writes(clean_db):  # type: ignore[no-untyped-def]
    strict = store(make_run("qs", hits=("a",), confidence=0.5, level="MEDIUM", status="pending"), at(6))
    with transaction() as session:
        session.execute(text("UPDATE runs SET config = CAST(:c AS jsonb) WHERE id = :id"),
                        {"c": json.dumps({"preset": "balanced", "reflection_min_score": 0.85}), "id": strict})
        plain = store(make_run("qp", hits=("a",), confidence=0.5, level="MEDIUM", status="pending"), at(6))
        values = dict(session.execute(text("SELECT id, reflection_min_score FROM runs")).tuples().all())
    assert values == {strict: 0.85, plain: None}  # None: the config names none, the reader's default applies


def test_the_drill_down_lists_a_documents_newest_runs_within_its_limit_and_dates(runs):  # type: ignore[no-untyped-def]
    from services.review.documents import document_runs

    with transaction() as session:
        every = [r.run_id for r in document_runs("b", collection="default", session=session)]
        assert every == [runs["D"], runs["C"], runs["A"]]  # newest first, over three days
        for limit in (1, 2, 3):
            assert [r.run_id for r in document_runs("b", collection="default", limit=limit,
                                                    session=session)] == every[:limit]
        assert [r.run_id for r in document_runs("b", collection="default", until=at(13, 0), limit=1,
                                                session=session)] == [runs["A"]]
        assert document_runs("never-retrieved", collection="default", session=session) == []


def _kept_rows() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with transaction() as session:
        return (list(map(tuple, session.execute(text("SELECT * FROM document_day_rollup ORDER BY 1, 2, 3, 4")))),
                list(map(tuple, session.execute(text("SELECT * FROM document_run_index ORDER BY 1, 2, 3, 4")))))


def test_retention_removes_a_months_runs_and_the_rollup_still_counts_what_is_left(runs):  # type: ignore[no-untyped-def]
    # The six runs are in May 2025; A and C reviewed (D flagged): those stay, B, E and F go.
    with transaction() as session:
        session.execute(text("UPDATE runs SET reviewed_at = created_at + interval '1 hour' WHERE id IN (:a, :c)"),
                        {"a": runs["A"], "c": runs["C"]})
    report = prune(older_than=timedelta(days=90), keep_reviewed=True, now=datetime.now(UTC))
    assert (report.runs_removed, report.runs_kept) == (3, 3)
    assert report.children_removed["run_iterations"] >= 3  # deleted with the triggers aside, then recounted
    assert_rollup_matches_runs()
    with transaction() as session:
        assert {t.external_id for t in document_trends(session=session)} >= {"a", "c"}  # not vacuously equal


def test_the_iteration_triggers_stand_aside_only_in_the_transaction_that_says_it_prunes(runs):  # type: ignore[no-untyped-def]
    before = _kept_rows()
    with transaction() as session:
        session.execute(text("SELECT set_config(:name, 'on', true)"), {"name": PRUNING_SETTING})
        session.execute(text("DELETE FROM run_iterations WHERE run_id = :a"), {"a": runs["A"]})
    assert _kept_rows() == before  # neither the rollup nor the drill-down's index moved
    with transaction() as session:  # the setting ended with its transaction: the triggers follow again
        session.execute(text("DELETE FROM run_iterations WHERE run_id = :b"), {"b": runs["B"]})
    rollup, index = _kept_rows()
    assert rollup != before[0] and index != before[1]
