"""Read-only work goes to the read engine: read-only everywhere, the primary when no replica is set."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from services.errors import DatabaseUnavailableError
from services.retrieval.search import default_params, search
from services.settings import Settings
from services.store import get_engine, get_read_engine, read_transaction, wait_for_reads


def test_without_a_read_url_reads_use_the_primary_engine(settings: Settings) -> None:
    assert settings.database_read_url is None
    assert get_read_engine(settings) is get_engine(settings)


def test_a_read_transaction_refuses_writes_even_on_the_primary(settings: Settings, clean_db: None) -> None:
    with pytest.raises(DBAPIError, match="read-only transaction"):
        with read_transaction(settings) as session:
            session.execute(text("INSERT INTO collections (name) VALUES ('written-on-a-read-path')"))


def test_an_unreachable_read_url_is_an_error_naming_it(settings: Settings) -> None:
    broken = settings.model_copy(update={"database_read_url": SecretStr("postgresql://nobody@127.0.0.1:1/none")})
    with pytest.raises(DatabaseUnavailableError, match="DATABASE_READ_URL"):
        search("anything", default_params(broken, mode="bm25"), settings=broken)


def test_a_read_url_naming_a_server_not_in_recovery_needs_no_waiting(settings: Settings, engine: Engine,
                                                                    clean_db: None) -> None:
    same = settings.model_copy(update={"database_read_url": SecretStr(engine.url.render_as_string(hide_password=False))})
    assert get_read_engine(same) is not get_engine(same)
    wait_for_reads(same, timeout_s=1.0)  # returns at once: the "replica" is a primary
    assert search("anything", default_params(same, mode="bm25"), settings=same).hits == ()
