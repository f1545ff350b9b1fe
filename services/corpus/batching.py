"""Cut parsed files into write batches and chunk their new content, in groups sized for the encoder."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from services.corpus.chunking import Chunk, chunk_text
from services.corpus.extract import ParsedFile, SkippedInput, SourceDocument
from services.corpus.identity import candidate_ids, place_documents
from services.corpus.indexing import content_hash, find_collection, known_documents
from services.retrieval import embedding
from services.settings import Settings
from services.store import transaction

BATCH_DOCUMENTS = 32  # documents per write transaction: the unit that commits or rolls back whole
# Chunks per encode call. sentence-transformers sorts one call's texts by length before
# batching them, so larger calls pad less than one call per write batch; but the first
# group's chunking and the last group's writes cannot overlap an encode. On 300 SQuAD
# paragraphs (404 chunks, 2 cores) 128 beat 64 and 256 (ingest/encode 0.88 vs 0.83, 0.85).
ENCODE_CHUNKS = 128
# The encoder waits for the first group to be chunked, and the last group's writes wait for its
# encode: the first group is yielded after one write batch, so the encoder starts sooner.
FIRST_GROUP_CHUNKS = 1
# A group is also let go at this many write batches, new chunks or not: a resumed ingest skips
# its already-ingested documents group by group (the skipped count moves, memory stays small)
# instead of holding every one of them until 128 new chunks turn up.
MAX_GROUP_BATCHES = 8


@dataclass
class Batch:
    """Documents written in one transaction, and the inputs skipped since the previous batch."""

    documents: list[SourceDocument] = field(default_factory=list)
    skipped: list[SkippedInput] = field(default_factory=list)
    new: list[tuple[SourceDocument, str, list[Chunk]]] = field(default_factory=list)  # changed content, chunked


def chunked_groups(parsed_files: Iterable[ParsedFile], collection: str, settings: Settings) -> Iterator[list[Batch]]:
    """Consecutive write batches, chunked, gathered until they hold ENCODE_CHUNKS chunks to embed."""
    count_tokens = embedding.token_counter(settings.embedding_model)
    group: list[Batch] = []
    pending = 0
    wanted = FIRST_GROUP_CHUNKS
    claimed: dict[str, str] = {}  # id -> origin of every document this ingest placed
    for batch in _batches(parsed_files):
        with transaction(settings) as session:
            # Only look here: a new collection is created in the write transaction, so a
            # failed ingest does not leave an empty collection behind.
            found = find_collection(session, collection)
            known = {} if found is None else known_documents(session, found, candidate_ids(batch.documents))
        batch.documents, repeats = place_documents(batch.documents, known, claimed)
        batch.skipped.extend(repeats)
        for doc in batch.documents:
            digest = content_hash(doc)
            stored = known.get(doc.external_id)
            if stored is None or stored.digest != digest:
                chunks = chunk_text(doc.text, count_tokens=count_tokens, max_tokens=settings.chunk_tokens,
                                    overlap_tokens=settings.chunk_overlap_tokens)
                batch.new.append((doc, digest, chunks))
                pending += len(chunks)
        group.append(batch)
        if pending >= wanted or len(group) >= MAX_GROUP_BATCHES:
            yield group
            group, pending, wanted = [], 0, ENCODE_CHUNKS
    if group:
        yield group


def _batches(parsed_files: Iterable[ParsedFile]) -> Iterator[Batch]:
    """Documents in write batches of BATCH_DOCUMENTS, each holding the skips reported before it filled."""
    batch = Batch()
    for parsed in parsed_files:
        batch.skipped.extend(parsed.skipped)
        for doc in parsed.documents:
            batch.documents.append(doc)
            if len(batch.documents) == BATCH_DOCUMENTS:
                yield batch
                batch = Batch()
    if batch.documents or batch.skipped:
        yield batch
