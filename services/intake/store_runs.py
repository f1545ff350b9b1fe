"""Store a batch of assessed runs with one call per table, and mark their intake rows.

save_run (services.answering.runs) stores one run in a statement per row: the run, then each
iteration, event and LLM call, each flushed by the ORM; the intake row is then marked with an
UPDATE that also sets the run's app. For a batch of 64 short records that was about 1,300
round trips, and every INSERT on runs and run_iterations fires the statement-level triggers
(the Document trends rollup, 0015; the Tuning matrix rows, 0017) once more. Here a batch is:
one INSERT of every run (its app written with it, so no UPDATE of runs follows), one of every
iteration (the two tables with triggers), one executemany of the events and one of the LLM
calls (a pipelined INSERT a row: no triggers there), one UPDATE of every intake row.

The rows are save_run's own (run_row_values, child_row_values, with the app added;
tests/services/intake/test_store_runs.py stores the same assessments both ways and compares
every column). The order save_run keeps is kept: a batch's runs are inserted before their
iterations, which the rollup's iterations trigger joins to their run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, insert, text
from sqlalchemy.orm import Session

from db.models import LLMCallRow, RunEvent, RunIteration
from db.models import Run as RunRow
from services.answering.runs import Run, child_row_values, run_row_values
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


def store_runs(runs: Sequence[tuple[int, Run, str | None]], *, session: Session) -> list[int]:
    """Insert each (intake id, run, app)'s run with its iterations, events and LLM calls, and
    mark the intake row assessed with it; the runs' ids, in order. The caller owns the
    transaction (and a savepoint, to fall back on storing one by one if a row is refused)."""
    if not runs:
        return []
    inserted = session.execute(_RUNS.insert().returning(_RUNS.c.id, sort_by_parameter_order=True),
                               [{**run_row_values(run), "app": app} for _, run, app in runs])
    run_ids = [int(row[0]) for row in inserted]
    iterations: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for run_id, (_, run, _) in zip(run_ids, runs, strict=True):
        children = child_row_values(run_id, run)
        iterations += children.iterations
        calls += children.calls
        events += children.events
    # The iterations as one statement: RETURNING makes SQLAlchemy send them as a multi-row INSERT
    # ("insertmanyvalues"), not as psycopg's executemany of one INSERT a row. A row at a time,
    # the statement-level triggers on run_iterations (the Document trends rollup, the document
    # index) fired once a row, and two workers storing runs that cite the same documents on the
    # same day took the rollup's rows in different orders and deadlocked (bench/intake.py, five
    # contexts from one article); in one statement the trigger upserts in its ORDER BY, the same
    # order in every transaction. Events and LLM calls have no triggers: their executemany is
    # cheaper for the client (a short record's ten events cost 2 ms more as a multi-row INSERT).
    if iterations:
        session.execute(_ITERATIONS.insert().returning(_ITERATIONS.c.id), iterations)
    for table, rows in ((_CALLS, calls), (_EVENTS, events)):
        if rows:
            session.execute(insert(table), rows)
    intake_ids = [intake_id for intake_id, _, _ in runs]
    marked = {int(row[0]) for row in session.execute(_MARK_ASSESSED, {"ids": intake_ids, "run_ids": run_ids})}
    missing = sorted(set(intake_ids) - marked)
    if missing:
        raise NotFoundError(f"no intake record {', '.join(map(str, missing))}")
    return run_ids
