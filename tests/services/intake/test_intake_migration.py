"""Migration 0006 on a scratch database: up, down and up again, with runs kept."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, inspect, text

from db.migrate import alembic_config


@pytest.fixture()
def scratch_engine(engine: Engine) -> Iterator[Engine]:
    name = f"intake_{uuid.uuid4().hex[:12]}"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    scratch = create_engine(engine.url.set(database=name))
    try:
        yield scratch
    finally:
        scratch.dispose()
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))


def _migrate(engine: Engine, revision: str, *, down: bool = False) -> None:
    config = alembic_config(embedding_dim=384)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)


def test_0006_adds_the_intake_and_removes_it_again(scratch_engine: Engine) -> None:
    _migrate(scratch_engine, "0006")
    tables = set(inspect(scratch_engine).get_table_names())
    assert {"api_keys", "run_intake"} <= tables
    assert {"trace_id", "external"} <= {c["name"] for c in inspect(scratch_engine).get_columns("runs")}
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO run_intake (trace_id, payload, source) VALUES ('t', '{}', 'api'), (NULL, '{}', 'import'), "
                          "(NULL, '{}', 'import')"))  # many rows may leave the trace id empty
        assert conn.execute(text("SELECT array_agg(status) FROM run_intake")).scalar_one() == ["queued"] * 3
        with pytest.raises(Exception, match="run_intake_source"):
            with conn.begin_nested():
                conn.execute(text("INSERT INTO run_intake (payload, source) VALUES ('{}', 'email')"))
        with pytest.raises(Exception, match="unique"):
            with conn.begin_nested():
                conn.execute(text("INSERT INTO run_intake (trace_id, payload, source) VALUES ('t', '{}', 'api')"))
    _migrate(scratch_engine, "0005", down=True)
    assert not {"api_keys", "run_intake"} & set(inspect(scratch_engine).get_table_names())
    assert "trace_id" not in {c["name"] for c in inspect(scratch_engine).get_columns("runs")}
    _migrate(scratch_engine, "head")
    assert "run_intake" in inspect(scratch_engine).get_table_names()


def test_0007_keeps_the_judges_choice_and_queued_records_keep_their_judges(scratch_engine: Engine) -> None:
    _migrate(scratch_engine, "0006")
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO run_intake (trace_id, payload, source) VALUES ('before', '{}', 'api')"))
    _migrate(scratch_engine, "0007")
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO run_intake (trace_id, payload, source, judges) VALUES ('after', '{}', 'api', false)"))
        assert conn.execute(text("SELECT trace_id, judges FROM run_intake ORDER BY id")).all() == [
            ("before", True), ("after", False)]  # records queued before 0007 were pushed with the judges on
    _migrate(scratch_engine, "0006", down=True)
    assert "judges" not in {c["name"] for c in inspect(scratch_engine).get_columns("run_intake")}
    _migrate(scratch_engine, "head")
    assert "judges" in {c["name"] for c in inspect(scratch_engine).get_columns("run_intake")}
