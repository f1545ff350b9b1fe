"""Embed the new chunks of grouped write batches on one worker thread, a group ahead of the writer."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from queue import Empty, Queue

import numpy as np

from services.corpus.batching import ENCODE_CHUNKS, Batch
from services.corpus.indexing import PreparedDocument, indexed_text
from services.errors import InputError
from services.retrieval import embedding
from services.settings import Settings

# Texts per forward pass within one encode call. sentence-transformers sorts a call's texts by
# length and pads each batch to its longest: in batches of 64 out of a 128-chunk call, 300 SQuAD
# paragraphs' chunks were padded to 1.25 tokens per real token (the bench's bare encode, one
# call of all 404 chunks, to 1.09); in batches of 16, to 1.07. A forward pass of 16 chunks of
# ~150 tokens still fills the CPU's matrix units. EMBEDDING_BATCH_SIZE below this wins.
ENCODE_BATCH = 16


def embedded_batches(groups: Iterator[list[Batch]], settings: Settings,
                     on_embedded: Callable[[int], None] | None = None) -> Generator[tuple[Batch, list[PreparedDocument]]]:
    """Each batch of each group with its new documents, embedded, in order.

    The next group is chunked (by the caller's thread, pulling from `groups`) and embedded
    (by one worker) while the caller writes this one: torch releases the GIL while it computes.
    `on_embedded(n)` is called on the caller's thread (pages may only draw from theirs) as
    each ENCODE_CHUNKS chunks are embedded, so one large document shows progress too.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-embed") as embedder:
        ahead: deque[tuple[list[Batch], Future[np.ndarray], Queue[int]]] = deque()
        for group in groups:
            embedded: Queue[int] = Queue()
            ahead.append((group, embedder.submit(_embed, group, settings, embedded), embedded))
            if len(ahead) > 1:
                yield from _prepared(*ahead.popleft(), on_embedded)
        while ahead:
            yield from _prepared(*ahead.popleft(), on_embedded)


def _embed(group: list[Batch], settings: Settings, embedded: Queue[int]) -> np.ndarray:
    texts = [indexed_text(doc.title, c.text) for batch in group for doc, _, chunks in batch.new for c in chunks]
    if not texts:  # nothing changed: no need to load the model
        return np.zeros((0, settings.embedding_dim), dtype=np.float32)
    # In slices of ENCODE_CHUNKS, the size a group is gathered to: a group beyond it (one
    # large document) is encoded as fast, and reports its progress slice by slice.
    batch_size = min(settings.embedding_batch_size, ENCODE_BATCH)
    parts = []
    for start in range(0, len(texts), ENCODE_CHUNKS):
        parts.append(embedding.encode(settings.embedding_model, texts[start:start + ENCODE_CHUNKS],
                                      batch_size=batch_size))
        embedded.put(len(parts[-1]))
    vectors = np.concatenate(parts)
    if vectors.shape[1] != settings.embedding_dim:
        raise InputError(
            f"embedding model '{settings.embedding_model}' gives {vectors.shape[1]}-d vectors but the "
            f"store holds {settings.embedding_dim}-d ones; set EMBEDDING_DIM or use a new data dir"
        )
    return vectors


def _prepared(group: list[Batch], embedding_done: Future[np.ndarray], embedded: Queue[int],
              on_embedded: Callable[[int], None] | None) -> Iterator[tuple[Batch, list[PreparedDocument]]]:
    """Per batch, its new documents with their rows of the group's embeddings."""
    while not (embedding_done.done() and embedded.empty()):
        try:
            count = embedded.get(timeout=0.1)
        except Empty:
            continue
        if on_embedded is not None:
            on_embedded(count)
    vectors = embedding_done.result()
    offset = 0
    for batch in group:
        prepared = []
        for doc, digest, chunks in batch.new:
            n = len(chunks)
            prepared.append(PreparedDocument(doc, digest, [c.text for c in chunks], [c.token_count for c in chunks],
                                             vectors[offset:offset + n]))
            offset += n
        yield batch, prepared
