"""Chunks and BM25 postings as list partitions by collection: a search touches only its
collection's partitions (and its own HNSW graph), a collection is dropped as two tables.

A collection gets its partitions when its row is inserted and loses them when it is deleted
(triggers on collections), so every way of creating one (ingest, tests, benches) has them.
Postings carry collection_id and no longer reference chunks by a foreign key: a partitioned
table referenced by one cannot drop a partition, and removing a document deletes its postings
itself (services/corpus/indexing.py). Existing rows are copied into the partitions.

Revision ID: 0009
"""

from alembic import context, op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# CREATE TABLE ... (LIKE) + ATTACH PARTITION rather than CREATE TABLE ... PARTITION OF: attaching
# locks the parent SHARE UPDATE EXCLUSIVE, so creating a collection does not block searches and
# ingests of the others (PARTITION OF takes ACCESS EXCLUSIVE until the creating transaction ends).
# Dropping one takes ACCESS EXCLUSIVE on the parents for an instant: deleting a collection is rare.
# Attaching gives the new tables the parents' indexes, keys and foreign keys.
_FUNCTIONS = """
CREATE FUNCTION collection_partitions_add(cid integer) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE chunks INCLUDING DEFAULTS)', 'chunks_' || cid);
    EXECUTE format('ALTER TABLE chunks ATTACH PARTITION %I FOR VALUES IN (%s)', 'chunks_' || cid, cid);
    EXECUTE format('CREATE TABLE %I (LIKE bm25_postings)', 'bm25_postings_' || cid);
    EXECUTE format('ALTER TABLE bm25_postings ATTACH PARTITION %I FOR VALUES IN (%s)', 'bm25_postings_' || cid, cid);
END $$;

CREATE FUNCTION collection_partitions_create() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM collection_partitions_add(NEW.id);
    RETURN NULL;
END $$;

CREATE FUNCTION collection_partitions_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS %I', 'bm25_postings_' || OLD.id);
    EXECUTE format('DROP TABLE IF EXISTS %I', 'chunks_' || OLD.id);
    RETURN OLD;
END $$;
"""
# Dropping before the row goes: the collection's rows leave with their tables instead of one
# by one through the foreign keys' cascades.
_TRIGGERS = """
CREATE TRIGGER collections_partitions_create AFTER INSERT ON collections
    FOR EACH ROW EXECUTE FUNCTION collection_partitions_create();
CREATE TRIGGER collections_partitions_drop BEFORE DELETE ON collections
    FOR EACH ROW EXECUTE FUNCTION collection_partitions_drop();
"""


def upgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    for statement in (
        "ALTER TABLE chunks RENAME TO chunks_unpartitioned",
        "ALTER TABLE bm25_postings RENAME TO bm25_postings_unpartitioned",
        # Their names are wanted by the new tables' indexes and constraints.
        "ALTER TABLE chunks_unpartitioned DROP CONSTRAINT chunks_pkey CASCADE",
        "ALTER TABLE chunks_unpartitioned DROP CONSTRAINT chunks_document_id_ordinal_key",
        "ALTER TABLE bm25_postings_unpartitioned DROP CONSTRAINT bm25_postings_pkey",
        "DROP INDEX chunks_embedding_hnsw, ix_chunks_document_id, ix_chunks_collection_id, bm25_postings_chunk",
        f"""CREATE TABLE chunks (
            id bigint NOT NULL DEFAULT nextval('chunks_id_seq'),
            document_id integer NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
            collection_id integer NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
            ordinal integer NOT NULL,
            text text NOT NULL,
            token_count integer NOT NULL,
            embedding vector({dim}) NOT NULL
        ) PARTITION BY LIST (collection_id)""",
        "ALTER SEQUENCE chunks_id_seq OWNED BY chunks.id",
        # collection_id sits in what was term_id's alignment padding: rows and keys keep their size.
        """CREATE TABLE bm25_postings (
            term_id integer NOT NULL REFERENCES bm25_terms (id) ON DELETE CASCADE,
            collection_id integer NOT NULL,
            chunk_id bigint NOT NULL,
            tf integer NOT NULL,
            dl integer NOT NULL
        ) PARTITION BY LIST (collection_id)""",
        _FUNCTIONS,
        "SELECT collection_partitions_add(id) FROM collections ORDER BY id",
        _TRIGGERS,
        # The rows first, then keys and indexes: a build beats maintaining them row by row.
        """INSERT INTO chunks (id, document_id, collection_id, ordinal, text, token_count, embedding)
           SELECT id, document_id, collection_id, ordinal, text, token_count, embedding FROM chunks_unpartitioned""",
        """INSERT INTO bm25_postings (term_id, collection_id, chunk_id, tf, dl)
           SELECT p.term_id, c.collection_id, p.chunk_id, p.tf, p.dl
           FROM bm25_postings_unpartitioned p JOIN chunks_unpartitioned c ON c.id = p.chunk_id""",
        "DROP TABLE bm25_postings_unpartitioned, chunks_unpartitioned",
        *_KEYS_AND_INDEXES,
    ):
        op.execute(statement)


_KEYS_AND_INDEXES = (
    "ALTER TABLE chunks ADD CONSTRAINT chunks_pkey PRIMARY KEY (id, collection_id)",
    # A document lives in one collection: with it in the key, the old (document_id, ordinal) stays unique.
    "ALTER TABLE chunks ADD CONSTRAINT chunks_document_id_ordinal_key UNIQUE (document_id, ordinal, collection_id)",
    "CREATE INDEX ix_chunks_document_id ON chunks (document_id)",
    "CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)",
    "ALTER TABLE bm25_postings ADD CONSTRAINT bm25_postings_pkey PRIMARY KEY (term_id, collection_id, chunk_id) INCLUDE (tf, dl)",
    "CREATE INDEX bm25_postings_chunk ON bm25_postings (chunk_id)",
)


def downgrade() -> None:
    dim = int(context.config.attributes.get("embedding_dim", 384))
    op.execute("DROP TRIGGER collections_partitions_create ON collections")
    op.execute("DROP TRIGGER collections_partitions_drop ON collections")
    op.execute("DROP FUNCTION collection_partitions_create(), collection_partitions_drop(), collection_partitions_add(integer)")
    op.execute("ALTER TABLE chunks RENAME TO chunks_partitioned")
    op.execute("ALTER TABLE bm25_postings RENAME TO bm25_postings_partitioned")
    op.execute("ALTER TABLE chunks_partitioned DROP CONSTRAINT chunks_pkey CASCADE")
    op.execute("ALTER TABLE chunks_partitioned DROP CONSTRAINT chunks_document_id_ordinal_key")
    op.execute("ALTER TABLE bm25_postings_partitioned DROP CONSTRAINT bm25_postings_pkey")
    op.execute("DROP INDEX chunks_embedding_hnsw, ix_chunks_document_id, bm25_postings_chunk")
    op.execute(f"""CREATE TABLE chunks (
        id bigint PRIMARY KEY DEFAULT nextval('chunks_id_seq'),
        document_id integer NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
        collection_id integer NOT NULL REFERENCES collections (id) ON DELETE CASCADE,
        ordinal integer NOT NULL, text text NOT NULL, token_count integer NOT NULL,
        embedding vector({dim}) NOT NULL,
        UNIQUE (document_id, ordinal))""")
    op.execute("ALTER SEQUENCE chunks_id_seq OWNED BY chunks.id")
    op.execute("""CREATE TABLE bm25_postings (
        term_id integer NOT NULL REFERENCES bm25_terms (id) ON DELETE CASCADE,
        chunk_id bigint NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
        tf integer NOT NULL, dl integer NOT NULL,
        PRIMARY KEY (term_id, chunk_id) INCLUDE (tf, dl))""")
    op.execute("""INSERT INTO chunks SELECT id, document_id, collection_id, ordinal, text, token_count, embedding
                  FROM chunks_partitioned""")
    op.execute("""INSERT INTO bm25_postings SELECT term_id, chunk_id, tf, dl FROM bm25_postings_partitioned""")
    op.execute("DROP TABLE bm25_postings_partitioned, chunks_partitioned")
    op.execute("CREATE INDEX ix_chunks_document_id ON chunks (document_id)")
    op.execute("CREATE INDEX ix_chunks_collection_id ON chunks (collection_id)")
    op.execute("CREATE INDEX bm25_postings_chunk ON bm25_postings (chunk_id)")
    op.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)")
