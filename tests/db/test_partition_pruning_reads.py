"""The reads outside the search bind their collection's id too: the answer stage's chunk vectors,
the pseudo-question sample and its document frequencies, the chunk count an ingest's
recalibration decision reads, and the Corpus page's documents list each plan only the
collection's own partitions (or no chunk table at all), never every collection's."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine, TextClause, text

from services.answering.stages import CHUNK_VECTORS_SQL
from services.corpus.stats import DOCUMENTS_SQL, document_page_values, list_documents
from services.scoring.pseudo_queries import DF_SQL, SAMPLE_SQL, sample_pseudo_queries
from services.scoring.recalibration import CHUNKS_SQL, list_collections
from services.settings import Settings
from services.store import transaction
from tests.db.test_partitions import _ingest, _relations_in


@pytest.fixture()
def two_collections(clean_db: None, settings: Settings) -> tuple[int, int]:
    return _ingest("pottery-a", settings), _ingest("pottery-b", settings)


def _plan(settings: Settings, sql: str | TextClause, values: dict[str, object]) -> set[str]:
    statement = sql.text if isinstance(sql, TextClause) else sql
    with transaction(settings) as session:
        plan = session.execute(text("EXPLAIN (FORMAT JSON) " + statement), values).scalar_one()
    return _relations_in(plan if isinstance(plan, list) else json.loads(plan))


def _of(collection_id: int, relations: set[str]) -> set[str]:
    return {r for r in relations if r.endswith(f"_{collection_id}") or f"_{collection_id}_" in r}


def _chunk_ids(engine: Engine, collection_id: int) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT id FROM chunks WHERE collection_id = :c ORDER BY id"),
                                 {"c": collection_id}).scalars())


def test_the_answer_stages_chunk_vectors_read_only_the_collections_partition(
        two_collections: tuple[int, int], settings: Settings, engine: Engine) -> None:
    a, b = two_collections
    relations = _plan(settings, CHUNK_VECTORS_SQL, {"cid": a, "ids": _chunk_ids(engine, a)})
    assert f"chunks_{a}" in relations and not _of(b, relations) and "chunks" not in relations, relations


def test_the_pseudo_question_sample_reads_only_the_collections_partition(
        two_collections: tuple[int, int], settings: Settings) -> None:
    a, b = two_collections
    relations = _plan(settings, SAMPLE_SQL, {"cid": a, "seed": "0", "n": 10})
    assert f"chunks_{a}" in relations and not _of(b, relations) and "chunks" not in relations, relations
    # The document frequencies read bm25_terms (not partitioned) by the bound id: no lookup of
    # the collection by name inside the statement.
    assert "collections" not in _plan(settings, DF_SQL, {"cid": a, "terms": ["kiln"]})
    with transaction(settings) as session:
        asked = sample_pseudo_queries(session, collection="pottery-a", n=10, seed=0)
        assert asked and {q.chunk_id for q in asked} <= set(_chunk_ids_in(session, a))
        assert sample_pseudo_queries(session, collection="no-such-collection", n=10) == []


def _chunk_ids_in(session, collection_id: int) -> list[int]:  # type: ignore[no-untyped-def]
    return list(session.execute(text("SELECT id FROM chunks WHERE collection_id = :c"), {"c": collection_id}).scalars())


def test_the_recalibration_chunk_count_reads_the_stored_total_not_the_chunks(
        two_collections: tuple[int, int], settings: Settings) -> None:
    a, b = two_collections
    relations = _plan(settings, CHUNKS_SQL, {"cid": a})
    assert not {r for r in relations if r.startswith("chunks")}, relations
    with transaction(settings) as session:
        assert session.scalar(CHUNKS_SQL, {"cid": a}) == 3
    sizes = {c.name: (c.documents, c.chunks) for c in list_collections(settings=settings)}
    assert (sizes["pottery-a"], sizes["pottery-b"]) == ((3, 3), (3, 3))


def test_the_documents_list_counts_chunks_in_the_collections_partition_only(
        two_collections: tuple[int, int], settings: Settings) -> None:
    a, b = two_collections
    relations = _plan(settings, DOCUMENTS_SQL, document_page_values(a, limit=50, offset=0, contains=""))
    assert f"chunks_{a}" in relations or f"chunks_{a}_document_id_idx" in relations, relations
    assert not _of(b, relations) and "chunks" not in relations, relations
    listed = list_documents("pottery-a", limit=2, offset=1, settings=settings)
    assert [(d.external_id, d.chunks) for d in listed] == [("glaze", 1), ("wheel", 1)]
    assert list_documents("no-such-collection", settings=settings) == []
