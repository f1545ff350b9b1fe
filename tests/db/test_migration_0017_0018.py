"""Migrations 0017 and 0018 on a scratch database holding runs from before: the upgrade fills
run_matrix_rows and document_run_index from the stored runs (the Tuning matrix and the drill-down
then read what the runs give), and the way back removes them and leaves the rollup working."""

from __future__ import annotations

import json

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from services.review.document_trends_check import document_runs_from_runs
from services.review.documents import document_runs
from services.scoring.run_matrix import load_run_matrix
from tests.db.test_migrations import _migrate, scratch_engine  # noqa: F401 - the fixture

_RUN = ("INSERT INTO runs (query, preset, backend, model, status, final_answer, citations, final_confidence, final_level, "
        "retrieval_confidence, components, signals, best_iteration, weights_profile, config, created_at) "
        "VALUES (:q, 'balanced', 'offline', 'm', :status, 'an answer', CAST(:citations AS jsonb), :confidence, 'LOW', 0.5, "
        "ARRAY[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], CAST(:signals AS jsonb), 1, 'default v1', '{}', :at) RETURNING id")
_ITERATION = ("INSERT INTO run_iterations (run_id, ordinal, query_used, retrieval, components, raw_metrics, "
              "retrieval_confidence, confidence, level, decision) VALUES (:r, 1, 'q', CAST(:retrieval AS jsonb), "
              "ARRAY[0.5], '{}', 0.5, 0.5, 'LOW', 'COMPLETE')")


def _hits(*docs: str) -> str:
    return json.dumps({"hits": [{"external_id": d, "document_id": 1, "rank": rank, "title": d}
                                for rank, d in enumerate(docs, start=1)]})


def test_the_upgrade_fills_both_from_stored_runs_and_the_way_back_removes_them(
        scratch_engine: Engine) -> None:  # noqa: F811
    _migrate(scratch_engine, "0016")
    with scratch_engine.begin() as conn:
        ids = []
        for i, (at, docs, cited) in enumerate([("2026-05-03 10:00+00", ("a", "b"), "a"),
                                               ("2026-06-15 10:00+00", ("b",), "z"),
                                               ("2026-06-20 10:00+00", ("b", "a", "b"), "")]):
            citations = json.dumps([{"external_id": cited}] if cited else [])
            run_id = conn.execute(text(_RUN), {"q": f"q{i}", "status": ["pending", "approved", "flagged"][i],
                                               "citations": citations, "confidence": 0.2 * (i + 1), "at": at,
                                               "signals": json.dumps({"reflection": 0.9, "grade": 0.5})}).scalar_one()
            conn.execute(text(_ITERATION), {"r": run_id, "retrieval": _hits(*docs)})
            ids.append(run_id)

    _migrate(scratch_engine, "head")
    with Session(scratch_engine) as session:
        matrix = load_run_matrix(session=session)
        assert matrix.run_ids.tolist() == ids and matrix.statuses.tolist() == ["pending", "approved", "flagged"]
        assert matrix.stored_confidence.tolist() == [0.2, 0.4, 0.6000000000000001]
        assert matrix.components[0].tolist() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
        assert matrix.reflection.tolist() == [0.9] * 3 and matrix.labels.tolist() == [-1, 1, 0]
        for doc in ("a", "b", "z"):
            kept = document_runs(doc, collection="default", session=session)
            assert kept == document_runs_from_runs(doc, collection="default", session=session) and kept
        assert [(r.run_id, r.best_rank, r.cited) for r in document_runs("b", collection="default", session=session)] \
            == [(ids[2], 1, False), (ids[1], 1, False), (ids[0], 2, False)]

    _migrate(scratch_engine, "0016", down=True)
    with scratch_engine.begin() as conn:
        assert conn.execute(text("SELECT to_regclass('run_matrix_rows'), to_regclass('document_run_index')")).one() \
            == (None, None)
        before = conn.execute(text("SELECT sum(runs) FROM document_day_rollup WHERE external_id = 'b'")).scalar()
        run_id = conn.execute(text(_RUN), {"q": "after", "status": "pending", "citations": "[]", "confidence": 0.5,
                                           "at": "2026-06-21 10:00+00", "signals": "{}"}).scalar_one()
        conn.execute(text(_ITERATION), {"r": run_id, "retrieval": _hits("b")})
        assert conn.execute(text("SELECT sum(runs) FROM document_day_rollup WHERE external_id = 'b'")).scalar() \
            == before + 1
    _migrate(scratch_engine, "head")
