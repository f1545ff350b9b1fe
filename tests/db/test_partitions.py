"""Chunks and postings are list-partitioned by collection: a collection's searches plan and read
only its own partitions, and a collection's partitions come and go with it."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine, text

from services.corpus.extract import SourceDocument
from services.corpus.ingest import ingest_documents
from services.corpus.stats import delete_document
from services.retrieval.search import clean_query, default_params, search, statement_values
from services.retrieval.search_sql import SQL_BY_MODE
from services.settings import Settings
from services.store import transaction

TEXTS = {
    "glaze": "Celadon glaze turns jade green in a reduction kiln firing.",
    "clay": "Stoneware clay vitrifies at high temperature in the kiln.",
    "wheel": "A potter centres clay on the wheel before throwing a bowl.",
}


def _ingest(collection: str, settings: Settings) -> int:
    ingest_documents([SourceDocument(name, name, body, name) for name, body in TEXTS.items()],
                     collection=collection, settings=settings)
    with transaction(settings) as session:
        return int(session.execute(text("SELECT id FROM collections WHERE name = :n"), {"n": collection}).scalar_one())


def _partitions(engine: Engine, parent: str) -> set[str]:
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = CAST(:parent AS regclass) AND c.relkind = 'r'"), {"parent": parent})}


def _relations_in(plan: object) -> set[str]:
    """Every table and index an EXPLAIN (FORMAT JSON) plan reads."""
    found: set[str] = set()
    if isinstance(plan, dict):
        for key in ("Relation Name", "Index Name"):
            if key in plan:
                found.add(plan[key])
        for value in plan.values():
            found |= _relations_in(value)
    elif isinstance(plan, list):
        for item in plan:
            found |= _relations_in(item)
    return found


@pytest.fixture()
def two_collections(clean_db: None, settings: Settings) -> tuple[int, int]:
    return _ingest("pottery-a", settings), _ingest("pottery-b", settings)


def test_a_collection_gets_its_partitions_and_they_go_with_it(two_collections: tuple[int, int],
                                                              engine: Engine) -> None:
    a, b = two_collections
    for parent in ("chunks", "bm25_postings"):
        assert {f"{parent}_{a}", f"{parent}_{b}"} <= _partitions(engine, parent)
    with engine.begin() as conn:
        rows = {parent: conn.execute(text(f"SELECT count(*) FROM {parent}_{a}")).scalar_one()
                for parent in ("chunks", "bm25_postings")}
        assert rows["chunks"] == len(TEXTS) and rows["bm25_postings"] > 0
        conn.execute(text("DELETE FROM collections WHERE id = :a"), {"a": a})
    for parent in ("chunks", "bm25_postings"):
        assert f"{parent}_{a}" not in _partitions(engine, parent) and f"{parent}_{b}" in _partitions(engine, parent)


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
def test_a_search_plans_only_its_own_collections_partitions(two_collections: tuple[int, int], settings: Settings,
                                                            mode: str) -> None:
    a, b = two_collections
    params = default_params(settings, mode=mode, collection="pottery-a")
    with transaction(settings) as session:
        values = statement_values(clean_query("kiln clay glaze", max_chars=100), params, session=session,
                                  settings=settings)
        plan = session.execute(text("EXPLAIN (FORMAT JSON) " + SQL_BY_MODE[mode]), values).scalar_one()
    relations = _relations_in(plan if isinstance(plan, list) else json.loads(plan))
    assert not {r for r in relations if r.endswith(f"_{b}") or f"_{b}_" in r}, relations
    assert not {"chunks", "bm25_postings"} & relations  # no unpruned parent scans
    if mode != "dense":
        assert f"bm25_postings_{a}" in relations
    if mode != "bm25":
        assert f"chunks_{a}" in relations


def test_each_partition_has_its_own_hnsw_graph_and_the_dense_leg_uses_it(two_collections: tuple[int, int],
                                                                         settings: Settings) -> None:
    a, _b = two_collections
    params = default_params(settings, mode="dense", collection="pottery-a")
    with transaction(settings) as session:
        # Three rows: a scan and a sort would win on cost; what matters is which index is there to use.
        session.execute(text("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off"))
        values = statement_values("kiln", params, session=session, settings=settings)
        plan = session.execute(text("EXPLAIN (FORMAT JSON) " + SQL_BY_MODE["dense"]), values).scalar_one()
        hnsw = session.execute(text(
            "SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am am ON am.oid = c.relam WHERE am.amname = 'hnsw' AND i.indrelid = CAST(:t AS regclass)"),
            {"t": f"chunks_{a}"}).scalar_one()
    assert hnsw in _relations_in(plan if isinstance(plan, list) else json.loads(plan))


def test_searches_in_two_collections_with_the_same_documents_keep_to_their_own(two_collections: tuple[int, int],
                                                                               engine: Engine,
                                                                               settings: Settings) -> None:
    a, b = two_collections
    with engine.connect() as conn:
        owner = dict(conn.execute(text("SELECT id, collection_id FROM chunks")).all())
    results = {}
    for name, cid in (("pottery-a", a), ("pottery-b", b)):
        hits = search("kiln clay", default_params(settings, mode="hybrid", collection=name), settings=settings).hits
        assert hits and {owner[h.chunk_id] for h in hits} == {cid}
        results[name] = [(h.external_id, h.bm25_score, h.dense_similarity) for h in hits]
    assert results["pottery-a"] == results["pottery-b"]  # same documents, same statistics: same scores


def test_removing_a_document_removes_its_postings(two_collections: tuple[int, int], engine: Engine,
                                                  settings: Settings) -> None:
    a, b = two_collections
    delete_document("glaze", "pottery-a", settings=settings)
    with engine.connect() as conn:
        orphans = conn.execute(text(
            "SELECT count(*) FROM bm25_postings p WHERE NOT EXISTS "
            "(SELECT FROM chunks c WHERE c.id = p.chunk_id AND c.collection_id = p.collection_id)")).scalar_one()
        left = {cid: conn.execute(text(f"SELECT count(*) FROM chunks_{cid}")).scalar_one() for cid in (a, b)}
    assert orphans == 0 and left == {a: len(TEXTS) - 1, b: len(TEXTS)}
    assert "glaze" not in {h.external_id for h in search("celadon jade", default_params(
        settings, mode="bm25", collection="pottery-a"), settings=settings).hits}
