"""Runs written as the bulk loader writes them (bench/_volume_build.py): many in one statement,
and by COPY. The tests that hold a trigger-kept table equal to the runs write them so."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

RUN_COLUMNS = ("query, preset, collection, source, backend, model, status, final_answer, citations, final_confidence, "
               "final_level, retrieval_confidence, components, signals, route, best_iteration, iterations_count, "
               "weights_profile, config, outcome_note, latency_ms, created_at")
_COPY_ITERATIONS = text(
    "INSERT INTO run_iterations (run_id, run_created_at, ordinal, query_used, sub_queries, retrieval, components, "
    "raw_metrics, retrieval_confidence, confidence, level, answer, citations, gaps, decision, decision_reason, signals, "
    "latency_ms, errors) SELECT n.id, n.created_at, it.ordinal, it.query_used, it.sub_queries, it.retrieval, it.components, "
    "it.raw_metrics, it.retrieval_confidence, it.confidence, it.level, it.answer, it.citations, it.gaps, "
    "it.decision, it.decision_reason, it.signals, it.latency_ms, it.errors "
    "FROM runs n JOIN runs o ON o.query = n.query AND o.id = ANY(:ids) AND n.id > o.id "
    "JOIN run_iterations it ON it.run_id = o.id")


def copy_runs_by_statement(session: Session, run_ids: list[int]) -> None:
    """Copies of the runs a day later, with their iterations: one INSERT of every run, one of
    every iteration."""
    shifted = RUN_COLUMNS.replace("created_at", "created_at + interval '1 day'")
    session.execute(text(f"INSERT INTO runs ({RUN_COLUMNS}) SELECT {shifted} FROM runs WHERE id = ANY(:ids)"),
                    {"ids": run_ids})
    session.execute(_COPY_ITERATIONS, {"ids": run_ids})


def copy_runs_by_copy(session: Session, run_ids: list[int], columns: str = RUN_COLUMNS) -> None:
    """Copies of the runs (not their iterations) through COPY out and COPY in."""
    driver = session.connection().connection.driver_connection
    assert driver is not None
    ids = ", ".join(str(int(run_id)) for run_id in run_ids)
    with driver.cursor() as cursor:
        with cursor.copy(f"COPY (SELECT {columns} FROM runs WHERE id IN ({ids})) TO STDOUT") as out:
            rows = b"".join(bytes(block) for block in out)
        with cursor.copy(f"COPY runs ({columns}) FROM STDIN") as into:
            into.write(rows)
