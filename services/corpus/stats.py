"""Corpus inspection and upkeep: statistics, document list, deletion, the demo corpus."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from services.corpus.indexing import find_collection, lock_collection, remove_document
from services.corpus.ingest import IngestSummary, ProgressCallback, ingest_paths
from services.errors import NotFoundError
from services.settings import Settings, get_settings
from services.store import read_transaction, transaction

DEMO_DIR = Path(__file__).resolve().parents[1] / "demo_data"


@dataclass(frozen=True)
class CorpusStats:
    collection: str
    documents: int
    chunks: int
    terms: int
    avg_chunk_tokens: float
    estimated: bool = False  # documents and terms read from the planner's statistics, not counted


@dataclass(frozen=True)
class DocumentInfo:
    document_id: int
    external_id: str
    title: str
    source: str
    chunks: int
    tokens: int
    updated_at: str


# Counted so that the Corpus page stays fast at a million chunks: the chunk count is the one
# bm25_stats keeps exact in every ingest's transaction (not a count(*) over the partition), and
# the mean chunk length comes from a sample of about AVG_SAMPLE_CHUNKS chunks (exact below
# that size). Documents and terms are counted from their (collection_id, ...) unique indexes
# up to EXACT_COUNT_CHUNKS chunks; past that, counting reads hundreds of thousands of index
# entries per page load, and the planner's statistics (the table's row estimate times the
# collection's share of it, kept by autovacuum's ANALYZE) say the same to a percent or two.
AVG_SAMPLE_CHUNKS = 20_000
EXACT_COUNT_CHUNKS = 100_000

_COLLECTION_SQL = """
SELECT c.id, coalesce((SELECT n_chunks FROM bm25_stats WHERE collection_id = c.id), 0) AS chunks
FROM collections c WHERE c.name = :name
"""
_COUNTS_SQL = """
SELECT (SELECT count(*) FROM documents WHERE collection_id = CAST(:cid AS integer)) AS documents,
       (SELECT count(*) FROM bm25_terms WHERE collection_id = CAST(:cid AS integer) AND df > 0) AS terms
"""
# reltuples is -1 before a table's first ANALYZE; a collection missing from the most common
# values (a small one beside a big one) gives NULL: both fall back to counting.
_ESTIMATE_SQL = """
SELECT round(c.reltuples * f.freq) FROM pg_class c
JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = c.relname AND s.attname = 'collection_id'
CROSS JOIN LATERAL unnest(CAST(CAST(s.most_common_vals AS text) AS integer[]), s.most_common_freqs) AS f(cid, freq)
WHERE c.relname = :table AND c.relnamespace = CAST(current_schema() AS regnamespace) AND c.reltuples >= 0
  AND f.cid = CAST(:cid AS integer)
"""

# SYSTEM sampling reads whole pages picked at random: a sample of pages, not of every row.
_AVG_TOKENS_SQL = """
SELECT coalesce(avg(token_count), 0) FROM chunks TABLESAMPLE SYSTEM (:percent) REPEATABLE (16)
WHERE collection_id = CAST(:cid AS integer)
"""


def corpus_stats(collection: str = "default", *, settings: Settings | None = None) -> CorpusStats:
    with read_transaction(settings) as session:
        row = session.execute(text(_COLLECTION_SQL), {"name": collection}).first()
        if row is None:
            return CorpusStats(collection, 0, 0, 0, 0.0)
        percent = min(100.0, 100.0 * AVG_SAMPLE_CHUNKS / max(row.chunks, 1))
        avg_tokens = session.execute(text(_AVG_TOKENS_SQL), {"percent": percent, "cid": row.id}).scalar_one()
        estimates = [session.execute(text(_ESTIMATE_SQL), {"table": table, "cid": row.id}).scalar()
                     for table in ("documents", "bm25_terms")] if row.chunks > EXACT_COUNT_CHUNKS else [None]
        if None in estimates:
            counted = session.execute(text(_COUNTS_SQL), {"cid": row.id}).one()
            return CorpusStats(collection, counted.documents, row.chunks, counted.terms, float(avg_tokens))
    documents, terms = (int(e or 0) for e in estimates)
    return CorpusStats(collection, documents, row.chunks, terms, float(avg_tokens), estimated=True)


def require_collection(name: str, *, settings: Settings | None = None) -> None:
    """NotFoundError naming the collections there are, when `name` is not one of them: a typo
    must not look like a search that found nothing."""
    with read_transaction(settings) as session:
        names = list(session.scalars(text("SELECT name FROM collections ORDER BY name")))
    if name not in names:
        known = ", ".join(map(repr, names)) if names else "none yet; ingest documents first"
        raise NotFoundError(f"no collection named {name!r} (collections: {known})")


# One page of documents first (the (collection_id, external_id) key gives them in order), then
# each one's chunks counted through the document_id index: never an aggregate over every chunk
# of the collection. The collection is bound by id: the chunk count then plans the collection's
# own partition only (correlated with the outer row, it planned a probe of every partition).
# `contains` filters ids and titles (ILIKE, its wildcards escaped).
DOCUMENTS_SQL = """
SELECT d.id, d.external_id, d.title, d.source, d.updated_at, n.chunks, n.tokens
FROM documents d
CROSS JOIN LATERAL (SELECT count(*) AS chunks, coalesce(sum(ch.token_count), 0) AS tokens FROM chunks ch
                    WHERE ch.document_id = d.id AND ch.collection_id = CAST(:cid AS integer)) n
WHERE d.collection_id = CAST(:cid AS integer)
  AND (CAST(:pattern AS text) IS NULL OR d.external_id ILIKE :pattern OR d.title ILIKE :pattern)
ORDER BY d.external_id
LIMIT :limit OFFSET :offset
"""


def list_documents(collection: str = "default", *, limit: int = 10_000, offset: int = 0, contains: str = "",
                   settings: Settings | None = None) -> list[DocumentInfo]:
    """Documents of the collection by id, `limit` from `offset` on (a page of the Corpus list)."""
    with read_transaction(settings) as session:
        cid = find_collection(session, collection)
        if cid is None:
            return []
        rows = session.execute(text(DOCUMENTS_SQL), document_page_values(cid, limit=limit, offset=offset,
                                                                         contains=contains)).all()
    return [
        DocumentInfo(r.id, r.external_id, r.title, r.source, r.chunks, r.tokens, r.updated_at.isoformat(timespec="seconds"))
        for r in rows
    ]


def document_page_values(collection_id: int, *, limit: int, offset: int, contains: str) -> dict[str, object]:
    """The values DOCUMENTS_SQL runs with (EXPLAIN in the tests uses them too)."""
    pattern = "%" + contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" if contains else None
    return {"cid": collection_id, "limit": limit, "offset": offset, "pattern": pattern}


# A sample of whole pages of documents (SYSTEM sampling: no scan of the table), each document's
# chunks counted through the document_id index of the collection's partition. Documents of one
# collection are stored together, so the fraction is the one that gives about `n` of its own.
_SAMPLE_DOCUMENTS_SQL = """
SELECT d.id, d.external_id, d.title, d.source, d.updated_at, n.chunks, n.tokens
FROM documents d TABLESAMPLE SYSTEM (:percent) REPEATABLE (16)
CROSS JOIN LATERAL (SELECT count(*) AS chunks, coalesce(sum(ch.token_count), 0) AS tokens FROM chunks ch
                    WHERE ch.document_id = d.id AND ch.collection_id = CAST(:cid AS integer)) n
WHERE d.collection_id = CAST(:cid AS integer)
LIMIT :n
"""


def sample_documents(collection: str = "default", *, n: int, documents: int,
                     settings: Settings | None = None) -> list[DocumentInfo]:
    """Every document when the collection holds at most `n` (its `documents` count), else a
    sample of about `n`: what a chunks-per-document histogram needs, at any size."""
    if documents <= n:
        return list_documents(collection, limit=n, settings=settings)
    with read_transaction(settings) as session:
        cid = find_collection(session, collection)
        if cid is None:
            return []
        percent = min(100.0, 100.0 * 2 * n / documents)  # twice over, then LIMIT n: page samples are lumpy
        rows = session.execute(text(_SAMPLE_DOCUMENTS_SQL), {"cid": cid, "percent": percent, "n": n}).all()
    return [
        DocumentInfo(r.id, r.external_id, r.title, r.source, r.chunks, r.tokens, r.updated_at.isoformat(timespec="seconds"))
        for r in rows
    ]


def delete_document(external_id: str, collection: str = "default", *, settings: Settings | None = None) -> None:
    """Remove one document with its chunks and postings, keeping BM25 statistics exact."""
    with transaction(settings) as session:
        collection_id = session.execute(text("SELECT id FROM collections WHERE name = :n"), {"n": collection}).scalar()
        exists = collection_id is not None and session.execute(
            text("SELECT 1 FROM documents WHERE collection_id = :cid AND external_id = :eid"),
            {"cid": collection_id, "eid": external_id},
        ).first()
        if not exists or collection_id is None:
            raise NotFoundError(f"no document '{external_id}' in collection '{collection}'")
        lock_collection(session, collection_id)
        remove_document(session, collection_id, external_id)


def load_demo_corpus_if_empty(
    *, on_progress: ProgressCallback | None = None, settings: Settings | None = None
) -> IngestSummary | None:
    """Ingest the bundled demo handbook into the default collection when it has no documents."""
    settings = settings or get_settings()
    if corpus_stats(settings=settings).documents > 0:
        return None
    return ingest_paths([DEMO_DIR / "corpus"], on_progress=on_progress, settings=settings)


def demo_questions() -> list[dict[str, object]]:
    """The bundled demo questions (BEIR queries), answerable ones first."""
    path = DEMO_DIR / "questions.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
