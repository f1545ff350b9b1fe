"""Store a batch of assessed runs in one statement per table, and mark their intake rows.

save_run (services.answering.runs) stores one run in a statement per row: the run, then each
iteration, event and LLM call, each flushed by the ORM; the intake row is then marked with an
UPDATE that also sets the run's app. For a batch of 64 short records that was about 1,300
round trips, and every INSERT on runs and run_iterations fires the statement-level triggers
(the Document trends rollup, 0015; the Tuning matrix rows, 0017) once more. Here a batch is:
one INSERT of every run (its app written with it, so no UPDATE of runs follows), one of every
iteration, one of every event, one of every LLM call, one UPDATE of every intake row.

The rows hold what save_run writes, column for column (tests/services/intake/test_store_runs.py
stores the same assessments both ways and compares every column). The order save_run keeps is
kept: a batch's runs are inserted before their iterations, which the rollup's iterations
trigger joins to their run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, cast

from sqlalchemy import Table, insert, text
from sqlalchemy.orm import Session

from db.models import LLMCallRow, RunEvent, RunIteration
from db.models import Run as RunRow
from services.answering.runs import Run
from services.errors import NotFoundError

_RUNS = cast(Table, RunRow.__table__)
_ITERATIONS = cast(Table, RunIteration.__table__)
_EVENTS = cast(Table, RunEvent.__table__)
_CALLS = cast(Table, LLMCallRow.__table__)

# Every intake row of the batch in one statement; the runs took their app when inserted.
_MARK_ASSESSED = text("""
UPDATE run_intake i SET status = 'assessed', run_id = m.run_id, error = NULL, assessed_at = now()
FROM unnest(CAST(:ids AS bigint[]), CAST(:run_ids AS bigint[])) AS m(id, run_id)
WHERE i.id = m.id
RETURNING i.id
""")


def run_values(run: Run, *, app: str | None) -> dict[str, Any]:
    """The runs row save_run writes for `run`, with the app its intake record belongs to."""
    return dict(
        query=run.query, preset=run.preset, collection=run.collection, source=run.source, backend=run.backend,
        model=run.model, status=run.status.value, final_answer=run.final_answer,
        citations=[asdict(c) for c in run.citations], final_confidence=run.final_confidence,
        final_level=run.final_level, retrieval_confidence=run.retrieval_confidence, components=list(run.components),
        reflection_score=run.reflection_score, grade=run.grade,
        crag_verdict=run.crag_verdict.value if run.crag_verdict is not None else None, signals=run.signals,
        route=[action.value for action in run.route], best_iteration=run.best_iteration,
        iterations_count=len(run.iterations), weights_profile_id=run.weights_profile_id,
        weights_profile=run.weights_profile, config=run.config, outcome_note=run.outcome_note, latency_ms=run.latency_ms,
        trace_id=run.trace_id, external=run.external, p_supported=run.p_supported, app=app,
    )


def store_runs(runs: Sequence[tuple[int, Run, str | None]], *, session: Session) -> list[int]:
    """Insert each (intake id, run, app)'s run with its iterations, events and LLM calls, and
    mark the intake row assessed with it; the runs' ids, in order. The caller owns the
    transaction (and a savepoint, to fall back on storing one by one if a row is refused)."""
    if not runs:
        return []
    inserted = session.execute(_RUNS.insert().returning(_RUNS.c.id, sort_by_parameter_order=True),
                               [run_values(run, app=app) for _, run, app in runs])
    run_ids = [int(row[0]) for row in inserted]
    iterations: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for run_id, (_, run, _) in zip(run_ids, runs, strict=True):
        for it in run.iterations:
            data = it.to_dict()
            data.pop("llm_calls")
            iterations.append({"run_id": run_id, **{k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}})
            calls.extend({"run_id": run_id, "iteration": it.ordinal, **call.to_dict()} for call in it.llm_calls)
        events.extend({"run_id": run_id, "seq": ev.seq, "ts": ev.ts, "elapsed_ms": ev.elapsed_ms,
                       "event_type": ev.event_type, "message": ev.message, "data": ev.data} for ev in run.events)
    for table, rows in ((_ITERATIONS, iterations), (_CALLS, calls), (_EVENTS, events)):
        if rows:
            session.execute(insert(table), rows)
    intake_ids = [intake_id for intake_id, _, _ in runs]
    marked = {int(row[0]) for row in session.execute(_MARK_ASSESSED, {"ids": intake_ids, "run_ids": run_ids})}
    missing = sorted(set(intake_ids) - marked)
    if missing:
        raise NotFoundError(f"no intake record {', '.join(map(str, missing))}")
    return run_ids
