"""The process's engines (primary, and read replica when set) and transactions, with store
failures mapped to WorkbenchErrors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

import psycopg
from psycopg import ClientCursor, RawCursor
from psycopg.rows import dict_row
from sqlalchemy import Connection, Engine, TextClause, text
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from db import StoreUnavailableError, build_engine, build_read_engine, describe_store
from services.errors import DatabaseRefusedError, DatabaseUnavailableError
from services.settings import Settings, get_settings

_T = TypeVar("_T")
_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _settings_key(settings: Settings, *, read: bool = False) -> str:
    url = settings.database_url.get_secret_value() if settings.database_url else ""
    key = f"{url}|{settings.workbench_data_dir}"
    if read and settings.database_read_url is not None:
        return f"read|{settings.database_read_url.get_secret_value()}|{key}"
    return key


def get_engine(settings: Settings | None = None) -> Engine:
    """The engine for these settings, built (and migrated) once per process."""
    settings = settings or get_settings()
    return _cached_engine(_settings_key(settings), lambda: build_engine(settings),
                          "Check that PostgreSQL is running (or unset DATABASE_URL to use the embedded server)")


def get_read_engine(settings: Settings | None = None) -> Engine:
    """The engine read-only work uses: DATABASE_READ_URL's replica when set, else the primary's."""
    settings = settings or get_settings()
    if settings.database_read_url is None:
        return get_engine(settings)
    get_engine(settings)  # the primary first: it owns the migrations the replica receives
    return _cached_engine(_settings_key(settings, read=True), lambda: build_read_engine(settings),
                          "Check that the replica is running (or unset DATABASE_READ_URL to read from the primary)")


def _cached_engine(key: str, build: Callable[[], Engine], hint: str) -> Engine:
    """The engine cached under `key`, built once; a store that cannot be reached says `hint`."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            try:
                engine = build()
            except StoreUnavailableError as exc:
                raise DatabaseUnavailableError(f"Database unavailable: {exc}. {hint} and try again.") from exc
            _ENGINES[key] = engine
        return engine


@contextmanager
def transaction(settings: Settings | None = None) -> Iterator[Session]:
    """One unit of work on the primary: commits on success, rolls back on any error."""
    settings = settings or get_settings()
    with _unit_of_work(settings, read=False) as session:
        yield session


@contextmanager
def read_transaction(settings: Settings | None = None) -> Iterator[Session]:
    """A read-only transaction on the read engine (the replica when DATABASE_READ_URL is set).
    READ ONLY on the primary too: a write on a read path fails in every deployment, not only
    in the one that has a replica."""
    settings = settings or get_settings()
    with _unit_of_work(settings, read=True) as session:
        session.execute(text("SET TRANSACTION READ ONLY"))
        yield session


@contextmanager
def _unit_of_work(settings: Settings, *, read: bool) -> Iterator[Session]:
    engine = get_read_engine(settings) if read else get_engine(settings)
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except (OperationalError, DBAPIError) as exc:
        session.rollback()
        if _connection_lost(exc):
            _forget_engine(_settings_key(settings, read=read), engine)
            where = describe_store(settings)
            raise DatabaseUnavailableError(
                f"Database unavailable ({where.kind}, {where.location}); nothing was saved "
                "from this action. Try again when it is back."
            ) from exc
        if isinstance(exc, OperationalError):  # the server is fine; this one statement was not
            raise DatabaseRefusedError(
                f"The database aborted this action ({_server_message(exc)}); nothing was saved "
                "from it. Try again; if it keeps failing, the server log says why."
            ) from exc
        raise
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def export_snapshot(session: Session) -> str | None:
    """An id for what `session`'s transaction sees now, for `in_snapshot` on other connections
    while that transaction stays open; None once it has written (other connections could not
    see its writes)."""
    return session.execute(text(
        "SELECT CASE WHEN pg_current_xact_id_if_assigned() IS NULL THEN pg_export_snapshot() END")).scalar_one()


def in_snapshot(engine: Engine, snapshot: str, work: Callable[[Connection], _T]) -> _T:
    """`work` done on a connection of its own, in a read-only transaction that sees exactly
    the exported `snapshot` (PostgreSQL's synchronized snapshots, as parallel pg_dump uses):
    what several connections read at once then adds up as if one statement had read it."""
    with engine.connect() as conn:
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        # SET takes no bound parameters: the id is quoted by psycopg on the client.
        ClientCursor(conn.connection.driver_connection).execute(  # type: ignore[arg-type]
            "SET TRANSACTION SNAPSHOT %s", [snapshot])
        try:
            return work(conn)
        finally:
            conn.rollback()


def copy_rows(session: Session, statement: str, rows: Iterable[Sequence[Any]], *,
              types: Sequence[str] | None = None) -> None:
    """`statement` (a COPY ... FROM STDIN) fed `rows` on the session's connection, in its
    transaction; `types` for a binary COPY. psycopg's errors are wrapped as SQLAlchemy wraps the
    errors of the statements it runs, so the store's transaction turns a lost server or an aborted
    statement into the same message."""
    with _driver_connection(session, statement, None) as raw, raw.cursor() as cursor, cursor.copy(statement) as copy:
        if types is not None:
            copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def fetch_rows(session: Session, statement: TextClause, values: Mapping[str, object]) -> list[dict[str, Any]]:
    """The rows of `statement` as dicts, run by psycopg on the session's connection, in its
    transaction, with the values `session.execute` would bind. For a statement run per search:
    SQLAlchemy's execute costs ~0.1 ms of client CPU, and psycopg converts a statement over
    4,096 characters from named to $n placeholders anew on every run (0.2 ms for the BM25
    statement), both of which this skips. Rows come in PostgreSQL's binary format: the server
    does not print the numbers (a search's rows hold 500 floats) for the client to parse back
    (another 0.15 ms). Errors are wrapped as in `copy_rows`. `statement` is a module constant:
    its compiled form is kept for the process's life."""
    sql, names = _numbered(statement)
    with _driver_connection(session, statement.text, values) as raw:
        cursor = RawCursor(raw, row_factory=dict_row)
        return cursor.execute(sql, [values[name] for name in names], binary=True).fetchall()


@contextmanager
def _driver_connection(session: Session, statement: str, values: Mapping[str, object] | None) -> Iterator[psycopg.Connection[Any]]:
    """The psycopg connection under the session's, its errors wrapped as SQLAlchemy wraps those
    of the statements it runs (`statement` and `values` name what failed)."""
    raw = session.connection().connection.driver_connection
    assert raw is not None
    try:
        yield raw
    except psycopg.Error as exc:
        raise DBAPIError.instance(statement, values, exc, psycopg.Error, connection_invalidated=raw.broken) from exc


@cache
def _numbered(statement: TextClause) -> tuple[bytes, tuple[str, ...]]:
    """`statement` with PostgreSQL's $n placeholders, and the value names in their order, as
    SQLAlchemy compiles it (a name bound twice is one placeholder)."""
    compiled = statement.compile(dialect=PGDialect_psycopg(paramstyle="numeric_dollar"))
    return compiled.string.encode(), tuple(compiled.positiontup or ())


def _connection_lost(exc: DBAPIError) -> bool:
    """The server or the connection went away (no SQLSTATE, class 08, or a shutdown 57P0x),
    as opposed to an OperationalError about one statement, such as a deadlock."""
    if exc.connection_invalidated:
        return True
    if not isinstance(exc, OperationalError):
        return False  # integrity, data and programming errors are about the statement
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(("08", "57P"))


def _server_message(exc: DBAPIError) -> str:
    """The server's first line and SQLSTATE, e.g. 'deadlock detected, SQLSTATE 40P01'."""
    first = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc.orig).__name__
    sqlstate = getattr(exc.orig, "sqlstate", None)
    return f"{first}, SQLSTATE {sqlstate}" if sqlstate else first


def _forget_engine(key: str, engine: Engine) -> None:
    """Drop an engine whose store went away, so the next action builds a new one: that
    reconnects, and restarts an embedded server that was stopped or killed (pre-ping alone
    would keep knocking on a dead server's socket)."""
    with _ENGINES_LOCK:
        if _ENGINES.get(key) is engine:  # not one another thread already rebuilt
            del _ENGINES[key]
            engine.dispose()


def wait_for_reads(settings: Settings | None = None, *, timeout_s: float = 30.0) -> None:
    """Wait until the read replica has replayed everything the primary has written so far, so
    a read right after a write (an evaluation after its ingest) sees it. A no-op without one."""
    settings = settings or get_settings()
    if settings.database_read_url is None:
        return
    with get_engine(settings).connect() as primary:
        target = primary.execute(text("SELECT pg_current_wal_lsn()")).scalar_one()
    deadline = time.monotonic() + timeout_s
    with get_read_engine(settings).connect() as replica:
        while True:
            caught_up = replica.execute(text(_REPLAYED_SQL), {"target": target}).scalar_one()
            if caught_up:
                return
            if time.monotonic() > deadline:
                raise DatabaseUnavailableError(
                    f"the read replica (DATABASE_READ_URL) has not replayed the primary's writes after {timeout_s:.0f} s; "
                    "check its replication (pg_stat_replication on the primary)"
                )
            time.sleep(0.02)
            replica.rollback()


# A server that is not in recovery is not a replica (the read URL names the primary itself, or a
# copy kept in step some other way): nothing to wait for.
_REPLAYED_SQL = """
SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= CAST(:target AS pg_lsn)
"""


def dispose_engines() -> None:
    """Close pooled connections (tests, and before a forked worker uses the store)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.dispose()
        _ENGINES.clear()
