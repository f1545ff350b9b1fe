"""How often the statement-level triggers on run_iterations fire, as the server counts them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.orm import Session

# The Document trends rollup's trigger on inserted iterations (migration 0015): FOR EACH STATEMENT.
_TRIGGER = "document_day_rollup_iterations_insert"
_CALLS = text("SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions WHERE funcname = :name")


@contextmanager
def iteration_inserts(session: Session) -> Iterator[list[int]]:
    """Yields a list that holds, on leaving, how many statements inserted into run_iterations
    meanwhile (the times its statement-level insert trigger fired in this transaction), however
    they were sent (INSERT or COPY). One statement lets the triggers take their rows in their
    ORDER BY; one a row let two transactions citing the same documents deadlock."""
    session.execute(text("SET LOCAL track_functions = 'pl'"))
    before = session.execute(_CALLS, {"name": _TRIGGER}).scalar_one()
    fired: list[int] = []
    yield fired
    fired.append(int(session.execute(_CALLS, {"name": _TRIGGER}).scalar_one() - before))
