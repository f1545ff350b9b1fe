"""Ingest embeds many write batches per encode call, yet still commits batch by batch."""

from __future__ import annotations

import services.corpus.batching as batching_module
from services.corpus.batching import BATCH_DOCUMENTS
from services.corpus.extract import ParsedFile, SourceDocument
from services.corpus.ingest import ingest_documents
from services.corpus.stats import corpus_stats
from services.retrieval import embedding


def _docs(n: int) -> list[SourceDocument]:
    return [SourceDocument(f"d{i}", f"Doc {i}", f"Valve {i} is checked every week.", f"d{i}.txt") for i in range(n)]


def _count_encodes(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    """Record the number of texts in each encode call."""
    calls: list[int] = []
    real = embedding.encode

    def counting(name, texts, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(texts))
        return real(name, texts, **kwargs)

    monkeypatch.setattr(embedding, "encode", counting)
    return calls


def test_batches_share_encode_calls_and_progress_counts_each_commit(clean_db, monkeypatch):  # type: ignore[no-untyped-def]
    calls = _count_encodes(monkeypatch)
    events = []
    n = 2 * BATCH_DOCUMENTS + 5
    summary = ingest_documents(_docs(n), on_progress=events.append)

    # The first write batch is encoded alone (the encoder starts after one batch is chunked);
    # the next two write batches of one-chunk documents share one encode call.
    assert calls == [BATCH_DOCUMENTS, n - BATCH_DOCUMENTS]
    # each group's embedding (under ENCODE_CHUNKS: one slice), then each commit
    assert [e.documents_done for e in events] == [0, 32, 32, 64, n, n]
    assert [e.chunks_done for e in events] == [0, 32, 32, 64, n, n]
    assert [e.chunks_embedded for e in events] == [32, 32, n, n, n, n]
    assert events[-1].documents_total == n and summary.ingested == n
    assert corpus_stats().documents == n


def test_groups_split_at_the_encode_size_and_skip_unchanged_content(clean_db, monkeypatch):  # type: ignore[no-untyped-def]
    calls = _count_encodes(monkeypatch)
    monkeypatch.setattr(batching_module, "ENCODE_CHUNKS", BATCH_DOCUMENTS)
    monkeypatch.setattr(batching_module, "FIRST_GROUP_CHUNKS", BATCH_DOCUMENTS)
    summary = ingest_documents(_docs(BATCH_DOCUMENTS + 3))
    assert calls == [BATCH_DOCUMENTS, 3]
    assert summary.ingested == BATCH_DOCUMENTS + 3

    calls.clear()
    again = ingest_documents(_docs(BATCH_DOCUMENTS + 3))
    assert calls == [] and again.unchanged == BATCH_DOCUMENTS + 3, "unchanged content is not embedded again"



def test_a_resumed_ingest_lets_its_skipped_batches_go_group_by_group(clean_db, settings):  # type: ignore[no-untyped-def]
    """Already-ingested documents are not held back until new chunks turn up: a group of
    MAX_GROUP_BATCHES write batches goes (and its skips are counted) with nothing to encode."""
    n = 3 * batching_module.MAX_GROUP_BATCHES * BATCH_DOCUMENTS
    ingest_documents(_docs(n))
    groups = list(batching_module.chunked_groups([ParsedFile(tuple(_docs(n)), ())], "default", settings))
    assert [len(g) for g in groups] == [batching_module.MAX_GROUP_BATCHES] * 3
    assert all(not batch.new for group in groups for batch in group)
    assert ingest_documents(_docs(n)).unchanged == n
