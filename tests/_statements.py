"""What a session sends to the database, as the driver receives it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event
from sqlalchemy.orm import Session


@contextmanager
def iteration_inserts(session: Session) -> Iterator[list[bool]]:
    """Each INSERT into run_iterations sent meanwhile: True where it went as one statement (its
    parameters one mapping), False where as psycopg's executemany of one INSERT a row. One
    statement lets the table's statement-level triggers take their rows in their ORDER BY."""
    sent: list[bool] = []

    def note(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.startswith("INSERT INTO run_iterations "):
            sent.append(isinstance(parameters, dict))

    engine = session.get_bind()
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", note)
