"""The corpus's write statements: collections, documents, chunks and BM25 postings, added and removed."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.orm import Session

from db.models import Collection, Document
from services.corpus.extract import SourceDocument
from services.corpus.identity import StoredDocument
from services.errors import InputError
from services.retrieval.text import require_storable, term_counts
from services.store import copy_rows

MAX_COLLECTION_CHARS = Collection.name.type.length  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PreparedDocument:
    """A document with new content, chunked and embedded: what `insert_documents` stores."""

    source: SourceDocument
    digest: str
    chunks: list[str]
    token_counts: list[int]
    embeddings: np.ndarray


def indexed_text(title: str, chunk: str) -> str:
    """What is embedded and BM25-indexed for a chunk: the title travels with every chunk."""
    return f"{title}\n{chunk}" if title else chunk


def content_hash(doc: SourceDocument) -> str:
    return hashlib.sha256(f"{doc.title}\x00{doc.text}".encode()).hexdigest()


def find_collection(session: Session, name: str) -> int | None:
    return session.scalar(select(Collection.id).where(Collection.name == name))


def check_collection_name(name: str) -> None:
    """InputError unless `name` fits the collections table (up to MAX_COLLECTION_CHARS, storable text)."""
    if not name.strip():
        raise InputError("give a collection name")
    if len(name) > MAX_COLLECTION_CHARS:
        raise InputError(f"the collection name is {len(name):,} characters long; the limit is {MAX_COLLECTION_CHARS}")
    require_storable(name, "the collection name")


def ensure_collection(session: Session, name: str) -> int:
    """The collection's id, creating the collection if it does not exist yet."""
    found = find_collection(session, name)
    if found is not None:
        return found
    # A new collection's row attaches its partitions, and attaching locks `collections` SHARE
    # ROW EXCLUSIVE (the partitions' foreign keys): two ingests creating the same collection
    # deadlocked, the second's insert holding what the first's attach needed. So one creates
    # at a time, and a second finds the first's collection once that commits.
    session.execute(text(_LOCK_COLLECTIONS))
    found = find_collection(session, name)
    if found is not None:
        return found
    session.execute(text(_CREATE_COLLECTION), {"name": name})
    return find_collection(session, name)  # type: ignore[return-value]


_LOCK_COLLECTIONS = "LOCK TABLE collections IN SHARE ROW EXCLUSIVE MODE"
_CREATE_COLLECTION = """
INSERT INTO collections (name) VALUES (:name) ON CONFLICT (name) DO NOTHING
"""


def lock_collection(session: Session, collection_id: int) -> None:
    session.execute(text(_LOCK_STATS), {"cid": collection_id})


_LOCK_STATS = """
INSERT INTO bm25_stats (collection_id, n_chunks, total_dl) VALUES (:cid, 0, 0)
ON CONFLICT (collection_id) DO UPDATE SET n_chunks = bm25_stats.n_chunks
"""


def known_documents(session: Session, collection_id: int, external_ids: list[str]) -> dict[str, StoredDocument]:
    rows = session.execute(
        select(Document.external_id, Document.content_hash, Document.source, Document.updated_at).where(
            Document.collection_id == collection_id, Document.external_id.in_(external_ids)
        )
    )
    return {external_id: StoredDocument(digest, source, updated_at) for external_id, digest, source, updated_at in rows}


def learn_origins(session: Session, collection_id: int, origins: dict[str, str]) -> None:
    """Record where unchanged documents stored without a location (bare names) came from."""
    for external_id, origin in origins.items():
        session.execute(
            update(Document).where(Document.collection_id == collection_id, Document.external_id == external_id)
            .values(source=origin)
        )


def known_hashes(session: Session, collection_id: int, external_ids: list[str]) -> dict[str, str]:
    rows = session.execute(
        select(Document.external_id, Document.content_hash).where(
            Document.collection_id == collection_id, Document.external_id.in_(external_ids)
        )
    )
    return {external_id: digest for external_id, digest in rows}


def insert_documents(session: Session, collection_id: int, preps: list[PreparedDocument]) -> None:
    """Insert the batch's documents, chunks and postings: a few statements per batch, not per
    document, so the database work that competes with the encoder for the CPU stays small."""
    if not preps:
        return
    document_ids = session.scalars(
        insert(Document).returning(Document.id, sort_by_parameter_order=True),
        [{"collection_id": collection_id, "external_id": p.source.external_id, "title": p.source.title,
          "source": p.source.origin or p.source.source, "content_hash": p.digest, "metadata_": p.source.metadata} for p in preps],
    ).all()
    n_chunks = sum(len(p.chunks) for p in preps)
    if not n_chunks:
        return
    # Ids drawn first, then the chunks copied in binary (COPY routes each row to the collection's
    # partition): per-row inserts through the ORM and pgvector's text form of every embedding
    # cost the client a third of ingest's own CPU time, while the encoder waited for the cores.
    chunk_ids = list(session.scalars(text(_CHUNK_IDS), {"n": n_chunks}))
    rows = ((document_id, collection_id, ordinal, chunk, tokens, vector)
            for document_id, prep in zip(document_ids, preps, strict=True)
            for ordinal, (chunk, tokens, vector) in enumerate(zip(prep.chunks, prep.token_counts, prep.embeddings)))
    copy_rows(session, _COPY_CHUNKS, ((chunk_id, *row) for chunk_id, row in zip(chunk_ids, rows, strict=True)),
              types=["int8", "int4", "int4", "int4", "text", "int4", "vector"])
    texts = [indexed_text(prep.source.title, chunk) for prep in preps for chunk in prep.chunks]
    index_chunks(session, collection_id, chunk_ids, texts)


_CHUNK_IDS = "SELECT nextval('chunks_id_seq') FROM generate_series(1, :n)"
_COPY_CHUNKS = ("COPY chunks (id, document_id, collection_id, ordinal, text, token_count, embedding) "
                "FROM STDIN WITH (FORMAT BINARY)")


def index_chunks(session: Session, collection_id: int, chunk_ids: Sequence[int], texts: Sequence[str]) -> None:
    """Add BM25 postings for the chunks; bump term df and bounds, and corpus stats, to match."""
    posting_chunks: list[str] = []
    posting_terms: list[str] = []
    posting_tf: list[str] = []
    posting_dl: list[str] = []
    total_dl = 0
    for chunk_id, body in zip(chunk_ids, texts):
        counts, dl = term_counts(body)
        total_dl += dl
        chunk, length = str(chunk_id), str(dl)
        for term, tf in counts.items():
            posting_chunks.append(chunk)
            posting_terms.append(term)
            posting_tf.append(str(tf))
            posting_dl.append(length)
    # Sent as space-separated strings and split by the server: psycopg adapts a list element
    # by element in Python, which cost more than computing the postings. Terms are runs of
    # letters and digits (services.retrieval.text), never holding a space.
    session.execute(text(_INSERT_POSTINGS), {
        "cid": collection_id, "chunks": " ".join(posting_chunks), "terms": " ".join(posting_terms),
        "tfs": " ".join(posting_tf), "dls": " ".join(posting_dl),
    })
    session.execute(text(_BUMP_STATS), {"cid": collection_id, "n": len(chunk_ids), "dl": total_dl})


# Terms are upserted in term order: concurrent ingests then lock them in the same order and
# cannot deadlock. A term's (tf, shortest chunk) pairs bound its impact for MaxScore (see
# db.models.Bm25Term): a batch's pairs are merged into the term's, keeping the shorter chunk
# of each tf, so the pairs only ever widen.
_INSERT_POSTINGS = """
WITH p AS (
    SELECT * FROM unnest(CAST(string_to_array(:chunks, ' ') AS bigint[]), string_to_array(:terms, ' '),
                         CAST(string_to_array(:tfs, ' ') AS int[]), CAST(string_to_array(:dls, ' ') AS int[]))
                  AS p(chunk_id, term, tf, dl)
), per_tf AS (
    SELECT term, tf, count(*) AS n, min(dl) AS dl FROM p GROUP BY term, tf
), terms AS (
    INSERT INTO bm25_terms (collection_id, term, df, impact_tf, impact_dl)
    SELECT :cid, term, sum(n), array_agg(tf ORDER BY tf), array_agg(dl ORDER BY tf) FROM per_tf GROUP BY term ORDER BY term
    ON CONFLICT (collection_id, term) DO UPDATE SET
        df = bm25_terms.df + EXCLUDED.df,
        (impact_tf, impact_dl) = (
            SELECT array_agg(tf ORDER BY tf), array_agg(dl ORDER BY tf)
            FROM (SELECT tf, min(dl) AS dl
                  FROM unnest(bm25_terms.impact_tf || EXCLUDED.impact_tf, bm25_terms.impact_dl || EXCLUDED.impact_dl)
                       AS pair(tf, dl)
                  GROUP BY tf) merged)
    RETURNING id, term
)
INSERT INTO bm25_postings (term_id, collection_id, chunk_id, tf, dl)
SELECT terms.id, :cid, p.chunk_id, p.tf, p.dl FROM p JOIN terms ON terms.term = p.term
"""

_BUMP_STATS = """
UPDATE bm25_stats SET n_chunks = n_chunks + :n, total_dl = total_dl + :dl WHERE collection_id = :cid
"""


def remove_document(session: Session, collection_id: int, external_id: str) -> None:
    """Remove a document, its chunks and postings, and take them out of df and stats."""
    session.execute(text(_UNCOUNT_DOCUMENT), {"cid": collection_id, "external_id": external_id})
    session.execute(
        delete(Document).where(Document.collection_id == collection_id, Document.external_id == external_id)
    )


# Every statement of a WITH sees the rows as they were before it: the postings are counted
# out of df and the stats in the same statement that deletes them (no foreign key cascades
# them from chunks: see db.models.Bm25Posting); the chunks go with the document.
_UNCOUNT_DOCUMENT = """
WITH doc_chunks AS (
    SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id
    WHERE c.collection_id = :cid AND d.collection_id = :cid AND d.external_id = :external_id
), term_drop AS (
    UPDATE bm25_terms t SET df = t.df - x.n
    FROM (SELECT p.term_id, count(*) AS n FROM bm25_postings p
          WHERE p.collection_id = :cid AND p.chunk_id IN (SELECT id FROM doc_chunks) GROUP BY p.term_id) x
    WHERE t.id = x.term_id
), postings_gone AS (
    DELETE FROM bm25_postings p WHERE p.collection_id = :cid AND p.chunk_id IN (SELECT id FROM doc_chunks)
)
UPDATE bm25_stats s SET
    n_chunks = s.n_chunks - (SELECT count(*) FROM doc_chunks),
    total_dl = s.total_dl - coalesce((SELECT sum(dl) FROM (
        SELECT DISTINCT p.chunk_id, p.dl FROM bm25_postings p
        WHERE p.collection_id = :cid AND p.chunk_id IN (SELECT id FROM doc_chunks)
    ) lens), 0)
WHERE s.collection_id = :cid
"""
