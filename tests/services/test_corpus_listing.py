"""Corpus statistics and the document list as the Corpus page reads them: counts kept exact
without counting every chunk, the list a page at a time, filtered in the store."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from services.corpus.extract import SourceDocument
from services.corpus.ingest import ingest_documents
from services.corpus.stats import corpus_stats, delete_document, list_documents
from services.settings import Settings

COLLECTION = "listing"
NAMES = ["a-pump", "b-valve", "c_seal", "d-100%", "e-gasket"]


@pytest.fixture()
def five_documents(clean_db: None, settings: Settings) -> None:
    body = "Pump maintenance: check the seal, the valve and the gasket every month. " * 3
    ingest_documents([SourceDocument(name, f"Title {name}", f"{name} {body * (i + 1)}", name)
                      for i, name in enumerate(NAMES)], collection=COLLECTION, settings=settings)


def _exact(engine: Engine) -> tuple[int, float]:
    with engine.connect() as conn:
        return conn.execute(text(
            "SELECT count(*), avg(token_count) FROM chunks WHERE collection_id = "
            "(SELECT id FROM collections WHERE name = :n)"), {"n": COLLECTION}).one()  # type: ignore[return-value]


def test_stats_count_chunks_exactly_without_counting_them(five_documents: None, engine: Engine,
                                                           settings: Settings) -> None:
    chunks, avg_tokens = _exact(engine)
    found = corpus_stats(COLLECTION, settings=settings)
    assert (found.documents, found.chunks) == (5, chunks) and chunks > 5
    assert found.avg_chunk_tokens == pytest.approx(float(avg_tokens))  # below the sample size: every chunk
    delete_document("e-gasket", COLLECTION, settings=settings)
    chunks, _ = _exact(engine)
    assert corpus_stats(COLLECTION, settings=settings).chunks == chunks  # bm25_stats follows removals too


def test_the_document_list_comes_a_page_at_a_time_in_id_order(five_documents: None, settings: Settings) -> None:
    pages = [[d.external_id for d in list_documents(COLLECTION, limit=2, offset=offset, settings=settings)]
             for offset in (0, 2, 4, 6)]
    assert pages == [NAMES[:2], NAMES[2:4], NAMES[4:], []]
    chunks, _ = _exact_for_each(settings)
    assert {d.external_id: d.chunks for d in list_documents(COLLECTION, settings=settings)} == chunks


def _exact_for_each(settings: Settings) -> tuple[dict[str, int], None]:
    from services.store import transaction

    with transaction(settings) as session:
        rows = session.execute(text(
            "SELECT d.external_id, count(*) FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.collection_id = (SELECT id FROM collections WHERE name = :n) GROUP BY 1"), {"n": COLLECTION}).all()
    return {name: n for name, n in rows}, None


def test_the_filter_runs_in_the_store_and_takes_wildcards_literally(five_documents: None, settings: Settings) -> None:
    def names(contains: str) -> list[str]:
        return [d.external_id for d in list_documents(COLLECTION, contains=contains, settings=settings)]

    assert names("VALVE") == ["b-valve"]  # ids and titles, any case
    assert names("title c") == ["c_seal"]
    assert names("_") == ["c_seal"] and names("%") == ["d-100%"]
    assert names("-1") == ["d-100%"] and names("nothing") == []
