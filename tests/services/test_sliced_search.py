"""A large collection's search runs its BM25 leg per range of chunk ids and its dense leg at
once, on connections of their own in the caller's snapshot: the hits must be exactly those
of the one-statement search, and what the slices read must be what the caller's transaction sees."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.corpus.extract import SourceDocument
from services.corpus.ingest import ingest_documents
from services.corpus.stats import delete_document
from services.domain import RetrievalResult
from services.retrieval import search as search_module
from services.retrieval.search import default_params, search_in_session
from services.settings import Settings
from services.store import export_snapshot, get_read_engine, read_transaction

COLLECTION = "sliced"
VOCABULARY = ("kiln glaze clay porcelain stoneware celadon wheel bowl firing reduction oxide ash slip "
              "bisque raku crackle temmoku iron cobalt copper flux silica feldspar kaolin ball grog "
              "throwing trimming handle lid teapot vase jar plate cup saucer foot rim glost saggar").split()
QUERIES = (
    "celadon glaze",
    "reduction firing in a wood kiln",
    "iron oxide temmoku glaze crackle",
    # more terms than the merged scans take: the rest are summed apart, or looked up
    "kiln glaze clay porcelain stoneware celadon wheel bowl firing reduction",
    "saggar raku copper flux silica feldspar kaolin grog",
    "teapot",
    "zirconium",  # no chunk has it: the dense leg alone
)


def _corpus() -> list[SourceDocument]:
    """Documents whose words follow a skewed distribution: common and rare terms, short and long chunks."""
    rng = random.Random(24)
    weights = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]
    docs = []
    for i in range(150):
        words = rng.choices(VOCABULARY, weights=weights, k=rng.randint(6, 60))
        docs.append(SourceDocument(f"d{i:03d}", f"Note {i}", " ".join(words) + ".", f"d{i:03d}"))
    return docs


@pytest.fixture(scope="module")
def sliced_collection(engine, settings: Settings) -> Iterator[None]:  # type: ignore[no-untyped-def]
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM collections WHERE name = :name"), {"name": COLLECTION})
    summary = ingest_documents(_corpus(), collection=COLLECTION, settings=settings)
    assert summary.chunks_added >= 150
    yield
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM collections WHERE name = :name"), {"name": COLLECTION})


@pytest.fixture()
def statements_in_snapshot(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements run on connections of their own (observed, not replaced)."""
    seen: list[str] = []
    real = search_module.in_snapshot

    def observed(engine, snapshot, work):  # type: ignore[no-untyped-def]
        def recording(conn):  # type: ignore[no-untyped-def]
            seen.append(snapshot)
            return work(conn)
        return real(engine, snapshot, recording)

    monkeypatch.setattr(search_module, "in_snapshot", observed)
    return seen


def _sliced(settings: Settings, slices: int = 3) -> Settings:
    return settings.model_copy(update={"search_slices": slices, "search_slice_min_chunks": 0})


def _whole(settings: Settings) -> Settings:
    return settings.model_copy(update={"search_slices": 1})


def _search(query: str, settings: Settings, session: Session, mode: str, depth: int) -> RetrievalResult:
    params = default_params(settings, mode=mode, k=depth, depth=depth, collection=COLLECTION)
    return search_in_session(query, params, session=session, settings=settings)


def _assert_same(sliced: RetrievalResult, whole: RetrievalResult) -> None:
    assert [h.chunk_id for h in sliced.hits] == [h.chunk_id for h in whole.hits]
    for got, want in zip(sliced.hits, whole.hits):
        assert (got.bm25_rank, got.dense_rank) == (want.bm25_rank, want.dense_rank)
        for field in ("bm25_score", "dense_similarity", "fused_score", "matched_idf_share"):
            a, b = getattr(got, field), getattr(want, field)
            assert (a is None) == (b is None), field
            assert a is None or abs(a - b) <= 1e-12, (field, a, b)
    assert sliced.leg_scores.keys() == whole.leg_scores.keys()
    for leg, scores in whole.leg_scores.items():
        assert sliced.leg_scores[leg] == pytest.approx(scores, abs=1e-12)
    assert sliced.query_idf == pytest.approx(whole.query_idf, abs=1e-12) if whole.query_idf else sliced.query_idf is None


@pytest.mark.parametrize("mode", ["hybrid", "bm25"])
@pytest.mark.parametrize("depth", [3, 50])
def test_a_sliced_search_returns_exactly_the_one_statement_search(sliced_collection, settings, statements_in_snapshot,
                                                                   mode, depth):  # type: ignore[no-untyped-def]
    with read_transaction(settings) as session:
        for query in QUERIES:
            whole = _search(query, _whole(settings), session, mode, depth)
            matched = query != "zirconium"
            assert bool(whole.hits) == (matched or mode == "hybrid")
            assert any(h.bm25_score for h in whole.hits) == matched
            assert not statements_in_snapshot
            sliced = _search(query, _sliced(settings), session, mode, depth)
            # three slices, the dense leg when there is one, and the statement that fuses them
            assert len(statements_in_snapshot) == 3 + (mode == "hybrid") + 1, query
            statements_in_snapshot.clear()
            _assert_same(sliced, whole)


def test_more_slices_than_a_range_has_chunks_still_finds_every_hit(sliced_collection, settings):  # type: ignore[no-untyped-def]
    with read_transaction(settings) as session:
        whole = _search("celadon glaze", _whole(settings), session, "bm25", 50)
        sliced = _search("celadon glaze", _sliced(settings, slices=16), session, "bm25", 50)
    _assert_same(sliced, whole)


def test_a_collection_below_the_size_is_searched_by_one_statement(sliced_collection, settings, statements_in_snapshot):  # type: ignore[no-untyped-def]
    small = settings.model_copy(update={"search_slices": 4, "search_slice_min_chunks": 10_000})
    with read_transaction(settings) as session:
        assert _search("celadon glaze", small, session, "hybrid", 10).hits
    assert statements_in_snapshot == []


def test_the_slices_read_what_the_callers_transaction_sees(sliced_collection, settings):  # type: ignore[no-untyped-def]
    """A document deleted after the caller's snapshot was taken is still there for every
    slice, as it is for the caller (its chunk ids lie inside the ranges); a new transaction no
    longer finds it."""
    top = _corpus_document("teapot", settings)
    session = Session(get_read_engine(settings))
    try:
        session.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        before = _search("teapot", _sliced(settings), session, "bm25", 10)
        assert top.external_id in [h.external_id for h in before.hits]
        delete_document(top.external_id, COLLECTION, settings=settings)
        assert _search("teapot", _sliced(settings), session, "bm25", 10).hits == before.hits
    finally:
        session.close()
    try:
        with read_transaction(settings) as fresh:
            after = _search("teapot", _sliced(settings), fresh, "bm25", 10)
        assert top.external_id not in [h.external_id for h in after.hits]
    finally:
        ingest_documents([top], collection=COLLECTION, settings=settings)


def _corpus_document(query: str, settings: Settings) -> SourceDocument:
    """The corpus document the whole-collection search ranks first for `query`."""
    with read_transaction(settings) as session:
        best = _search(query, _whole(settings), session, "bm25", 1).hits[0].external_id
    return next(doc for doc in _corpus() if doc.external_id == best)


def test_a_transaction_that_has_written_is_not_sliced(settings, engine):  # type: ignore[no-untyped-def]
    """Other connections cannot see its writes, so it searches in one statement."""
    with Session(engine) as session:
        assert export_snapshot(session) is not None
        session.execute(text("CREATE TEMPORARY TABLE wrote_something (x int)"))
        assert export_snapshot(session) is None
        session.rollback()
