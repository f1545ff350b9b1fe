"""SQLAlchemy 2 typed mappings of the store; plain mappings, no behaviour."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# The vector column's dimension follows the embedding model; migrations create it with
# the configured model's dimension and the ORM only needs to know it is a vector.
EMBEDDING_DIM = 384


class Base(DeclarativeBase):
    pass


class Collection(Base):
    """A named corpus; the main one is "default", others can serve as fallback sources."""

    __tablename__ = "collections"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Document(Base):
    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("collection_id", "external_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    external_id: Mapped[str] = mapped_column(Text)
    title: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(Text, default="")
    content_hash: Mapped[str] = mapped_column(String(64))
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Chunk(Base):
    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("document_id", "ordinal"),
        Index(
            "chunks_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), index=True)
    ordinal: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    embedding: Mapped[Any] = mapped_column(Vector(EMBEDDING_DIM))


class Bm25Term(Base):
    """Document frequency of one term within one collection."""

    __tablename__ = "bm25_terms"
    __table_args__ = (UniqueConstraint("collection_id", "term"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    term: Mapped[str] = mapped_column(Text)
    df: Mapped[int] = mapped_column(Integer)


class Bm25Posting(Base):
    """Term frequency of a term in a chunk, with the chunk length, covered by the key."""

    __tablename__ = "bm25_postings"
    __table_args__ = (
        PrimaryKeyConstraint("term_id", "chunk_id", postgresql_include=["tf", "dl"]),
        Index("bm25_postings_chunk", "chunk_id"),
    )
    term_id: Mapped[int] = mapped_column(ForeignKey("bm25_terms.id", ondelete="CASCADE"))
    chunk_id: Mapped[int] = mapped_column(ForeignKey("chunks.id", ondelete="CASCADE"))
    tf: Mapped[int] = mapped_column(Integer)
    dl: Mapped[int] = mapped_column(Integer)


class Bm25Stats(Base):
    """Corpus statistics BM25 needs: chunk count and total length, per collection."""

    __tablename__ = "bm25_stats"
    collection_id: Mapped[int] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True
    )
    n_chunks: Mapped[int] = mapped_column(BigInteger, default=0)
    total_dl: Mapped[int] = mapped_column(BigInteger, default=0)
