"""Ingest documents: chunk, embed and index them, one transaction per batch."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlalchemy import delete, insert, select, text
from sqlalchemy.orm import Session

from db.models import Chunk as ChunkRow
from db.models import Collection, Document
from services.corpus.chunking import Chunk, chunk_text
from services.corpus.extract import ParsedFile, SkippedInput, SourceDocument, parse_file, parse_paths
from services.errors import InputError
from services.retrieval import embedding
from services.retrieval.text import term_counts
from services.settings import Settings, get_settings
from services.store import transaction


@dataclass(frozen=True)
class IngestProgress:
    documents_done: int
    documents_total: int | None  # None while files are still being discovered
    chunks_done: int
    current: str


@dataclass
class IngestSummary:
    """What happened to every input; `outcomes` has one line per file or document."""

    ingested: int = 0
    replaced: int = 0
    unchanged: int = 0
    chunks_added: int = 0
    skipped: list[SkippedInput] = field(default_factory=list)
    outcomes: list[dict[str, object]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "ingested": self.ingested,
            "replaced": self.replaced,
            "unchanged": self.unchanged,
            "chunks_added": self.chunks_added,
            "skipped": [{"source": s.source, "reason": s.reason} for s in self.skipped],
            "outcomes": self.outcomes,
        }


ProgressCallback = Callable[[IngestProgress], None]


def indexed_text(title: str, chunk: str) -> str:
    """What is embedded and BM25-indexed for a chunk: the title travels with every chunk."""
    return f"{title}\n{chunk}" if title else chunk


def content_hash(doc: SourceDocument) -> str:
    return hashlib.sha256(f"{doc.title}\x00{doc.text}".encode()).hexdigest()


def ingest_paths(
    paths: Sequence[Path],
    *,
    collection: str = "default",
    on_progress: ProgressCallback | None = None,
    settings: Settings | None = None,
) -> IngestSummary:
    """Ingest files and directories (recursively)."""
    settings = settings or get_settings()
    return _ingest_parsed(parse_paths(paths, max_bytes=settings.max_upload_bytes), collection, on_progress, settings)


def ingest_uploads(
    files: Sequence[tuple[str, bytes]],
    *,
    collection: str = "default",
    on_progress: ProgressCallback | None = None,
    settings: Settings | None = None,
) -> IngestSummary:
    """Ingest in-memory files (name, bytes), e.g. from an upload widget."""
    settings = settings or get_settings()
    parsed = (parse_file(name, data, max_bytes=settings.max_upload_bytes) for name, data in files)
    return _ingest_parsed(parsed, collection, on_progress, settings)


def ingest_documents(
    documents: Iterable[SourceDocument],
    *,
    collection: str = "default",
    on_progress: ProgressCallback | None = None,
    settings: Settings | None = None,
) -> IngestSummary:
    """Ingest already-parsed documents."""
    settings = settings or get_settings()
    return _ingest_parsed([ParsedFile(tuple(documents), ())], collection, on_progress, settings)


BATCH_DOCUMENTS = 32  # documents per write transaction: the unit that commits or rolls back whole
# Chunks per encode call. sentence-transformers sorts one call's texts by length before
# batching them, so larger calls pad less than one call per write batch; but the first
# group's chunking and the last group's writes cannot overlap an encode. On 300 SQuAD
# paragraphs (404 chunks, 2 cores) 128 beat 64 and 256 (ingest/encode 0.88 vs 0.83, 0.85).
ENCODE_CHUNKS = 128


def _ingest_parsed(
    parsed_files: Iterable[ParsedFile],
    collection: str,
    on_progress: ProgressCallback | None,
    settings: Settings,
) -> IngestSummary:
    summary = IngestSummary()
    done = 0
    groups = _chunked_groups(parsed_files, collection, settings)
    with closing(_embedded(groups, settings)) as embedded:
        for group, vectors in embedded:
            for batch, prepared in zip(group, _split(group, vectors), strict=True):
                done += _write_batch(batch, prepared, collection, summary, settings)
                _report(on_progress, done, None, summary)
    _report(on_progress, done, done, summary)
    return summary


def _report(on_progress: ProgressCallback | None, done: int, total: int | None, summary: IngestSummary) -> None:
    if on_progress is not None:
        current = str(summary.outcomes[-1]["source"]) if summary.outcomes else ""
        on_progress(IngestProgress(done, total, summary.chunks_added, current))


@dataclass
class _Batch:
    """Documents written in one transaction, and the inputs skipped since the previous batch."""

    documents: list[SourceDocument] = field(default_factory=list)
    skipped: list[SkippedInput] = field(default_factory=list)
    new: list[tuple[SourceDocument, str, list[Chunk]]] = field(default_factory=list)  # changed content, chunked


@dataclass(frozen=True)
class _PreparedDocument:
    source: SourceDocument
    digest: str
    chunks: list[str]
    token_counts: list[int]
    embeddings: np.ndarray


def _batches(parsed_files: Iterable[ParsedFile]) -> Iterator[_Batch]:
    """Documents in write batches of BATCH_DOCUMENTS, each holding the skips reported before it filled."""
    batch = _Batch()
    for parsed in parsed_files:
        batch.skipped.extend(parsed.skipped)
        for doc in parsed.documents:
            batch.documents.append(doc)
            if len(batch.documents) == BATCH_DOCUMENTS:
                yield batch
                batch = _Batch()
    if batch.documents or batch.skipped:
        yield batch


def _chunked_groups(parsed_files: Iterable[ParsedFile], collection: str, settings: Settings) -> Iterator[list[_Batch]]:
    """Consecutive write batches, chunked, gathered until they hold ENCODE_CHUNKS chunks to embed."""
    count_tokens = embedding.token_counter(settings.embedding_model)
    group: list[_Batch] = []
    pending = 0
    for batch in _batches(parsed_files):
        batch.documents = _dedupe(batch.documents, batch.skipped)
        with transaction(settings) as session:
            # Only look here: a new collection is created in the write transaction, so a
            # failed ingest does not leave an empty collection behind.
            found = session.scalar(select(Collection.id).where(Collection.name == collection))
            known = {} if found is None else _known_hashes(session, found, [d.external_id for d in batch.documents])
        for doc in batch.documents:
            digest = content_hash(doc)
            if known.get(doc.external_id) != digest:
                chunks = chunk_text(doc.text, count_tokens=count_tokens, max_tokens=settings.chunk_tokens,
                                    overlap_tokens=settings.chunk_overlap_tokens)
                batch.new.append((doc, digest, chunks))
                pending += len(chunks)
        group.append(batch)
        if pending >= ENCODE_CHUNKS:
            yield group
            group, pending = [], 0
    if group:
        yield group


def _embedded(groups: Iterator[list[_Batch]], settings: Settings) -> Generator[tuple[list[_Batch], np.ndarray]]:
    """Each group with the embeddings of its chunks, in order.

    The next group is chunked (by the caller's thread) and embedded (by one worker) while
    the caller writes this one: torch releases the GIL while it computes.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-embed") as embedder:
        ahead: deque[tuple[list[_Batch], Future[np.ndarray]]] = deque()
        for group in groups:
            ahead.append((group, embedder.submit(_embed, group, settings)))
            if len(ahead) > 1:
                ready, vectors = ahead.popleft()
                yield ready, vectors.result()
        for ready, vectors in ahead:
            yield ready, vectors.result()


def _embed(group: list[_Batch], settings: Settings) -> np.ndarray:
    texts = [indexed_text(doc.title, c.text) for batch in group for doc, _, chunks in batch.new for c in chunks]
    if not texts:  # nothing changed: no need to load the model
        return np.zeros((0, settings.embedding_dim), dtype=np.float32)
    vectors = embedding.encode(settings.embedding_model, texts, batch_size=settings.embedding_batch_size)
    if vectors.shape[1] != settings.embedding_dim:
        raise InputError(
            f"embedding model '{settings.embedding_model}' gives {vectors.shape[1]}-d vectors but the "
            f"store holds {settings.embedding_dim}-d ones; set EMBEDDING_DIM or use a new data dir"
        )
    return vectors


def _split(group: list[_Batch], vectors: np.ndarray) -> Iterator[list[_PreparedDocument]]:
    """Per batch, its new documents with their rows of `vectors`."""
    offset = 0
    for batch in group:
        prepared = []
        for doc, digest, chunks in batch.new:
            n = len(chunks)
            prepared.append(_PreparedDocument(doc, digest, [c.text for c in chunks], [c.token_count for c in chunks],
                                              vectors[offset:offset + n]))
            offset += n
        yield prepared


def _write_batch(batch: _Batch, prepared: list[_PreparedDocument], collection: str, summary: IngestSummary,
                 settings: Settings) -> int:
    """Write one batch atomically; the hashes are checked again, under the collection lock."""
    summary.skipped.extend(batch.skipped)
    summary.outcomes.extend({"source": s.source, "status": "skipped", "reason": s.reason} for s in batch.skipped)
    docs = batch.documents
    if not docs:
        return 0
    with transaction(settings) as session:
        collection_id = _collection_id(session, collection)
        # Locking the stats row serializes writers per collection: df counts and the
        # hash re-check below stay exact even with concurrent ingests.
        lock_collection(session, collection_id)
        known = _known_hashes(session, collection_id, [d.external_id for d in docs])
        for doc in docs:
            if known.get(doc.external_id) == content_hash(doc):
                summary.unchanged += 1
                summary.outcomes.append({"source": doc.source, "external_id": doc.external_id, "status": "unchanged"})
        # Left out: content someone ingested meanwhile (or an earlier batch of this ingest).
        fresh = [prep for prep in prepared if known.get(prep.source.external_id) != prep.digest]
        for prep in fresh:
            replacing = prep.source.external_id in known
            if replacing:
                remove_document(session, collection_id, prep.source.external_id)
            status = "replaced" if replacing else "ingested"
            summary.replaced += replacing
            summary.ingested += not replacing
            summary.chunks_added += len(prep.chunks)
            summary.outcomes.append(
                {"source": prep.source.source, "external_id": prep.source.external_id,
                 "status": status, "chunks": len(prep.chunks)}
            )
        _insert_documents(session, collection_id, fresh)
    return len(docs)


def _dedupe(docs: list[SourceDocument], skipped: list[SkippedInput]) -> list[SourceDocument]:
    seen: dict[str, SourceDocument] = {}
    for doc in docs:
        if doc.external_id in seen:
            reason = f"duplicate document id '{doc.external_id}' in this ingest; the first one was kept"
            skipped.append(SkippedInput(doc.source, reason))
        else:
            seen[doc.external_id] = doc
    return list(seen.values())


def _collection_id(session: Session, name: str) -> int:
    found = session.scalar(select(Collection.id).where(Collection.name == name))
    if found is not None:
        return found
    session.execute(text(_CREATE_COLLECTION), {"name": name})
    return session.scalar(select(Collection.id).where(Collection.name == name))  # type: ignore[return-value]


_CREATE_COLLECTION = """
INSERT INTO collections (name) VALUES (:name) ON CONFLICT (name) DO NOTHING
"""


def lock_collection(session: Session, collection_id: int) -> None:
    session.execute(text(_LOCK_STATS), {"cid": collection_id})


_LOCK_STATS = """
INSERT INTO bm25_stats (collection_id, n_chunks, total_dl) VALUES (:cid, 0, 0)
ON CONFLICT (collection_id) DO UPDATE SET n_chunks = bm25_stats.n_chunks
"""


def _known_hashes(session: Session, collection_id: int, external_ids: list[str]) -> dict[str, str]:
    rows = session.execute(
        select(Document.external_id, Document.content_hash).where(
            Document.collection_id == collection_id, Document.external_id.in_(external_ids)
        )
    )
    return {external_id: digest for external_id, digest in rows}


def _insert_documents(session: Session, collection_id: int, preps: list[_PreparedDocument]) -> None:
    """Insert the batch's documents, chunks and postings: a few statements per batch, not per
    document, so the database work that competes with the encoder for the CPU stays small."""
    if not preps:
        return
    document_ids = session.scalars(
        insert(Document).returning(Document.id, sort_by_parameter_order=True),
        [{"collection_id": collection_id, "external_id": p.source.external_id, "title": p.source.title,
          "source": p.source.source, "content_hash": p.digest, "metadata_": p.source.metadata} for p in preps],
    ).all()
    rows = [
        {"document_id": document_id, "collection_id": collection_id, "ordinal": i,
         "text": chunk, "token_count": tokens, "embedding": vector}
        for document_id, prep in zip(document_ids, preps, strict=True)
        for i, (chunk, tokens, vector) in enumerate(zip(prep.chunks, prep.token_counts, prep.embeddings))
    ]
    if not rows:
        return
    chunk_ids = session.scalars(insert(ChunkRow).returning(ChunkRow.id, sort_by_parameter_order=True), rows).all()
    texts = [indexed_text(prep.source.title, chunk) for prep in preps for chunk in prep.chunks]
    _index_chunks(session, collection_id, chunk_ids, texts)


def _index_chunks(session: Session, collection_id: int, chunk_ids: Sequence[int], texts: Sequence[str]) -> None:
    """Add BM25 postings for the chunks; bump term df and bounds, and corpus stats, to match."""
    posting_chunks: list[int] = []
    posting_terms: list[str] = []
    posting_tf: list[int] = []
    posting_dl: list[int] = []
    total_dl = 0
    for chunk_id, body in zip(chunk_ids, texts):
        counts, dl = term_counts(body)
        total_dl += dl
        for term, tf in counts.items():
            posting_chunks.append(chunk_id)
            posting_terms.append(term)
            posting_tf.append(tf)
            posting_dl.append(dl)
    session.execute(
        text(_INSERT_POSTINGS),
        {"cid": collection_id, "chunks": posting_chunks, "terms": posting_terms, "tfs": posting_tf, "dls": posting_dl},
    )
    session.execute(text(_BUMP_STATS), {"cid": collection_id, "n": len(chunk_ids), "dl": total_dl})


# Terms are upserted in term order: concurrent ingests then lock them in the same order and
# cannot deadlock. max_tf and min_dl only ever widen (see db.models.Bm25Term).
_INSERT_POSTINGS = """
WITH p AS (
    SELECT * FROM unnest(CAST(:chunks AS bigint[]), CAST(:terms AS text[]), CAST(:tfs AS int[]), CAST(:dls AS int[]))
                  AS p(chunk_id, term, tf, dl)
), terms AS (
    INSERT INTO bm25_terms (collection_id, term, df, max_tf, min_dl)
    SELECT :cid, term, count(*), max(tf), min(dl) FROM p GROUP BY term ORDER BY term
    ON CONFLICT (collection_id, term) DO UPDATE SET
        df = bm25_terms.df + EXCLUDED.df,
        max_tf = greatest(bm25_terms.max_tf, EXCLUDED.max_tf),
        min_dl = least(bm25_terms.min_dl, EXCLUDED.min_dl)
    RETURNING id, term
)
INSERT INTO bm25_postings (term_id, chunk_id, tf, dl)
SELECT terms.id, p.chunk_id, p.tf, p.dl FROM p JOIN terms ON terms.term = p.term
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


_UNCOUNT_DOCUMENT = """
WITH doc_chunks AS (
    SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id
    WHERE d.collection_id = :cid AND d.external_id = :external_id
), term_drop AS (
    UPDATE bm25_terms t SET df = t.df - x.n
    FROM (SELECT p.term_id, count(*) AS n FROM bm25_postings p
          WHERE p.chunk_id IN (SELECT id FROM doc_chunks) GROUP BY p.term_id) x
    WHERE t.id = x.term_id
)
UPDATE bm25_stats s SET
    n_chunks = s.n_chunks - (SELECT count(*) FROM doc_chunks),
    total_dl = s.total_dl - coalesce((SELECT sum(dl) FROM (
        SELECT DISTINCT p.chunk_id, p.dl FROM bm25_postings p WHERE p.chunk_id IN (SELECT id FROM doc_chunks)
    ) lens), 0)
WHERE s.collection_id = :cid
"""
