"""Migration 0017 on the real store: the Tuning matrix read from run_matrix_rows (kept by triggers on
runs) equals the one computed from the runs themselves through every writer: the pipeline's
inserts, intake's insert-then-update, COPY, verdicts, level changes, a run moved to another
month, deletes, TRUNCATE, retention's dropped and rebuilt months, and a COPY no trigger saw
followed by a refresh."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from services.review.retention import prune
from services.scoring.blend import REFLECTION_MIN_SCORE
from services.scoring.run_matrix import RunMatrix, load_run_matrix, run_store_epoch
from services.store import transaction
from tests.db._bulk_writes import copy_runs_by_copy
from tests.services.test_tuning import DEFAULT_PROFILE, _save

# The matrix as the runs themselves give it (what load_run_matrix read before 0017).
_FROM_RUNS = text("""
SELECT id, status, final_level, preset, final_confidence, components,
       CAST(signals ->> 'reflection' AS float8), CAST(signals ->> 'grade' AS float8),
       CAST(signals ->> 'heuristic' AS float8), final_answer <> '', crag_verdict IS NOT DISTINCT FROM 'CORRECT',
       coalesce(reflection_score >= coalesce(reflection_min_score, :minimum), false)
FROM runs ORDER BY id""")
_LABELS = {"approved": 1, "flagged": 0, "corrected": 0}


def _number(value: Any) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _rows_from_runs() -> list[tuple[Any, ...]]:
    with transaction() as session:
        rows = session.execute(_FROM_RUNS, {"minimum": REFLECTION_MIN_SCORE}).all()
    return [(r[0], r[1], _LABELS.get(r[1], -1), r[2], r[3], _number(r[4]),
             tuple(_number(r[5][i]) if i < len(r[5]) else None for i in range(7)),
             _number(r[6]), _number(r[7]), _number(r[8]), bool(r[9]), bool(r[10]), bool(r[11])) for r in rows]


def _rows_of(matrix: RunMatrix) -> list[tuple[Any, ...]]:
    return [(int(matrix.run_ids[i]), matrix.statuses[i], int(matrix.labels[i]), matrix.current_levels[i],
             matrix.presets[i], _number(matrix.stored_confidence[i]),
             tuple(_number(c) for c in matrix.components[i]), _number(matrix.reflection[i]),
             _number(matrix.grade_norm[i]), _number(matrix.heuristic[i]), bool(matrix.has_answer[i]),
             bool(matrix.crag_correct[i]), bool(matrix.reflection_approved[i])) for i in range(len(matrix))]


def assert_matrix_matches_runs(*, at_least: int = 1) -> list[tuple[Any, ...]]:
    kept = _rows_of(load_run_matrix())
    assert kept == _rows_from_runs()
    assert len(kept) >= at_least  # not vacuously equal
    return kept


@pytest.fixture()
def runs(clean_db: None) -> list[int]:  # type: ignore[no-untyped-def]
    """Twenty runs saved by the pipeline (save_run), varied statuses, CRAG verdicts, signals."""
    rng = np.random.default_rng(17)
    statuses = ["pending", "auto_accepted", "approved", "flagged", "corrected"]
    with transaction() as session:
        ids = [_save(session, rng, DEFAULT_PROFILE, status=statuses[i % 5], crag=["CORRECT", None][i % 2])[0]
               for i in range(19)]
        ids.append(_save(session, rng, DEFAULT_PROFILE, reflection_min=0.99)[0])
    return ids


def _update(sql: str, **params: Any) -> None:
    with transaction() as session:
        session.execute(text(sql), params)


def test_runs_saved_by_the_pipeline_are_in_the_matrix(runs: list[int]) -> None:
    kept = assert_matrix_matches_runs(at_least=20)
    assert {row[1] for row in kept} == {"pending", "auto_accepted", "approved", "flagged", "corrected"}
    assert any(row[12] for row in kept) and not all(row[12] for row in kept)


def test_intake_stores_a_run_then_updates_it_when_assessed(runs: list[int]) -> None:
    # as services/intake does: a run written first with what the record says, its numbers later
    _update("UPDATE runs SET components = ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], final_confidence = 0.42, "
            "signals = '{\"reflection\": 0.91, \"grade\": 0.5, \"heuristic\": 0.25}', reflection_score = 0.91, "
            "crag_verdict = 'CORRECT', final_answer = '', final_level = 'LOW' WHERE id = :id", id=runs[3])
    kept = {row[0]: row for row in assert_matrix_matches_runs()}
    assert kept[runs[3]][5:10] == (0.42, (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7), 0.91, 0.5, 0.25)


def test_verdicts_level_changes_and_a_comment_are_followed(runs: list[int]) -> None:
    _update("UPDATE runs SET status = CASE id WHEN :a THEN 'approved' ELSE 'flagged' END WHERE id IN (:a, :b)",
            a=runs[0], b=runs[1])
    _update("UPDATE runs SET final_level = 'VERY LOW', final_confidence = 0.05 WHERE id > :id", id=runs[10])
    _update("UPDATE runs SET review_comment = 'looked at it' WHERE id = :id", id=runs[2])
    _update("UPDATE runs SET preset = 'team-custom', status = 'archived' WHERE id = :id", id=runs[4])  # uncoded names
    kept = {row[0]: row for row in assert_matrix_matches_runs()}
    assert (kept[runs[0]][2], kept[runs[1]][2]) == (1, 0)
    assert (kept[runs[4]][1], kept[runs[4]][2], kept[runs[4]][4]) == ("archived", -1, "team-custom")
    assert kept[runs[11]][3:6] == ("VERY LOW", "balanced", 0.05)


def test_a_run_moved_to_another_month_and_deleted_runs(runs: list[int]) -> None:
    _update("UPDATE runs SET created_at = created_at - interval '3 months' WHERE id = :id", id=runs[5])
    _update("DELETE FROM runs WHERE id IN (:a, :b)", a=runs[6], b=runs[7])
    kept = assert_matrix_matches_runs()
    assert runs[5] in {row[0] for row in kept} and not {runs[6], runs[7]} & {row[0] for row in kept}


def test_runs_written_many_in_a_statement_and_by_copy(runs: list[int]) -> None:
    columns = ("query, preset, collection, source, backend, model, status, final_answer, citations, final_confidence, "
               "final_level, retrieval_confidence, components, reflection_score, grade, crag_verdict, signals, route, "
               "best_iteration, iterations_count, weights_profile, config, outcome_note, latency_ms, created_at")
    _update(f"INSERT INTO runs ({columns}) SELECT {columns} FROM runs WHERE id <= :id", id=runs[4])
    with transaction() as session:
        copy_runs_by_copy(session, [runs[8], runs[9]], columns)
    assert_matrix_matches_runs(at_least=27)


def test_a_copy_no_trigger_saw_is_counted_by_a_refresh(runs: list[int]) -> None:
    # bench/_volume_build.py writes runs under session_replication_role = replica, then refreshes
    with transaction() as session:
        session.execute(text("SET LOCAL session_replication_role = replica"))
        session.execute(text("UPDATE runs SET final_confidence = 0.01 WHERE id = :id"), {"id": runs[0]})
    with pytest.raises(AssertionError):
        assert_matrix_matches_runs()
    _update("SELECT refresh_run_matrix_rows(NULL, NULL)")
    assert_matrix_matches_runs(at_least=20)


def test_truncate_empties_it_and_changes_the_epoch(runs: list[int]) -> None:
    before = run_store_epoch()
    _update("TRUNCATE runs")
    assert len(load_run_matrix()) == 0 and _rows_from_runs() == []
    assert run_store_epoch() != before


def test_retention_drops_and_rebuilds_months_and_the_matrix_follows(clean_db: None) -> None:
    rng = np.random.default_rng(23)
    now = datetime.now(UTC)
    with transaction() as session:
        ids = [_save(session, rng, DEFAULT_PROFILE, status=["pending", "approved"][i % 2])[0] for i in range(12)]
    # four runs each in two old months (one pruned whole, one keeping its reviewed runs) and this month
    _update("UPDATE runs SET created_at = CAST(:old AS timestamptz) + (id % 4) * interval '1 day' WHERE id <= :id",
            old=datetime(2025, 1, 10, tzinfo=UTC), id=ids[3])
    _update("UPDATE runs SET created_at = CAST(:old AS timestamptz) + (id % 4) * interval '1 day', "
            "status = CASE WHEN id % 2 = 0 THEN 'approved' ELSE 'pending' END, "
            "reviewed_at = CASE WHEN id % 2 = 0 THEN now() END WHERE id > :low AND id <= :high",
            old=datetime(2025, 3, 10, tzinfo=UTC), low=ids[3], high=ids[7])
    _update("UPDATE runs SET status = 'pending', reviewed_at = NULL WHERE id <= :id", id=ids[3])
    assert_matrix_matches_runs(at_least=12)
    report = prune(older_than=timedelta(days=90), keep_reviewed=True, now=now)
    assert report.runs_removed == 6 and report.runs_kept == 2
    kept = assert_matrix_matches_runs(at_least=6)
    assert len(kept) == 6


def test_a_stored_nan_reflection_compares_as_postgresql_orders_it(runs: list[int]) -> None:
    # PostgreSQL orders NaN above every number: NaN >= 0.8 holds, 0.9 >= NaN does not
    _update("UPDATE runs SET reflection_score = 'NaN' WHERE id = :id", id=runs[0])
    _update("UPDATE runs SET reflection_score = 0.9, config = '{\"reflection_min_score\": \"NaN\"}' WHERE id = :id",
            id=runs[1])
    kept = {row[0]: row for row in assert_matrix_matches_runs()}
    assert (kept[runs[0]][12], kept[runs[1]][12]) == (True, False)


def test_a_store_whose_records_are_laid_out_otherwise_is_refused(runs: list[int]) -> None:
    from services.scoring.run_matrix import RunMatrixLayoutError

    with transaction() as session:
        session.execute(text("CREATE OR REPLACE FUNCTION run_matrix_record_layout() RETURNS text LANGUAGE sql "
                             "AS $$ SELECT 'id:i8' $$"))
        with pytest.raises(RunMatrixLayoutError, match="migrate the store and the code to the same revision"):
            load_run_matrix(session=session)
        session.rollback()
