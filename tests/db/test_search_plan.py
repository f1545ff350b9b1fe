"""The BM25 leg's plan grows with the postings of the query's terms, never with their square."""

from __future__ import annotations

import json

from sqlalchemy import text

from services.corpus.extract import SourceDocument
from services.corpus.ingest import ingest_documents
from services.retrieval.search import clean_query, default_params, statement_values
from services.retrieval.search_sql import BM25_SQL
from services.settings import Settings
from services.store import transaction

# Every chunk holds the query's words, so MaxScore keeps every chunk a survivor to complete.
TEXTS = {f"kiln-{i}": f"Kiln {i}: the glaze on stoneware clay fires to jade green, batch {i}." for i in range(40)}


def _pairwise_joins_of_survivors(plan: object) -> list[str]:
    """The join filters of an EXPLAIN (FORMAT JSON) plan's joins that read the survivors CTE
    directly: a join with a filter compares row pairs."""
    found: list[str] = []
    if isinstance(plan, dict):
        if "Join Filter" in plan and any(child.get("CTE Name") == "survivors" for child in plan.get("Plans", [])):
            found.append(plan["Join Filter"])
        for value in plan.values():
            found += _pairwise_joins_of_survivors(value)
    elif isinstance(plan, list):
        for item in plan:
            found += _pairwise_joins_of_survivors(item)
    return found


def test_survivors_and_completions_are_added_without_a_pairwise_join(clean_db: None, settings: Settings) -> None:
    # The planner cannot estimate the CTEs' row counts, so a join of survivors with their
    # completions became a nested loop over every pair: at a million chunks, 13 s of 13.5.
    ingest_documents([SourceDocument(name, name, body, name) for name, body in TEXTS.items()],
                     collection="kilns", settings=settings)
    params = default_params(settings, mode="bm25", k=10, collection="kilns")
    with transaction(settings) as session:
        values = statement_values(clean_query("glaze stoneware clay kiln jade green", max_chars=200), params,
                                  session=session, settings=settings, query_vector=None)
        plan = session.execute(text("EXPLAIN (FORMAT JSON) " + BM25_SQL), values).scalar_one()
    assert "survivors" in json.dumps(plan)  # the MaxScore steps are there to check
    assert _pairwise_joins_of_survivors(plan) == []
