"""Past EXACT_COUNT_CHUNKS the Corpus and Search pages' document and term counts come from the
planner's statistics (fast at any size), and the histogram from a sample of documents; below
it, and for a collection the statistics do not know yet, they are counted."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from services.corpus import stats as corpus_stats_module
from services.corpus.extract import SourceDocument
from services.corpus.ingest import ingest_documents
from services.corpus.stats import corpus_stats, sample_documents
from services.settings import Settings

BODY = "Check the {n} pump seal, valve {n} and gasket {n} before the night shift starts."


@pytest.fixture()
def forty_documents(clean_db: None, settings: Settings) -> None:
    ingest_documents([SourceDocument(f"doc{n:02d}", f"Pump {n}", BODY.format(n=n), f"doc{n}") for n in range(40)],
                     collection="counts", settings=settings)


def _analyze(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("ANALYZE documents, bm25_terms"))


def test_counts_are_exact_below_the_limit_and_estimated_from_statistics_past_it(
        forty_documents: None, engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    exact = corpus_stats("counts", settings=settings)
    assert (exact.documents, exact.estimated) == (40, False) and exact.terms > 40
    monkeypatch.setattr(corpus_stats_module, "EXACT_COUNT_CHUNKS", 10)
    _analyze(engine)
    estimated = corpus_stats("counts", settings=settings)
    assert estimated.estimated
    # ANALYZE of tables this small reads every row: the estimates are the counts.
    assert (estimated.documents, estimated.terms, estimated.chunks) == (exact.documents, exact.terms, exact.chunks)


def test_a_collection_the_statistics_do_not_know_yet_is_counted(
        forty_documents: None, engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    _analyze(engine)
    ingest_documents([SourceDocument("late", "Late", "A collection ingested after the last ANALYZE.", "late")],
                     collection="after-analyze", settings=settings)
    monkeypatch.setattr(corpus_stats_module, "EXACT_COUNT_CHUNKS", 0)
    late = corpus_stats("after-analyze", settings=settings)
    assert (late.documents, late.estimated) == (1, False)


def test_the_histogram_sample_is_every_document_up_to_n_and_about_n_past_it(
        forty_documents: None, settings: Settings) -> None:
    everything = sample_documents("counts", n=100, documents=40, settings=settings)
    assert len(everything) == 40 and {d.chunks for d in everything} == {1}
    sampled = sample_documents("counts", n=10, documents=40, settings=settings)
    assert len(sampled) <= 10 and {d.external_id for d in sampled} <= {d.external_id for d in everything}
    assert sample_documents("no-such-collection", n=10, documents=40, settings=settings) == []
