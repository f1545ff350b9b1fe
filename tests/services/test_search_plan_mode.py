"""A search of a collection up to GENERIC_PLAN_MAX_CHUNKS plans its statement once per
connection (plan_cache_mode force_generic_plan for that statement) and gives its caller's
transaction back the plan_cache_mode it had; the hits are the same either way. On the real
store, the session's SQuAD collection."""

from __future__ import annotations

import pytest
from sqlalchemy import text

import services.retrieval.search as search_module
from services.retrieval.search import default_params, search_in_session
from services.store import transaction


def _bm25_hits(queries, collection, settings):  # type: ignore[no-untyped-def]
    params = default_params(settings, mode="bm25", k=10, collection=collection)
    with transaction(settings) as session:
        session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
        hits = [[(h.chunk_id, round(float(h.bm25_score or 0.0), 9)) for h in
                 search_in_session(q, params, session=session, settings=settings).hits]
                for q in queries * 2]  # past psycopg's five runs: the statement is prepared
        assert session.execute(text("SHOW plan_cache_mode")).scalar_one() == "force_custom_plan"
    return hits


def test_the_generic_plan_finds_what_custom_plans_find_and_the_caller_keeps_its_mode(
        squad_collection, settings, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    queries = ["Who ruled the duchy of Normandy?", "When were the Normans in Normandy?", "What is the capital of France?",
               "Normandy Normandy Normans normans", "zqxjv wkpfh"]  # the last finds nothing
    generic = _bm25_hits(queries, squad_collection, settings)
    monkeypatch.setattr(search_module, "GENERIC_PLAN_MAX_CHUNKS", -1)  # custom plans, as before
    assert _bm25_hits(queries, squad_collection, settings) == generic
    assert all(generic[:4]) and generic[4] == []
