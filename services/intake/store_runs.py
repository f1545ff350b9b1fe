"""Store a batch of assessed runs with one COPY per table, and mark their intake rows.

save_run (services.answering.runs) stores one run in a statement per row: the run, then each
iteration, event and LLM call, each flushed by the ORM; the intake row is then marked with an
UPDATE that also sets the run's app. For a batch of 64 short records that was about 1,300
round trips, and every INSERT on runs and run_iterations fires the statement-level triggers
(the Document trends rollup, 0015; the Tuning matrix rows, 0017; the document index, 0018) once
more. Here a batch is: the runs' ids drawn from their sequence, one COPY of every run (its app
written with it, so no UPDATE of runs follows), one of every iteration, event and LLM call, and
one UPDATE of every intake row. A COPY is one statement: the statement-level triggers fire once
for it and take their rows in their ORDER BY, the same order in every worker's transaction (a
row at a time, two workers storing runs that cite the same documents on the same day took the
rollup's rows in different orders and deadlocked). It replaced one multi-row INSERT a table,
whose thousands of placeholders psycopg split and PostgreSQL parsed for every batch: about a
millisecond a short record of the client's CPU (bench/intake.py).

The rows are save_run's own (run_row_values, child_row_values, with the id, app and created_at
added, and the Python-side defaults save_run's ORM fills in;
tests/services/intake/test_store_runs.py stores the same assessments both ways and compares every
column). The order save_run keeps is kept: a batch's runs are copied before their iterations, which
the rollup's iterations trigger joins to their run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

from psycopg.types.json import Jsonb
from sqlalchemy import Table, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session
from sqlalchemy.sql.schema import ColumnDefault

from db.models import LLMCallRow, RunEvent, RunIteration
from db.models import Run as RunRow
from services.answering.runs import Run, child_row_values, run_row_values
from services.errors import NotFoundError
from services.store import copy_rows

_RUNS = cast(Table, RunRow.__table__)
_ITERATIONS = cast(Table, RunIteration.__table__)
_EVENTS = cast(Table, RunEvent.__table__)
_CALLS = cast(Table, LLMCallRow.__table__)

# The runs' ids, and their created_at (the transaction's time, as the column's default gives save_run's
# runs), which their children carry: they are partitioned by its month (migration 0021).
_RUN_IDS = text("SELECT nextval('runs_id_seq'), now() FROM generate_series(1, :n)")
# Every intake row of the batch in one statement; the runs took their app when copied.
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
    drawn = session.execute(_RUN_IDS, {"n": len(runs)}).all()
    run_ids = [int(run_id) for run_id, _ in drawn]
    rows: dict[Table, list[dict[str, Any]]] = {_RUNS: [], _ITERATIONS: [], _CALLS: [], _EVENTS: []}
    for (run_id, created_at), (_, run, app) in zip(drawn, runs, strict=True):
        rows[_RUNS].append({"id": run_id, **run_row_values(run), "app": app, "created_at": created_at})
        children = child_row_values(run_id, created_at, run)
        rows[_ITERATIONS] += children.iterations
        rows[_CALLS] += children.calls
        rows[_EVENTS] += children.events
    for table, table_rows in rows.items():  # runs first: the iterations' triggers join them
        _copy(session, table, table_rows)
    intake_ids = [intake_id for intake_id, _, _ in runs]
    marked = {int(row[0]) for row in session.execute(_MARK_ASSESSED, {"ids": intake_ids, "run_ids": run_ids})}
    missing = sorted(set(intake_ids) - marked)
    if missing:
        raise NotFoundError(f"no intake record {', '.join(map(str, missing))}")
    return run_ids


def _copy(session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """COPY `rows` (each with the same keys) into `table` as the ORM inserts them: a column a row
    leaves out takes its Python-side default, or else the server's, and None in a JSON column is
    JSON's null (SQLAlchemy's JSON type without none_as_null), not SQL's."""
    if not rows:
        return
    defaults = {c.name: c.default for c in table.columns
                if c.name not in rows[0] and isinstance(c.default, ColumnDefault) and not c.computed}
    names = [*rows[0], *defaults]
    as_json = [isinstance(table.c[name].type, JSONB) for name in names]
    statement = f"COPY {table.name} ({', '.join(names)}) FROM STDIN"

    def values() -> Iterator[list[Any]]:
        for row in rows:
            given = [*row.values(), *(d.arg(None) if d.is_callable else d.arg for d in defaults.values())]
            yield [Jsonb(v) if json else v for v, json in zip(given, as_json, strict=True)]

    copy_rows(session, statement, values())
