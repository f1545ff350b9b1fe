"""The process's engine and transactions, with store failures mapped to WorkbenchErrors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session

from db import StoreUnavailableError, build_engine, describe_store
from services.errors import DatabaseRefusedError, DatabaseUnavailableError
from services.settings import Settings, get_settings

_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _settings_key(settings: Settings) -> str:
    url = settings.database_url.get_secret_value() if settings.database_url else ""
    return f"{url}|{settings.workbench_data_dir}"


def get_engine(settings: Settings | None = None) -> Engine:
    """The engine for these settings, built (and migrated) once per process."""
    settings = settings or get_settings()
    key = _settings_key(settings)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            try:
                engine = build_engine(settings)
            except StoreUnavailableError as exc:
                raise DatabaseUnavailableError(
                    f"Database unavailable: {exc}. Check that PostgreSQL is running "
                    "(or unset DATABASE_URL to use the embedded server) and try again."
                ) from exc
            _ENGINES[key] = engine
        return engine


@contextmanager
def transaction(settings: Settings | None = None) -> Iterator[Session]:
    """One unit of work: commits on success, rolls back on any error."""
    settings = settings or get_settings()
    engine = get_engine(settings)
    session = Session(engine, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except (OperationalError, DBAPIError) as exc:
        session.rollback()
        if _connection_lost(exc):
            _forget_engine(settings, engine)
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


def _forget_engine(settings: Settings, engine: Engine) -> None:
    """Drop an engine whose store went away, so the next action builds a new one: that
    reconnects, and restarts an embedded server that was stopped or killed (pre-ping alone
    would keep knocking on a dead server's socket)."""
    with _ENGINES_LOCK:
        if _ENGINES.get(_settings_key(settings)) is engine:  # not one another thread already rebuilt
            del _ENGINES[_settings_key(settings)]
            engine.dispose()


def dispose_engines() -> None:
    """Close pooled connections (tests, and before a forked worker uses the store)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.dispose()
        _ENGINES.clear()
