"""fetch_rows runs a statement on psycopg directly, in the session's transaction: the values
are bound by name as session.execute binds them, and a failure comes out as every other
statement's does (a server abort is not reported as an outage)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import Engine, text

from services.errors import DatabaseRefusedError
from services.settings import Settings
from services.store import fetch_rows, get_engine, transaction

_ECHO = text("SELECT CAST(:n AS integer) + CAST(:n AS integer) AS twice, CAST(:word AS text) AS word, "
             "CAST(:terms AS text[]) AS terms, 'a::b' AS literal, 2::float8 AS cast_kept, "
             "ARRAY[0.1, 1e-300, NULL]::float8[] AS floats, 12345678901::bigint AS big, 1.50::numeric AS exact")


def test_values_are_bound_by_name_and_rows_come_back_as_dicts(engine: Engine, settings: Settings) -> None:
    values = {"n": 21, "word": "it's 100%", "terms": ["kiln", "glaze"], "unused": object()}
    with transaction(settings) as session:
        assert fetch_rows(session, _ECHO, values) == [
            {"twice": 42, "word": "it's 100%", "terms": ["kiln", "glaze"], "literal": "a::b", "cast_kept": 2.0,
             "floats": [0.1, 1e-300, None], "big": 12345678901, "exact": Decimal("1.50")}]
        assert fetch_rows(session, _ECHO, values) == [dict(session.execute(_ECHO, values).mappings().one())]


def test_it_runs_in_the_sessions_transaction(clean_db: None, settings: Settings) -> None:
    with transaction(settings) as session:
        session.execute(text("INSERT INTO collections (name) VALUES ('unseen elsewhere')"))
        found = fetch_rows(session, text("SELECT name FROM collections WHERE name = :name"), {"name": "unseen elsewhere"})
        assert found == [{"name": "unseen elsewhere"}]
        session.rollback()
        assert fetch_rows(session, text("SELECT name FROM collections WHERE name = :name"), {"name": "unseen elsewhere"}) == []


def test_a_statement_the_server_aborts_is_refused_not_an_outage(engine: Engine, settings: Settings) -> None:
    with pytest.raises(DatabaseRefusedError, match="statement timeout.*SQLSTATE 57014"):
        with transaction(settings) as session:
            session.execute(text("SET LOCAL statement_timeout = '50ms'"))
            fetch_rows(session, text("SELECT pg_sleep(:s)"), {"s": 5})
    assert get_engine(settings) is engine  # the server is up: its pool is kept
    with transaction(settings) as session:
        assert fetch_rows(session, text("SELECT 1 AS one"), {}) == [{"one": 1}]
