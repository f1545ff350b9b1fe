"""Chunks go in by binary COPY: the rows and their vectors arrive as given, and a COPY that
fails comes out as the errors of every other statement do (SQLAlchemy's), rolling the batch back."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from services.corpus.extract import SourceDocument
from services.corpus.indexing import PreparedDocument, ensure_collection, insert_documents, lock_collection
from services.settings import Settings
from services.store import transaction


def _prepared(external_id: str, chunks: list[str], dim: int) -> PreparedDocument:
    vectors = np.random.default_rng(7).standard_normal((len(chunks), dim)).astype(np.float32)
    return PreparedDocument(SourceDocument(external_id, external_id.title(), " ".join(chunks), external_id),
                            "digest-" + external_id, chunks, [len(c.split()) for c in chunks], vectors)


def test_copied_chunks_keep_their_order_text_and_vectors(clean_db: None, engine: Engine, settings: Settings) -> None:
    docs = [_prepared("pump", ["Prime the pump.", "Bleed the air."], settings.embedding_dim),
            _prepared("valve", ["Close the valve slowly."], settings.embedding_dim)]
    with transaction(settings) as session:
        cid = ensure_collection(session, "copy")
        lock_collection(session, cid)
        insert_documents(session, cid, docs)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT d.external_id, c.ordinal, c.text, c.token_count, CAST(c.embedding AS real[]) FROM chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE c.collection_id = :c ORDER BY c.id"), {"c": cid}).all()
        n_chunks = conn.execute(text("SELECT n_chunks FROM bm25_stats WHERE collection_id = :c"), {"c": cid}).scalar()
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("pump", 0, "Prime the pump.", 3), ("pump", 1, "Bleed the air.", 3), ("valve", 0, "Close the valve slowly.", 4)]
    expected = [v for d in docs for v in d.embeddings]
    assert all(np.array_equal(np.asarray(r[4], dtype=np.float32), v) for r, v in zip(rows, expected, strict=True))
    assert n_chunks == 3


def test_a_failed_copy_is_a_sqlalchemy_error_and_the_batch_rolls_back(clean_db: None, engine: Engine,
                                                                      settings: Settings) -> None:
    bad = _prepared("nul", ["A text with a NUL \x00 byte."], settings.embedding_dim)
    with pytest.raises(DBAPIError), transaction(settings) as session:
        cid = ensure_collection(session, "copy-fails")
        insert_documents(session, cid, [bad])
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM collections WHERE name = 'copy-fails'")).scalar() == 0
