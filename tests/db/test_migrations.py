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


_CORPUS_0008 = (
    "INSERT INTO collections (name) VALUES ('manuals')",
    "INSERT INTO documents (collection_id, external_id, content_hash) SELECT c.id, c.name || '-' || g, 'h' "
    "FROM collections c CROSS JOIN generate_series(1, 3) g",
    "INSERT INTO chunks (document_id, collection_id, ordinal, text, token_count, embedding) "
    "SELECT d.id, d.collection_id, 0, 'pump ' || d.external_id, 2, "
    "CAST((SELECT array_agg(sin(d.id * 7 + i)) FROM generate_series(1, 384) i) AS vector) FROM documents d",
    "INSERT INTO bm25_terms (collection_id, term, df, max_tf, min_dl) "
    "SELECT c.id, 'pump', 3, 1, 2 FROM collections c",
    "INSERT INTO bm25_postings (term_id, chunk_id, tf, dl) "
    "SELECT t.id, ch.id, 1, 2 FROM chunks ch JOIN bm25_terms t ON t.collection_id = ch.collection_id",
    "INSERT INTO bm25_stats (collection_id, n_chunks, total_dl) SELECT c.id, 3, 6 FROM collections c",
)


def test_0009_partitions_existing_chunks_and_postings_by_collection_and_keeps_them_searchable(
        scratch_engine: Engine) -> None:
    from services.retrieval.search_sql import SQL_BY_MODE

    _migrate(scratch_engine, "0008")
    with scratch_engine.begin() as conn:
        for statement in _CORPUS_0008:
            conn.execute(text(statement))
        chunks_before = conn.execute(text("SELECT id, collection_id, text FROM chunks ORDER BY id")).all()
        postings_before = conn.execute(text("SELECT term_id, chunk_id, tf, dl FROM bm25_postings ORDER BY 1, 2")).all()
        collections = dict(conn.execute(text("SELECT name, id FROM collections")).all())
    _migrate(scratch_engine, "0009")
    manuals = collections["manuals"]
    with scratch_engine.begin() as conn:
        assert conn.execute(text("SELECT id, collection_id, text FROM chunks ORDER BY id")).all() == chunks_before
        assert conn.execute(text("SELECT term_id, chunk_id, tf, dl FROM bm25_postings ORDER BY 1, 2")).all() == postings_before
        assert conn.execute(text(f"SELECT count(*) FROM chunks_{manuals}")).scalar_one() == 3
        assert conn.execute(text(f"SELECT count(*) FROM bm25_postings_{manuals}")).scalar_one() == 3
        values = {"cid": manuals, "k": 5, "depth": 5, "k1": 1.2, "b": 0.75, "rrf_k": 60.0, "w_bm25": 1.0,
                  "w_dense": 1.0, "terms": ["pump"], "embedding": None, "plan_mode": "auto"}
        conn.execute(text("SELECT set_config('hnsw.ef_search', '64', true)"))
        vector = conn.execute(text("SELECT embedding FROM chunks WHERE text = 'pump manuals-2'")).scalar_one()
        nearest = conn.execute(text(SQL_BY_MODE["dense"]), {**values, "embedding": vector}).mappings().first()
        assert nearest is not None and nearest["external_id"] == "manuals-2"
        # A collection created now gets its partitions; ids keep coming from the same sequence.
        conn.execute(text("INSERT INTO collections (name) VALUES ('tickets')"))
        new = conn.execute(text("SELECT id FROM collections WHERE name = 'tickets'")).scalar_one()
        document = conn.execute(text(f"INSERT INTO documents (collection_id, external_id, content_hash) "
                                     f"VALUES ({new}, 't', 'h') RETURNING id")).scalar_one()
        chunk = conn.execute(text("INSERT INTO chunks (document_id, collection_id, ordinal, text, token_count, embedding) "
                                  "VALUES (:d, :c, 0, 'x', 1, :v) RETURNING id"),
                             {"d": document, "c": new, "v": vector}).scalar_one()
        assert chunk > max(row.id for row in chunks_before)
        assert conn.execute(text(f"SELECT count(*) FROM chunks_{new}")).scalar_one() == 1
    _migrate(scratch_engine, "head")  # today's BM25 statement reads what later migrations add (0019's bounds)
    with scratch_engine.begin() as conn:
        found = conn.execute(text(SQL_BY_MODE["bm25"]), values).mappings().all()
        assert sorted(row["external_id"] for row in found) == ["manuals-1", "manuals-2", "manuals-3"]
    _migrate(scratch_engine, "0008", down=True)
    with scratch_engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM pg_inherits")).scalar_one() == 0
        assert conn.execute(text("SELECT id, collection_id, text FROM chunks WHERE id <> :c ORDER BY id"),
                            {"c": chunk}).all() == chunks_before
        assert conn.execute(text("SELECT term_id, chunk_id, tf, dl FROM bm25_postings ORDER BY 1, 2")).all() == postings_before


def test_0019_derives_each_terms_tf_and_shortest_chunk_pairs_from_its_postings(scratch_engine: Engine) -> None:
    _migrate(scratch_engine, "0018")
    with scratch_engine.begin() as conn:
        for statement in _CORPUS_0008[:3]:
            conn.execute(text(statement))
        cid = conn.execute(text("SELECT id FROM collections WHERE name = 'manuals'")).scalar_one()
        chunks = conn.execute(text("SELECT id FROM chunks WHERE collection_id = :c ORDER BY id"), {"c": cid}).scalars().all()
        conn.execute(text("INSERT INTO bm25_terms (collection_id, term, df, max_tf, min_dl) "
                          "VALUES (:c, 'pump', 3, 3, 4), (:c, 'gone', 0, 2, 5)"), {"c": cid})
        pump = conn.execute(text("SELECT id FROM bm25_terms WHERE term = 'pump'")).scalar_one()
        # tf 1 in chunks of 4 and 9 words, tf 3 in one of 12: the bound 0004 kept (tf 3 over 4
        # words) is a pair no chunk holds.
        for chunk, tf, dl in zip(chunks, (1, 1, 3), (9, 4, 12), strict=True):
            conn.execute(text("INSERT INTO bm25_postings (term_id, collection_id, chunk_id, tf, dl) "
                              "VALUES (:t, :c, :chunk, :tf, :dl)"), {"t": pump, "c": cid, "chunk": chunk, "tf": tf, "dl": dl})
    _migrate(scratch_engine, "0019")
    with scratch_engine.begin() as conn:
        pairs = dict(conn.execute(text("SELECT term, (impact_tf, impact_dl)::text FROM bm25_terms")).all())
        assert pairs == {"pump": '("{1,3}","{4,12}")', "gone": '({},{})'}
    _migrate(scratch_engine, "0018", down=True)
    with scratch_engine.begin() as conn:
        assert dict(conn.execute(text("SELECT term, (max_tf, min_dl)::text FROM bm25_terms")).all()) == {
            "pump": "(3,4)", "gone": "(0,0)"}


def test_0020_sets_the_iteration_delete_triggers_aside_while_retention_prunes_and_back(scratch_engine: Engine) -> None:
    from services.review.retention import PRUNING_SETTING

    def guarded() -> dict[str, bool]:
        with scratch_engine.begin() as conn:
            return {name: PRUNING_SETTING in definition for name, definition in conn.execute(text(
                "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                "WHERE tgrelid = 'run_iterations'::regclass AND tgname LIKE '%iterations_delete'"))}

    _migrate(scratch_engine, "0020")
    assert guarded() == {"document_day_rollup_iterations_delete": True, "document_run_index_iterations_delete": True}
    _migrate(scratch_engine, "0019", down=True)
    assert guarded() == {"document_day_rollup_iterations_delete": False, "document_run_index_iterations_delete": False}
