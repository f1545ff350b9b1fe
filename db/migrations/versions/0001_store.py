"""Corpus store: collections, documents, chunks with HNSW vectors, BM25 postings.

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import context, op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "collections",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.execute("INSERT INTO collections (name) VALUES ('default')")
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id", ondelete="CASCADE"), nullable=False),
        sa.Column("external_id", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("source", sa.Text, nullable=False, server_default=""),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("metadata", JSONB, nullable=False, server_default="{}"),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("collection_id", "external_id"),
    )
    op.create_table(
        "chunks",
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column("document_id", sa.Integer, sa.ForeignKey("documents.id", ondelete="CASCADE"), nullable=False),
        sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id", ondelete="CASCADE"), nullable=False),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
        sa.Column("embedding", Vector(dim), nullable=False),
        sa.UniqueConstraint("document_id", "ordinal"),
    )
    op.create_index("ix_chunks_document_id", "chunks", ["document_id"])
    op.create_index("ix_chunks_collection_id", "chunks", ["collection_id"])
    op.create_index(
        "chunks_embedding_hnsw",
        "chunks",
        ["embedding"],
        postgresql_using="hnsw",
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_table(
        "bm25_terms",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id", ondelete="CASCADE"), nullable=False),
        sa.Column("term", sa.Text, nullable=False),
        sa.Column("df", sa.Integer, nullable=False),
        sa.UniqueConstraint("collection_id", "term"),
    )
    op.create_table(
        "bm25_postings",
        sa.Column("term_id", sa.Integer, sa.ForeignKey("bm25_terms.id", ondelete="CASCADE"), nullable=False),
        sa.Column("chunk_id", sa.BigInteger, sa.ForeignKey("chunks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tf", sa.Integer, nullable=False),
        sa.Column("dl", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("term_id", "chunk_id", postgresql_include=["tf", "dl"]),
    )
    op.create_index("bm25_postings_chunk", "bm25_postings", ["chunk_id"])
    op.create_table(
        "bm25_stats",
        sa.Column("collection_id", sa.Integer, sa.ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("n_chunks", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("total_dl", sa.BigInteger, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    for table in ("bm25_stats", "bm25_postings", "bm25_terms", "chunks", "documents", "collections"):
        op.drop_table(table)
