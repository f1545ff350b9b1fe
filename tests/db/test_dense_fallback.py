"""The dense leg falls back to an exact scan when HNSW returns fewer rows than the collection
holds (an HNSW graph that has seen deletes can lose live rows), and only then."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import text

from services.corpus.extract import SourceDocument
from services.corpus.ingest import ingest_documents
from services.retrieval import embedding
from services.retrieval.search import default_params, search_in_session, statement_values
from services.retrieval.search_sql import SQL_BY_MODE
from services.settings import Settings
from services.store import transaction

TEXTS = {
    "srvo-062": "SRVO-062 means the pulsecoder backup battery voltage dropped and the multi-turn count was lost.",
    "grease": "Replace the J2 reducer grease every 20,000 hours or 4 years.",
    "dsz": "DSZ dual-check safety zones limit the robot to a configured box.",
}
QUERY = "What does SRVO-062 mean?"
# On three rows a scan and a sort win on cost; these make the planner take the HNSW index, as
# it does on a collection of any size.
_USE_THE_INDEX = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off"
# An index that gives one row at most: HNSW's candidate list is ef_search long, and without
# iterative scans it does not look further.
_ONE_ROW_INDEX = f"{_USE_THE_INDEX}; SET LOCAL hnsw.ef_search = 1; SET LOCAL hnsw.iterative_scan = off"


@pytest.fixture()
def three_chunks(clean_db: None, settings: Settings) -> None:
    ingest_documents([SourceDocument(name, name, body, name) for name, body in TEXTS.items()], settings=settings)


def _exact_order(session, settings: Settings) -> list[str]:  # type: ignore[no-untyped-def]
    """The documents by cosine similarity to QUERY, computed in numpy from the stored vectors."""
    # This test's documents only: the session's SQuAD collection stays between tests.
    rows = session.execute(text("SELECT d.external_id, c.embedding::text FROM chunks c "
                                "JOIN documents d ON d.id = c.document_id WHERE d.external_id = ANY(:names)"),
                           {"names": list(TEXTS)}).all()
    query = np.asarray(embedding.encode(settings.embedding_model, [QUERY])[0])
    sims = {name: float(np.dot(query, v := np.asarray(json.loads(vec))) / np.linalg.norm(query) / np.linalg.norm(v))
            for name, vec in rows}
    return sorted(sims, key=sims.__getitem__, reverse=True)


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_a_short_index_gives_way_to_an_exact_scan(three_chunks: None, settings: Settings, mode: str) -> None:
    params = default_params(settings, mode=mode)
    with transaction(settings) as session:
        session.execute(text(_ONE_ROW_INDEX))
        values = statement_values(QUERY, params, session=session, settings=settings)
        from_index = session.execute(text(
            "SELECT id FROM chunks WHERE collection_id = :cid ORDER BY embedding <=> CAST(:embedding AS vector) LIMIT 50"),
            values).all()
        # The premise: the index alone comes up short (one row, or none when the one candidate
        # it looked at is an earlier test's deleted chunk, still in the graph).
        assert len(from_index) < len(TEXTS)
        result = search_in_session(QUERY, params, session=session, settings=settings)
        expected = _exact_order(session, settings)
    dense_order = sorted((h for h in result.hits if h.dense_rank), key=lambda h: h.dense_rank)  # type: ignore[arg-type, return-value]
    assert [h.external_id for h in dense_order] == expected
    assert expected[0] == "srvo-062"
    if mode == "hybrid":  # the chunk the question is about leads both legs
        assert result.hits[0].external_id == "srvo-062" and result.hits[0].bm25_rank == 1 == result.hits[0].dense_rank


def _nodes(plan: object):  # type: ignore[no-untyped-def]
    if isinstance(plan, dict):
        yield plan
        for child in plan.get("Plans", []):
            yield from _nodes(child)
    elif isinstance(plan, list):
        for item in plan:
            yield from _nodes(item.get("Plan", item))


def test_a_complete_index_never_runs_the_exact_scan(three_chunks: None, settings: Settings) -> None:
    params = default_params(settings, mode="dense")
    with transaction(settings) as session:
        session.execute(text(_USE_THE_INDEX))
        values = statement_values(QUERY, params, session=session, settings=settings)
        plan = session.execute(text("EXPLAIN (ANALYZE, FORMAT JSON) " + SQL_BY_MODE["dense"]), values).scalar_one()
    nodes = list(_nodes(plan if isinstance(plan, list) else json.loads(plan)))
    # The exact scan is the sort whose key is the distance `+ 0` (the form no index serves).
    exact_sorts = [n for n in nodes if n.get("Node Type") == "Sort" and "+ '0'" in " ".join(n.get("Sort Key", []))]
    from_index = [n for n in nodes if n.get("Node Type") == "Index Scan" and "Order By" in n]  # HNSW orders
    assert len(exact_sorts) == 1 and exact_sorts[0]["Actual Loops"] == 0, exact_sorts
    assert len(from_index) == 1 and from_index[0]["Actual Rows"] == len(TEXTS), from_index
