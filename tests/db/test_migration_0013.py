"""Migration 0013 on a scratch database: keys, queued and assessed records, their runs and
traces from before apps all land in the app "default" (keys as push keys), trace ids become
unique per app, and the way back is refused while two apps share a trace id."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError

from tests.db.test_migrations import _migrate, scratch_engine  # noqa: F401 - the fixture

_RUN = ("INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, retrieval_confidence, "
        "components, weights_profile, config, trace_id) VALUES ('q', 'external', 'external', 'm', 'pending', 0.5, 'LOW', "
        "0.5, ARRAY[0.5], 'default v1', '{}', :trace) RETURNING id")


def test_0013_puts_everything_from_before_in_the_default_app(scratch_engine: Engine) -> None:  # noqa: F811
    _migrate(scratch_engine, "0012")
    with scratch_engine.begin() as conn:
        key_id = conn.execute(text("INSERT INTO api_keys (name, key_hash, prefix) VALUES ('bot', :h, 'wb_abc') RETURNING id"),
                              {"h": "0" * 64}).scalar_one()
        run_id = conn.execute(text(_RUN), {"trace": "t-1"}).scalar_one()
        own_run = conn.execute(text(_RUN), {"trace": None}).scalar_one()  # the workbench's own: no app
        conn.execute(text("INSERT INTO run_intake (trace_id, payload, source, api_key_id, status, run_id) VALUES "
                          "('t-1', '{}', 'api', :k, 'assessed', :r), ('t-2', '{}', 'api', :k, 'queued', NULL)"),
                     {"k": key_id, "r": run_id})
        conn.execute(text("INSERT INTO otlp_traces (trace_id, api_key_id) VALUES ('a1', :k)"), {"k": key_id})
        conn.execute(text("INSERT INTO otlp_spans (trace_id, span_id) VALUES ('a1', 's1')"))

    _migrate(scratch_engine, "0013")
    with scratch_engine.begin() as conn:
        assert conn.execute(text("SELECT app, scope FROM api_keys")).one() == ("default", "push")
        assert conn.execute(text("SELECT array_agg(DISTINCT app) FROM run_intake")).scalar_one() == ["default"]
        assert conn.execute(text("SELECT id, app FROM runs ORDER BY id")).all() == [(run_id, "default"), (own_run, None)]
        assert conn.execute(text("SELECT app, trace_id FROM otlp_spans")).one() == ("default", "a1")
        # One trace id, two apps: allowed now, everywhere; twice in one app: not.
        conn.execute(text("INSERT INTO run_intake (app, trace_id, payload, source) VALUES ('other', 't-1', '{}', 'api')"))
        conn.execute(text("INSERT INTO otlp_traces (app, trace_id) VALUES ('other', 'a1')"))
        conn.execute(text("INSERT INTO otlp_spans (app, trace_id, span_id) VALUES ('other', 'a1', 's1')"))
        other_run = conn.execute(text(_RUN), {"trace": "t-1"}).scalar_one()
        conn.execute(text("UPDATE runs SET app = 'other' WHERE id = :id"), {"id": other_run})
    for clash in ("INSERT INTO run_intake (app, trace_id, payload, source) VALUES ('default', 't-1', '{}', 'api')",
                  "INSERT INTO otlp_traces (app, trace_id) VALUES ('other', 'a1')",
                  f"UPDATE runs SET app = 'other' WHERE id = {int(run_id)}",
                  "INSERT INTO api_keys (name, app, key_hash, prefix) VALUES ('x', 'no spaces allowed', 'h', 'p')",
                  "INSERT INTO api_keys (name, app, scope, key_hash, prefix) VALUES ('x', 'a', 'root', 'h', 'p')"):
        with pytest.raises(IntegrityError), scratch_engine.begin() as conn:
            conn.execute(text(clash))

    with pytest.raises(RuntimeError, match="trace ids held by more than one app"):
        _migrate(scratch_engine, "0012", down=True)
    with scratch_engine.begin() as conn:
        conn.execute(text("DELETE FROM run_intake WHERE app = 'other'"))
        conn.execute(text("DELETE FROM runs WHERE app = 'other'"))
        conn.execute(text("DELETE FROM otlp_traces WHERE app = 'other'"))
    _migrate(scratch_engine, "0012", down=True)
    with scratch_engine.connect() as conn:
        assert conn.execute(text("SELECT trace_id, span_id FROM otlp_spans")).one() == ("a1", "s1")
        assert conn.execute(text("SELECT count(*) FROM run_intake")).scalar_one() == 2
