"""Migration 0016 on a scratch database: a store's runs from before, with everything that refers
to them, are the same runs after runs becomes partitioned by month, and again after the way back;
months with runs get their tables, ids go on from the same sequence, and what the foreign keys
did (removing a run's rows, refusing a second trace id of one app) still happens."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from tests.db.test_migrations import _migrate, scratch_engine  # noqa: F401 - the fixture

_RUN = ("INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, retrieval_confidence, "
        "components, weights_profile, config, trace_id, app, created_at, reviewed_at) VALUES (:q, 'external', 'external', "
        "'m', :status, 0.5, 'LOW', 0.5, ARRAY[0.5], 'default v1', CAST(:config AS jsonb), :trace, 'default', :at, "
        ":reviewed) RETURNING id")
_CHILDREN = (
    "INSERT INTO run_iterations (run_id, ordinal, query_used, retrieval, components, raw_metrics, retrieval_confidence, "
    "confidence, level, decision) VALUES (:r, 0, 'q', '{\"hits\": []}', ARRAY[0.5], '{}', 0.5, 0.5, 'LOW', 'COMPLETE')",
    "INSERT INTO run_events (run_id, seq, ts, elapsed_ms, event_type, message) VALUES (:r, 1, now(), 0, 'e', '')",
    "INSERT INTO llm_calls (run_id, backend, model, operation, prompt_version, temperature, outcome) "
    "VALUES (:r, 'offline', 'm', 'generate', 'v1', 0, 'ok')",
    "INSERT INTO run_intake (app, trace_id, payload, source, status, run_id) VALUES ('default', :t, '{}', 'api', 'assessed', :r)",
    "INSERT INTO review_history (run_id, version, action, reviewer, previous_status, new_status) "
    "VALUES (:r, 1, 'approve', 'ana', 'pending', 'approved')",
)
_SNAPSHOT = {
    "runs": "SELECT * FROM runs ORDER BY id",
    "run_iterations": "SELECT * FROM run_iterations ORDER BY id",
    "run_events": "SELECT * FROM run_events ORDER BY id",
    "llm_calls": "SELECT * FROM llm_calls ORDER BY id",
    "run_intake": "SELECT * FROM run_intake ORDER BY id",
    "review_history": "SELECT * FROM review_history ORDER BY id",
}
_BEFORE = "0015"


def _snapshot(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    with engine.connect() as conn:
        return {name: [tuple(row) for row in conn.execute(text(sql))] for name, sql in _SNAPSHOT.items()}


def _keys_to_runs(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM pg_constraint WHERE confrelid = 'runs'::regclass")).scalar_one())


def test_0016_keeps_every_run_and_what_refers_to_it_and_gives_each_month_its_table(
        scratch_engine: Engine) -> None:  # noqa: F811
    _migrate(scratch_engine, _BEFORE)
    with scratch_engine.begin() as conn:
        ids = []
        for i, (at, status) in enumerate([("2025-12-31 23:59:59+00", "approved"), ("2026-06-15 10:00+00", "pending"),
                                          ("2026-06-30 23:00+00", "flagged")]):
            run_id = conn.execute(text(_RUN), {"q": f"q{i}", "status": status, "trace": f"t-{i}", "at": at,
                                               "config": '{"reflection_min_score": 0.65}',
                                               "reviewed": at if status != "pending" else None}).scalar_one()
            for statement in _CHILDREN:
                conn.execute(text(statement), {"r": run_id, "t": f"t-{i}"})
            ids.append(run_id)
        rollup_before = conn.execute(text("SELECT * FROM document_day_rollup ORDER BY 1, 2, 3, 4, 5, 6")).all()
    before = _snapshot(scratch_engine)
    assert _keys_to_runs(scratch_engine) == 5

    _migrate(scratch_engine, "0016")
    assert _snapshot(scratch_engine) == before  # every column of every row, generated ones included
    assert _keys_to_runs(scratch_engine) == 0
    with scratch_engine.begin() as conn:
        where = dict(conn.execute(text("SELECT id, tableoid::regclass::text FROM runs")).all())
        assert where == {ids[0]: "runs_2025_12", ids[1]: "runs_2026_06", ids[2]: "runs_2026_06"}
        assert conn.execute(text("SELECT relkind FROM pg_class WHERE relname = 'runs'")).scalar() == "p"
        assert conn.execute(text("SELECT * FROM document_day_rollup ORDER BY 1, 2, 3, 4, 5, 6")).all() == rollup_before
        new = conn.execute(text(_RUN), {"q": "new", "status": "pending", "trace": "t-new", "at": "2026-06-20 00:00+00",
                                        "config": "{}", "reviewed": None}).scalar_one()
        assert new > max(ids)
        conn.execute(text("DELETE FROM runs WHERE id = :r"), {"r": ids[1]})  # its rows go, as by the keys' cascade
        assert [conn.execute(text(f"SELECT count(*) FROM {t} WHERE run_id = :r"), {"r": ids[1]}).scalar()
                for t in ("run_iterations", "run_events", "llm_calls", "review_history")] == [0, 0, 0, 0]
        assert conn.execute(text("SELECT run_id FROM run_intake WHERE trace_id = 't-1'")).scalar() is None
    with pytest.raises(IntegrityError, match="runs_trace_id"), scratch_engine.begin() as conn:
        conn.execute(text(_RUN), {"q": "again", "status": "pending", "trace": "t-0", "at": "2026-09-01 00:00+00",
                                  "config": "{}", "reviewed": None})
    after = _snapshot(scratch_engine)

    _migrate(scratch_engine, _BEFORE, down=True)
    assert _snapshot(scratch_engine) == after
    assert _keys_to_runs(scratch_engine) == 5
    with scratch_engine.connect() as conn:
        assert conn.execute(text("SELECT relkind FROM pg_class WHERE relname = 'runs'")).scalar() == "r"
        assert conn.execute(text("SELECT count(*) FROM pg_class WHERE relname LIKE 'runs\\_2%'")).scalar() == 0
        assert conn.execute(text("SELECT indisunique FROM pg_index WHERE indexrelid = 'runs_trace_id'::regclass")).scalar()
    _migrate(scratch_engine, "head")
