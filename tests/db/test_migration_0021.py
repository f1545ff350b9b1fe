"""Migration 0021 on a scratch database: a store's iterations, events, LLM calls and review history
from before are the same rows after those tables become partitioned by their run's month, each in
its run's month's table, and again after the way back, with their keys, indexes and triggers;
the Document trends rollup is not counted twice by the copy."""

from __future__ import annotations

import json

from sqlalchemy import Engine, text

from tests.db.test_migrations import _migrate, scratch_engine  # noqa: F401 - the fixture

CHILDREN = ("review_history", "run_iterations", "run_events", "llm_calls")
_RUN = ("INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, retrieval_confidence, "
        "components, weights_profile, config, created_at) VALUES (:q, 'balanced', 'offline', 'm', 'pending', 0.5, "
        "'LOW', 0.5, ARRAY[0.5], 'default v1', '{}', :at) RETURNING id")
_CHILD_ROWS = (
    "INSERT INTO run_iterations (run_id, ordinal, query_used, retrieval, components, raw_metrics, retrieval_confidence, "
    "confidence, level, decision) VALUES (:r, 0, 'q', CAST(:hits AS jsonb), ARRAY[0.5], '{}', 0.5, 0.5, 'LOW', "
    "'COMPLETE')",
    "INSERT INTO run_events (run_id, seq, ts, elapsed_ms, event_type, message) VALUES (:r, 1, now(), 0, 'e', '')",
    "INSERT INTO llm_calls (run_id, backend, model, operation, prompt_version, temperature, outcome) "
    "VALUES (:r, 'offline', 'm', 'generate', 'v1', 0, 'ok')",
    "INSERT INTO review_history (run_id, version, action, reviewer, previous_status, new_status) "
    "VALUES (:r, 1, 'approve', 'ana', 'pending', 'approved')",
)
_HITS = json.dumps({"hits": [{"external_id": "pump.md", "document_id": 1, "rank": 1, "title": "Pump"}]})
# Every column the tables had before (run_created_at is the migration's).
_COLUMNS = {
    "review_history": "id, run_id, version, action, reviewer, previous_status, new_status, flag_reason, "
                      "corrected_answer, comment, created_at",
    "run_iterations": "id, run_id, ordinal, query_used, sub_queries, retrieval, components, raw_metrics, "
                      "retrieval_confidence, confidence, level, crag, answer, citations, reflection, grade, verdict, "
                      "gaps, decision, decision_reason, signals, latency_ms, errors",
    "run_events": "id, run_id, seq, ts, elapsed_ms, event_type, message, data",
    "llm_calls": "id, run_id, iteration, backend, model, operation, prompt_version, temperature, input_tokens, "
                 "output_tokens, latency_ms, cached, outcome, error, cache_key, created_at",
}
_ROLLUP = "SELECT * FROM document_day_rollup ORDER BY 1, 2, 3, 4"


def _snapshot(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    with engine.connect() as conn:
        return {t: [tuple(r) for r in conn.execute(text(f"SELECT {_COLUMNS[t]} FROM {t} ORDER BY id"))] for t in CHILDREN}


def _schema(engine: Engine) -> dict[str, set[tuple[str, str]]]:
    """Per table: its keys, indexes and triggers, by name and definition."""
    with engine.connect() as conn:
        return {t: {tuple(r) for r in conn.execute(text(  # type: ignore[misc]
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = CAST(:t AS regclass) "
            "AND contype IN ('p', 'u') UNION ALL "
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = CAST(:t AS regclass) "
            "UNION ALL SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = CAST(:t AS regclass) "
            "AND NOT tgisinternal"), {"t": t})} for t in CHILDREN}


def _names(schema: dict[str, set[tuple[str, str]]]) -> dict[str, set[str]]:
    return {t: {name for name, _ in parts} for t, parts in schema.items()}


def test_0021_puts_each_row_in_its_runs_month_and_back(scratch_engine: Engine) -> None:  # noqa: F811
    _migrate(scratch_engine, "0020")
    with scratch_engine.begin() as conn:
        conn.execute(text("SELECT runs_month_partition_add(m) FROM unnest(CAST(:m AS timestamptz[])) m"),
                     {"m": ["2026-06-01 00:00+00", "2026-07-01 00:00+00"]})
        runs = {}
        for at in ("2026-06-30 23:59:59+00", "2026-07-01 00:00+00", "2031-01-15 00:00+00"):  # 2031: runs_default
            runs[at] = conn.execute(text(_RUN), {"q": at, "at": at}).scalar_one()
            for statement in _CHILD_ROWS:
                conn.execute(text(statement), {"r": runs[at], "hits": _HITS})
        conn.execute(text(_CHILD_ROWS[2]), {"r": 987654})  # an LLM call of a run that does not exist
        rollup = conn.execute(text(_ROLLUP)).all()
        drop_before = conn.execute(text("SELECT pg_get_functiondef('runs_month_drop(timestamptz)'::regprocedure)")).scalar()
    before, schema_before = _snapshot(scratch_engine), _schema(scratch_engine)
    assert rollup and all(before.values())

    _migrate(scratch_engine, "0021")
    upgraded = _snapshot(scratch_engine)
    assert upgraded == {**before, "llm_calls": [r for r in before["llm_calls"] if r[1] != 987654]}
    schema = _schema(scratch_engine)
    assert all(_names(schema)[t] >= _names(schema_before)[t] for t in CHILDREN)  # every key, index and trigger
    assert ("run_iterations_run_id_ordinal_key", "UNIQUE (run_id, ordinal, run_created_at)") in schema["run_iterations"]
    assert ("llm_calls_pkey", "PRIMARY KEY (id, run_created_at)") in schema["llm_calls"]
    with scratch_engine.begin() as conn:
        assert conn.execute(text(_ROLLUP)).all() == rollup  # the copy was not counted again
        for t in CHILDREN:
            assert conn.execute(text("SELECT relkind FROM pg_class WHERE relname = :t"), {"t": t}).scalar() == "p"
            placed = dict(conn.execute(text(f"SELECT c.run_id, c.tableoid::regclass::text FROM {t} c "
                                            f"JOIN runs r ON r.id = c.run_id AND r.created_at = c.run_created_at")).all())
            assert placed == {runs["2026-06-30 23:59:59+00"]: f"{t}_2026_06", runs["2026-07-01 00:00+00"]: f"{t}_2026_07",
                              runs["2031-01-15 00:00+00"]: f"{t}_default"}
        # The month's table made for 2031 takes the runs' and the children's rows out of the defaults.
        conn.execute(text("SELECT runs_month_partition_add('2031-01-01')"))
        assert conn.execute(text("SELECT tableoid::regclass::text FROM run_events WHERE run_id = :r"),
                            {"r": runs["2031-01-15 00:00+00"]}).scalar() == "run_events_2031_01"
        new = conn.execute(text(_RUN), {"q": "new", "at": "2026-07-02 00:00+00"}).scalar_one()
        conn.execute(text("INSERT INTO run_events (run_id, run_created_at, seq, ts, elapsed_ms, event_type, message) "
                          "VALUES (:r, '2026-07-02 00:00+00', 1, now(), 0, 'e', '')"), {"r": new})
        assert conn.execute(text("SELECT max(id) FROM run_events")).scalar() == len(before["run_events"]) + 1
    after = _snapshot(scratch_engine)

    _migrate(scratch_engine, "0020", down=True)
    assert _snapshot(scratch_engine) == after
    assert _schema(scratch_engine) == schema_before
    with scratch_engine.connect() as conn:
        assert all(conn.execute(text("SELECT relkind FROM pg_class WHERE relname = :t"), {"t": t}).scalar() == "r"
                   for t in CHILDREN)
        assert conn.execute(text("SELECT count(*) FROM pg_class WHERE relname ~ "
                                 "'^(review_history|run_iterations|run_events|llm_calls)_(default|[0-9]{4}_[0-9]{2})$'")
                            ).scalar() == 0  # no month table left
        assert conn.execute(text(
            "SELECT pg_get_functiondef('runs_month_drop(timestamptz)'::regprocedure)")).scalar() == drop_before
    _migrate(scratch_engine, "head")
