"""Migrations on scratch databases: stored data survives renames, new tables come and go cleanly."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import Engine, create_engine, inspect, text

from db.migrate import alembic_config

OLD_WEIGHTS = {"top_score": 0.3, "score_gap": 0.2, "consensus": 0.15, "bm25_dense_agreement": 0.15,
               "low_spread": 0.1, "graph_support": 0.05, "low_diversity": 0.05}


@pytest.fixture()
def scratch_engine(engine: Engine) -> Iterator[Engine]:
    """A fresh database on the session's server, dropped afterwards."""
    name = f"migrations_{uuid.uuid4().hex[:12]}"
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


def test_0005_renames_graph_support_and_web_fallback_in_stored_data(scratch_engine: Engine) -> None:
    _migrate(scratch_engine, "0004")
    with scratch_engine.begin() as conn:
        conn.execute(text("INSERT INTO weights_profiles (name, version, weights, high, medium, low, active, created_by, notes) "
                          "VALUES ('tuned', 1, CAST(:w AS jsonb), 0.8, 0.6, 0.4, false, '', '')"),
                     {"w": json.dumps(OLD_WEIGHTS)})
        run_id = conn.execute(text(
            "INSERT INTO runs (query, preset, collection, source, backend, model, status, final_answer, citations, "
            "final_confidence, final_level, retrieval_confidence, components, signals, route, best_iteration, "
            "iterations_count, weights_profile, config, outcome_note, latency_ms) VALUES ('q', 'balanced', 'default', "
            "'ask', 'offline', 'm', 'pending', '', '[]', 0.5, 'LOW', 0.5, '{}', '{}', "
            "ARRAY['WEB_FALLBACK', 'ACCEPT_BEST'], 2, 2, 'tuned v1', CAST(:config AS jsonb), '', 1.0) RETURNING id"),
            {"config": json.dumps({"profile": {"name": "tuned", "weights": OLD_WEIGHTS}})}).scalar_one()
        conn.execute(text(
            "INSERT INTO run_iterations (run_id, ordinal, query_used, sub_queries, retrieval, components, raw_metrics, "
            "retrieval_confidence, confidence, level, answer, citations, gaps, decision, decision_reason, signals, "
            "latency_ms, errors) VALUES (:run, 1, 'q', '{}', '{}', '{}', CAST(:raw AS jsonb), 0.5, 0.5, 'LOW', '', "
            "'[]', '{}', 'WEB_FALLBACK', '', '{}', '{}', '[]')"),
            {"run": run_id, "raw": json.dumps({"graph_support": True, "linked_entities": ["x"]})})
        conn.execute(text("INSERT INTO run_events (run_id, seq, ts, elapsed_ms, event_type, message, data) "
                          "VALUES (:run, 1, now(), 0, 'adaptive_refinement_decision', '', "
                          "CAST('{\"decision\": \"WEB_FALLBACK\"}' AS jsonb))"), {"run": run_id})

    _migrate(scratch_engine, "0005")
    with scratch_engine.connect() as conn:
        weights = conn.execute(text("SELECT weights FROM weights_profiles WHERE name = 'tuned'")).scalar_one()
        route, config = conn.execute(text("SELECT route, config FROM runs")).one()
        raw, decision = conn.execute(text("SELECT raw_metrics, decision FROM run_iterations")).one()
        event_decision = conn.execute(text("SELECT data ->> 'decision' FROM run_events")).scalar_one()
    renamed = {("entity_support" if k == "graph_support" else k): v for k, v in OLD_WEIGHTS.items()}
    assert weights == renamed and config["profile"]["weights"] == renamed
    assert route == ["FALLBACK_SEARCH", "ACCEPT_BEST"] and decision == "FALLBACK_SEARCH" == event_decision
    assert raw == {"entity_support": True, "linked_entities": ["x"]}
    with scratch_engine.connect() as conn:  # the built-in default profile of migration 0002 too
        assert conn.execute(text("SELECT count(*) FROM weights_profiles WHERE weights ? 'graph_support'")).scalar_one() == 0

    _migrate(scratch_engine, "0004", down=True)
    with scratch_engine.connect() as conn:
        assert conn.execute(text("SELECT weights FROM weights_profiles WHERE name = 'tuned'")).scalar_one() == OLD_WEIGHTS
        assert conn.execute(text("SELECT route FROM runs")).scalar_one() == ["WEB_FALLBACK", "ACCEPT_BEST"]


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
