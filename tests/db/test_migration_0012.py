"""Migration 0012 on a scratch database: closed traces' span rows become counts and ids on
the trace row (late ones counted apart), open traces keep their rows, and back again."""

from __future__ import annotations

from sqlalchemy import Engine, text

from tests.db.test_migrations import _migrate, scratch_engine  # noqa: F401 - the fixture

_SPANS = [("a" * 32, "assembled", [("r1", False), ("c1", False), ("c2", False), ("x1", True)]),
          ("b" * 32, "open", [("r2", False)])]


def test_0012_moves_closed_traces_span_rows_onto_the_trace_row(scratch_engine: Engine) -> None:  # noqa: F811
    _migrate(scratch_engine, "0011")
    with scratch_engine.begin() as conn:
        for trace_id, state, spans in _SPANS:
            conn.execute(text("INSERT INTO otlp_traces (trace_id, state) VALUES (:t, :s)"), {"t": trace_id, "s": state})
            for span_id, late in spans:
                conn.execute(text("INSERT INTO otlp_spans (trace_id, span_id, late) VALUES (:t, :s, :l)"),
                             {"t": trace_id, "s": span_id, "l": late})

    _migrate(scratch_engine, "0012")
    with scratch_engine.connect() as conn:
        traces = conn.execute(text("SELECT trace_id, spans, late_spans, span_ids FROM otlp_traces ORDER BY 1")).all()
        spans = conn.execute(text("SELECT trace_id, span_id FROM otlp_spans")).all()
    assert [(t, n, late, sorted(ids)) for t, n, late, ids in traces] == [
        ("a" * 32, 3, 1, ["c1", "c2", "r1", "x1"]), ("b" * 32, 0, 0, [])]
    assert spans == [("b" * 32, "r2")]

    _migrate(scratch_engine, "0011", down=True)
    with scratch_engine.connect() as conn:
        back = conn.execute(text("SELECT trace_id, span_id FROM otlp_spans ORDER BY 1, 2")).all()
    assert back == [("a" * 32, "c1"), ("a" * 32, "c2"), ("a" * 32, "r1"), ("a" * 32, "x1"), ("b" * 32, "r2")]
