"""SQLAlchemy 2 typed mappings of the store; plain mappings, no behaviour."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    Date,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    Numeric,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
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
    """A chunk of a document; the table is list-partitioned by collection (one partition per
    collection, created and dropped with it by triggers on collections: migration 0009)."""

    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("document_id", "ordinal", "collection_id"),
        Index(
            "chunks_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        {"postgresql_partition_by": "LIST (collection_id)"},
    )
    # The key holds the partition column too (PostgreSQL requires it); ids come from chunks_id_seq alone.
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    collection_id: Mapped[int] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True, autoincrement=False)
    ordinal: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    embedding: Mapped[Any] = mapped_column(Vector(EMBEDDING_DIM))


class Bm25Term(Base):
    """Document frequency of one term within one collection, and what retrieval's MaxScore
    pruning bounds the term's impact by: for each tf the term has, the shortest chunk holding it
    that often (`impact_tf[i]`, `impact_dl[i]`, ascending tf; migration 0019 says why). Removing
    a document leaves the pairs as they were: a stale bound is still a bound, only a looser one."""

    __tablename__ = "bm25_terms"
    __table_args__ = (UniqueConstraint("collection_id", "term"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    collection_id: Mapped[int] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    term: Mapped[str] = mapped_column(Text)
    df: Mapped[int] = mapped_column(Integer)
    impact_tf: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    impact_dl: Mapped[list[int]] = mapped_column(ARRAY(Integer))


class Bm25Posting(Base):
    """Term frequency of a term in a chunk, with the chunk length, covered by the key.
    List-partitioned by collection like chunks; no foreign key to chunks (a referenced
    partitioned table cannot drop a partition): removing a document deletes its postings."""

    __tablename__ = "bm25_postings"
    __table_args__ = (
        PrimaryKeyConstraint("term_id", "collection_id", "chunk_id", postgresql_include=["tf", "dl"]),
        Index("bm25_postings_chunk", "chunk_id"),
        {"postgresql_partition_by": "LIST (collection_id)"},
    )
    term_id: Mapped[int] = mapped_column(ForeignKey("bm25_terms.id", ondelete="CASCADE"))
    collection_id: Mapped[int] = mapped_column(Integer)
    chunk_id: Mapped[int] = mapped_column(BigInteger)
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


class WeightsProfileRow(Base):
    __tablename__ = "weights_profiles"
    __table_args__ = (UniqueConstraint("name", "version"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    weights: Mapped[dict[str, float]] = mapped_column(JSONB)
    high: Mapped[float] = mapped_column(Float)
    medium: Mapped[float] = mapped_column(Float)
    low: Mapped[float] = mapped_column(Float)
    # collection -> retrieval mode -> a fitted ConfidenceMapping's JSON (services.scoring.mapping)
    mappings: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict, server_default=text("'{}'::jsonb"))
    active: Mapped[bool] = mapped_column(Boolean, default=False)
    created_by: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Run(Base):
    """One answered question: its final state and everything needed to re-score it. The table is
    range-partitioned by UTC month of created_at (runs_YYYY_MM, and runs_default for a month
    without its table; migration 0016), so retention drops whole months."""

    __tablename__ = "runs"
    __table_args__ = (
        # Not unique as an index (a partitioned table's would have to hold created_at): the trigger
        # runs_trace_id_unique keeps (trace_id, app) unique across months (0016).
        Index("runs_trace_id", "trace_id", "app"),
        Index("runs_reviewed_by_app", "app", "reviewed_at", "id",
              postgresql_where=text("reviewed_at IS NOT NULL AND app IS NOT NULL")),
        Index("runs_reviewed_external", "reviewed_at", "id", postgresql_where=text("reviewed_at IS NOT NULL AND app IS NOT NULL")),
        # The Review queue's order, overall and within one level, and the verdicts' confidences (0014).
        Index("runs_pending_queue", text("coalesce(p_supported, final_confidence)"), "final_confidence", "id",
              postgresql_where=text("status = 'pending'")),
        Index("runs_pending_queue_by_level", "final_level", text("coalesce(p_supported, final_confidence)"),
              "final_confidence", "id", postgresql_where=text("status = 'pending'")),
        Index("runs_verdicts", "status", postgresql_include=["final_confidence"],
              postgresql_where=text("status IN ('approved', 'flagged', 'corrected')")),
        {"postgresql_partition_by": "RANGE (created_at)"},
    )
    # The table's key holds the partition column (PostgreSQL requires it); ids come from runs_id_seq
    # alone, so the ORM knows a run by its id (session.get(Run, run_id)).
    __mapper_args__ = {"primary_key": ["id"]}
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    query: Mapped[str] = mapped_column(Text)
    preset: Mapped[str] = mapped_column(Text)
    collection: Mapped[str] = mapped_column(Text, default="default")
    source: Mapped[str] = mapped_column(Text, default="ask")
    backend: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    final_answer: Mapped[str] = mapped_column(Text, default="")
    citations: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    final_confidence: Mapped[float] = mapped_column(Float)
    final_level: Mapped[str] = mapped_column(Text)
    retrieval_confidence: Mapped[float] = mapped_column(Float)
    components: Mapped[list[float]] = mapped_column(ARRAY(Float))
    reflection_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    grade: Mapped[int | None] = mapped_column(Integer, nullable=True)
    crag_verdict: Mapped[str | None] = mapped_column(Text, nullable=True)
    signals: Mapped[dict[str, float]] = mapped_column(JSONB, default=dict)
    route: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    best_iteration: Mapped[int] = mapped_column(Integer, default=0)
    iterations_count: Mapped[int] = mapped_column(Integer, default=0)
    weights_profile_id: Mapped[int | None] = mapped_column(ForeignKey("weights_profiles.id"), nullable=True)
    weights_profile: Mapped[str] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB)
    outcome_note: Mapped[str] = mapped_column(Text, default="")
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), primary_key=True)
    # Current review state; review_version guards it (optimistic locking).
    review_version: Mapped[int] = mapped_column(Integer, default=0)
    reviewer: Mapped[str | None] = mapped_column(Text, nullable=True)
    reviewed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    corrected_answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    flag_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    review_comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    p_supported: Mapped[float | None] = mapped_column(Float, nullable=True)  # the judge's, on the best iteration
    # Set on runs assessed from another system's record: its trace id and metadata, and the app
    # whose key sent it (a trace id is unique per app; migration 0013).
    trace_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    external: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    app: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The reflection score that approved an answer when the run was made, read from its config by
    # the database (0015), so the Tuning matrix reads a number, not every run's config JSON.
    reflection_min_score: Mapped[float | None] = mapped_column(
        Float, Computed("CAST(config ->> 'reflection_min_score' AS float8)", persisted=True), nullable=True)


class DocumentDayRollup(Base):
    """Document trends per UTC day and document; kept by triggers on runs and run_iterations (0015)."""

    __tablename__ = "document_day_rollup"
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    run_collection: Mapped[str] = mapped_column(Text, primary_key=True)
    collection: Mapped[str] = mapped_column(Text, primary_key=True)
    external_id: Mapped[str] = mapped_column(Text, primary_key=True)
    runs: Mapped[int] = mapped_column(BigInteger)
    retrieved: Mapped[int] = mapped_column(BigInteger)
    cited: Mapped[int] = mapped_column(BigInteger)
    approved: Mapped[int] = mapped_column(BigInteger)
    flagged: Mapped[int] = mapped_column(BigInteger)
    corrected: Mapped[int] = mapped_column(BigInteger)
    pending: Mapped[int] = mapped_column(BigInteger)
    auto_accepted: Mapped[int] = mapped_column(BigInteger)
    low_confidence: Mapped[int] = mapped_column(BigInteger)
    troubled: Mapped[int] = mapped_column(BigInteger)
    confidence_sum: Mapped[Decimal] = mapped_column(Numeric)
    title: Mapped[str | None] = mapped_column(Text, nullable=True)


class RunMatrixRow(Base):
    """The Tuning matrix's numbers of one run as one fixed-width binary record (the layout
    run_matrix_record_layout() names; services/scoring/run_matrix.py reads it). Kept by triggers
    on runs, pruned with them by retention (0017)."""

    __tablename__ = "run_matrix_rows"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    numbers: Mapped[bytes] = mapped_column(LargeBinary)


class DocumentRunIndex(Base):
    """The runs each document appeared in, for the Document trends drill-down, by listed collection,
    document and the run's created_at; kept by triggers on runs and run_iterations (0018)."""

    __tablename__ = "document_run_index"
    __table_args__ = (Index("document_run_index_run", "run_id"),)
    collection: Mapped[str] = mapped_column(Text, primary_key=True)  # as document_trends lists it
    external_id: Mapped[str] = mapped_column(Text, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    run_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    best_rank: Mapped[int | None] = mapped_column(Integer, nullable=True)  # None: only cited
    cited: Mapped[bool] = mapped_column(Boolean)


# Tables holding rows of a run by run_id, with no foreign key to the partitioned runs (0016), and
# what becomes of a row when its run goes: a DELETE FROM runs does it by trigger (runs_children_gone),
# and retention, which drops whole months, drops their month tables with the runs' (0021), intake
# records by run (services/review/retention.py).
RUN_CHILDREN = {"review_history": "delete", "run_iterations": "delete", "run_events": "delete",
                "llm_calls": "delete", "run_intake": "set null"}
# Those partitioned by their run's month (0021), on run_created_at, which every writer gives: the
# run's created_at. Their keys hold it (PostgreSQL requires it); ids come from each one's sequence.
RUN_MONTH_CHILDREN = ("review_history", "run_iterations", "run_events", "llm_calls")
_BY_RUN_MONTH = {"postgresql_partition_by": "RANGE (run_created_at)"}


def _run_created_at() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), primary_key=True)


class ReviewHistory(Base):
    """Every landed review action, append-only."""

    __tablename__ = "review_history"
    __table_args__ = (UniqueConstraint("run_id", "version", "run_created_at"), _BY_RUN_MONTH)
    __mapper_args__ = {"primary_key": ["id"]}
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_created_at: Mapped[datetime] = _run_created_at()
    run_id: Mapped[int] = mapped_column(BigInteger)  # no key to runs (partitioned): RUN_CHILDREN
    version: Mapped[int] = mapped_column(Integer)
    action: Mapped[str] = mapped_column(Text)
    reviewer: Mapped[str] = mapped_column(Text)
    previous_status: Mapped[str] = mapped_column(Text)
    new_status: Mapped[str] = mapped_column(Text)
    flag_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    corrected_answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    comment: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class RunIteration(Base):
    __tablename__ = "run_iterations"
    __table_args__ = (UniqueConstraint("run_id", "ordinal", "run_created_at"), _BY_RUN_MONTH)
    __mapper_args__ = {"primary_key": ["id"]}
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_created_at: Mapped[datetime] = _run_created_at()
    run_id: Mapped[int] = mapped_column(BigInteger)  # no key to runs (partitioned): RUN_CHILDREN
    ordinal: Mapped[int] = mapped_column(Integer)
    query_used: Mapped[str] = mapped_column(Text)
    sub_queries: Mapped[list[str]] = mapped_column(JSONB, default=list)
    retrieval: Mapped[dict[str, Any]] = mapped_column(JSONB)
    components: Mapped[list[float]] = mapped_column(ARRAY(Float))
    raw_metrics: Mapped[dict[str, Any]] = mapped_column(JSONB)
    retrieval_confidence: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float] = mapped_column(Float)
    level: Mapped[str] = mapped_column(Text)
    crag: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    answer: Mapped[str] = mapped_column(Text, default="")
    citations: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    reflection: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    grade: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    verdict: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)  # services.judging.Verdict
    gaps: Mapped[list[str]] = mapped_column(JSONB, default=list)
    decision: Mapped[str] = mapped_column(Text)
    decision_reason: Mapped[str] = mapped_column(Text, default="")
    signals: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    latency_ms: Mapped[dict[str, float]] = mapped_column(JSONB, default=dict)
    errors: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)


class RunEvent(Base):
    __tablename__ = "run_events"
    __table_args__ = (_BY_RUN_MONTH,)
    __mapper_args__ = {"primary_key": ["id"]}
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_created_at: Mapped[datetime] = _run_created_at()
    run_id: Mapped[int] = mapped_column(BigInteger, index=True)  # no key to runs: RUN_CHILDREN
    seq: Mapped[int] = mapped_column(Integer)
    ts: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    elapsed_ms: Mapped[float] = mapped_column(Float)
    event_type: Mapped[str] = mapped_column(Text)
    message: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)


class LLMCallRow(Base):
    """Every backend call: model, prompt version, tokens, latency, outcome."""

    __tablename__ = "llm_calls"
    __table_args__ = (_BY_RUN_MONTH,)
    __mapper_args__ = {"primary_key": ["id"]}
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_created_at: Mapped[datetime] = _run_created_at()
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)  # no key to runs: RUN_CHILDREN
    iteration: Mapped[int | None] = mapped_column(Integer, nullable=True)
    backend: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    operation: Mapped[str] = mapped_column(Text)
    prompt_version: Mapped[str] = mapped_column(Text)
    temperature: Mapped[float] = mapped_column(Float)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    outcome: Mapped[str] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cache_key: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class LLMCacheRow(Base):
    """Responses by hash of (model, prompt version, inputs): re-asking costs nothing."""

    __tablename__ = "llm_cache"
    cache_key: Mapped[str] = mapped_column(Text, primary_key=True)
    backend: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    operation: Mapped[str] = mapped_column(Text)
    prompt_version: Mapped[str] = mapped_column(Text)
    response: Mapped[dict[str, Any]] = mapped_column(JSONB)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class JudgeModelRow(Base):
    """A judge model refitted from reviewers' verdicts (services.judging.refit); the active one
    replaces the shipped coefficients. Versions are never overwritten."""

    __tablename__ = "judge_models"
    __table_args__ = (Index("judge_models_one_active", "active", unique=True, postgresql_where=text("active")),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(Text, unique=True)
    model: Mapped[dict[str, Any]] = mapped_column(JSONB)
    active: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    created_by: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class ApiKey(Base):
    """A key another system sends to the HTTP API; only its sha256 is stored."""

    __tablename__ = "api_keys"
    __table_args__ = (
        CheckConstraint("scope IN ('push', 'read', 'admin')", name="api_keys_scope"),
        CheckConstraint("app ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$'", name="api_keys_app"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    app: Mapped[str] = mapped_column(Text)  # the system the key speaks for: it pushes and reads that app's runs
    scope: Mapped[str] = mapped_column(Text, default="push", server_default="push")  # push, read or admin
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class RunIntake(Base):
    """A record another system sent (file import or API), waiting for or past its assessment."""

    __tablename__ = "run_intake"
    __table_args__ = (
        CheckConstraint("source IN ('import', 'api', 'otlp')", name="run_intake_source"),
        CheckConstraint("status IN ('queued', 'assessed', 'failed')", name="run_intake_status"),
        UniqueConstraint("app", "trace_id", name="run_intake_app_trace_id"),
        Index("run_intake_queued", "app", "id", postgresql_where=text("status = 'queued'")),
        Index("run_intake_queued_by_key", "api_key_id", postgresql_where=text("status = 'queued'")),
        Index("run_intake_run_id", "run_id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    app: Mapped[str] = mapped_column(Text)  # the app of the key that sent it; imports go to "default"
    trace_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    source: Mapped[str] = mapped_column(Text)
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), nullable=True)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    status: Mapped[str] = mapped_column(Text, default="queued")
    judges: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))  # reflection, grading, CRAG
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # no key to runs: RUN_CHILDREN
    assessed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class OtlpTrace(Base):
    """A trace id seen by POST /v1/traces and what became of it (services.intake.traces)."""

    __tablename__ = "otlp_traces"
    __table_args__ = (
        CheckConstraint("state IN ('open', 'assembled', 'dropped', 'refused')", name="otlp_traces_state"),
        Index("otlp_traces_open", "last_received_at", postgresql_where=text("state = 'open'")),
    )
    app: Mapped[str] = mapped_column(Text, primary_key=True)
    trace_id: Mapped[str] = mapped_column(Text, primary_key=True)
    service_name: Mapped[str | None] = mapped_column(Text, nullable=True)
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id", ondelete="SET NULL"), nullable=True)
    judges: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    first_received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    state: Mapped[str] = mapped_column(Text, default="open", server_default="open")
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    intake_id: Mapped[int | None] = mapped_column(ForeignKey("run_intake.id", ondelete="SET NULL"), nullable=True)
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # Kept when the trace is closed and its span rows deleted (migration 0012).
    spans: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    late_spans: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    span_ids: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list, server_default=text("'{}'"))


class OtlpSpan(Base):
    """A span of an open trace; deleted once the trace is closed (its count and id kept on the trace)."""

    __tablename__ = "otlp_spans"
    __table_args__ = (ForeignKeyConstraint(["app", "trace_id"], ["otlp_traces.app", "otlp_traces.trace_id"],
                                           ondelete="CASCADE", onupdate="CASCADE", name="otlp_spans_trace_fkey"),)
    app: Mapped[str] = mapped_column(Text, primary_key=True)
    trace_id: Mapped[str] = mapped_column(Text, primary_key=True)
    span_id: Mapped[str] = mapped_column(Text, primary_key=True)
    parent_span_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    facts: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
