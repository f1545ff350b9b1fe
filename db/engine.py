"""Build the one SQLAlchemy engine from settings: embedded server or DATABASE_URL."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import psycopg
from pgvector.psycopg import register_vector
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import DBAPIError

from db.embedded import EmbeddedServerError, embedded_uri
from db.migrate import upgrade_to_head
from db.settings import StoreSettings

# The HNSW candidate list: it must hold at least the dense leg's depth (50 by default), and
# its length is the dense leg's cost (at 100k chunks 200 took twice the time of 64). Deeper
# searches raise it for their own transaction.
DEFAULT_EF_SEARCH = 64


class StoreUnavailableError(RuntimeError):
    """The database could not be reached; the message names what was tried."""


@dataclass(frozen=True)
class StoreInfo:
    """What the sidebar shows about the store (never the password)."""

    kind: str  # "embedded" or "external"
    location: str  # data dir or host/dbname


def describe_store(settings: StoreSettings) -> StoreInfo:
    if settings.embedded:
        return StoreInfo("embedded", str(settings.workbench_data_dir))
    parts = urlsplit(settings.database_url.get_secret_value())  # type: ignore[union-attr]
    return StoreInfo("external", f"{parts.hostname or 'local socket'}:{parts.port or 5432}{parts.path}")


def build_engine(settings: StoreSettings) -> Engine:
    """Create the engine and prove it can connect; raise StoreUnavailableError otherwise."""
    info = describe_store(settings)
    try:
        raw_url = (
            embedded_uri(settings.workbench_data_dir)
            if settings.embedded
            else settings.database_url.get_secret_value()  # type: ignore[union-attr]
        )
    except EmbeddedServerError as exc:
        raise StoreUnavailableError(str(exc)) from exc
    engine = _create(raw_url)
    try:
        upgrade_to_head(engine, embedding_dim=settings.embedding_dim)
    except DBAPIError as exc:
        engine.dispose()
        raise StoreUnavailableError(
            f"cannot reach the {info.kind} database at {info.location}: "
            f"{_first_line(exc.orig)}"
        ) from exc
    # Connections opened before the migration created the vector type lack its adapter.
    engine.dispose()
    return engine


def build_read_engine(settings: StoreSettings) -> Engine:
    """The engine for DATABASE_READ_URL (a replica: no migrations run there, the primary's
    reach it by replication); raise StoreUnavailableError when it cannot connect."""
    assert settings.database_read_url is not None
    engine = _create(settings.database_read_url.get_secret_value())
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except DBAPIError as exc:
        engine.dispose()
        where = urlsplit(settings.database_read_url.get_secret_value())
        raise StoreUnavailableError(
            f"cannot reach the read replica (DATABASE_READ_URL) at {where.hostname or 'local socket'}"
            f":{where.port or 5432}{where.path}: {_first_line(exc.orig)}"
        ) from exc
    return engine


def _create(raw_url: str) -> Engine:
    engine = create_engine(
        _psycopg_url(raw_url),
        pool_pre_ping=True,
        pool_size=5,
        max_overflow=10,
        connect_args={"connect_timeout": 5, "options": f"-c hnsw.ef_search={DEFAULT_EF_SEARCH} -c hnsw.iterative_scan=strict_order"},
    )
    event.listen(engine, "connect", _register_vector_type)
    return engine


def _psycopg_url(url: str) -> str:
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    raise StoreUnavailableError("DATABASE_URL must start with postgresql:// (got another scheme)")


def _register_vector_type(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    try:
        register_vector(dbapi_conn)
    except psycopg.ProgrammingError:
        pass  # fresh database: the first migration creates the extension, then we reconnect


def _first_line(exc: object) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
